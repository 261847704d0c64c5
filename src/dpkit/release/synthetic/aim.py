"""AIM: an adaptive and iterative mechanism for workload-aware synthetic data (McKenna,
Mullins, Sheldon & Miklau, PVLDB 2022, Algorithm 2). ρ-zCDP.

The workload is a set of marginals ("cliques"); the candidates are its downward closure,
each with weight w_r = Σ_{s∈W} |r ∩ s|. With T = 16d rounds planned:

1. every 1-way marginal is measured with discrete Gaussian noise at ρ_meas = 0.9ρ/T each;
   a graphical model is fitted to the measurements (Private-PGM, post-processing);
2. while budget remains: ρ_used grows by ρ_meas + ρ_sel (ρ_sel = 0.1ρ/T; when less than
   twice that is left, the last round takes 0.9 and 0.1 of the rest); the candidates are the
   marginals whose addition keeps the model's junction tree under
   ``max_size``·ρ_used/ρ MB; the exponential mechanism picks r by
   w_r(‖M_r(x) − M_r(model)‖₁ − √(2/π)·σ·n_r) (σ the measurement noise, n_r the cells:
   the expected L1 error the measurement itself would add); r is measured at ρ_meas and
   the model re-fitted (warm start); if the model's M_r moved by less than √(2/π)σn_r the
   round was not worth it and the per-round budget is quadrupled (σ halves, ε doubles).

Privacy: a score moves by ≤ w_r when a record is added or removed (one cell of M_r(x) by
1), so the selection has sensitivity Δ = max w_r (+ the float and 2^-10 grid allowances of
:func:`dpkit.release.synthetic.mst.grid_scores`, the L1 norms clamped at 2^28); each draw
is ε-DP with ε²/8 ≤ ρ_sel, hence ρ_sel-zCDP (Cesar & Rogers 2021). Each measurement (one
marginal, L2 sensitivity 1) is ρ_meas-zCDP (CKS20). Everything else — fitting, the size
filter (it depends on past outputs only), annealing — is post-processing. zCDP composes
adaptively and additively: the total is exactly ρ.

Implementation (issue 18; bench/aim_scale.py): the model is Private-PGM's, fitted by the
same mirror descent, but on NumPy tables (:mod:`dpkit.release.synthetic.jtree`) — the JAX
programs were compiled anew every round, and on a 16-attribute binary table with all 3-way
marginals as the workload a run took 30 minutes and 2.7 GB. The candidates' model marginals
are exact (the calibrated junction tree; they were estimated from a sample of 10n records)
and scored in one pass (:func:`score_vector`); the size filter computes mbi's junction-tree
size on bitmasks and only when it can matter (:class:`SizeFilter`); true marginals are
counted when a candidate first passes the filter; each fit is warm-started.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from rich.console import Console
from rich.progress import Progress

from dpkit.core.measures import ZCDP
from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.exponential import SCORE_ALLOWANCE
from dpkit.release.synthetic import jtree, mst
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.mst import (
    Measured,
    MSTResult,
    _epsilon_for_rho,
    grid_scores,
    loss_lipschitz,
    require_mbi,
)

__all__ = ["aim", "candidates", "score_vector", "SizeFilter"]

_ROUND_ALLOWANCE = SCORE_ALLOWANCE
_BIAS = math.sqrt(2 / math.pi)


def candidates(workload: Sequence[Sequence[str]]) -> dict[tuple[str, ...], int]:
    """The downward closure of the workload's cliques with AIM's weights
    w_r = Σ_{s∈W} |r ∩ s|."""
    closure: set[tuple[str, ...]] = set()
    for s in workload:
        for k in range(1, len(s) + 1):
            closure.update(itertools.combinations(tuple(s), k))
    return {r: sum(len(set(r) & set(s)) for s in workload) for r in sorted(
        closure, key=lambda c: (len(c), c))}


def score_vector(truth: Sequence[np.ndarray], estimates: Sequence[np.ndarray],
                 weights: Sequence[int], scale: float) -> np.ndarray:
    """AIM's scores w_r(‖M_r(x) − M_r(model)‖₁ − √(2/π)·σ·n_r) for all candidates at once:
    one subtraction over the concatenated cells, then each candidate's L1 norm as a
    correctly rounded sum (``math.fsum``, which the float allowance of the sensitivity
    assumes) of its slice, clamped at :data:`~dpkit.release.synthetic.mst.MAX_RECORDS`
    (1-Lipschitz: the allowance then holds for any number of records,
    :func:`~dpkit.release.synthetic.mst.grid_scores`)."""
    sizes = np.array([t.size for t in truth], dtype=np.int64)
    if not sizes.size:
        return np.zeros(0)
    diff = np.abs(np.concatenate([np.ravel(t) for t in truth]).astype(np.float64)
                  - np.concatenate([np.ravel(e) for e in estimates]))
    ends = np.cumsum(sizes)
    l1 = np.array([math.fsum(diff[e - n: e]) for e, n in zip(ends.tolist(), sizes.tolist(),
                                                              strict=True)])
    l1 = np.minimum(l1, float(mst.MAX_RECORDS))
    return np.asarray(weights, dtype=np.float64) * (l1 - _BIAS * scale * sizes)


class SizeFilter:
    """Which candidates keep the model's junction tree within a size limit (MB), as
    :func:`mbi.junction_tree.hypothetical_model_size` of the measured cliques plus the
    candidate — computed by :func:`dpkit.release.synthetic.jtree.model_size` and only when
    needed: never when :func:`~dpkit.release.synthetic.jtree.size_bound` (any tree over the
    domain) is within the limit; a candidate inside a measured clique adds nothing to the
    graph (mbi's elimination order sees the same unions), so it has the current size; other
    sizes are cached until the set of maximal measured cliques changes. A function of the
    public measured cliques only (post-processing)."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.bound = jtree.size_bound(domain)
        self._key: frozenset[frozenset[str]] = frozenset()
        self._sizes: dict[tuple[str, ...], float] = {}

    def __call__(self, have: Sequence[tuple[str, ...]], cands: Sequence[tuple[str, ...]],
                 limit: float) -> list[tuple[str, ...]]:
        if self.bound <= limit:
            return list(cands)
        sets = {frozenset(c) for c in have}
        key = frozenset(s for s in sets if not any(s < o for o in sets))
        if key != self._key:
            self._key, self._sizes = key, {}
        out = []
        for c in cands:
            if c not in self._sizes:
                inside = any(set(c) <= k for k in key)
                self._sizes[c] = jtree.model_size(self.domain, list(have) + ([] if inside
                                                                            else [c]))
            if self._sizes[c] <= limit:
                out.append(c)
        return out


def aim(codes: np.ndarray, domain: Domain, rho: Number,
        workload: Sequence[Sequence[str]] | None = None, *, max_size: float = 80.0,
        rounds: int | None = None, iters: int = 300, final_iters: int = 1000,
        progress: bool = False) -> MSTResult:
    """Run AIM (module docstring) and return the fitted model (``result.sample(rows)``).

    Parameters
    ----------
    codes : ndarray of int, shape (n, d)
    domain : Domain
    rho : number
        ρ > 0, spent in total (zCDP).
    workload : sequence of cliques, optional
        The marginals the synthetic data should preserve (default: all 2-way).
    max_size : float
        Largest junction tree (MB of float64 cells) the model may grow to (default 80, the
        paper's).
    rounds : int, optional
        T (default 16d, the paper's).
    iters, final_iters : int
        Mirror-descent iterations per round (warm-started) and for the final fit
        (:func:`dpkit.release.synthetic.jtree.fit`).
    progress : bool
        Show a progress bar of the budget spent so far (Rich, on standard error).

    Raises
    ------
    DomainError
        Bad ρ or codes, an empty workload; ImportError without ``mbi``.

    Notes
    -----
    The model's marginals on the candidates are exact (the calibrated junction tree,
    :meth:`dpkit.release.synthetic.jtree.JunctionTree.marginals`), as in the paper's code;
    the true marginals are counted once per candidate, when it first passes the size
    filter.
    """
    require_mbi()
    r = positive(rho, "rho", up=False)
    d = len(domain.attributes)
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != d or codes.dtype.kind not in "iu" or (
            codes < 0).any() or (codes >= np.asarray(domain.sizes)).any():
        raise DomainError(f"codes must be integers of shape (n, {d}) inside the domain")
    cliques = [tuple(c) for c in (workload if workload is not None else
                                  itertools.combinations(domain.attributes, 2))]
    if not cliques:
        raise DomainError("the workload is empty")
    for c in cliques:
        domain.axes(c)  # raises on unknown attributes
    weights = candidates(cliques)
    t = d * 16 if rounds is None else int(rounds)
    if t < 1:
        raise DomainError("rounds must be positive")
    rho_meas, rho_sel = Fraction(9, 10) * r / t, Fraction(1, 10) * r / t
    truth: dict[tuple[str, ...], np.ndarray] = {}

    def true_marginal(clique: tuple[str, ...]) -> np.ndarray:
        if clique not in truth:
            truth[clique] = marginal_counts(codes, domain, clique)
        return truth[clique]

    def measure(clique: tuple[str, ...], rho_m: Fraction) -> Measured:
        noisy, row = frontend.noisy(true_marginal(clique).ravel(), 1, ZCDP(rho_m))
        return Measured(clique, noisy.astype(np.float64), float(frontend.exact_scale(row)))

    one_way = [c for c in weights if len(c) == 1]
    if len(one_way) * rho_meas > r:
        raise DomainError("rounds too small for the one-way measurements")
    measurements = [measure(c, rho_meas) for c in one_way]
    rho_used = len(one_way) * rho_meas
    # the mean of the 1-way sums; Private-PGM's minimum-variance total over all measurements
    # was no better (Adult, 2-way, 3 runs at ε = 1: mean TV 0.0376 against 0.0366)
    total = float(np.mean([m.values.sum() for m in measurements]))
    model = _fit(domain, measurements, total, iters, None)
    selected: list[tuple[str, ...]] = []
    sizes = SizeFilter(domain)
    with Progress(*Progress.get_default_columns(), console=Console(stderr=True),
                  transient=True, disable=not progress) as bar:
        task = bar.add_task("AIM: budget spent", total=float(r))
        bar.update(task, completed=float(rho_used))
        while rho_used < r:
            remaining = r - rho_used
            if remaining < 2 * (rho_meas + rho_sel):
                rho_meas, rho_sel = Fraction(9, 10) * remaining, Fraction(1, 10) * remaining
            rho_used += rho_meas + rho_sel
            sigma = float(frontend.exact_scale(frontend.noise_row(1, ZCDP(rho_meas))))
            limit = max_size * float(rho_used / r)
            cands = sizes([m.clique for m in measurements], list(weights), limit)
            if not cands:  # post-processing choice; the round's budget is still counted
                cands = [c for c in weights if len(c) == 1]
            sensitivity = max(weights[c] for c in cands) * (1 + _ROUND_ALLOWANCE)
            eps = _epsilon_for_rho(rho_sel)
            estimates = model.marginals(cands)
            scores = score_vector([true_marginal(c) for c in cands], estimates,
                                  [weights[c] for c in cands], sigma)
            u = grid_scores(scores)
            index = frontend.select(u, sensitivity, eps).value
            pick = cands[index]
            before = estimates[index].ravel()
            measurements.append(measure(pick, rho_meas))
            selected.append(pick)
            model = _fit(domain, measurements, total, iters, model)
            after = model.marginal(pick).ravel()
            if np.abs(after - before).sum() <= _BIAS * sigma * after.size:
                rho_meas, rho_sel = 4 * rho_meas, 4 * rho_sel
            bar.update(task, completed=float(rho_used))
    kept = {a: np.arange(s) for a, s in zip(domain.attributes, domain.sizes, strict=True)}
    result = MSTResult(domain, domain, kept, measurements, selected, r, total)
    result.model = _fit(domain, measurements, total, final_iters, model)
    return result


def _fit(domain: Domain, measurements: list[Measured], total: float, iters: int,
         start: jtree.Model | None) -> jtree.Model:
    """Private-PGM's fit of the measurements (post-processing), with the closed-form
    Lipschitz constant of :func:`dpkit.release.synthetic.mst.loss_lipschitz` on the
    maximal measured cliques (as ``pgm_estimate`` takes it)."""
    from mbi.clique_utils import maximal_subset

    top = maximal_subset([m.clique for m in measurements])
    return jtree.fit(domain, jtree.Measurements.pool(measurements), total, iters,
                     loss_lipschitz(domain, measurements, top), start)
