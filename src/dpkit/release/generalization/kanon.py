"""Safe k-anonymisation: β-sampling, a declared generalisation, suppression below k.

Li, Qardaji & Su, "On sampling, anonymization, and differential privacy, or,
k-anonymization meets differential privacy", ASIACCS 2012. A *strongly-safe*
k-anonymisation generalises every row with a function g fixed before the data are seen and
suppresses every generalised row whose value occurs fewer than k times; preceded by
sampling each row independently with probability β it is (ε, δ)-DP (their Thm. 5):

    for every ε ≥ −ln(1 − β):
    δ = d(k, β, ε) = max_{n ≥ ⌈k/γ − 1⌉} Σ_{j > γn}^{n} C(n, j) β^j (1 − β)^{n−j},
    γ = (e^ε − 1 + β) / e^ε.

:func:`kanon_delta` computes d exactly (Fractions); :func:`safe_k_anonymize` runs the
mechanism, charged once through the front-end kit. Its suppression step alone is
(k, 0)-crowd-blending private (Gehrke, Hay, Lui & Pass 2012): a row in a group of at least
k blends with the others of its group (swapping it for one of them leaves the output
unchanged), and removing a row of a suppressed group leaves it suppressed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from dpkit.core import numbers, rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ApproxDP, CrowdBlending
from dpkit.core.metrics import AddRemoveDistance
from dpkit.core.numbers import Number
from dpkit.errors import DomainError
from dpkit.mechanisms.frontend import AccountantLike, charge, check_accountant
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["Ranges", "Taxonomy", "KAnonymized", "safe_k_anonymize", "kanon_delta",
           "kanon_loss", "presampled_crowd_blending", "OTHER", "MAX_K"]

OTHER = "*"  # the label of a value outside a scheme's declared domain (and of nulls)
MAX_K = 1000  # bounds the plan-time cost of d(k, β, ε) (a sum of ≤ n terms per n)
_MAX_START = 4000  # ⌈k/γ − 1⌉ past this costs seconds at plan time: refused
_MAX_SPAN = 2000  # values of n searched past ⌈k/γ − 1⌉ before the plan is refused
_MAX_DENOMINATOR = 1 << 32  # β is sampled as uniform_below(denominator) < numerator


@dataclass(frozen=True)
class Ranges:
    """A numeric quasi-identifier generalised to declared intervals [e_i, e_{i+1}).

    Parameters
    ----------
    edges : sequence of numbers
        At least two, strictly increasing, finite; fixed before the data are seen.

    Notes
    -----
    A value outside [e_0, e_last), a null, a NaN or a non-number becomes :data:`OTHER`
    (the output labels are the declared ones and ``"*"``, whatever the data).
    """

    edges: tuple[float, ...]

    def __init__(self, edges: Any) -> None:
        try:
            values = tuple(float(numbers.to_fraction(e)) for e in edges)
        except TypeError as err:
            raise DomainError("Ranges needs a sequence of numbers") from err
        if len(values) < 2 or any(b <= a for a, b in zip(values, values[1:], strict=False)):
            raise DomainError("Ranges needs at least two strictly increasing edges")
        if not all(math.isfinite(v) for v in values):
            raise DomainError("Ranges edges must be finite")
        object.__setattr__(self, "edges", values)

    def labels(self) -> tuple[str, ...]:
        """The declared labels, ``"[a, b)"`` per interval."""
        return tuple(f"[{a:g}, {b:g})" for a, b in zip(self.edges, self.edges[1:],
                                                      strict=False))

    def apply(self, column: pl.Series) -> pl.Series:
        """The generalised column (strings); total on any input column."""
        values = column.cast(pl.Float64, strict=False).fill_null(float("nan")).to_numpy()
        index = np.searchsorted(np.asarray(self.edges), values, side="right") - 1
        inside = np.isfinite(values) & (index >= 0) & (index < len(self.edges) - 1)
        table = np.asarray((*self.labels(), OTHER), dtype=object)
        return pl.Series(column.name, table[np.where(inside, index, len(self.edges) - 1)],
                         dtype=pl.Utf8)


@dataclass(frozen=True)
class Taxonomy:
    """A categorical quasi-identifier generalised up a declared taxonomy tree.

    Parameters
    ----------
    parent : mapping of str to str
        Each node's parent (the root has none); acyclic. The declared values are the nodes.
    level : int
        Steps up the tree, ≥ 0 (0 keeps a declared value; a node reaches the root earlier
        if the tree is shallower there).

    Notes
    -----
    Values are compared as text (an integer column's 9 is ``"9"``). A value that is not a
    declared node, or a null, becomes :data:`OTHER`.
    """

    parent: Mapping[str, str]
    level: int = 1

    def __init__(self, parent: Mapping[str, str], level: int = 1) -> None:
        if not isinstance(parent, Mapping) or not parent or not all(
                isinstance(a, str) and isinstance(b, str) for a, b in parent.items()):
            raise DomainError("Taxonomy needs a non-empty mapping of str child → str parent")
        object.__setattr__(self, "parent", dict(parent))
        object.__setattr__(self, "level", numbers.integer(level, "level", minimum=0))
        for node in self.parent:  # acyclic: every walk up ends at a root
            seen = {node}
            while node in self.parent:
                node = self.parent[node]
                if node in seen:
                    raise DomainError(f"Taxonomy has a cycle through {node!r}")
                seen.add(node)

    def ancestor(self, node: str) -> str:
        """``node`` after :attr:`level` steps up (stopping at a root)."""
        for _ in range(self.level):
            if node not in self.parent:
                break
            node = self.parent[node]
        return node

    def apply(self, column: pl.Series) -> pl.Series:
        """The generalised column (strings); total on any input column."""
        nodes = set(self.parent) | set(self.parent.values())
        mapping = {node: self.ancestor(node) for node in nodes}
        text = column.cast(pl.Utf8, strict=False)
        return text.replace_strict(mapping, default=OTHER, return_dtype=pl.Utf8).fill_null(
            OTHER).rename(column.name)


Scheme = Ranges | Taxonomy


@dataclass(frozen=True)
class KAnonymized:
    """A safe k-anonymisation's release.

    Attributes
    ----------
    groups : polars.DataFrame
        One row per released generalised value: the scheme's columns (strings) and
        ``count`` (Int64, ≥ k), sorted by the columns.
    loss : ApproxDP
        The (ε, δ) debited (δ = d(k, β, ε) rounded up to 64 significant bits).
    crowd_blending : CrowdBlending
        (k, 0): the guarantee of the suppression step alone.
    """

    groups: pl.DataFrame
    loss: ApproxDP
    crowd_blending: CrowdBlending

    @property
    def table(self) -> pl.DataFrame:
        """The k-anonymous generalised table: each group's row repeated ``count`` times."""
        columns = [c for c in self.groups.columns if c != "count"]
        return self.groups.select(pl.col(columns).repeat_by(pl.col("count"))).explode(columns)


def _beta(beta: Number) -> Fraction:
    value = numbers.as_typed(beta)
    if not 0 < value < 1:
        raise DomainError(f"beta must be in (0, 1), got {beta!r}")
    if value.denominator > _MAX_DENOMINATOR:
        raise DomainError("beta's denominator must be at most 2^32 (it is sampled exactly)")
    return value


def _gamma_bounds(beta: Fraction, epsilon: Fraction) -> tuple[Fraction, Fraction]:
    """γ = 1 − (1 − β)e^{−ε} as a certified interval [lo, hi], after checking the theorem's
    hypothesis ε ≥ −ln(1 − β), i.e. (1 − β)e^ε ≥ 1."""
    e_lo, e_hi = numbers.exp_down(epsilon), numbers.exp_up(epsilon)
    if (1 - beta) * e_lo < 1:
        floor = numbers.log_up(1 / (1 - beta))
        raise DomainError(f"Li et al.'s Thm. 5 needs ε ≥ −ln(1 − β) ≈ {float(floor):.6g} "
                          f"at β = {beta}")
    return 1 - (1 - beta) / e_lo, 1 - (1 - beta) / e_hi


def _tail(n: int, threshold: int, beta: Fraction) -> Fraction:
    """P[Bin(n, β) ≥ threshold], exactly: the shorter of the two sums, each term from the
    last by T_{j+1} = T_j·(n − j)·a / ((j + 1)·c), an exact integer division (β = a/b,
    c = b − a, T_j = C(n, j) a^j c^{n−j} is an integer)."""
    a, b = beta.numerator, beta.denominator
    c = b - a
    upper = threshold > n // 2
    first, last = (threshold, n) if upper else (0, threshold - 1)
    term = math.comb(n, first) * a**first * c**(n - first)
    total = 0
    for j in range(first, last + 1):
        total += term
        term = term * (n - j) * a // ((j + 1) * c)
    part = Fraction(total, b**n)
    return part if upper else 1 - part


def _kl_down(gamma: Fraction, beta: Fraction) -> Fraction:
    """A rational ≤ D(γ ‖ β) = γ ln(γ/β) + (1 − γ) ln((1 − γ)/(1 − β)), for β < γ < 1."""
    return (gamma * numbers.log_down(gamma / beta)
            + (1 - gamma) * numbers.log_down((1 - gamma) / (1 - beta)))


def kanon_delta(k: int, beta: Number, epsilon: Number) -> Fraction:
    """δ = d(k, β, ε) of Li, Qardaji & Su 2012, Thm. 5, exactly.

    d(k, β, ε) = max_{n ≥ ⌈k/γ − 1⌉} Σ_{j > γn}^{n} C(n, j) β^j (1 − β)^{n−j},
    γ = (e^ε − 1 + β)/e^ε.

    γ is irrational (e^ε is, for rational ε > 0), so it is held as a certified interval
    [γ_lo, γ_hi] at 50 digits: the search starts at ⌈k/γ_hi − 1⌉ (not after the true start)
    and sums j > γ_lo·n (not fewer terms), so the result is never below d; it equals d
    whenever ⌊γ_lo n⌋ = ⌊γ_hi n⌋ on the searched n (γn is never an integer). The maximum over
    the infinite range is exact: the search stops at the first N where the Chernoff bound
    P[Bin(n, β) ≥ γn] ≤ e^{−n·D(γ‖β)} (decreasing in n, γ > β) at n = N + 1, with D rounded
    down, is at most the largest tail found (compared as logarithms), so no n > N can exceed it.

    Parameters
    ----------
    k : int
        2 ≤ k ≤ :data:`MAX_K`.
    beta : number
        The sampling probability, 0 < β < 1, exact as typed, denominator ≤ 2^32.
    epsilon : number
        ε ≥ −ln(1 − β) in nats, exact as typed.

    Returns
    -------
    Fraction
        δ, exact (its denominator is a power of β's).

    Raises
    ------
    DomainError
        A parameter out of range, a search that would start past n = 4000 (k/γ too
        large) or would run past 2000 values of n.
    """
    k = numbers.integer(k, "k", minimum=2, maximum=MAX_K)
    b = _beta(beta)
    eps = numbers.positive(epsilon, "epsilon", up=False)
    gamma_lo, gamma_hi = _gamma_bounds(b, eps)
    start = max(1, math.ceil(k / gamma_hi - 1))
    if start > _MAX_START:
        raise DomainError(f"d(k, β, ε) sums over n ≥ {start} rows: more than {_MAX_START} "
                          "is refused (its exact cost); raise ε or β, or lower k")
    rate = _kl_down(gamma_lo, b)
    best = Fraction(0)
    for n in range(start, start + _MAX_SPAN):
        best = max(best, _tail(n, math.floor(gamma_lo * n) + 1, b))
        # e^{−(n+1)D} ≤ best, compared in logs (exp_up has an absolute floor of 1e-200)
        if -(n + 1) * rate <= numbers.log_down(best):
            return best
    raise DomainError(f"d(k, β, ε) did not settle within {_MAX_SPAN} values of n: raise ε")


def _short_up(x: Fraction, bits: int = 64) -> Fraction:
    """x rounded up to ``bits`` significant bits (a short δ for the ledger)."""
    if x == 0:
        return x
    shift = x.denominator.bit_length() - x.numerator.bit_length() + bits
    return numbers.dyadic_up(x, max(0, shift))


def kanon_loss(k: int, beta: Number, epsilon: Number) -> ApproxDP:
    """The (ε, δ) that :func:`safe_k_anonymize` debits: ε as given (rounded down when a
    float), δ = :func:`kanon_delta` rounded up to 64 significant bits.

    Raises
    ------
    DomainError
        As :func:`kanon_delta`.
    """
    eps = numbers.positive(epsilon, "epsilon", up=False)
    return ApproxDP(eps, _short_up(kanon_delta(k, beta, eps)))


def _keep(size: int, beta: Fraction) -> np.ndarray:
    """Bernoulli(β) per row, exactly, from the one CSPRNG."""
    return np.asarray(rng.bernoulli_rational(beta.numerator, beta.denominator, size),
                      dtype=bool)


def _suppressed(counts: np.ndarray, k: int) -> np.ndarray:
    """Counts below k set to 0 (their rows are not released)."""
    return np.where(counts >= k, counts, 0)


def _released(generalised: pl.DataFrame, kept: np.ndarray, k: int) -> pl.DataFrame:
    """The groups of the kept rows with at least k of them, sorted: the data side after the
    sampling draw, deterministic (the brute-force test enumerates ``kept``)."""
    columns = generalised.columns
    counts = (generalised.filter(pl.Series(kept, dtype=pl.Boolean))
              .group_by(columns).agg(pl.len().cast(pl.Int64).alias("count")))
    return counts.filter(pl.col("count") >= k).sort(columns)


def _generalise(data: pl.DataFrame, schemes: Mapping[str, Scheme]) -> pl.DataFrame:
    return pl.DataFrame([scheme.apply(data.get_column(name))
                         for name, scheme in schemes.items()])


def _castable(dtype: pl.DataType) -> bool:
    """Types whose casts to Float64 / Utf8 (non-strict) cannot raise: the data side is then
    total (a nested or binary column is refused at plan time)."""
    return (dtype.is_numeric() or dtype in (pl.Utf8, pl.Boolean, pl.Null)
            or isinstance(dtype, pl.Categorical | pl.Enum))


def _check_schemes(data: Any, schemes: Any) -> dict[str, Scheme]:
    if not isinstance(data, pl.DataFrame):
        raise DomainError("data must be a polars DataFrame")
    if not isinstance(schemes, Mapping) or not schemes:
        raise DomainError("declare a generalisation scheme per released column: "
                          "schemes={column: Ranges(...) | Taxonomy(...)}")
    out: dict[str, Scheme] = {}
    for name, scheme in schemes.items():
        if not isinstance(scheme, Ranges | Taxonomy):
            raise DomainError(f"the scheme of {name!r} must be Ranges or Taxonomy")
        if name not in data.columns or name == "count":
            raise DomainError(f"no column {name!r} to generalise (or a reserved name)")
        if not _castable(data.schema[name]):  # a cast that could raise after the debit
            raise DomainError(f"column {name!r} has type {data.schema[name]}: generalise "
                              "numbers, text, categories or booleans")
        out[name] = scheme
    return out


@register(audit=lambda: audit_cases())  # the audit battery's case
def safe_k_anonymize(data: pl.DataFrame, schemes: Mapping[str, Scheme], *, k: int,
                     beta: Number, epsilon: Number, accountant: AccountantLike = None
                     ) -> KAnonymized:
    """Safe k-anonymisation (Li, Qardaji & Su 2012): sample, generalise, suppress below k.

    Each row is kept independently with probability β (an exact Bernoulli from
    :mod:`dpkit.core.rng`); every released column is generalised by its declared scheme
    (columns without one are not released); generalised values held by fewer than k kept
    rows are suppressed. Charged once, (ε, δ), before any row is read.

    Privacy: (ε, δ)-DP under adding or removing one row, for every ε ≥ −ln(1 − β), with
    δ = d(k, β, ε) = max_{n ≥ ⌈k/γ−1⌉} Σ_{j>γn}^{n} C(n, j) β^j (1 − β)^{n−j},
    γ = (e^ε − 1 + β)/e^ε (Li, Qardaji & Su, ASIACCS 2012, Thm. 5: a strongly-safe
    k-anonymisation satisfies (β, ε, δ)-DPS); δ as :func:`kanon_delta`, rounded up. The
    suppression step alone is (k, 0)-crowd-blending private (Gehrke, Hay, Lui & Pass,
    CRYPTO 2012).

    Parameters
    ----------
    data : polars.DataFrame, n rows
        One row per person.
    schemes : mapping of column name to Ranges or Taxonomy
        The data-independent generalisation g, one scheme per released column.
    k : int
        2 ≤ k ≤ :data:`MAX_K`.
    beta : number
        0 < β < 1, exact as typed (0.1 is 1/10), denominator ≤ 2^32.
    epsilon : number
        ε ≥ −ln(1 − β), nats.
    accountant : AccountantLike
        None, an accountant, a filter or a Session (row-level privacy unit).

    Returns
    -------
    KAnonymized
        ``groups`` (generalised values with counts ≥ k), ``table`` (the rows), ``loss``
        and ``crowd_blending``.

    Raises
    ------
    DomainError
        A parameter out of range, an undeclared or missing column, a privacy unit of more
        than one row (all before the debit).
    BudgetExceededError
        Before anything runs.
    ReleaseFailedError
        The data side failed after the debit.

    Notes
    -----
    For counts it loses to Identity: on held-out real data (MSNBC sessions' (first, last)
    page table, ``bench/floor.py``) per-cell Laplace on the same generalised table at the
    same ε (δ = 0) has about 1.1× less L1 error at ε = 0.1 and 5–6× less at ε = 1 (k = 20;
    δ = 2.9e-5 and 5.2e-3 there).
    Prefer Identity for a contingency table; use this when record-level rows must be
    released (a table an analyst can read as microdata).
    """
    declared = _check_schemes(data, schemes)
    k = numbers.integer(k, "k", minimum=2, maximum=MAX_K)
    b = _beta(beta)
    loss = kanon_loss(k, b, epsilon)
    description = (f"safe k-anonymisation (Li, Qardaji & Su 2012): k={k}, β={b}, "
                   f"columns {sorted(declared)}")
    return _sample_and_suppress(data, declared, k, b, loss, description, accountant)


def _sample_and_suppress(data: pl.DataFrame, declared: Mapping[str, Scheme], k: int,
                         beta: Fraction, loss: ApproxDP, description: str,
                         accountant: AccountantLike) -> KAnonymized:
    """The data side both entries share, charged ``loss``: keep each row with probability
    β, generalise, suppress values held by fewer than k kept rows."""
    check_accountant(accountant)  # refuses a per-person unit: the rows are not bounded here

    def compute() -> KAnonymized:
        generalised = _generalise(data, declared)
        groups = _released(generalised, _keep(generalised.height, beta), k)
        return KAnonymized(groups, loss, CrowdBlending(k, 0))

    return charge(accountant, loss, description, compute)


def _smallest_k(p: Fraction, delta: Fraction) -> int:
    """The least k whose :meth:`CrowdBlending.presampled_delta` at p is below δ (δ′ falls
    as k grows): doubling, then bisection."""
    def passes(k: int) -> bool:
        return (k - 1) * p > 1 - p and CrowdBlending(k, 0).presampled_delta(p) < delta
    high = 2
    while not passes(high):
        high *= 2
    low = high // 2  # fails (or is 1)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if passes(mid) else (mid, high)
    return high


def presampled_loss(k: int, p: Fraction, delta: Number) -> ApproxDP:
    """(ε′, δ′) of pre-sampling + (k, 0)-crowd-blending suppression, refused at plan time
    unless δ′ < ``delta`` (the error names the least k that passes at this p)."""
    bound = numbers.positive(delta, "delta", up=False)
    if not bound < 1:
        raise DomainError(f"delta must be in (0, 1), got {delta!r}")
    blending = CrowdBlending(k, 0)
    if (k - 1) * p <= 1 - p or blending.presampled_delta(p) >= bound:
        raise DomainError(f"δ′ of crowd-blending with pre-sampling is not below δ = {delta} "
                          f"at k = {k}, p = {p}: k = {_smallest_k(p, bound)} passes at this p "
                          "(safe_k_anonymize's exact δ of Li et al. is smaller)")
    return blending.presampled_loss(p)


@register(audit=lambda: crowd_audit_cases())
def presampled_crowd_blending(data: pl.DataFrame, schemes: Mapping[str, Scheme], *, k: int,
                              p: Number, delta: Number, accountant: AccountantLike = None
                              ) -> KAnonymized:
    """Pre-sampling + crowd-blending (Gehrke, Hay, Lui & Pass, CRYPTO 2012), charged at the
    (ε′, δ′) their pre-sampling theorem gives, with δ′ derived for declared crowds.

    The data side is :func:`safe_k_anonymize`'s (keep each row with probability p, generalise
    by the declared schemes, suppress values held by fewer than k kept rows); only the
    accounting differs. Suppression below k over a data-independent generalisation is
    (k, 0)-crowd-blending private with crowds that are declared classes (a row blends with
    every row of its generalised value; a class of fewer than k rows is suppressed with or
    without it).

    Privacy: (ε′, δ′)-DP under adding or removing one row, with
    ε′ = ln(p(2 − p)/(1 − p)·e^0 + 1 − p) = −ln(1 − p) and
    δ′ = p·exp(−2(1 − p)²((k − 1)p − (1 − p))²/(k − 1)) (derivation and its hypotheses:
    :meth:`dpkit.core.measures.CrowdBlending.presampled_delta`; Gehrke et al. state
    δ′ = e^{−Ω(k(1 − p)²)}). Refused before the debit unless δ′ < ``delta``.

    Parameters
    ----------
    data : polars.DataFrame, n rows
        One row per person.
    schemes : mapping of column name to Ranges or Taxonomy
        The data-independent generalisation, one scheme per released column.
    k : int
        2 ≤ k ≤ :data:`MAX_K`, with (k − 1)p > 1 − p.
    p : number
        The sampling probability, 0 < p < 1, exact as typed, denominator ≤ 2^32.
    delta : number
        The largest δ the caller accepts, 0 < δ < 1; δ′ must be below it.
    accountant : AccountantLike
        None, an accountant, a filter or a Session (row-level privacy unit).

    Returns
    -------
    KAnonymized
        ``groups``, ``table``, ``loss`` = (ε′, δ′) and ``crowd_blending`` = (k, 0).

    Raises
    ------
    DomainError
        A parameter out of range, δ′ ≥ ``delta`` (naming the least k that passes at this p),
        an undeclared or missing column, a privacy unit of more than one row (all before
        the debit).
    BudgetExceededError
        Before anything runs.
    ReleaseFailedError
        The data side failed after the debit.

    Notes
    -----
    For this data side Li, Qardaji & Su's exact δ (:func:`safe_k_anonymize` at ε just above
    −ln(1 − p)) is far smaller: k = 50, p = 1/2 gives δ′ ≈ 1.4e-3 here against their
    1.7e-5; k = 200 gives 1.0e-11 against 3.7e-17 (the closed form is a Hoeffding bound, 5–20×
    the exact tail it bounds on small k). Use this entry when the guarantee to state is
    crowd-blending's, or as the template for another declared-crowd mechanism.
    """
    declared = _check_schemes(data, schemes)
    k = numbers.integer(k, "k", minimum=2, maximum=MAX_K)
    prob = _beta(p)
    loss = presampled_loss(k, prob, delta)
    description = (f"pre-sampled crowd-blending (Gehrke, Hay, Lui & Pass 2012): k={k}, "
                   f"p={prob}, columns {sorted(declared)}")
    return _sample_and_suppress(data, declared, k, prob, loss, description, accountant)


# -- audit: one group, one row added; broken: no sampling while β = 1/2 is claimed -----------

def _target_sampler(beta: Fraction, k: int) -> Sampler:
    """``sample(rows, n)``: the released count of the generalised value 0 in n runs (0 when
    suppressed); ``rows`` holds generalised values (ints)."""
    def sample(rows: Any, n: int) -> np.ndarray:
        target = int(np.count_nonzero(np.asarray(rows) == 0))
        kept = _keep(n * target, beta).reshape(n, target) if target else np.zeros((n, 0))
        return _suppressed(kept.sum(axis=1).astype(np.int64), k)
    return sample


def audit_cases() -> list[AuditCase]:
    """k = 2, β = 1/2, ε = 1 (δ = d(2, 1/2, 1) = 1/4); x holds two rows of one generalised
    value, x′ three. Broken: every row kept (no sampling) while the claim stays β = 1/2."""
    k, beta, eps = 2, Fraction(1, 2), Fraction(1)
    loss = kanon_loss(k, beta, eps)
    good = _target_sampler(beta, k)
    claim = Measurement(lambda d: good(d, 1), AddRemoveDistance(), ApproxDP,
                        lambda d: loss, "safe_k_anonymize",
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase("safe_k_anonymize", claim, good, _target_sampler(Fraction(1), k),
                      np.array([0, 0]), np.array([0, 0, 0]))]


def crowd_audit_cases() -> list[AuditCase]:
    """k = 3, p = 1/2 (ε′ = ln 2, δ′ ≈ 0.47); x holds two rows of one generalised value, x′
    three (P[count = 3] = 1/8 on x′, 0 on x). Broken: δ′ understated, i.e. the same claim
    for the mechanism run at p = 19/20 (P[count = 3] ≈ 0.86 > δ′ + e^{ε′}·0)."""
    k, p = 3, Fraction(1, 2)
    loss = CrowdBlending(k, 0).presampled_loss(p)
    good = _target_sampler(p, k)
    claim = Measurement(lambda d: good(d, 1), AddRemoveDistance(), ApproxDP,
                        lambda d: loss, "presampled_crowd_blending",
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase("presampled_crowd_blending", claim, good,
                      _target_sampler(Fraction(19, 20), k), np.array([0, 0]),
                      np.array([0, 0, 0]))]
