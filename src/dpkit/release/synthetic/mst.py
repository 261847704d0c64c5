"""MST: synthetic data from noisy 1-way marginals and a maximum spanning tree of noisy 2-way
marginals (McKenna, Miklau & Sheldon, "Winning the NIST contest: a scalable and general
approach to differentially private synthetic data", JPC 2021, Algorithm 1). ρ-zCDP.

dpkit does the privacy-relevant work — measurement, selection, accounting — with its own
exact samplers; the graphical-model inference that turns the noisy marginals into a
distribution is Private-PGM (the ``mbi`` package, ``pip install dpkit[synth]``), which is
post-processing.

1. *1-way marginals* (ρ/3): every attribute's counts with discrete Gaussian noise, σ² =
   d/(2·ρ/3) (d marginals, each of L2 sensitivity 1). Then *compression* (post-processing):
   cells whose noisy count is below 3σ are merged into one cell per attribute.
2. *Selection* (ρ/3): Kruskal's algorithm where each of the d − 1 edges is drawn by the
   exponential mechanism among the attribute pairs that join two components, with score
   ‖M_ij(x) − M̂_ij‖₁, M̂ the independent model of the noisy 1-way marginals (fixed before
   the selection). A record changes one cell of M_ij(x): sensitivity 1 (+ 2^-10 for scores
   rounded to a 2^-10 grid, + 2^-20 for float rounding: :func:`grid_scores`). Each draw is
   ε-DP with ε²/8 = ρ/(3(d − 1)), hence ε²/8-zCDP (Cesar & Rogers 2021, bounded range).
3. *2-way marginals* (ρ/3): the d − 1 selected pairs, σ² = (d − 1)/(2·ρ/3).
4. Private-PGM estimates a graphical model from all measurements; records are sampled
   from it (:mod:`dpkit.release.synthetic.pgm_sample`) and decompressed: a merged cell becomes one
   of its original values with probability proportional to that value's noisy 1-way count
   (clamped at 0; uniform if all are 0) — post-processing of step 1's measurement, where
   the paper's code draws uniformly (which flattens, e.g., Adult's ages at ε = 0.1).

zCDP composes additively: ρ/3 + ρ/3 + ρ/3 = ρ (Bun & Steinke 2016, Lemma 2.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress

from dpkit.core.measures import ZCDP
from dpkit.core.numbers import Number, positive, sqrt_down
from dpkit.core.rng import uniforms
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.exponential import SCORE_ALLOWANCE, SCORE_GRID
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.pgm_sample import quick_compile, sample_model

__all__ = ["MSTResult", "mst", "mst_measure", "Measured", "require_mbi", "pair_scores",
           "decompress", "pgm_estimate", "grid_scores", "MAX_RECORDS"]

SCORE_SENSITIVITY = 1 + SCORE_ALLOWANCE
MAX_RECORDS = 1 << 28  # scores are clamped here, where the float allowance covers them


def grid_scores(scores: object) -> np.ndarray:
    """Selection scores clamped to at most :data:`MAX_RECORDS` and put on the grid 1/G
    (G = ``SCORE_GRID``), so that their sensitivity is Δ·(1 + ``SCORE_ALLOWANCE``) whatever
    the number of records — a large table loses accuracy, never raises.

    Why: a score here is Σ_c |a_c − b_c| (or one such term) of exact integer counts a_c
    (< 2^53) and public floats b_c, each difference rounded once and the sum correctly
    rounded (``math.fsum``), so the computed score is s(1 + θ), |θ| ≤ 2.0001u (u = 2^-53).
    Clamping at C = 2^28 is 1-Lipschitz and leaves neighbours' computed scores within
    Δ + 4.0002u·(C + Δ) < Δ + 2^-20 of each other; rounding to the grid adds 1/G
    (``SCORE_ALLOWANCE`` = 1/G + 2^-20)."""
    clamped = np.minimum(np.asarray(scores, dtype=np.float64), float(MAX_RECORDS))
    return np.rint(clamped * SCORE_GRID) / SCORE_GRID


def require_mbi() -> Any:
    """Import Private-PGM (``mbi``) or raise an ImportError that says how to install it."""
    try:
        import mbi
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("MST and AIM use Private-PGM for inference: pip install "
                          "'dpkit[synth]' (mbi==1.1.0)") from exc
    return mbi


@dataclass
class Measured:
    """A noisy marginal on the compressed domain: ``values`` (flattened, float) measure
    ``weights``·(true marginal) with i.i.d. Gaussian noise of scale (standard deviation σ)
    ``scale``."""

    clique: tuple[str, ...]
    values: np.ndarray
    scale: float
    weights: np.ndarray | None = None

    @property
    def sigma(self) -> float:
        """The noise's standard deviation σ (the same as ``scale``)."""
        return self.scale


@dataclass
class MSTResult:
    """Measurements (compressed domain), the compression maps and the selected tree.

    Attributes
    ----------
    measurements : list of Measured
    kept : dict attribute → ndarray of the original codes kept as their own cell (the last
        compressed cell, if any, stands for every other code)
    compressed : Domain
    selected : list of (str, str)
    rho : Fraction
    noisy_total : float
    """

    domain: Domain
    compressed: Domain
    kept: dict[str, np.ndarray]
    measurements: list[Measured]
    selected: list[tuple[str, ...]]
    rho: Fraction
    noisy_total: float
    model: Any = field(default=None, repr=False)
    merged: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def fit(self, iters: int = 1000, tick: Callable[[], object] | None = None) -> Any:
        """Estimate the graphical model with Private-PGM's mirror descent (post-processing);
        cached on the result. ``tick()`` is called after each iteration (a progress bar)."""
        if self.model is None:
            self.model = pgm_estimate(self.compressed, self.measurements, self.noisy_total,
                                      iters, tick=tick)
        return self.model

    def sample(self, rows: int | None = None, iters: int = 1000) -> np.ndarray:
        """Synthetic records as original-domain codes, shape (rows, d); rows defaults to the
        noisy total."""
        model = self.fit(iters)
        count = int(round(self.noisy_total)) if rows is None else int(rows)
        data = sample_model(model, max(count, 0))
        out = np.empty((max(count, 0), len(self.domain.attributes)), dtype=np.int64)
        for j, a in enumerate(self.domain.attributes):
            out[:, j] = decompress(data[a], self.kept[a], self.domain.sizes[j],
                                   self.merged.get(a))
        return out


def pgm_estimate(domain: Domain, measurements: list[Measured], total: float, iters: int,
                 potentials: Any = None, tick: Callable[[], object] | None = None) -> Any:
    """Private-PGM's mirror descent (McKenna, Sheldon & Miklau, ICML 2019, Alg. 1) on the
    measurements, with the (noisy) total known; ``potentials`` warm-starts it; ``tick()``
    after each iteration. Post-processing of the measurements."""
    mbi = require_mbi()
    import jax.numpy as jnp

    dom = mbi.Domain(domain.attributes, domain.sizes)
    ms = []
    for m in measurements:
        if m.weights is None:
            ms.append(mbi.LinearMeasurement(jnp.asarray(m.values), m.clique, m.scale))
            continue
        w = jnp.asarray(m.weights)
        ms.append(mbi.LinearMeasurement(jnp.asarray(m.values), m.clique, m.scale,
                                        lambda f, w=w: f.datavector() * w))
    loss = mbi.marginal_loss.from_linear_measurements(ms)  # no domain: no power iteration
    loss = mbi.marginal_loss.MarginalLossFn(loss.cliques, loss.loss_fn,
                                            loss_lipschitz(domain, measurements, loss.cliques))
    with quick_compile():
        return mirror_descent(dom, loss, max(total, 1.0), potentials, int(iters), tick)


def mirror_descent(domain: Any, loss: Any, total: float, potentials: Any, iters: int,
                   tick: Callable[[], object] | None = None) -> Any:
    """Entropic mirror descent on the marginal polytope (McKenna, Sheldon & Miklau, ICML
    2019, Alg. 1) with an Armijo line search (step ×1.01 after a sufficient decrease, ×0.5
    and no move otherwise; first step 2/(L·total)), on Private-PGM's model classes and
    message passing. One compiled program per call (so one per AIM round) evaluates the
    marginals, the loss and its gradient together; a trial point's evaluation is reused as
    the next iterate's when it is accepted, so each iteration costs one message-passing
    pass (mbi 1.1.0's own loop compiles and runs two, plus a separate oracle program: 30%
    of AIM's time on Adult was compiling them). Post-processing."""
    import jax
    from mbi import CliqueVector, MarkovRandomField, marginal_oracles

    if potentials is None:
        potentials = CliqueVector.zeros(domain, loss.cliques)
    if not all(potentials.supports(c) for c in loss.cliques):
        potentials = potentials.expand(loss.cliques)

    @jax.jit
    def advance(theta: Any, value: Any, grad: Any, mu: Any, alpha: Any) -> tuple[Any, ...]:
        """The trial point θ − α∇, its loss, gradient and marginals, and whether it
        decreased the loss enough (Armijo)."""
        trial = theta - alpha * grad
        mu2 = marginal_oracles.message_passing_fast(trial, total)
        value2, grad2 = jax.value_and_grad(loss)(mu2)
        return trial, value2, grad2, mu2, value - value2 >= 0.5 * alpha * grad.dot(mu - mu2)

    alpha = 2.0 / ((loss.lipschitz or 1.0) * total)
    zero = potentials * 0.0  # the same types as every later call: one compile
    start = jax.numpy.zeros((), dtype=jax.tree.leaves(potentials)[0].dtype)
    theta, value, grad, mu, _ = advance(potentials, start, zero, zero, 0.0)  # evaluate θ₀
    for _ in range(iters):
        trial, value2, grad2, mu2, ok = advance(theta, value, grad, mu, alpha)
        if bool(ok):
            theta, value, grad, mu, alpha = trial, value2, grad2, mu2, 1.01 * alpha
        else:
            alpha *= 0.5
        if tick is not None:
            tick()
    return MarkovRandomField(potentials=theta, marginals=mu, total=total)


def loss_lipschitz(domain: Domain, measurements: list[Measured],
                   cliques: list[tuple[str, ...]]) -> float:
    """The Lipschitz constant of ∇L for Private-PGM's loss L(μ) = Σ_i ‖w_i·P_i μ − y_i‖²/2σ_i²
    over the marginals μ on ``cliques`` (each measured clique projects from the first clique
    containing it, as ``mbi.CliqueVector.project`` does).

    The Hessian is block-diagonal over the cliques, the block of C being
    Σ_{i→C} P_iᵀ diag(w_i²) P_i / σ_i². With constant weights its terms are Kronecker
    products of identities and all-ones matrices, which share eigenvectors; all peak on the
    constant vector, so λ_max = Σ_{i→C} w_i²·(|C|/|c_i|)/σ_i² exactly. With other weights
    that sum with max w_i² is an upper bound (λ_max is subadditive). mbi estimates the same
    number by 50 power iterations, each a compiled program (12 of AIM's 130 s on Adult);
    an upper bound only makes the first step smaller (the line search then grows it)."""
    sizes = dict(zip(domain.attributes, domain.sizes, strict=True))
    per_clique = dict.fromkeys(cliques, 0.0)
    for m in measurements:
        parent = m.clique if m.clique in per_clique else next(
            c for c in cliques if set(m.clique) <= set(c))
        dropped = math.prod(sizes[a] for a in parent if a not in m.clique)
        w2 = 1.0 if m.weights is None else float(np.max(np.square(m.weights)))
        per_clique[parent] += w2 * dropped / max(m.scale, 1e-12) ** 2
    return max(per_clique.values(), default=1.0)


def decompress(codes: np.ndarray, kept: np.ndarray, size: int,
               weights: np.ndarray | None = None) -> np.ndarray:
    """Compressed codes back to original ones; the merged cell (code len(kept)) becomes one
    of the merged original codes (ascending) with probability ∝ ``weights`` (clamped at 0;
    uniformly without weights or if they are all 0). CSPRNG; post-processing."""
    out = np.empty_like(codes)
    own = codes < kept.size
    out[own] = kept[codes[own]]
    rest = np.setdiff1d(np.arange(size), kept)
    many = int((~own).sum())
    if many:
        if rest.size == 0:
            raise DomainError("internal: a merged cell without merged codes")
        w = np.ones(rest.size) if weights is None else np.maximum(
            np.asarray(weights, dtype=np.float64), 0)
        if w.shape != rest.shape:
            raise DomainError("internal: one weight per merged code")
        if w.sum() <= 0:
            w = np.ones(rest.size)
        cdf = np.cumsum(w) / w.sum()
        pick = np.searchsorted(cdf, uniforms(many), side="right")
        out[~own] = rest[np.minimum(pick, rest.size - 1)]
    return out


def _compress(noisy: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kept original codes, compressed noisy values, weights): cells at or above the
    threshold stay; the rest sum into one cell measured with weight 1/√k (so its noise has
    the same σ as the others)."""
    keep = noisy >= threshold
    if keep.all() or keep.sum() == 0:
        k = noisy.size
        return np.arange(k), noisy.astype(np.float64), np.ones(k)
    kept = np.flatnonzero(keep)
    k = int((~keep).sum())
    w = np.concatenate([np.ones(kept.size), [1 / math.sqrt(k)]])
    values = np.concatenate([noisy[keep], [noisy[~keep].sum()]]) * w
    return kept, values.astype(np.float64), w


def _recode(codes: np.ndarray, kept: np.ndarray, size: int) -> np.ndarray:
    lookup = np.full(size, kept.size, dtype=np.int64)
    lookup[kept] = np.arange(kept.size)
    return lookup[codes]


def _epsilon_for_rho(rho: Fraction) -> Fraction:
    """The ε, √(8ρ) rounded down exactly, with ε²/8 ≤ ρ: the exponential mechanism at ε is
    ε²/8-zCDP (a bounded-range mechanism, Cesar & Rogers 2021)."""
    return sqrt_down(8 * rho)


def pair_scores(codes: np.ndarray, domain: Domain, ones: dict[str, np.ndarray], total: float,
                pairs: list[tuple[str, str]]) -> dict[tuple[str, str], float]:
    """‖M_ab(x) − total·p_a⊗p_b‖₁ for each pair, p the (public, noisy) one-way
    distributions: adding or removing a record moves one cell of M_ab(x) by 1, so each
    score moves by at most 1 (exactly; the float rounding is :func:`grid_scores`')."""
    out = {}
    for a, b in pairs:
        true = marginal_counts(codes, domain, [a, b]).astype(np.float64)
        out[(a, b)] = math.fsum(np.abs(true - total * np.outer(ones[a], ones[b])).ravel())
    return out


def mst_measure(codes: np.ndarray, domain: Domain, rho: Number) -> MSTResult:
    """Steps 1–3 (module docstring): the private part of MST, no inference library needed.

    Parameters
    ----------
    codes : ndarray of int, shape (n, d)
        Records as codes of ``domain`` (:func:`dpkit.release.synthetic.domain.records`).
    domain : Domain
        At least two attributes.
    rho : number
        ρ > 0, spent in total (zCDP).

    Raises
    ------
    DomainError
        Bad ρ, fewer than two attributes, codes outside the domain (never the number of
        records: :func:`grid_scores` clamps the scores instead).
    """
    r = positive(rho, "rho", up=False)
    d = len(domain.attributes)
    if d < 2:
        raise DomainError("MST needs at least two attributes")
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != d or codes.dtype.kind not in "iu" or (
            codes < 0).any() or (codes >= np.asarray(domain.sizes)).any():
        raise DomainError(f"codes must be integers of shape (n, {d}) inside the domain")
    rho_part = r / 3
    # 1. one-way marginals
    rho_one = rho_part / d
    measurements, kept, merged, recoded = [], {}, {}, np.empty_like(codes)
    for j, a in enumerate(domain.attributes):
        noisy, row = frontend.noisy(marginal_counts(codes, domain, [a]), 1, ZCDP(rho_one))
        # σ read off the row of the draw (post-processing: the threshold and the
        # inference's weights), never recomputed beside the entry
        sigma_one = float(frontend.exact_scale(row))
        keep, values, weights = _compress(noisy.astype(np.float64), 3 * sigma_one)
        kept[a] = keep
        merged[a] = np.delete(noisy, keep).astype(np.float64)
        recoded[:, j] = _recode(codes[:, j], keep, domain.sizes[j])
        measurements.append(Measured((a,), values, sigma_one,
                                     None if np.all(weights == 1) else weights))
    compressed = Domain(domain.attributes, tuple(
        kept[a].size + (kept[a].size < domain.sizes[j]) for j, a in enumerate(
            domain.attributes)))
    noisy_total = float(np.mean([(m.values / (1 if m.weights is None else m.weights)).sum()
                                 for m in measurements]))
    # 2. selection: independent model of the noisy one-way marginals
    ones = {}
    for m in measurements:
        v = np.maximum(m.values / (1 if m.weights is None else m.weights), 0)
        ones[m.clique[0]] = v / v.sum() if v.sum() > 0 else np.full(v.size, 1 / v.size)
    pairs = [(a, b) for i, a in enumerate(domain.attributes) for b in domain.attributes[i + 1:]]
    scores = pair_scores(recoded, compressed, ones, max(noisy_total, 1.0), pairs)
    eps_sel = _epsilon_for_rho(rho_part / (d - 1))
    component = {a: a for a in domain.attributes}

    def find(a: str) -> str:
        while component[a] != a:
            a = component[a]
        return a

    selected: list[tuple[str, ...]] = []
    for _ in range(d - 1):
        cands = [p for p in pairs if find(p[0]) != find(p[1])]
        u = grid_scores([scores[p] for p in cands])
        a, b = cands[frontend.select(u, SCORE_SENSITIVITY, eps_sel).value]
        component[find(a)] = find(b)
        selected.append((a, b))
    # 3. two-way marginals of the tree
    rho_two = rho_part / (d - 1)
    for a, b in selected:
        true = marginal_counts(recoded, compressed, [a, b])
        noisy, row = frontend.noisy(true.ravel(), 1, ZCDP(rho_two))
        measurements.append(Measured((a, b), noisy.astype(np.float64),
                                     float(frontend.exact_scale(row))))
    return MSTResult(domain, compressed, kept, measurements, selected, r, noisy_total,
                     merged=merged)


def mst(codes: np.ndarray, domain: Domain, rho: Number, iters: int = 1000,
        progress: bool = False) -> MSTResult:
    """MST (module docstring): :func:`mst_measure`, then Private-PGM inference
    (:meth:`MSTResult.fit`). ρ-zCDP; ``result.sample(rows)`` draws synthetic records.
    ``progress``: a progress bar (Rich, on standard error) of the measurement step and of the
    inference's iterations.

    Raises
    ------
    ImportError
        Without the ``mbi`` package.
    """
    require_mbi()
    with Progress(*Progress.get_default_columns(), console=Console(stderr=True),
                  transient=True, disable=not progress) as bar:
        task = bar.add_task("MST: measuring", total=int(iters) + 1)
        result = mst_measure(codes, domain, rho)
        bar.update(task, advance=1, description="MST: fitting the model")
        result.fit(iters, tick=lambda: bar.advance(task))
    return result


def privacy(result: MSTResult) -> ZCDP:
    """The zCDP loss of an MST run."""
    return ZCDP(result.rho)
