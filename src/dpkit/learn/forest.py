"""Random decision forests whose leaves release only a label (Fletcher & Islam, "Differentially
private random decision forests using smooth sensitivity", Expert Systems with Applications 78
(2017) 16–31, Alg. 1).

Structure. Every tree is a complete binary tree of depth D drawn without reading a row
(:func:`dpkit.learn.tree.random_tree`: a uniform feature and a uniform threshold inside its
declared bounds per internal node). D defaults to the paper's balls-in-bins rule
(:func:`paper_depth`): the smallest D at which fewer than half of the m features are expected
to be untested on a root-to-leaf path, m(1 − 1/m)^D ≤ m/2 (all features are continuous here,
so the paper's "+ half the categorical features" term is 0). Each row goes to one tree, drawn
uniformly (CSPRNG): the trees see disjoint parts of the data, the paper's sampling without
replacement.

Leaves. A leaf's class counts n = (n_1 … n_K) are never released; only a label, by the
exponential mechanism (McSherry & Talwar 2007), drawn through
:func:`dpkit.mechanisms.frontend.select`, exactly:

- ``leaf="counts"`` (default): Pr[c] ∝ exp(ε·n_c). Utility n_c has sensitivity 1 and adding a
  record raises one count only (monotone), so each leaf is ε-DP (Dwork & Roth 2014, Thm 3.10
  and its monotone remark).
- ``leaf="smooth_sensitivity"`` (the paper's): utility u(n, c) = 1 when c is a mode, else 0,
  and Pr[c] ∝ exp(ε·u(n, c) / (2·S(n))) with S a smooth upper bound on the local sensitivity
  of u. With g = n_(1) − n_(2) the gap between the two largest counts, one added or removed
  record moves g by at most 1, and u changes only when a mode appears or disappears, which
  takes g ≤ 1: the local sensitivity within distance k is A_k(n) = 1 if k ≥ g − 1, else 0
  (:func:`local_sensitivity_within`). So S(n) = r^{max(0, g−1)} ≥ max_k r^k·A_k(n) is a
  smooth bound with ratio r = e^{−β} (Nissim, Raskhodnikova & Smith 2007, Def. 2.1 and
  Prop. 3.3); it is held at r^{G−1} beyond a cut-off gap G at which a non-mode label's
  weight is ≤ 2^-60 of the mode's (a larger S is still an upper bound), so the laws take
  finitely many values.

Privacy. Add/remove-one neighbours. Within a tree the leaves partition its rows, and the
trees partition the data (a row's tree is drawn independently of the data), so a record
changes the class counts of exactly one leaf of one tree: parallel composition (McSherry 2009)
makes the forest as private as one leaf, at the full budget — the paper's choice of disjoint
subsets over sequential composition across trees (ε/T each).

- ``"counts"``: PureDP(ε).
- ``"smooth_sensitivity"``: ApproxDP(ε, δ). The exponential mechanism with a data-dependent
  scale is not covered by the pure-DP theorem of the exponential mechanism: as the gap grows
  the non-mode labels' probability (K−1)/(e^{ε/(2S)} + K − 1) falls doubly exponentially, so
  its ratio between neighbours at gaps g and g+1 is unbounded (the paper's claim of ε-DP
  does not hold: :func:`leaf_delta` of its own calibration, β = ε and S = e^{−ε·g}, is far
  from 0). dpkit therefore computes the mechanism's δ exactly: the label's law depends on n
  only through the mode set and the gap, and neighbours move between (same mode, gap g) and
  (same mode, g ± 1) for g ≥ 1, or between states with g ≤ 1, where S = 1 and the mechanism
  is the ε-DP exponential mechanism on a utility of sensitivity 1 (Thm 3.10 again). Hence

      δ(ε) = max_{1 ≤ g < G} max(H_ε(P_g ‖ P_{g+1}), H_ε(P_{g+1} ‖ P_g)),
      H_ε(P ‖ Q) = Σ_c [P(c) − e^ε·Q(c)]₊,

  with P_g the law at gap g (mode weight e^{ε/(2S_g)}, K − 1 others of weight 1), evaluated
  in float64 plus an allowance that covers its rounding (:func:`leaf_delta`). The ratio
  r = 1 − 2^{−j} is the smallest of that form (the largest β) whose δ(ε) is at most the
  declared δ (:func:`smooth_ratio`, at plan time).

Prediction is a majority vote of the trees' leaf labels (``predict_proba``: the vote shares):
post-processing. Floor: at small ε a leaf's label is close to uniform, and the forest can do
worse than always answering the majority class; when every released leaf label is the same
class the model is that constant classifier, and ``fit`` says so with a
:class:`~dpkit.errors.TrivialResultWarning`. ``"smooth_sensitivity"`` with a valid δ needs a
small β, so S stays near 1 and the leaf is close to uniform unless the budget is large: at
ε = 0.1, δ = 10^-6, K = 2 and a gap of 50 its non-mode label has probability ≈ 0.48, the
count leaf's ≈ 0.007 (:func:`leaf_law`); hence ``"counts"`` is the default.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from functools import cache

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit.core import rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ApproxDP, PrivacyLoss, PureDP
from dpkit.core.metrics import AddRemoveDistance
from dpkit.core.numbers import positive
from dpkit.errors import DomainError
from dpkit.learn import _baseline
from dpkit.learn._privacy import check_bounds, check_epsilon
from dpkit.learn._validation import ArrayLike, fit_labelled, predict_features
from dpkit.learn.tree import leaves, random_tree
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["SmoothRandomForestClassifier", "paper_depth", "local_sensitivity_within",
           "smooth_scale_at", "cutoff", "leaf_law", "leaf_delta", "smooth_ratio", "LEAF_RULES"]

LABELS = "leaf labels"
LEAF_RULES = ("counts", "smooth_sensitivity")
MAX_DEPTH = 16  # 2^16 leaves per tree: memory and time are bounded by declared numbers
MAX_RATIO_BITS = 16  # r = 1 − 2^-j, j ≤ 16: G ≤ 2^16·ln(84/ε) gaps to check


def paper_depth(n_features: int) -> int:
    """Fletcher & Islam's depth for m continuous features: the smallest D ≥ 1 with
    m(1 − 1/m)^D ≤ m/2, i.e. D = ⌈ln 2 / −ln(1 − 1/m)⌉ (1 for m = 1), capped at 16."""
    m = int(n_features)
    if m <= 1:
        return 1
    return min(MAX_DEPTH, max(1, math.ceil(math.log(2) / -math.log1p(-1 / m))))


def _gap(counts: np.ndarray) -> int:
    top = np.sort(np.asarray(counts, dtype=np.int64))[::-1]
    return int(top[0] - top[1]) if top.size > 1 else 0


def local_sensitivity_within(counts: np.ndarray, k: int) -> int:
    """A_k(n): the largest change of the mode indicator u(·, c) between neighbours, over all
    count vectors within k added or removed records of n (1 if k ≥ gap − 1, else 0;
    module docstring)."""
    return int(k >= _gap(counts) - 1)


def cutoff(epsilon: Fraction, ratio: Fraction) -> int:
    """G: the first gap with ε/(2·r^{G−1}) ≥ 42 > 60·ln 2 (then a non-mode label's weight is
    ≤ 2^-60 of the mode's, and gaps beyond G reuse S_G)."""
    need = math.log(84 / float(epsilon))
    return 1 + max(0, math.ceil(need / -math.log(float(ratio))))


def smooth_scale_at(gap: int, epsilon: Fraction, ratio: Fraction) -> Fraction:
    """S at a gap: r^{min(g, G)−1} (1 at g ≤ 1), computed in floats and rounded up by a
    factor 1 + 2^-40 (far above the float error), as an exact dyadic rational ≥ r^{g−1}."""
    g = min(max(int(gap), 1), cutoff(epsilon, ratio))
    value = math.exp((g - 1) * math.log(float(ratio))) * (1 + 2.0 ** -40)
    return min(Fraction(1), Fraction(value))


def smooth_scale(counts: np.ndarray, epsilon: Fraction, ratio: Fraction) -> Fraction:
    """S(n) for one leaf's counts (``"smooth_sensitivity"``)."""
    return smooth_scale_at(_gap(counts), epsilon, ratio)


def leaf_scores(counts: np.ndarray, scale: Fraction) -> list[Fraction]:
    """u(n, c)/S(n): 1/S for a mode, 0 otherwise (the scores handed to the exponential
    mechanism at sensitivity 1, so Pr[c] ∝ exp(ε·u/(2S)))."""
    top = int(np.max(counts))
    return [1 / scale if int(c) == top else Fraction(0) for c in counts]


def leaf_law(counts: np.ndarray, epsilon: Fraction, ratio: Fraction | None) -> np.ndarray:
    """The label law of a leaf (floats, for tests and reports): ``ratio`` None for
    ``"counts"`` (∝ exp(ε·n_c)), else ``"smooth_sensitivity"`` with that r."""
    counts = np.asarray(counts, dtype=np.int64)
    if ratio is None:
        logits = float(epsilon) * (counts - counts.max()).astype(float)
    else:
        scores = leaf_scores(counts, smooth_scale(counts, epsilon, ratio))
        logits = np.array([float(epsilon * s / 2) for s in scores])
        logits -= logits.max()
    weights = np.exp(logits)
    return np.asarray(weights / weights.sum())


def leaf_delta(epsilon: Fraction, classes: int, scales: np.ndarray | None = None,
               ratio: Fraction | None = None) -> Fraction:
    """An upper bound on δ(ε) of the ``"smooth_sensitivity"`` leaf with K = ``classes``
    labels: the largest hockey-stick divergence between the laws at gaps g and g + 1, both
    ways, over 1 ≤ g < G (module docstring). ``scales``: S_1 … S_G (default: those of
    ``ratio``, :func:`smooth_scale_at`); any other sequence (a broken variant) is evaluated
    the same way.

    Evaluated in float64, vectorised: every probability is ≤ 1 and computed to a relative
    2^-50, so each divergence is off by less than (1 + e^ε)·K·2^-48, the allowance added."""
    k = int(classes)
    if k < 2:
        return Fraction(0)
    if scales is None:
        if ratio is None:
            raise DomainError("leaf_delta needs scales or a ratio")
        scales = _scales(epsilon, ratio)
    tail = np.exp(-float(epsilon) / (2 * np.asarray(scales, dtype=np.float64)))
    mode, other = 1 / (1 + (k - 1) * tail), tail / (1 + (k - 1) * tail)
    grow = math.exp(float(epsilon))
    worst = 0.0
    for a, b in ((slice(None, -1), slice(1, None)), (slice(1, None), slice(None, -1))):
        hs = (np.maximum(0, mode[a] - grow * mode[b])
              + (k - 1) * np.maximum(0, other[a] - grow * other[b]))
        worst = max(worst, float(hs.max(initial=0.0)))
    return Fraction(worst) + Fraction((1 + grow) * k) / (1 << 48)


def _scales(epsilon: Fraction, ratio: Fraction) -> np.ndarray:
    """S_1 … S_G of :func:`smooth_scale_at`, vectorised (same formula, same rounding)."""
    g = np.arange(1, cutoff(epsilon, ratio) + 1)
    values = np.exp((g - 1) * math.log(float(ratio))) * (1 + 2.0 ** -40)
    return np.minimum(1.0, values)


@cache
def smooth_ratio(epsilon: Fraction, delta: Fraction, classes: int) -> Fraction:
    """The smallest r = 1 − 2^{−j} (1 ≤ j ≤ 16; the largest β) whose :func:`leaf_delta` is
    ≤ δ (bisection on j, the chosen r checked). Raises DomainError when even j = 16 does not fit."""
    def fits(j: int) -> bool:
        return leaf_delta(epsilon, classes, ratio=1 - Fraction(1, 1 << j)) <= delta

    if not fits(MAX_RATIO_BITS):
        raise DomainError(f"no smooth bound with r ≥ 1 − 2^-{MAX_RATIO_BITS} reaches δ = "
                          f"{delta} at ε = {epsilon}: raise δ or use leaf='counts'")
    low, high = 0, MAX_RATIO_BITS  # fits(high); j = 0 (r = 0) is never tried
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if fits(mid) else (mid, high)
    return 1 - Fraction(1, 1 << high)


AUDIT_EPSILON, AUDIT_DELTA = Fraction(1), Fraction(1, 10**6)
AUDIT_PAIR = (np.array([0, 0, 0, 1]), np.array([0, 0, 0, 0, 1]))  # one leaf: gaps 2 and 3


def paper_scale(counts: np.ndarray, epsilon: Fraction) -> Fraction:
    """The authors' published calibration (β = ε, S = e^{−ε·gap}, not an upper bound at
    distance gap − 1, and no δ): the audit's broken variant."""
    return Fraction(math.exp(-float(epsilon) * _gap(counts)))


def audit_cases() -> list[AuditCase]:
    """One leaf of the forest (the forest's loss is one leaf's, module docstring): its rows'
    labels (K = 2) at gaps 2 and 3, the ``"smooth_sensitivity"`` label at ε = 1, δ = 10^-6.
    Broken: the paper's published scale e^{−ε·gap} for the same claim."""
    eps, ratio = AUDIT_EPSILON, smooth_ratio(AUDIT_EPSILON, AUDIT_DELTA, 2)

    def sampler(scale: Callable[[np.ndarray], Fraction]) -> Sampler:
        def sample(rows: np.ndarray, n: int) -> np.ndarray:
            counts = np.bincount(np.asarray(rows, dtype=np.int64), minlength=2)
            return np.asarray(frontend.select(leaf_scores(counts, scale(counts)), 1, eps,
                                              size=n, statistic=LABELS).value)
        return sample

    good = sampler(lambda c: smooth_scale(c, eps, ratio))
    claim = Measurement(lambda rows: good(rows, 1)[0], AddRemoveDistance(), ApproxDP,
                        lambda d: ApproxDP(eps * d, AUDIT_DELTA * d), "smooth_forest_leaf",
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase("smooth_forest_leaf", claim, good,
                      sampler(lambda c: paper_scale(c, eps)), *AUDIT_PAIR)]


@register(audit=lambda: audit_cases())  # the audit battery's case
class SmoothRandomForestClassifier(ClassifierMixin, BaseEstimator):
    """Random decision forest with exponential-mechanism leaf labels (module docstring:
    Fletcher & Islam 2017, Alg. 1; privacy argument).

    Parameters
    ----------
    n_estimators : int
        T ≥ 1 trees (default 10); each row trains one tree, drawn uniformly.
    max_depth : int, optional
        D, 1 ≤ D ≤ 16 (default :func:`paper_depth` of the number of features).
    epsilon : float
        ε > 0 (nats) for the whole forest (parallel composition: every leaf of every tree
        runs at ε).
    delta : float, optional
        δ ∈ (0, 1), required for ``leaf="smooth_sensitivity"``; unused otherwise.
    leaf : {"counts", "smooth_sensitivity"}
        The leaf label's utility: the class counts (ε-DP), or the paper's mode indicator
        scaled by its smooth sensitivity ((ε, δ)-DP).
    bounds : (lower, upper)
        Declared feature bounds (scalars broadcast); required, never read off the data.
        Rows are clipped to them; categorical features are passed as codes 0 … m − 1.
    classes : sequence
        Declared labels (K ≥ 1).
    accountant : None, PrivacyFilter, Session or Accountant
        Debited PureDP(ε) (``"counts"``) or ApproxDP(ε, δ) once, before any row is read.

    Attributes
    ----------
    trees_ : list of (features, thresholds, labels)
        Per tree: (2^D − 1,) feature indices and thresholds, (2^D,) leaf label indices.
    classes_ : ndarray of shape (K,)
    depth_ : int
    ratio_ : Fraction or None
        r = e^{−β} of the smooth bound (``"smooth_sensitivity"``).
    release_ : Release
        The fit's release record.

    Raises
    ------
    DomainError
        Missing bounds or classes, labels outside them, ε ≤ 0, T < 1, D outside 1 … 16, an
        unknown ``leaf``, a missing δ or δ ∉ (0, 1) for ``"smooth_sensitivity"``, or a δ no
        smooth bound reaches — all before the debit.

    Warns
    -----
    TrivialResultWarning
        When every released leaf label is the same class (the constant classifier).

    Notes
    -----
    Guarantee (add/remove one row): ``"counts"``: ε-DP; ``"smooth_sensitivity"``:
    (ε, δ)-DP with δ ≥ :func:`leaf_delta` (ε, K, r). Source: Fletcher & Islam 2017 Alg. 1
    (structure, depth, disjoint subsets, leaf label by the exponential mechanism); McSherry &
    Talwar 2007 / Dwork & Roth Thm 3.10; Nissim, Raskhodnikova & Smith 2007 Def. 2.1.
    """

    def __init__(self, n_estimators: int = 10, max_depth: int | None = None,
                 epsilon: float = 1.0, delta: float | None = None, leaf: str = "counts",
                 bounds: tuple[object, object] | None = None,
                 classes: object = None, accountant: AccountantLike = None) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.epsilon = epsilon
        self.delta = delta
        self.leaf = leaf
        self.bounds = bounds
        self.classes = classes
        self.accountant = accountant

    def _plan(self, d: int, k: int) -> tuple[Fraction, int, int, Fraction | None, PrivacyLoss]:
        """(ε, T, D, r, loss), every check before the debit."""
        eps = check_epsilon(self.epsilon)
        t = int(self.n_estimators)
        if t < 1:
            raise DomainError("n_estimators must be positive")
        depth = paper_depth(d) if self.max_depth is None else int(self.max_depth)
        if not 1 <= depth <= MAX_DEPTH:
            raise DomainError(f"max_depth must be in 1 … {MAX_DEPTH}")
        if self.leaf not in LEAF_RULES:
            raise DomainError(f"leaf must be one of {LEAF_RULES}, got {self.leaf!r}")
        if self.leaf == "counts":
            return eps, t, depth, None, PureDP(eps)
        if self.delta is None:
            raise DomainError("leaf='smooth_sensitivity' is (ε, δ)-DP: declare delta")
        delta = positive(self.delta, "delta", up=False)
        if delta >= 1:
            raise DomainError("delta must be below 1")
        return eps, t, depth, smooth_ratio(eps, delta, k), ApproxDP(eps, delta)

    def fit(self, X: ArrayLike, y: ArrayLike) -> SmoothRandomForestClassifier:
        """Draw the trees, route each row to one tree and label every leaf.

        Parameters
        ----------
        X : array of shape (n_samples, n_features)
        y : array of shape (n_samples,), values among ``classes``

        Returns
        -------
        self

        Raises
        ------
        DomainError
            See the class docstring; raised before the accountant is debited.
        """
        x, classes, label = fit_labelled(X, y, self.classes)
        lower, upper = check_bounds(self.bounds, x.shape[1])
        k = classes.size
        eps, t, depth, ratio, loss = self._plan(x.shape[1], k)
        row = frontend.selection_row(1, eps, LABELS, monotonic=ratio is None,
                                     mechanism="exponential_many" if ratio is None
                                     else "exponential")

        def compute() -> SmoothRandomForestClassifier:
            clipped = np.clip(x, lower, upper)
            tree_of = rng.uniform_below(t, x.shape[0]).astype(np.int64)
            structures, tables = [], []
            for i in range(t):
                features, thresholds = random_tree(depth, lower, upper)
                mine = tree_of == i
                leaf = leaves(clipped[mine], features, thresholds, depth)
                tables.append(np.bincount(leaf * k + label[mine], minlength=(2 ** depth) * k
                                          ).reshape(-1, k))
                structures.append((features, thresholds))
            labels = self._labels(np.concatenate(tables), eps, ratio)
            size = 2 ** depth
            self.trees_ = [(f, th, labels[i * size:(i + 1) * size])
                           for i, (f, th) in enumerate(structures)]
            self.classes_, self.depth_, self.ratio_ = classes, depth, ratio
            self.n_features_in_ = x.shape[1]
            return self

        model: SmoothRandomForestClassifier = charge(
            self.accountant, loss, f"SmoothRandomForestClassifier(ε={eps}, leaf={self.leaf}, "
            f"T={t}, D={depth})", compute, (row,))
        if k > 1 and np.unique(np.concatenate([lab for _, _, lab in model.trees_])).size == 1:
            _baseline.warn("SmoothRandomForestClassifier", "every leaf label is one class")
        return model

    @staticmethod
    def _labels(tables: np.ndarray, eps: Fraction, ratio: Fraction | None) -> np.ndarray:
        """One exponential-mechanism label per leaf (rows of ``tables``; disjoint data)."""
        if ratio is None:  # all leaves in one vectorised draw, ∝ exp(ε·n_c)
            picks = frontend.select([r for r in tables], 1, eps, monotonic=True,
                                    mechanism="exponential_many", statistic=LABELS).value
            return np.asarray(picks, dtype=np.int64)
        return np.array([frontend.select(leaf_scores(r, smooth_scale(r, eps, ratio)), 1, eps,
                                         statistic=LABELS).value for r in tables],
                        dtype=np.int64)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Vote shares (n_samples, K): the fraction of trees whose leaf says each class."""
        x = predict_features(self, X)
        votes = np.zeros((x.shape[0], self.classes_.size))
        rows = np.arange(x.shape[0])
        for features, thresholds, labels in self.trees_:
            votes[rows, labels[leaves(x, features, thresholds, self.depth_)]] += 1
        return votes / len(self.trees_)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The majority vote of the trees (ties to the first declared class)."""
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])
