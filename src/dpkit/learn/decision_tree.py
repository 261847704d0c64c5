"""ε-DP decision trees grown top-down on the data: DiffP-ID3, DiffP-C4.5 and SuLQ ID3.

Sources
-------
- ``"diffp_id3"``, ``"diffp_c45"``: Friedman & Schuster, "Data mining with differential
  privacy", KDD 2010 — the DiffP-ID3 algorithm and its C4.5 extension to continuous
  attributes: a per-level budget ε′ = ε/(2(D+1)), a Laplace count of every node,
  the split attribute chosen by the exponential mechanism (McSherry & Talwar 2007) with the
  max operator as quality, and noisy class counts in the leaves.
- ``"sulq_id3"``: Blum, Dwork, McSherry & Nissim, "Practical privacy: the SuLQ framework",
  PODS 2005 (ID3 from noisy counts, as recalled by Friedman & Schuster §4): every node
  releases its (attribute value × class) count tables with Laplace noise and picks the
  attribute of highest information gain computed from the noisy counts (the SuLQ-based ID3
  that Friedman & Schuster take as their baseline).

Features
--------
Categorical feature j holds integer codes 0 … m_j − 1, declared by ``categorical={j: m_j}``;
a split on it is multiway (one child per code) and the feature is not offered again below.
Every other feature is continuous, clipped to its declared interval [l_j, u_j]:

- ``diffp_c45``, ``sulq_id3``: binary splits x < t / x ≥ t. A node that knows x_j ∈ [a, b]
  (from the splits above it — public) offers the G − 1 interior points of an equal-width
  grid of G = ``n_bins`` cells on [a, b]: the thresholds depend on the declared bounds and
  the released tree only, never on the data, and a feature can be split again deeper down.
  (Friedman & Schuster sample the threshold from the whole interval, an interval between
  consecutive data points with probability ∝ length·exp(ε′q/Δ); the declared grid replaces
  that with a finite candidate set on which dpkit's exact sampler runs.)
- ``diffp_id3``: ID3 needs discrete attributes, so x_j is first replaced by its cell in the
  equal-width G-cell grid of [l_j, u_j] (a public, record-by-record transform) and treated
  as a categorical feature of m_j = G codes.

Privacy (pure ε-DP, neighbours add or remove one record)
--------------------------------------------------------
The nodes of one level partition the records that reach that level (the children of a node
split its records by a function of the record alone), so all mechanisms run on the nodes of
one level compose in parallel: the level costs the largest per-node ε, not the sum
(parallel composition, McSherry 2009, PINQ). Levels compose sequentially, the later ones
chosen adaptively from the earlier releases. With D = ``max_depth``:

``diffp_*``: ε′ = ε / (2(D + 1)). A node at depth d < D releases its size
n̂ = n + Lap(1/ε′) (ε′; counts have sensitivity 1) and either splits — the candidate s is
drawn by the exponential mechanism (:func:`dpkit.mechanisms.frontend.select`) with
probability ∝ exp(ε′·q(s)), which is ε′-DP because the
max-operator quality q(s) = Σ_children max_c τ_{child,c} (τ: counts of class c in a child)
moves by at most Δ = 1 between neighbours and every candidate's score moves in the same
direction (adding a record never lowers a maximum), so the factor 2 of the exponential
mechanism is not needed (McSherry & Talwar 2007; Dwork & Roth 2014, Thm 3.10, whose factor
2 pays for the numerator and the normaliser moving in opposite directions; dpkit's
``make_exponential(monotonic=True)`` has the same map) — or stops, when
n̂ / (t·|C|) < √2/ε′ (t: the largest number of children of any candidate split, |C|: the
number of classes; the paper's rule: the average count per cell is below the noise's
standard deviation). A leaf at depth d releases its class counts
with Lap(1/ε_leaf), where ε_leaf = ε − (2d + 1)ε′ (and 2ε′ at depth D, where no size is
released): whatever the records in that leaf would have spent on the levels below is given
to their leaf. Along every root-to-leaf path the losses add up to exactly

    ε = Σ_{levels 0 … d−1} 2ε′ + ε′ + (ε − (2d+1)ε′),

(a leaf at d < D with no candidate left releases its counts at ε − 2dε′). The budget of
every release is a function of the earlier releases only, and the node a record sits in at
each level is fixed by the record and the released splits, so the likelihood ratio of any
outcome under neighbouring datasets is a product over the nodes on the differing record's
path, at most e^ε — pure ε-DP.

``sulq_id3``: ε_l = ε / (D + 1). A node at depth d < D with a attributes on offer releases
all its a count tables (code or grid cell × class) at once with discrete Laplace noise of
scale a/ε_l: one record adds 1 to one cell of each table, L1 sensitivity a, so ε_l-DP. The
node's size and class counts are read off the tables (the mean over the a tables:
post-processing); it stops when n̂ / (t·|C|) < √2·a/ε_l, and a leaf at depth d < D releases
fresh class counts at the remaining (D − d)·ε_l; the leaves at depth D release class counts
at ε_l (a leaf at d < D with no attribute left, at ε − d·ε_l). Again every path spends
exactly ε, with the same argument.

Noise: discrete Laplace on the integer counts (Canonne, Kamath & Steinke 2020, via
:func:`dpkit.mechanisms.frontend.noisy`), the exponential mechanism sampled exactly
(:func:`dpkit.mechanisms.frontend.select`); all randomness from the CSPRNG.
Prediction from the released tree and counts is post-processing: a leaf's class
distribution is its clamped noisy counts, shrunk towards its parent's (the sum of the
parent's leaves below it) with a weight equal to the leaf counts' noise standard deviation,
so that a leaf whose counts are mostly noise defers to its parent.

Split quality: only the max operator (the paper's recommendation for small budgets: Δ = 1)
is offered for the exponential mechanism. Information gain would need Δ = log(N + 1) + 1/ln 2
for a declared upper bound N on the node size and Gini Δ = 2 without monotonicity — a
factor 2 to 4·log N more noise for the same ε. The paper's pruning of DiffP-C4.5 trees is
not done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit.core.measures import PureDP
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_bounds, check_epsilon
from dpkit.learn._validation import ArrayLike, fit_labelled, predict_features
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["DecisionTreeClassifier", "Node", "max_scores", "METHODS"]

SIZES, SPLIT, TABLES, LEAVES = ("node sizes", "split choice", "count tables (Δ = candidates)",
                                "leaf class counts")

METHODS = ("diffp_c45", "diffp_id3", "sulq_id3")


@dataclass
class Node:
    """One node of a fitted tree (every field is released or public).

    ``feature`` is −1 at a leaf. A continuous split sends x < ``threshold`` to
    ``children[0]`` and the rest to ``children[1]``; a categorical split sends code v to
    ``children[v]``. ``counts`` are a leaf's noisy class counts (float, unclamped) and
    ``noise_std`` their noise's standard deviation; ``lower``/``upper`` the public
    interval of every continuous feature at this node; ``spent`` the ε of this node's own
    releases (they add up to the model's ε along every root-to-leaf path)."""

    depth: int
    lower: np.ndarray
    upper: np.ndarray
    used: frozenset[int]
    feature: int = -1
    threshold: float = math.nan
    children: list[int] = field(default_factory=list)
    counts: np.ndarray | None = None
    noise_std: float = 0.0
    size: float = math.nan
    spent: Fraction = Fraction(0)


def grid(a: float, b: float, cells: int) -> np.ndarray:
    """The interior points of the equal-width ``cells``-cell grid of [a, b], strictly
    inside (a, b) and increasing (duplicates from float rounding dropped)."""
    points = a + (b - a) * np.arange(1, cells) / cells
    return np.unique(points[(points > a) & (points < b)])


def max_scores(cells: np.ndarray, binary: bool) -> np.ndarray:
    """Max-operator quality of candidate splits from a (cells × classes) count table.

    ``binary``: the candidates are the cuts between consecutive cells, and cut i scores
    Σ_{side} max_c τ_{side,c} with the sides cells < i+1 and cells ≥ i+1 (one int per cut).
    Otherwise one multiway split, one child per cell: Σ_cells max_c τ_{cell,c}. Sensitivity
    1 and monotone under adding or removing a record (module docstring)."""
    if not binary:
        return np.array([int(cells.max(axis=1).sum())], dtype=np.int64)
    left = np.cumsum(cells, axis=0)[:-1]
    right = cells.sum(axis=0) - left
    return (left.max(axis=1) + right.max(axis=1)).astype(np.int64)


def _conditional_entropy(tables: np.ndarray) -> np.ndarray:
    """Σ_children Σ_c τ_{j,c}·log(τ_j / τ_{j,c}) (nats) for each split, ``tables`` of shape
    (splits, children, classes), counts clamped at 0 (post-processing of noisy counts)."""
    t = np.maximum(tables, 0.0)
    sizes = t.sum(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(t > 0, t * np.log(np.where(t > 0, sizes / t, 1.0)), 0.0)
    return np.asarray(terms.sum(axis=(1, 2)))


class DecisionTreeClassifier(ClassifierMixin, BaseEstimator):
    """ε-DP decision tree (module docstring: algorithms, privacy argument and sources).

    Parameters
    ----------
    epsilon : float
        ε > 0 (nats) for the whole tree. Guarantee: pure ε-DP under adding or removing one
        record; every root-to-leaf path spends exactly ε (parallel composition within a
        level, sequential over the D + 1 levels).
    max_depth : int
        D ≥ 0, the largest depth of a leaf (default 5); the budget is split over D + 1
        levels, so a deeper tree gets less per level.
    method : {"diffp_c45", "diffp_id3", "sulq_id3"}
        Friedman & Schuster 2010 (C4.5 or ID3 variant) or Blum et al. 2005 (SuLQ ID3).
    bounds : (lower, upper)
        Declared bounds of every feature (scalars broadcast), in the features' units;
        required. Continuous features are clipped to them; the entries of categorical
        features are not used.
    classes : sequence
        Declared labels; required.
    categorical : dict[int, int], optional
        ``{feature index: number of codes m}``; the feature's values must be the integers
        0 … m − 1.
    n_bins : int
        G ≥ 2 (default 16): grid cells per continuous feature (candidate thresholds of a
        node: the G − 1 interior grid points of its interval; for ``diffp_id3`` the codes).
    accountant : None, PrivacyFilter or Session
        Debited ε (PureDP) before the data are touched; an overrun raises and nothing is
        fitted.

    Attributes
    ----------
    nodes_ : list of Node
        The tree, root first, parents before children.
    classes_ : ndarray
        The declared labels.
    epsilon_level_ : Fraction
        ε′ (``diffp_*``) or ε_l (``sulq_id3``).
    n_features_in_ : int

    Raises
    ------
    DomainError
        Missing bounds or classes, labels outside the declared classes, ε ≤ 0, unknown
        method, max_depth < 0, n_bins < 2, a categorical declaration out of range or
        categorical values that are not its codes, X not 2-D or containing NaN.
    """

    def __init__(self, epsilon: float = 1.0, max_depth: int = 5, method: str = "diffp_c45",
                 bounds: Any = None, classes: Any = None, categorical: Any = None,
                 n_bins: int = 16, accountant: AccountantLike = None) -> None:
        self.epsilon = epsilon
        self.max_depth = max_depth
        self.method = method
        self.bounds = bounds
        self.classes = classes
        self.categorical = categorical
        self.n_bins = n_bins
        self.accountant = accountant

    # ------------------------------------------------------------------ validation
    def _arities(self, d: int) -> dict[int, int]:
        arities: dict[int, int] = {}
        for key, m in dict(self.categorical or {}).items():
            j, m = int(key), int(m)
            if not 0 <= j < d or m < 2:
                raise DomainError(f"categorical={{{key}: {m}}}: the feature index must be in "
                                  f"0 … {d - 1} and the number of codes at least 2")
            arities[j] = m
        return arities

    def _codes(self, x: np.ndarray) -> np.ndarray:
        """X as float with categorical columns checked (codes 0 … m−1) and, for
        ``diffp_id3``, continuous columns replaced by their grid cell."""
        x = np.array(x, dtype=np.float64)
        for j, m in self.declared_.items():
            col = x[:, j]
            if not np.all((col == np.round(col)) & (col >= 0) & (col < m)):
                raise DomainError(f"feature {j} is declared categorical with {m} codes: its "
                                  f"values must be the integers 0 … {m - 1}")
        cont = [j for j in range(x.shape[1]) if j not in self.declared_]
        x[:, cont] = np.clip(x[:, cont], self.lower_[cont], self.upper_[cont])
        if self.method == "diffp_id3":
            for j in cont:
                edges = grid(self.lower_[j], self.upper_[j], self.n_bins_)
                x[:, j] = np.searchsorted(edges, x[:, j], side="right")
        return x

    def fit(self, X: ArrayLike, y: ArrayLike) -> DecisionTreeClassifier:
        """Grow the tree on X (n_samples, n_features) and labels y (module docstring).

        Raises
        ------
        DomainError
            See the class docstring; raised before the accountant is debited.
        """
        x, classes, label = fit_labelled(X, y, self.classes)
        eps = check_epsilon(self.epsilon)
        if self.method not in METHODS:
            raise DomainError(f"method must be one of {METHODS}, got {self.method!r}")
        depth = int(self.max_depth)
        if depth < 0:
            raise DomainError("max_depth must be ≥ 0")
        bins = int(self.n_bins)
        if bins < 2:
            raise DomainError("n_bins must be ≥ 2")
        lower, upper = check_bounds(self.bounds, x.shape[1])
        declared = self._arities(x.shape[1])
        arities = dict(declared)
        if self.method == "diffp_id3":  # continuous features become grid codes
            arities = {j: declared.get(j, bins) for j in range(x.shape[1])}
        self.declared_, self.arities_ = declared, arities
        self.lower_, self.upper_, self.n_bins_ = lower, upper, bins
        codes = self._codes(x)

        sulq = self.method == "sulq_id3"
        level = eps / (depth + 1) if sulq else eps / (2 * (depth + 1))
        # the noise plan: DiffP's node sizes and split picks at ε′ each; SuLQ's count tables
        # at Δ = the node's number of candidates and the leaves' counts at the budget left at
        # their depth (set as the tree grows: no single scale)
        rows = ((NoiseRow("discrete Laplace", None, None, TABLES),) if sulq else (
            frontend.noise_row(1, level, SIZES),
            frontend.selection_row(1, level, SPLIT, monotonic=True))) + (
            NoiseRow("discrete Laplace", None, Fraction(1), LEAVES),)

        def compute() -> DecisionTreeClassifier:
            self.classes_ = classes
            self.n_features_in_ = x.shape[1]
            self.depth_ = depth
            self.epsilon_level_ = level
            self.nodes_ = self._grow(codes, label, classes.size)
            return self

        return charge(self.accountant, PureDP(eps), f"DecisionTreeClassifier(ε={eps}, "
                      f"method={self.method}, D={depth})", compute, rows)

    # ------------------------------------------------------------------ growing
    def _candidates(self, node: Node) -> list[tuple[int, np.ndarray | None]]:
        """The public candidate splits of a node: (feature, thresholds) for a continuous
        feature (thresholds: its grid on the node's interval), (feature, None) for an unused
        categorical one."""
        out: list[tuple[int, np.ndarray | None]] = []
        for j in range(self.n_features_in_):
            if j in self.arities_:
                if j not in node.used:
                    out.append((j, None))
            else:
                edges = grid(node.lower[j], node.upper[j], self.n_bins_)
                if edges.size:
                    out.append((j, edges))
        return out

    def _tables(self, x: np.ndarray, y: np.ndarray, k: int,
                candidates: list[tuple[int, np.ndarray | None]]) -> list[np.ndarray]:
        """(cells × classes) count table of each candidate feature on the node's rows."""
        tables = []
        for j, edges in candidates:
            if edges is None:
                cell, m = x[:, j].astype(np.int64), self.arities_[j]
            else:
                cell, m = np.searchsorted(edges, x[:, j], side="right"), edges.size + 1
            tables.append(np.bincount(cell * k + y, minlength=m * k).reshape(m, k))
        return tables

    def _split(self, node: Node, j: int, threshold: float | None, x: np.ndarray,
               rows: np.ndarray) -> list[tuple[Node, np.ndarray]]:
        """The children of ``node`` split on feature j (public), with their rows."""
        if threshold is None:
            col = x[rows, j].astype(np.int64)
            return [(Node(node.depth + 1, node.lower, node.upper, node.used | {j}),
                     rows[col == v]) for v in range(self.arities_[j])]
        node.threshold = threshold
        left_upper, right_lower = node.upper.copy(), node.lower.copy()
        left_upper[j] = right_lower[j] = threshold
        go_left = x[rows, j] < threshold
        return [(Node(node.depth + 1, node.lower, left_upper, node.used), rows[go_left]),
                (Node(node.depth + 1, right_lower, node.upper, node.used), rows[~go_left])]

    def _grow(self, x: np.ndarray, y: np.ndarray, k: int) -> list[Node]:
        """Level by level (the nodes of a level are disjoint: parallel composition); a
        node's children get the next ids, so parents come before children."""
        depth, sulq = self.depth_, self.method == "sulq_id3"
        self._pending: list[tuple[Node, np.ndarray, Fraction]] = []
        nodes = [Node(0, self.lower_.copy(), self.upper_.copy(), frozenset())]
        frontier: list[tuple[int, np.ndarray]] = [(0, np.arange(x.shape[0]))]
        while frontier:
            following: list[tuple[int, np.ndarray]] = []
            for i, rows in frontier:
                node = nodes[i]
                d = node.depth
                candidates = self._candidates(node) if d < depth else []
                if not candidates:  # a leaf by construction: its whole remaining budget
                    self._leaf(node, y[rows], k, self._remaining(d, 0))
                    continue
                choice = (self._sulq_node(node, x[rows], y[rows], k, candidates) if sulq
                          else self._diffp_node(node, x[rows], y[rows], k, candidates))
                if choice is None:
                    continue
                node.feature = choice[0]
                for child, child_rows in self._split(node, *choice, x, rows):
                    node.children.append(len(nodes))
                    following.append((len(nodes), child_rows))
                    nodes.append(child)
            frontier = following
        self._release_leaves(k)
        return nodes

    def _leaf(self, node: Node, y: np.ndarray, k: int, budget: Fraction) -> None:
        """Queue the class counts of a leaf for release at ``budget`` (sensitivity 1)."""
        self._pending.append((node, np.bincount(y, minlength=k), budget))

    def _release_leaves(self, k: int) -> None:
        """Every queued leaf's counts, one discrete-Laplace draw per distinct budget (the
        same noise as a call per leaf: each count gets its own independent draw at its
        leaf's scale; nothing released depends on another leaf's noise)."""
        by_budget: dict[Fraction, list[tuple[Node, np.ndarray]]] = {}
        for node, counts, budget in self._pending:
            by_budget.setdefault(budget, []).append((node, counts))
        for budget, items in by_budget.items():
            noisy = frontend.noisy(np.concatenate([c for _, c in items]), 1, budget,
                                   statistic=LEAVES).value.reshape(len(items), k)
            for (node, _), row in zip(items, noisy, strict=True):
                node.counts = row.astype(np.float64)
                node.spent += budget
                node.noise_std = math.sqrt(2) / float(budget)
        del self._pending

    def _diffp_node(self, node: Node, x: np.ndarray, y: np.ndarray, k: int,
                    candidates: list[tuple[int, np.ndarray | None]]
                    ) -> tuple[int, float | None] | None:
        """Friedman & Schuster at one internal-depth node: noisy size, stop or split."""
        level = self.epsilon_level_
        node.size = float(frontend.noisy(y.size, 1, level, statistic=SIZES).value)
        node.spent += level
        t = max(2 if edges is not None else self.arities_[j] for j, edges in candidates)
        if node.size / (t * k) < math.sqrt(2) / float(level):
            self._leaf(node, y, k, self._remaining(node.depth, 1))
            return None
        scores = self._scores(x, y, k, candidates)
        pick = split_selection(np.concatenate(scores), level)
        node.spent += level
        for (j, edges), score in zip(candidates, scores, strict=True):
            if pick < score.size:
                return j, None if edges is None else float(edges[pick])
            pick -= score.size
        raise AssertionError("unreachable")  # pragma: no cover

    def _scores(self, x: np.ndarray, y: np.ndarray, k: int,
                candidates: list[tuple[int, np.ndarray | None]]) -> list[np.ndarray]:
        """Max-operator scores of every candidate split of a node's rows: one array per
        candidate feature (a score per threshold, or one for a multiway split)."""
        return [max_scores(table, edges is not None) for table, (_, edges)
                in zip(self._tables(x, y, k, candidates), candidates, strict=True)]

    def _remaining(self, d: int, own: int) -> Fraction:
        """Budget left to a leaf at depth d that has already spent ``own`` per-level units
        (ε′ or ε_l) at its own level: ε − (2d + own)·ε′ (``diffp_*``) or ε − (d + own)·ε_l
        (``sulq_id3``)."""
        above = d if self.method == "sulq_id3" else 2 * d
        return check_epsilon(self.epsilon) - (above + own) * self.epsilon_level_

    def _sulq_node(self, node: Node, x: np.ndarray, y: np.ndarray, k: int,
                   candidates: list[tuple[int, np.ndarray | None]]
                   ) -> tuple[int, float | None] | None:
        """SuLQ ID3 at one internal-depth node: all count tables at once, then argmax of
        the information gain computed from them (post-processing)."""
        level, a = self.epsilon_level_, len(candidates)
        tables = self._tables(x, y, k, candidates)
        flat = np.concatenate([t.ravel() for t in tables])
        noisy = frontend.noisy(flat, a, level, statistic=TABLES).value.astype(np.float64)
        node.spent += level
        parts, start = [], 0
        for table in tables:
            parts.append(noisy[start:start + table.size].reshape(table.shape))
            start += table.size
        node.size = float(np.mean([p.sum() for p in parts]))
        t = max(2 if edges is not None else self.arities_[j] for j, edges in candidates)
        if node.size / (t * k) < math.sqrt(2) * a / float(level):
            self._leaf(node, y, k, self._remaining(node.depth, 1))
            return None
        best, choice = math.inf, None
        for (j, edges), part in zip(candidates, parts, strict=True):
            if edges is None:
                h = _conditional_entropy(part[None])
            else:
                left = np.cumsum(part, axis=0)[:-1]
                right = part.sum(axis=0) - left
                h = _conditional_entropy(np.stack([left, right], axis=1))
            i = int(np.argmin(h))
            if h[i] < best:
                best, choice = float(h[i]), (j, None if edges is None else float(edges[i]))
        return choice

    # ------------------------------------------------------------------ prediction
    def _distributions(self) -> list[np.ndarray]:
        """Each node's class distribution (post-processing, module docstring)."""
        k = self.classes_.size
        totals = [np.zeros(k) for _ in self.nodes_]
        for i in range(len(self.nodes_) - 1, -1, -1):  # children come after parents
            node = self.nodes_[i]
            if node.feature < 0:
                assert node.counts is not None
                totals[i] = np.maximum(node.counts, 0.0)
            else:
                totals[i] = sum((totals[c] for c in node.children), np.zeros(k))
        dist: list[np.ndarray] = [np.zeros(k) for _ in self.nodes_]
        root = totals[0] + 1.0
        dist[0] = root / root.sum()
        for i, node in enumerate(self.nodes_):
            for c in node.children:
                child = self.nodes_[c]
                weight = child.noise_std if child.feature < 0 else 0.0
                mix = totals[c] + weight * dist[i]
                dist[c] = mix / mix.sum() if mix.sum() > 0 else dist[i]
        return dist

    def _reach(self, X: ArrayLike) -> np.ndarray:
        """The leaf each row of X reaches."""
        x = self._codes(predict_features(self, X))
        at = np.zeros(x.shape[0], dtype=np.int64)
        for i, node in enumerate(self.nodes_):
            if node.feature < 0:
                continue
            rows = np.flatnonzero(at == i)
            if rows.size == 0:
                continue
            col = x[rows, node.feature]
            if math.isnan(node.threshold):  # categorical: one child per code
                branch = col.astype(np.int64)
            else:  # x < t left, x ≥ t right
                branch = (col >= node.threshold).astype(np.int64)
            at[rows] = np.asarray(node.children)[branch]
        return at

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities (n_samples, n_classes) from the leaves the rows reach."""
        leaves = self._reach(X)  # checks the fit and X first
        return np.asarray(np.array(self._distributions())[leaves])

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The most probable declared class of each row."""
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])


def split_selection(scores: np.ndarray, level: Fraction) -> int:
    """The split picked at per-node budget ε′ (:func:`dpkit.mechanisms.frontend.select`):
    probabilities ∝ exp(q/s) with s = Δ/ε′ = 1/ε′ (max operator: Δ = 1, monotone; module
    docstring)."""
    return int(frontend.select(scores, 1, level, monotonic=True, statistic=SPLIT).value)
