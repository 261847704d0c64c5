"""DiffGen: differentially private top-down specialisation (Mohammed, Chen, Fung & Yu,
"Differentially private data release for data mining", KDD 2011, Alg. 1).

Start from the fully generalised table (every attribute at its taxonomy's root), specialise
h times — each time one generalised value v of one attribute is replaced by its children
in every record, chosen by the exponential mechanism on a score of v against the class
attribute — then release every leaf of the resulting generalised contingency table (all
combinations of the attributes' current values × the classes, empty ones too) with a noisy
count. A categorical value's children are its taxonomy's; a numeric interval is split at a
grid point chosen by the exponential mechanism.

Two variants (``variant=``):

- ``"diffgen"`` (the paper's Alg. 1): ε′ = ε / (2(|Aⁿ| + 2h)), |Aⁿ| the numeric attributes
  with room to split. One draw at ε′ per numeric attribute chooses its root's split point
  (sequential: |Aⁿ|ε′); each of the h steps draws the value to specialise at ε′ and the split
  points of the new numeric intervals at ε′ (disjoint records: parallel composition), so the
  specialisation spends (|Aⁿ| + 2h)ε′ = ε/2.
- ``"weighted"`` (the budget-saving variant the issue attributes to Zhu et al.; see
  :func:`diffgen` for what is implemented and what could be cited): one draw per step at
  ε/(2h) over every (categorical value) and every (numeric interval, split point) pair,
  a numeric pair weighted by 1/(its interval's split points) — the exponential mechanism
  with a data-free base measure (McSherry & Talwar 2007, Thm 6), so an interval does not
  win by having many split points. No budget goes to split points chosen ahead.

The leaf counts get discrete Laplace noise at ε/2 (L1 sensitivity 1 under add/remove-one;
the leaves partition the records), drawn through the kit; total ε (sequential composition).

The scores (``score=``): ``"infogain"`` — InfoGain(D, v) = H(D_v) − Σ_c |D_c|/|D_v| H(D_c)
(entropies in bits over the classes), in [0, log₂|classes|], so Δu = log₂|classes| (rounded
up to a rational); ``"max"`` — Max(D, v) = Σ_c max_cls |D_c^cls|, Δu = 1 (the paper's §4.1).
Max is the default (:func:`diffgen` says why). A score depends only on the one-attribute
class histogram of v's records, so every step costs O(Σ domain sizes · classes) after one
pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import polars as pl

from dpkit.core.component import Measurement
from dpkit.core.domains import CategoricalDomain, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import AddRemoveDistance
from dpkit.core.numbers import Number, integer, log_down, log_up, positive
from dpkit.core.record import NoiseRow
from dpkit.errors import ColumnError, DomainError
from dpkit.frame import engine
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike
from dpkit.mechanisms.registry import AuditCase, Sampler, register
from dpkit.release.generalization.taxonomy import (
    Categorical,
    Numeric,
    Taxonomy,
    check_taxonomies,
    uniform_codes,
)

__all__ = ["DiffGenPlan", "DiffGenRelease", "plan_diffgen", "diffgen", "diffgen_query",
           "first_step_scores", "largest_table", "MAX_CELLS"]

MAX_CELLS = 1 << 22  # leaves of the released table, by default (memory: 8 bytes each)
Span = tuple[int, int]
Score = Literal["infogain", "max"]
Variant = Literal["diffgen", "weighted"]


@dataclass(frozen=True)
class DiffGenPlan:
    """A DiffGen release as planned (data-free): what is drawn at which budget.

    Attributes
    ----------
    taxonomies : dict column → Categorical or Numeric
    target : str
    classes : tuple of str
    epsilon : Fraction
        ε of the whole release (row level).
    steps : int
        h, the specialisations.
    score, variant : str
    sensitivity : Fraction
        Δu of the score.
    step_epsilon : Fraction
        ε′ of each exponential-mechanism draw.
    count_epsilon : Fraction
        ε/2, the leaf counts' budget.
    noise : tuple of NoiseRow
        The specialisation draws' row and the counts' row (the noise plan).
    """

    taxonomies: dict[str, Taxonomy]
    target: str
    classes: tuple[str, ...]
    epsilon: Fraction
    steps: int
    score: str
    variant: str
    sensitivity: Fraction
    step_epsilon: Fraction
    count_epsilon: Fraction
    noise: tuple[NoiseRow, ...] = field(default=())

    @property
    def columns(self) -> list[str]:
        """The attributes, then the class column."""
        return [*self.taxonomies, self.target]


@dataclass(frozen=True)
class DiffGenRelease:
    """The noisy generalised contingency table of :func:`diffgen`.

    Attributes
    ----------
    table : polars.DataFrame
        One row per leaf: the generalised value of every attribute (a taxonomy node's name,
        or "[lo, hi)" of a numeric interval), the class, and ``count`` (noisy, Int64; may be
        negative), shape (Π |cutᵢ| · |classes|, attributes + 2).
    spans : dict column → int64 array of shape (rows, 2)
        Each row's generalised value as its run [a, b) of codes (leaves or grid cells).
    plan : DiffGenPlan
        The budgets (public).
    """

    table: pl.DataFrame
    spans: dict[str, np.ndarray]
    plan: DiffGenPlan

    def to_record(self) -> dict[str, Any]:
        """What was released, for the record's digest: the table and ε."""
        return {"table": self.table, "epsilon": self.plan.epsilon}

    def sample(self, n: int) -> pl.DataFrame:
        """n synthetic records drawn from the noisy table (post-processing: no budget).

        A leaf is drawn with probability ∝ max(count, 0) (uniformly when no count is
        positive); within it, a categorical value uniformly among its node's leaves and a
        numeric value uniformly among the grid points of its interval [lo, hi). Every draw
        comes from :mod:`dpkit.core.rng`.

        Parameters
        ----------
        n : int
            Records, n ≥ 0.

        Returns
        -------
        polars.DataFrame
            Shape (n, attributes + 1): the attributes (leaf values, grid points) and the class.

        Raises
        ------
        DomainError
            n < 0 or not an integer.
        """
        n = integer(n, "n", minimum=0)
        counts = np.maximum(self.table["count"].to_numpy().astype(np.int64), 0)
        rows = _weighted_rows(counts, n)
        out = {}
        for column, tax in self.plan.taxonomies.items():
            out[column] = tax.values(uniform_codes(self.spans[column][rows]))
        out[self.plan.target] = self.table[self.plan.target].gather(rows)
        return pl.DataFrame(out)


def _weighted_rows(weights: np.ndarray, n: int) -> np.ndarray:
    """n row indices drawn ∝ weights (uniform if all are zero), exactly, from the CSPRNG."""
    from dpkit.core import rng

    total = int(weights.sum())
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if total == 0:
        return rng.uniform_below(weights.size, n).astype(np.int64)
    u = np.array([rng.uniform_below_int(total) for _ in range(n)], dtype=np.int64) \
        if total >= 1 << 62 else rng.uniform_below(total, n).astype(np.int64)
    return np.searchsorted(np.cumsum(weights), u, side="right").astype(np.int64)


# -- the plan (data-free) -------------------------------------------------------------------
def plan_diffgen(taxonomies: Mapping[str, Taxonomy], target: str, classes: Sequence[str], *,
                 epsilon: Number, steps: int = 10, score: str = "max",
                 variant: str = "diffgen", max_cells: int = MAX_CELLS) -> DiffGenPlan:
    """Check a DiffGen request and split its budget, reading no data.

    Parameters and errors as :func:`diffgen` (all raised here, before any debit).
    """
    names = check_taxonomies(taxonomies, target, classes)
    eps = positive(epsilon, "epsilon", up=False)
    h = integer(steps, "steps", minimum=1)
    if score not in ("infogain", "max"):
        raise DomainError(f"score must be 'infogain' or 'max'; got {score!r}")
    if variant not in ("diffgen", "weighted"):
        raise DomainError(f"variant must be 'diffgen' or 'weighted'; got {variant!r}")
    taxes = dict(taxonomies)
    room = sum(_specialisations(t) for t in taxes.values())
    if h > room:
        raise DomainError(f"steps = {h} exceeds the {room} specialisations the taxonomies "
                          "allow: lower steps or refine the taxonomies")
    cells = len(names) * largest_table(list(taxes.values()), h)
    if cells > integer(max_cells, "max_cells", minimum=1):
        raise DomainError(f"after {h} steps the table can have {cells} leaves, above "
                          f"max_cells = {max_cells}: lower steps or raise max_cells")
    sensitivity = _score_sensitivity(score, len(names))
    numeric = sum(1 for t in taxes.values() if isinstance(t, Numeric) and t.size > 1)
    draws = numeric + 2 * h if variant == "diffgen" else h
    step_eps = eps / 2 / draws
    noise = (frontend.selection_row(sensitivity, step_eps, "specialisation"),
             frontend.noise_row(1, eps / 2, "leaf counts"))
    return DiffGenPlan(taxes, target, names, eps, h, score, variant, sensitivity, step_eps, eps / 2,
                       noise)


def _score_sensitivity(score: str, classes: int) -> Fraction:
    """Δu: 1 for Max; log₂|classes| (exact for a power of two, else rounded up) for
    InfoGain, whose values lie in [0, log₂|classes|]."""
    if score == "max":
        return Fraction(1)
    if classes & (classes - 1) == 0:
        return Fraction(classes.bit_length() - 1)
    return log_up(Fraction(classes)) / log_down(Fraction(2))


def _specialisations(tax: Taxonomy) -> int:
    """How many specialisations a taxonomy allows in all (internal nodes, or grid cells − 1)."""
    return len(tax.children) if isinstance(tax, Categorical) else tax.size - 1


def _widest(tax: Taxonomy, h: int) -> list[int]:
    """f[j]: the most values a cut of ``tax`` can hold after j ≤ h specialisations."""
    if isinstance(tax, Numeric):
        return [min(j + 1, tax.size) for j in range(h + 1)]
    return _subtree(tax, (0, tax.size), h)


def _subtree(tax: Categorical, span: Span, h: int) -> list[int]:
    """Tree knapsack: the widest frontier under ``span`` using j expansions, j = 0..h."""
    best = [1] * (h + 1)
    kids = tax.split(span)
    if not kids or h == 0:
        return best
    combined = [0] + [-1] * (h - 1)  # expansions spent below (h − 1 left after this one)
    for kid in kids:
        sub = _subtree(tax, kid, h - 1)
        merged = [-1] * h
        for used, width in enumerate(combined):
            if width < 0:
                continue
            for more in range(h - used):
                merged[used + more] = max(merged[used + more], width + sub[more])
        combined = merged
    for j in range(1, h + 1):
        best[j] = max(best[j - 1], max(combined[:j]))
    return best


def largest_table(taxes: Sequence[Taxonomy], h: int) -> int:
    """The most generalised records Π |cutᵢ| that any h specialisations can produce (the
    plan's bound on the table, from the taxonomies alone; times |classes| for its leaves)."""
    best = [1] + [0] * h
    for tax in taxes:
        f = _widest(tax, h)
        best = [max(best[used] * f[j - used] for used in range(j + 1)) for j in range(h + 1)]
    return max(best)


# -- the data side (after the debit: total) -------------------------------------------------
def _xlog2x(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x * np.log2(np.where(x > 0, x, 1.0)), 0.0)


def _scores(parts: np.ndarray, score: str, sensitivity: Fraction) -> np.ndarray:
    """Scores of P candidate splits, ``parts`` of shape (P, children, classes) (counts)."""
    if score == "max":
        return parts.max(axis=2).sum(axis=1).astype(np.int64)
    n = parts.sum(axis=(1, 2)).astype(np.float64)
    gain = (_xlog2x(n) - _xlog2x(parts.sum(axis=1)).sum(axis=1)
            - _xlog2x(parts.sum(axis=2)).sum(axis=1) + _xlog2x(parts).sum(axis=(1, 2)))
    gain = np.where(n > 0, gain / np.where(n > 0, n, 1.0), 0.0)
    # clipped to the range that bounds Δu, so float rounding can never widen it
    return np.clip(gain, 0.0, float(sensitivity))


class _Specialiser:
    """The state of Alg. 1 on coded records: each attribute's cut (sorted spans) and, in the
    paper's variant, the split point chosen for each numeric span."""

    def __init__(self, plan: DiffGenPlan, codes: np.ndarray, classes: np.ndarray) -> None:
        self.plan = plan
        self.taxes = list(plan.taxonomies.values())
        k = len(plan.classes)
        # cum[i][c] = class counts of codes < c: a span's histogram is a difference
        self.cum = []
        for i, tax in enumerate(self.taxes):
            hist = np.zeros((tax.size, k), dtype=np.int64)
            np.add.at(hist, (codes[:, i], classes), 1)
            self.cum.append(np.vstack([np.zeros((1, k), np.int64), hist.cumsum(axis=0)]))
        self.cuts: list[list[Span]] = [[(0, t.size)] for t in self.taxes]
        self.points: dict[tuple[int, Span], int] = {}

    def counts(self, i: int, spans: Sequence[Span]) -> np.ndarray:
        """Class counts of the records in each span of attribute i, shape (len, classes)."""
        cum = self.cum[i]
        return np.stack([cum[b] - cum[a] for a, b in spans])

    def children(self, i: int, span: Span) -> tuple[Span, ...]:
        tax = self.taxes[i]
        if isinstance(tax, Categorical):
            return tax.split(span)
        p = self.points.get((i, span))
        return () if p is None else ((span[0], p), (p, span[1]))

    def split_scores(self, i: int, span: Span) -> np.ndarray:
        """The score of splitting numeric ``span`` at each interior grid point."""
        a, b = span
        cum = self.cum[i]
        inner = cum[a + 1:b]
        parts = np.stack([inner - cum[a], cum[b] - inner], axis=1)
        return _scores(parts, self.plan.score, self.plan.sensitivity)

    def choose_point(self, i: int, span: Span) -> None:
        """The paper's line 3 / 9: a split point for a numeric span, at ε′."""
        if isinstance(self.taxes[i], Numeric) and span[1] - span[0] > 1:
            pick = frontend.select(self.split_scores(i, span), self.plan.sensitivity,
                                   self.plan.step_epsilon, statistic="split point").value
            self.points[(i, span)] = span[0] + 1 + int(pick)

    def candidates(self) -> tuple[list[tuple[int, Span, tuple[Span, ...]]], np.ndarray]:
        """Every (attribute, value, children) the next step may pick, with its score."""
        cands: list[tuple[int, Span, tuple[Span, ...]]] = []
        scores: list[float] = []
        weighted = self.plan.variant == "weighted"
        temperature = frontend.exact_scale(self.plan.noise[0]) if weighted else Fraction(0)
        for i, tax in enumerate(self.taxes):
            for span in self.cuts[i]:
                if weighted and isinstance(tax, Numeric):
                    if span[1] - span[0] < 2:
                        continue
                    s = self.split_scores(i, span).astype(np.float64)
                    # base measure 1/(split points): an offset s·ln w that no record moves
                    s = s - float(temperature) * math.log(s.size)
                    for p, value in zip(range(span[0] + 1, span[1]), s, strict=True):
                        cands.append((i, span, ((span[0], p), (p, span[1]))))
                        scores.append(value)
                    continue
                kids = self.children(i, span)
                if kids:
                    cands.append((i, span, kids))
                    scores.append(_scores(self.counts(i, kids)[None], self.plan.score,
                                          self.plan.sensitivity)[0])
        return cands, np.asarray(scores)

    def step(self) -> None:
        """One specialisation: pick a value by the exponential mechanism, replace it."""
        cands, scores = self.candidates()
        if not cands:  # cannot happen: plan_diffgen caps steps at what the taxonomies allow
            return
        pick = frontend.select(scores, self.plan.sensitivity, self.plan.step_epsilon,
                               statistic="specialisation").value
        i, span, kids = cands[int(pick)]
        cut = self.cuts[i]
        at = cut.index(span)
        self.cuts[i] = cut[:at] + list(kids) + cut[at + 1:]
        if self.plan.variant == "diffgen":
            for kid in kids:  # disjoint records: parallel composition, ε′ for all of them
                self.choose_point(i, kid)


def _run(plan: DiffGenPlan, table: pl.DataFrame) -> DiffGenRelease:
    """Alg. 1 on bounded rows (the data side: total — out-of-domain rows are dropped)."""
    codes = np.stack([tax.codes(table[c]) for c, tax in plan.taxonomies.items()], axis=1) \
        if table.height else np.zeros((0, len(plan.taxonomies)), dtype=np.int64)
    index = {c: k for k, c in enumerate(plan.classes)}
    classes = table[plan.target].cast(pl.String, strict=False).replace_strict(
        index, default=-1, return_dtype=pl.Int64).fill_null(-1).to_numpy().astype(np.int64)
    keep = (classes >= 0) & (codes >= 0).all(axis=1)
    codes, classes = codes[keep], classes[keep]
    state = _Specialiser(plan, codes, classes)
    if plan.variant == "diffgen":
        for i, tax in enumerate(state.taxes):
            state.choose_point(i, (0, tax.size))
    for _ in range(plan.steps):
        state.step()
    return _leaves(plan, state.cuts, codes, classes)


def _leaves(plan: DiffGenPlan, cuts: list[list[Span]], codes: np.ndarray,
            classes: np.ndarray) -> DiffGenRelease:
    """Every leaf (cut values × classes) with its count, noised at ε/2 through the kit."""
    shape = [len(c) for c in cuts] + [len(plan.classes)]
    index = [np.searchsorted([a for a, _ in cut], codes[:, i], side="right") - 1
             for i, cut in enumerate(cuts)]
    flat = np.ravel_multi_index((*index, classes), shape) if codes.shape[0] else \
        np.zeros(0, dtype=np.int64)
    exact = np.bincount(flat, minlength=int(np.prod(shape))).astype(np.int64)
    noisy = frontend.noisy(exact, 1, plan.count_epsilon, statistic="leaf counts").value
    grid = np.indices(shape).reshape(len(shape), -1)
    columns: dict[str, Any] = {}
    spans: dict[str, np.ndarray] = {}
    for i, (column, tax) in enumerate(plan.taxonomies.items()):
        cut = np.asarray(cuts[i], dtype=np.int64)
        spans[column] = cut[grid[i]]
        columns[column] = pl.Series([tax.label(s) for s in cuts[i]], dtype=pl.String
                                    ).gather(grid[i])
    columns[plan.target] = pl.Series(plan.classes, dtype=pl.String).gather(grid[-1])
    columns["count"] = pl.Series(np.asarray(noisy, dtype=np.int64))
    return DiffGenRelease(pl.DataFrame(columns), spans, plan)


# -- the entries ----------------------------------------------------------------------------
def _audit() -> list[AuditCase]:
    """The first specialisation on a tiny table: education-like tree {lo: [a, b], hi: [c]},
    binary class, Max score (Δu = 1), ε′ = 1; x′ adds one record (c, f, yes), which raises
    the score of specialising e from 3 to 4 and leaves s's at 3. Broken: the temperature of
    a quarter of Δu while the claim stays ε′ = 1 (P(s) falls from 1/2 to 0.12: ln 4.2 > 1)."""
    taxes: dict[str, Taxonomy] = {
        "e": Categorical({"all": {"lo": ["a", "b"], "hi": ["c"]}}),
        "s": Categorical({"any": ["m", "f"]})}
    x = np.array([("a", "m", "no"), ("b", "f", "no"), ("c", "m", "yes"), ("a", "m", "yes")],
                 dtype=object)  # records (e, s, y)
    x_prime = np.vstack([x, np.array([("c", "f", "yes")], dtype=object)])
    plan = plan_diffgen(taxes, "y", ["no", "yes"], epsilon=2, steps=1, score="max",
                        variant="weighted")  # ε′ = ε/(2h) = 1

    def sampler(budget: Fraction) -> Sampler:
        def sample(data: Any, n: int) -> np.ndarray:
            table = pl.DataFrame(np.asarray(data).tolist(), schema=["e", "s", "y"],
                                 orient="row")
            _, scores = first_step_scores(plan, table)
            return np.asarray(frontend.select(scores, plan.sensitivity, budget,
                                              size=n).value)
        return sample

    claim = Measurement(lambda d: sampler(Fraction(1))(d, 1), AddRemoveDistance(), PureDP,
                        lambda d: PureDP(Fraction(d)), "diffgen_step",
                        input_domain=VectorDomain(VectorDomain(CategoricalDomain(
                            ("a", "b", "c", "m", "f", "no", "yes")), size=3)))
    return [AuditCase("diffgen_step", claim, sampler(Fraction(1)), sampler(Fraction(4)),
                      x, x_prime)]


def first_step_scores(plan: DiffGenPlan, table: pl.DataFrame,
                      points: Mapping[str, int] | None = None
                      ) -> tuple[list[tuple[str, str, tuple[str, ...]]], np.ndarray]:
    """The candidates of the first specialisation on ``table`` and their scores (exact law
    tests and the audit; reads the data without noise — never for a release).

    Parameters
    ----------
    plan : DiffGenPlan
    table : polars.DataFrame
    points : mapping column → int, optional
        The paper's variant: the grid point chosen for each numeric root (default: the
        middle).

    Returns
    -------
    candidates : list of (column, value, children)
        Labels, in the order of the scores.
    scores : array of shape (candidates,)
        u(D, v) (with the base-measure offset in the weighted variant).
    """
    codes = np.stack([tax.codes(table[c]) for c, tax in plan.taxonomies.items()], axis=1)
    index = {c: k for k, c in enumerate(plan.classes)}
    classes = table[plan.target].replace_strict(index, default=-1,
                                                return_dtype=pl.Int64).to_numpy()
    keep = (classes >= 0) & (codes >= 0).all(axis=1)
    state = _Specialiser(plan, codes[keep], classes[keep])
    for i, (column, tax) in enumerate(plan.taxonomies.items()):
        if plan.variant == "diffgen" and isinstance(tax, Numeric) and tax.size > 1:
            chosen = (points or {}).get(column, tax.size // 2)
            state.points[(i, (0, tax.size))] = int(chosen)
    cands, scores = state.candidates()
    names = list(plan.taxonomies)
    labels = [(names[i], state.taxes[i].label(span),
               tuple(state.taxes[i].label(k) for k in kids)) for i, span, kids in cands]
    return labels, scores


@register(audit=_audit)
def diffgen(table: pl.DataFrame, taxonomies: Mapping[str, Taxonomy], target: str,
            classes: Sequence[str], *, epsilon: Number, steps: int = 10,
            score: str = "max", variant: str = "diffgen", max_cells: int = MAX_CELLS,
            accountant: AccountantLike = None) -> DiffGenRelease:
    """DiffGen (Mohammed, Chen, Fung & Yu, KDD 2011, Alg. 1): a noisy generalised
    contingency table of ``table``'s declared attributes and class, by top-down
    specialisation over declared taxonomies, on already-bounded rows (one row, one
    individual). A curator with per-person data uses ``query.publish.diffgen``
    (:func:`diffgen_query`).

    Privacy: ε-DP under add/remove-one-row. Each exponential-mechanism draw at ε′ with
    temperature 2Δu/ε′ is ε′-DP (McSherry & Talwar 2007, Thm 6; Dwork & Roth Thm 3.10);
    ``variant="diffgen"`` makes |Aⁿ| + 2h draws' worth of sequential steps at
    ε′ = ε/(2(|Aⁿ| + 2h)) (the split points of one step's new intervals by parallel
    composition: disjoint records), ``"weighted"`` h draws at ε′ = ε/(2h) (a data-free base
    measure keeps the exponential mechanism's guarantee); the leaf counts, a partition of
    the records, get discrete Laplace noise at ε/2 (sensitivity 1; Canonne, Kamath &
    Steinke 2020). Total: (|Aⁿ| + 2h)ε′ + ε/2 = ε (paper's Theorem 4.1; sequential
    composition, Dwork & Roth Thm 3.16, and parallel composition, McSherry 2009 Thm 4).

    The weighted variant is the one the issue attributes to Zhu et al. (one draw per
    iteration over weighted candidates); the exact paper could not be retrieved here, so
    what is implemented is stated above: candidates are every specialisable categorical
    value and every (numeric interval, split point) pair, with base measure 1 and
    1/(the interval's split points) respectively (McSherry & Talwar 2007's exponential
    mechanism with a base measure).

    Parameters
    ----------
    table : polars.DataFrame
        The records: the attributes of ``taxonomies`` and ``target``; rows whose values lie
        outside the declared domains (nulls too) are dropped.
    taxonomies : mapping column → Categorical or Numeric
        The declared generalisation of every attribute released
        (:mod:`~dpkit.release.generalization.taxonomy`; Adult's in ``ADULT_TAXONOMY``).
    target : str
        The class column (never generalised).
    classes : sequence of str
        Its declared values (at least two).
    epsilon : number
        ε > 0 (nats).
    steps : int
        h ≥ 1, the specialisations (at most what the taxonomies allow).
    score : {"max", "infogain"}
        The exponential mechanism's utility: Max (default, Δu = 1) or the normalised
        information gain (Δu = log₂|classes|). Why Max: InfoGain lies in [0, log₂|classes|],
        so its draw at temperature 2Δu/ε′ favours the best candidate over the worst by at
        most e^{ε′/2} — uniform to within 1% at ε = 1, h = 10 (ε′ = ε/52 on Adult), at any
        table size; Max's scores are counts, whose spread grows with the table.
    variant : {"diffgen", "weighted"}
        The paper's Alg. 1, or one weighted draw per step (above).
    max_cells : int
        Largest number of leaves the table may reach after h steps (worst case over the
        choices, computed from the taxonomies; default 2^22).
    accountant : AccountantLike
        Charged PureDP(ε) once, before the data is read (None: the caller composes).

    Returns
    -------
    DiffGenRelease
        ``table`` (Polars: generalised values, class, noisy ``count``), ``sample(n)``.

    Raises
    ------
    DomainError
        A bad taxonomy or class list, ε ≤ 0, steps < 1 or above what the taxonomies allow,
        an unknown score or variant, a worst-case table above ``max_cells`` — before any
        budget is spent.
    ColumnError
        A declared column missing from ``table`` (before the debit).
    BudgetExceededError
        From the accountant (nothing drawn).
    """
    plan = plan_diffgen(taxonomies, target, classes, epsilon=epsilon, steps=steps,
                        score=score, variant=variant, max_cells=max_cells)
    frontend.check_accountant(accountant)
    missing = [c for c in plan.columns if c not in table.columns]
    if missing:
        raise ColumnError(f"column {missing[0]!r} is not in the table")
    frame = table.select(plan.columns)
    return frontend.charge(accountant, PureDP(plan.epsilon), _description(plan),
                           lambda: _run(plan, frame), plan.noise)


def _description(plan: DiffGenPlan, prefix: str = "") -> str:
    attrs = ", ".join(plan.taxonomies)
    return (f"{prefix}diffgen({attrs} → {plan.target}; h={plan.steps}, score={plan.score}, "
            f"variant={plan.variant}, ε′={plan.step_epsilon}, counts ε={plan.count_epsilon})")


def diffgen_query(query: Any, taxonomies: Mapping[str, Taxonomy], target: str,
                  classes: Sequence[str], *, epsilon: Number, steps: int = 10,
                  score: str = "max", variant: str = "diffgen",
                  max_cells: int = MAX_CELLS) -> DiffGenRelease:
    """DiffGen (:func:`diffgen`) on a session query's rows, charged once to the session at
    its privacy unit (``query.publish.diffgen``).

    Privacy: the rows are bounded to at most M per unit (M the unit's row bound, 1 for
    row-level units), then DiffGen runs at ε/M, which is ε-DP per unit by group privacy
    (Dwork & Roth Thm 2.2; DiffGen's own guarantee: Mohammed et al. 2011, Thm 4.1). The
    session is debited PureDP(ε) (ρ = ε²/2 in a zCDP session) once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations (filters and transformations allowed).
    taxonomies, target, classes, steps, score, variant, max_cells
        As :func:`diffgen`.
    epsilon : number
        ε > 0 (nats), per unit.

    Returns
    -------
    DiffGenRelease
        Its record is ``query.session.last_release``.

    Raises
    ------
    DomainError, ColumnError
        As :func:`diffgen`, and a grouped query or one with aggregations — before any
        budget is spent. BudgetExceededError if ε exceeds what remains.
    """
    if query.aggs or query.group_columns:
        raise DomainError("publish.diffgen runs on an ungrouped query without agg()")
    eps = positive(epsilon, "epsilon", up=False)
    session = query.session
    unit = session.privacy_unit
    m = int(unit.bounds.single_group().max_rows) if unit.column is not None else 1
    plan = plan_diffgen(taxonomies, target, classes, epsilon=eps / m, steps=steps,
                        score=score, variant=variant, max_cells=max_cells)
    empty = query.lazy(empty=True)
    engine.check_columns(empty.collect_schema(), plan.columns)
    engine.bound_contributions(empty, unit, plan.columns, []).collect()  # the plan runs

    def compute() -> DiffGenRelease:
        bounded = engine.bound_contributions(query.lazy(), unit, plan.columns, [])
        return _run(plan, engine.to_polars(bounded.select(plan.columns).collect()))

    steps_text = query.describe().removesuffix("agg()").rstrip(".")
    description = _description(plan, f"{steps_text}.publish." if steps_text else "publish.")
    description += f"; unit ≤ {m} rows, run at ε/{m}" if m > 1 else ""
    return frontend.charge(session, PureDP(eps), description, compute, plan.noise,
                           unit_bounded=True)
