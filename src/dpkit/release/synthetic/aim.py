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
:mod:`dpkit.release.synthetic.mst`); each draw is ε-DP with ε²/8 ≤ ρ_sel, hence ρ_sel-zCDP (Cesar &
Rogers 2021). Each measurement (one marginal, L2 sensitivity 1) is ρ_meas-zCDP (CKS20).
Everything else — fitting, the size filter (it depends on past outputs only), annealing —
is post-processing. zCDP composes adaptively and additively: the total is exactly ρ.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError
from dpkit.mechanisms import make_noise, make_selection
from dpkit.mechanisms.exponential import SCORE_ALLOWANCE, SCORE_GRID, sample_exponential
from dpkit.release.measure import gaussian_integer
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.mst import (
    Measured,
    MSTResult,
    _epsilon_for_rho,
    pgm_estimate,
    require_mbi,
)
from dpkit.release.synthetic.pgm_sample import sample_model

__all__ = ["aim", "candidates", "model_marginals"]

_ROUND_ALLOWANCE = SCORE_ALLOWANCE


def candidates(workload: Sequence[Sequence[str]]) -> dict[tuple[str, ...], int]:
    """The downward closure of the workload's cliques with AIM's weights
    w_r = Σ_{s∈W} |r ∩ s|."""
    closure: set[tuple[str, ...]] = set()
    for s in workload:
        for k in range(1, len(s) + 1):
            closure.update(itertools.combinations(tuple(s), k))
    return {r: sum(len(set(r) & set(s)) for s in workload) for r in sorted(
        closure, key=lambda c: (len(c), c))}


def model_marginals(model: object, domain: Domain, cliques: Sequence[tuple[str, ...]],
                    total: float, sample_factor: int) -> dict[tuple[str, ...], np.ndarray]:
    """The model's marginals (counts) on ``cliques``: exact where the model's own cliques
    contain them, else from a synthetic sample of ``sample_factor``·total records scaled to
    the total (post-processing either way)."""
    out: dict[tuple[str, ...], np.ndarray] = {}
    own = getattr(model, "cliques", [])
    rest = []
    for c in cliques:
        if sample_factor <= 0 or any(set(c) <= set(k) for k in own):
            out[c] = np.asarray(model.project(c).datavector()).reshape(  # type: ignore
                domain.shape(c))
        else:
            rest.append(c)
    if rest:
        rows = max(int(sample_factor * max(total, 1.0)), 1)
        data = sample_model(model, rows)
        sample = np.column_stack([data[a] for a in domain.attributes])
        for c in rest:
            out[c] = marginal_counts(sample, domain, c) * (total / rows)
    return out


def aim(codes: np.ndarray, domain: Domain, rho: Number,
        workload: Sequence[Sequence[str]] | None = None, *, max_size: float = 80.0,
        rounds: int | None = None, iters: int = 300, final_iters: int = 1000,
        sample_factor: int = 10) -> MSTResult:
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
        Mirror-descent iterations per round (warm-started) and for the final fit. 300 a
        round (Private-PGM's reference runs 1000) against 100: mean TV on Adult's 2-way
        workload 0.127 → 0.110 at ε = 0.1 and 0.043 → 0.040 at ε = 1, in 82–111 s there.
    sample_factor : int
        Model marginals that are not on the model's own cliques are estimated from
        ``sample_factor``·n̂ records drawn from the model (exact variable elimination for
        ~100 candidates cost 90% of the run time); 0 computes them exactly.

    Raises
    ------
    DomainError
        Bad ρ or codes, an empty workload; ImportError without ``mbi``.
    """
    mbi = require_mbi()
    r = positive(rho, "rho", up=False)
    d = len(domain.attributes)
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != d or codes.dtype.kind not in "iu" or (
            codes < 0).any() or (codes >= np.asarray(domain.sizes)).any():
        raise DomainError(f"codes must be integers of shape (n, {d}) inside the domain")
    if codes.shape[0] > 1 << 28:
        raise DomainError("the score rounding allowance covers up to 2^28 records")
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
    truth = {c: marginal_counts(codes, domain, c) for c in weights}
    mdom = mbi.Domain(domain.attributes, domain.sizes)

    def measure(clique: tuple[str, ...], rho_m: Fraction) -> Measured:
        noisy = gaussian_integer(truth[clique].ravel(), Fraction(1), rho_m)
        return Measured(clique, noisy.astype(np.float64),
                        float(make_noise(1, rho=rho_m, norm="l2").scale))

    one_way = [c for c in weights if len(c) == 1]
    if len(one_way) * rho_meas > r:
        raise DomainError("rounds too small for the one-way measurements")
    measurements = [measure(c, rho_meas) for c in one_way]
    rho_used = len(one_way) * rho_meas
    total = float(np.mean([m.values.sum() for m in measurements]))
    model = pgm_estimate(domain, measurements, total, iters)
    selected: list[tuple[str, ...]] = []
    while rho_used < r:
        remaining = r - rho_used
        if remaining < 2 * (rho_meas + rho_sel):
            rho_meas, rho_sel = Fraction(9, 10) * remaining, Fraction(1, 10) * remaining
        rho_used += rho_meas + rho_sel
        sigma = float(make_noise(1, rho=rho_meas, norm="l2").scale)
        limit = max_size * float(rho_used / r)
        have = [m.clique for m in measurements]
        cands = [c for c in weights
                 if mbi.junction_tree.hypothetical_model_size(mdom, have + [c]) <= limit]
        if not cands:  # post-processing choice; the round's budget is still counted
            cands = [c for c in weights if len(c) == 1]
        delta = max(weights[c] for c in cands) * (1 + _ROUND_ALLOWANCE)
        eps = _epsilon_for_rho(rho_sel)
        scale = make_selection(delta, eps).scale  # 2Δ/ε rounded up, map-checked
        scores = []
        estimates = model_marginals(model, domain, cands, total, sample_factor)
        for c in cands:
            err = math.fsum(np.abs(truth[c] - estimates[c]).ravel())
            scores.append(weights[c] * (err - math.sqrt(2 / math.pi) * sigma * truth[c].size))
        u = np.rint(np.asarray(scores) * SCORE_GRID) / SCORE_GRID
        pick = cands[sample_exponential(u, scale)]
        before = estimates[pick].ravel()  # exact or sampled; exact VE here cost ~2 s a round
        measurements.append(measure(pick, rho_meas))
        selected.append(pick)
        model = pgm_estimate(domain, measurements, total, iters, potentials=model.potentials)
        after = np.asarray(model.project(pick).datavector())
        if np.abs(after - before).sum() <= math.sqrt(2 / math.pi) * sigma * after.size:
            rho_meas, rho_sel = 4 * rho_meas, 4 * rho_sel
    kept = {a: np.arange(s) for a, s in zip(domain.attributes, domain.sizes, strict=True)}
    result = MSTResult(domain, domain, kept, measurements, selected, r, total)
    result.model = pgm_estimate(domain, measurements, total, final_iters,
                                potentials=model.potentials)
    return result
