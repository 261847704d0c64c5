"""The iterative construction (IC): answer many counting queries by learning a synthetic
distribution (Gupta, Roth & Ullman, TCC 2012; Dwork & Roth 2014 §5.2, Algorithm 9 and
Thms 5.3–5.7; Hardt & Rothblum 2010).

A hypothesis D⁰ over the finite data domain X (uniform) is corrected T times. Round t:

1. the *distinguisher* privately picks the query q_t that D^{t−1} gets most wrong, on the
   score |q·x − n̂·q(D^{t−1})| (sensitivity 1 for counting queries, see below), at ε_sel;
2. q_t·x is *measured* with discrete Laplace noise of scale 1/ε_meas (sensitivity 1);
3. the non-private *updater* moves D^{t−1} towards the measured answer â_t = m_t/n̂.

The release is the average hypothesis D̄ = (1/T)Σ_{t<T} D^t (the analysis bounds the
average; :attr:`ICResult.last` is the final iterate too), answers n̂·q(D̄).

Distinguishers (all at scale s = 2Δ/ε_sel, ε_sel-DP for scores of sensitivity Δ):
``"exponential"`` (McSherry & Talwar 2007; D&R Thm 3.10), ``"noisy_max"`` (report noisy max
with discrete Laplace; D&R Claim 3.9), ``"permute_and_flip"`` (McKenna & Sheldon 2020).

Updaters: ``"mw"`` multiplicative weights D ← D·exp(η·q)/Z, η = clip((â − q(D))/2, ±1)
(Hardt & Rothblum 2010; D&R Thm 4.10's update with a measured step); ``"additive"`` the
perceptron-like step D ← Π_Δ(D + η·q), η = (â − q(D))/‖q‖₂², Π_Δ the Euclidean projection
on the simplex; ``"halving"`` the median mechanism's update (Roth & Roughgarden, STOC 2010):
the hypothesis is a set of candidate databases of m records, its answer their median, and an
update drops every candidate farther than τ from â (exponential in m: small domains only).

Privacy (pure, add/remove one record). A share of ε measures n (unless ``n`` is declared
public); each round spends ε_round = ε_sel + ε_meas (half each) — the distinguisher sees
the data only through scores whose sensitivity is Δ = 1 (adding a record z changes
q·x − n̂·q(D) by q(z) ∈ {0, 1}), plus a float rounding allowance of 2^-20 (the scores are
clamped at 2^28, so it holds for any number of records:
:func:`dpkit.release.synthetic.mst.grid_scores`) and 2^-10 for rounding the scores to a
grid of 2^-10 (so noisy max works with small exact rationals). Sequential composition:
ε_n + T·ε_round ≤ ε (D&R Thm 5.3, pure). With δ > 0 the T rounds compose by the advanced composition
theorem (D&R Thm 3.20; :func:`dpkit.core.composition.advanced_composition`, checked
exactly): ε_round is the largest that gives (ε − ε_n, δ) over T rounds.

Accuracy (:attr:`ICResult.bound`, in counts, holds with probability ≥ 1 − β; our derivation
in the spirit of D&R Thm 5.7, written out since we state our own constants). Let p = x/n,
e_t = q_t(p) − q_t(D^{t−1}), ν_t = â_t − q_t(p), M_t = max_q |q(p) − q(D^{t−1})|, κ a bound
on |n̂ − n| (0 if n is declared), g the distinguisher's utility gap (D&R Thm 3.11 for the
exponential mechanism, s(ln|Q| + ln 1/β′); the same for permute-and-flip, since a candidate
r is picked with probability ≤ e^{−(u*−u_r)/s}; 2s(ln(|Q|+1) + ln 1/β′) for noisy max).
- *MW*: with Ψ_t = KL(p‖D^t), e^y ≤ 1 + y + y² (|y| ≤ 1) and q(z) ∈ [0, 1] give
  Ψ_t − Ψ_{t−1} ≤ −η(e_t) + η² ≤ (ν_t² − e_t²)/4 (also when η is clipped), so
  Σ e_t² ≤ 4 ln|X| + Σ ν_t².
- *additive*: with Ψ_t = ‖p − D^t‖₂² ≤ 1 (the projection never increases it),
  Ψ_t − Ψ_{t−1} ≤ (ν_t² − e_t²)/‖q_t‖², so Σ e_t² ≤ c(1 + Σ ν_t²), c = max ‖q‖₂².
- The distinguisher: n·M_t ≤ n|e_t| + g + 2κ. Averaging, max_q |q(D̄) − q(p)| ≤
  (1/T)Σ M_t ≤ √((1/T)Σ e_t²) + (g + 2κ)/n, and the released counts n̂·q(D̄) are off by
  at most n·that + κ. With |ν_t| ≤ (ℓ + κ)/n̂, ℓ the measurement noise's tail, and n ≤
  n̂ + κ: bound = (n̂ + κ)·√(4 ln|X|/T + ν²) + g + 3κ (MW), with c(1/T + ν²) under the
  root for additive. β splits as β/(2T + 1) over the T selections, T measurements and n̂.
- *halving*: no a-priori bound on the released iterate is stated (``bound`` is None).

Accuracy (issue 34): faithful to its theorem, not a default. Each round measures one query,
so at most T of the m queries are ever measured and the rest are inferred from the uniform
start; on real marginal workloads (``bench/floor_guards.py``,
``bench/results/floor_guards.md``) its mean error per cell is 32–238× MWEM's
(:func:`dpkit.release.synthetic.mwem.mwem`, which measures a whole marginal per round) and
118–2,250× Identity's (per-cell Laplace) at ε ∈ {0.1, 1} on MovieLens and MSNBC 2-way
marginals, T = 10.
:meth:`IterativeConstruction.run` emits :class:`~dpkit.errors.BaselineWarning` and sets
:attr:`ICResult.note` when m > T (public: the workload's size and T), pointing to MWEM;
the release is unchanged. No front end uses IC as a default (``synthesize`` and ``auto``
do not offer it).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations_with_replacement
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpkit.core.accuracy import laplace_tail
from dpkit.core.composition import advanced_composition
from dpkit.core.measures import ApproxDP, PureDP
from dpkit.core.numbers import Number, positive, to_fraction
from dpkit.errors import BaselineWarning, DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.exponential import SCORE_ALLOWANCE
from dpkit.release.synthetic.mst import grid_scores

__all__ = ["LinearQueries", "IterativeConstruction", "ICResult", "DISTINGUISHERS",
           "UPDATERS", "project_simplex"]

# Δ = 1, plus the float rounding allowance, plus the rounding to the grid (|round(a) −
# round(b)| ≤ |a − b| + 2^-10)
SCORE_SENSITIVITY = 1 + SCORE_ALLOWANCE


# ------------------------------------------------------------------------------- queries
@dataclass(frozen=True)
class LinearQueries:
    """Counting queries over a finite domain of ``size`` cells: a 0/1 matrix (m × size).

    Build with :meth:`from_matrix`, :meth:`from_marginals` (every cell of every marginal
    is a query) or :meth:`from_ranges`."""

    matrix: sp.csr_matrix
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        m = self.matrix
        if m.shape[0] == 0 or m.shape[1] == 0:
            raise DomainError("a workload needs at least one query over a non-empty domain")
        data = np.asarray(m.data)
        if data.size and not np.all((data == 0) | (data == 1)):
            raise DomainError("counting queries must have 0/1 entries")

    @classmethod
    def from_matrix(cls, matrix: object) -> LinearQueries:
        return cls(sp.csr_matrix(matrix, dtype=np.float64))

    @classmethod
    def from_marginals(cls, workload: object) -> LinearQueries:
        """Every cell of every marginal of a :class:`~dpkit.release.synthetic.marginals.
        MarginalWorkload` over its (explicit, row-major) domain."""
        domain = workload.domain  # type: ignore[attr-defined]
        size = domain.size()
        index = np.arange(size).reshape(domain.shape())
        blocks, names = [], []
        for clique in workload.cliques:  # type: ignore[attr-defined]
            axes = domain.axes(clique)
            rest = [a for a in range(len(domain.attributes)) if a not in axes]
            cells = np.transpose(index, list(axes) + rest).reshape(domain.size(clique), -1)
            rows = np.repeat(np.arange(cells.shape[0]), cells.shape[1])
            blocks.append(sp.csr_matrix((np.ones(rows.size), (rows, cells.ravel())),
                                        shape=(cells.shape[0], size)))
            names += [f"{'×'.join(clique)}[{i}]" for i in range(cells.shape[0])]
        return cls(sp.vstack(blocks).tocsr(), tuple(names))

    @classmethod
    def from_ranges(cls, workload: object) -> LinearQueries:
        """The queries of a :class:`~dpkit.release.workload.RangeWorkload`."""
        return cls(sp.csr_matrix(workload.matrix(), dtype=np.float64))  # type: ignore

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def domain_size(self) -> int:
        return int(self.matrix.shape[1])

    def answer(self, x: np.ndarray) -> np.ndarray:
        """q·x for every query (float64; exact for integer counts below 2^53)."""
        return np.asarray(self.matrix @ np.asarray(x, dtype=np.float64)).ravel()


# ------------------------------------------------------------------------ distinguishers
@dataclass(frozen=True)
class _Distinguisher:
    mechanism: str  # dpkit.mechanisms.make_selection's name for it
    gap_factor: float  # g = gap_factor·s·(ln(|Q| + extra) + ln(1/β))
    extra: int


DISTINGUISHERS = {
    "exponential": _Distinguisher("exponential", 1.0, 0),
    "permute_and_flip": _Distinguisher("permute_and_flip", 1.0, 0),
    "noisy_max": _Distinguisher("report_noisy_max", 2.0, 1),
}


# ------------------------------------------------------------------------------ updaters
def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of v on the probability simplex (sort-based; Held, Wolfe &
    Crowder 1974, as in Duchi et al. 2008, Fig. 1)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1
    idx = np.arange(1, v.size + 1)
    k = np.flatnonzero(u - css / idx > 0)[-1]
    return np.maximum(v - css[k] / (k + 1), 0.0)


class _MW:
    name = "mw"

    def __init__(self, size: int, **_: object) -> None:
        self.d = np.full(size, 1.0 / size)

    def distribution(self) -> np.ndarray:
        return self.d

    def answers(self, queries: LinearQueries) -> np.ndarray:
        return np.asarray(queries.matrix @ self.d).ravel()

    def update(self, row: np.ndarray, current: float, measured: float) -> None:
        eta = float(np.clip((measured - current) / 2, -1.0, 1.0))
        w = self.d * np.exp(eta * row)
        self.d = w / w.sum()

    @staticmethod
    def progress(size: int, rounds: int, c: float, nu: float) -> float:
        return math.sqrt(4 * math.log(size) / rounds + nu * nu)


class _Additive(_MW):
    name = "additive"

    def update(self, row: np.ndarray, current: float, measured: float) -> None:
        norm2 = float(row @ row)
        if norm2 > 0:
            self.d = project_simplex(self.d + (measured - current) / norm2 * row)

    @staticmethod
    def progress(size: int, rounds: int, c: float, nu: float) -> float:
        return math.sqrt(c * (1 / rounds + nu * nu))


class _Halving:
    name = "halving"

    def __init__(self, size: int, records: int = 4, max_candidates: int = 200_000,
                 tolerance: float | None = None, **_: object) -> None:
        m = int(records)
        if m < 1:
            raise DomainError("records (candidate database size) must be positive")
        count = math.comb(size + m - 1, m)
        if count > max_candidates:
            raise DomainError(f"the halving updater enumerates all {count:,} databases of "
                              f"{m} records over {size} cells (> max_candidates = "
                              f"{max_candidates:,}): it is exponential-time, for small "
                              "domains (use 'mw')")
        cand = np.zeros((count, size))
        for i, combo in enumerate(combinations_with_replacement(range(size), m)):
            np.add.at(cand[i], list(combo), 1.0 / m)
        self.candidates = cand
        # a sample of m records is within √(ln(2|Q|)/(2m)) on every query with positive
        # probability (Hoeffding + union bound), so some candidate is that close to p
        self.tolerance = tolerance
        self.m = m

    def distribution(self) -> np.ndarray:
        return self.candidates.mean(axis=0)

    def answers(self, queries: LinearQueries) -> np.ndarray:
        return np.median(np.asarray(queries.matrix @ self.candidates.T), axis=1)

    def update(self, row: np.ndarray, current: float, measured: float) -> None:
        values = self.candidates @ row
        far = np.abs(values - measured)
        tol = self.tolerance if self.tolerance is not None else 1 / math.sqrt(self.m)
        keep = far <= tol
        if not keep.any():  # keep the closest rather than nothing (post-processing)
            keep = far <= far.min()
        self.candidates = self.candidates[keep]

    @staticmethod
    def progress(size: int, rounds: int, c: float, nu: float) -> float | None:
        return None


UPDATERS: dict[str, Any] = {"mw": _MW, "additive": _Additive, "halving": _Halving}


# --------------------------------------------------------------------------- the result
@dataclass
class ICResult:
    """The output of :meth:`IterativeConstruction.run`.

    Attributes
    ----------
    distribution : ndarray, shape (|X|,)
        The released average hypothesis D̄ (sums to 1).
    last : ndarray, shape (|X|,)
        The final iterate D^T (also private: post-processing).
    noisy_total : int
        n̂ (or the declared n).
    answers : ndarray, shape (m,)
        n̂·q(D̄) for every workload query, in counts.
    bound : float or None
        max_q |n̂·q(D̄) − q·x| ≤ bound with probability ≥ 1 − β (module docstring); None for
        the halving updater, inf when n̂ < 1.
    beta : float
    epsilon, delta : Fraction
        The privacy loss spent.
    selected : list of int
        The query index chosen in each round.
    note : str or None
        Why a simpler release is expected to be more accurate
        (:meth:`IterativeConstruction.advice`), else None.
    """

    distribution: np.ndarray
    last: np.ndarray
    noisy_total: int
    answers: np.ndarray
    bound: float | None
    beta: float
    epsilon: Fraction
    delta: Fraction
    selected: list[int] = field(default_factory=list)
    note: str | None = None

    def answer(self, queries: LinearQueries) -> np.ndarray:
        """Counts n̂·q(D̄) for other queries over the same domain (post-processing)."""
        return self.noisy_total * np.asarray(queries.matrix @ self.distribution).ravel()

    def synthetic_counts(self) -> np.ndarray:
        """The hypothesis as a count vector n̂·D̄ (float)."""
        return self.noisy_total * self.distribution


# ------------------------------------------------------------------------- the framework
class IterativeConstruction:
    """The iterative construction with swappable distinguisher and updater (module
    docstring).

    Parameters
    ----------
    distinguisher : {"exponential", "noisy_max", "permute_and_flip"}
    updater : {"mw", "additive", "halving"}
    T : int
        Rounds (for MW, D&R's T(α) = 4 ln|X|/α² gives the progress term α).
    epsilon : number
        Total ε (nats), including the share for n̂.
    delta : number
        0 (pure, sequential composition) or δ ∈ (0, 1) (advanced composition over rounds).
    n : int, optional
        The number of records if it is public; otherwise ``total_share``·ε measures it.
    total_share : number in (0, 1)
        Share of ε for n̂ (default 1/20).
    beta : float
        Failure probability of the reported bound (default 0.05).
    **updater_options
        For "halving": ``records`` (m, default 4), ``max_candidates``, ``tolerance``.

    Raises
    ------
    DomainError
        Unknown parts, T < 1, ε ≤ 0, δ outside [0, 1), bad shares.

    Notes
    -----
    Accuracy: not a default. With more queries than rounds (m > T) at most T queries are
    measured; on real 2-way marginal workloads its error is 32–238× MWEM's at ε ∈ {0.1, 1}
    (module docstring). :meth:`run` and :meth:`check` then warn
    (:class:`~dpkit.errors.BaselineWarning`) and the result's ``note`` says so.
    """

    def __init__(self, distinguisher: str = "exponential", updater: str = "mw", T: int = 10,
                 epsilon: Number = 1, delta: Number = 0, *, n: int | None = None,
                 total_share: Number = Fraction(1, 20), beta: float = 0.05,
                 **updater_options: object) -> None:
        if distinguisher not in DISTINGUISHERS:
            raise DomainError(f"unknown distinguisher {distinguisher!r}; choose from "
                              f"{', '.join(DISTINGUISHERS)}")
        if updater not in UPDATERS:
            raise DomainError(f"unknown updater {updater!r}; choose from {', '.join(UPDATERS)}")
        if isinstance(T, bool) or int(T) != T or T < 1:
            raise DomainError(f"T must be a positive integer; got {T!r}")
        self.distinguisher, self.updater, self.T = distinguisher, updater, int(T)
        self.epsilon = positive(epsilon, "epsilon", up=False)
        self.delta = to_fraction(delta) if delta else Fraction(0)
        if not 0 <= self.delta < 1:
            raise DomainError(f"delta must be in [0, 1); got {delta!r}")
        if n is not None and (isinstance(n, bool) or int(n) != n or n < 0):
            raise DomainError(f"n must be a non-negative integer; got {n!r}")
        self.n = None if n is None else int(n)
        self.share = to_fraction(total_share)
        if not 0 < self.share < 1:
            raise DomainError("total_share must be in (0, 1)")
        if not 0 < beta < 1:
            raise DomainError("beta must be in (0, 1)")
        self.beta = float(beta)
        self.updater_options = updater_options
        self.eps_total = Fraction(0) if self.n is not None else self.epsilon * self.share
        self.eps_round = self._round_budget(self.epsilon - self.eps_total)

    def check(self, size: int, queries: int | None = None) -> None:
        """Check the updater's options for a domain of ``size`` cells without the records (a
        session runs it before the debit): the halving updater's ``records`` and candidate
        count; the other updaters take no option. With ``queries`` (the workload's size),
        also emit the accuracy warning of :meth:`advice` (before the debit).

        Raises
        ------
        DomainError
            An option the updater does not take, or a value it refuses.

        Warns
        -----
        BaselineWarning
            ``queries`` > T (:meth:`advice`)."""
        note = None if queries is None else self.advice(queries)
        if note is not None:
            warnings.warn(note, BaselineWarning, stacklevel=3)
        allowed = {"records", "max_candidates", "tolerance"} if self.updater == "halving" \
            else set()
        unknown = sorted(set(self.updater_options) - allowed)
        if unknown:
            raise DomainError(f"unknown option {unknown[0]!r} for the {self.updater} updater")
        if self.updater != "halving":
            return
        opts = self.updater_options
        m, most = opts.get("records", 4), opts.get("max_candidates", 200_000)
        for name, value in (("records", m), ("max_candidates", most)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise DomainError(f"{name} must be a positive integer")
        assert isinstance(m, int | np.integer) and isinstance(most, int | np.integer)
        tol = opts.get("tolerance")
        if tol is not None and not (isinstance(tol, int | float) and 0 < tol < math.inf):
            raise DomainError("tolerance must be a positive number")
        if math.comb(size + int(m) - 1, int(m)) > most:
            raise DomainError(f"the halving updater enumerates all databases of {m} records "
                              f"over {size} cells, more than max_candidates = {most}")

    def _round_budget(self, budget: Fraction) -> Fraction:
        """Pure: budget/T. With δ: the largest ε_round (bisection on exact Fractions) whose
        T-fold advanced composition is ≤ (budget, δ); never below budget/T."""
        basic = budget / self.T
        if self.delta == 0 or self.T == 1:
            return basic
        lo, hi = basic, budget
        for _ in range(40):
            mid = (lo + hi) / 2
            mid = Fraction(mid.numerator * (1 << 40) // mid.denominator, 1 << 40)
            if mid <= lo:
                break
            if advanced_composition(PureDP(mid), self.T, self.delta).epsilon <= budget:
                lo = mid
            else:
                hi = mid
        return lo

    def privacy(self) -> PureDP | ApproxDP:
        """The loss the run spends: ε_n plus the rounds' composition."""
        rounds = PureDP(self.eps_round * self.T)
        if self.delta:
            comp = advanced_composition(PureDP(self.eps_round), self.T, self.delta)
            return ApproxDP(self.eps_total + comp.epsilon, comp.delta)
        return PureDP(self.eps_total + rounds.epsilon)

    def advice(self, queries: int) -> str | None:
        """The accuracy note for a workload of ``queries`` queries (public), or None: with
        more queries than rounds T, at most T are ever measured (module docstring,
        "Accuracy")."""
        if queries <= self.T:
            return None
        return (f"the iterative construction measures one query a round: at most "
                f"T = {self.T} of the {queries} queries are measured, the rest come from the "
                "uniform start; MWEM (dpkit.release.synthetic.mwem, or publish.synthetic "
                "with method='mwem') or per-cell Laplace is measured tens of times more "
                "accurate on such workloads")

    def run(self, x: np.ndarray, queries: LinearQueries, *, advise: bool = True) -> ICResult:
        """Run on the count vector ``x`` (the data's histogram over the domain, shape
        (|X|,), non-negative integers) and the workload; returns :class:`ICResult`.
        ``advise=False``: the caller already warned before its debit (:meth:`check` with
        ``queries``); the result's ``note`` is set either way.

        Raises
        ------
        DomainError
            Counts of the wrong shape, negative or non-integer, or a declared n that is not
            their total (never their size: scores are clamped).

        Warns
        -----
        BaselineWarning
            Before any draw, when the workload has more queries than rounds
            (:meth:`advice`; public quantities only, the release is unchanged)."""
        note = self.advice(len(queries))
        if note is not None and advise:
            warnings.warn(note, BaselineWarning, stacklevel=2)
        counts = np.asarray(x)
        if counts.shape != (queries.domain_size,) or counts.dtype.kind not in "iu" or (
                counts < 0).any():
            raise DomainError(f"x must be non-negative integer counts of shape "
                              f"({queries.domain_size},)")
        counts = counts.astype(np.int64)
        n_true = int(counts.sum())
        if self.n is not None and self.n != n_true:
            raise DomainError("the declared n differs from the number of records")
        eps_sel, eps_meas = self.eps_round / 2, self.eps_round / 2
        part = DISTINGUISHERS[self.distinguisher]
        # 2Δ/ε_sel rounded up; the map at Δ is checked ≤ ε_sel (reported in the bound)
        scale = frontend.exact_scale(frontend.selection_row(SCORE_SENSITIVITY, eps_sel,
                                                            mechanism=part.mechanism))
        n_hat = self.n if self.n is not None else frontend.noisy(int(n_true), 1,
                                                                 self.eps_total).value
        size = queries.domain_size
        hyp = UPDATERS[self.updater](size, **self.updater_options)
        truth = queries.answer(counts)
        mat = queries.matrix
        scale_n = max(n_hat, 1)
        total = np.zeros(size)
        selected = []
        for _ in range(self.T):
            total += hyp.distribution()
            current = hyp.answers(queries)
            scores = grid_scores(np.abs(truth - scale_n * current))
            i = int(frontend.select(scores, SCORE_SENSITIVITY, eps_sel,
                                    mechanism=part.mechanism).value)
            measured = frontend.noisy(int(truth[i]), 1, eps_meas).value
            row = np.asarray(mat[i].toarray()).ravel()
            hyp.update(row, float(current[i]), measured / scale_n)
            selected.append(i)
        avg = total / self.T
        bound = self._bound(n_hat, size, len(queries), float(scale), eps_meas,
                            float(np.asarray(mat.multiply(mat).sum(axis=1)).max()))
        loss = self.privacy()
        return ICResult(avg, hyp.distribution(), n_hat,
                        n_hat * np.asarray(mat @ avg).ravel(), bound, self.beta,
                        loss.epsilon, getattr(loss, "delta", Fraction(0)), selected, note)

    def _bound(self, n_hat: int, size: int, m: int, scale: float, eps_meas: Fraction,
               c: float) -> float | None:
        part = DISTINGUISHERS[self.distinguisher]
        b = self.beta / (2 * self.T + 1)
        kappa = 0.0 if self.n is not None else laplace_tail(1 / float(self.eps_total), b, True)
        if n_hat < 1:
            return math.inf
        ell = laplace_tail(1 / float(eps_meas), b, True)
        nu = (ell + kappa) / n_hat
        gap = part.gap_factor * scale * (math.log(m + part.extra) + math.log(1 / b))
        progress = UPDATERS[self.updater].progress(size, self.T, c, nu)
        if progress is None:
            return None
        return (n_hat + kappa) * progress + gap + 3 * kappa
