"""k-means under ε-DP (and (ε, δ)-DP), three ways to start and three ways to fit.

``method="lloyd"`` (default) — noisy Lloyd iterations (SuLQ k-means: Blum, Dwork, McSherry
& Nissim, PODS 2005, §5; budget schedules after Dwork, "A firm foundation for private data
analysis", CACM 2011). Each iteration assigns the points to their nearest current centre
(the centres are public: earlier outputs) and releases, with the grid Laplace mechanism, the
per-cluster counts (a point is in one cluster: L1 sensitivity 1) and, for every feature j,
the per-cluster sums of x_j − m_j, x clipped to the declared [l_j, u_j] and m_j the midpoint
(sensitivity (u_j − l_j)/2; summed exactly, :func:`~dpkit.learn._privacy.exact_sums`).
The iteration's ε_t is split equally over these d + 1
releases; the new centre is the noisy sum over the noisy count (kept where the noisy count
is below 1), clamped into the bounds — post-processing. The iterations compose
sequentially: ``schedule="fixed"`` gives each ε/T, ``"halving"`` ε/2, ε/4, … with the last
taking the rest (early iterations move centres far, later ones refine).

Starting centres:

- ``init="auto"`` (default) — ``"grid"`` when its b^d cells number at most 65,536, else
  ``"sphere_packing"`` (a function of d and the declared parameters only);
- ``init="sphere_packing"`` (Su, Cao, Li, Bertino & Jin, "Differentially private
  k-means clustering", CODASPY 2016, §4.1) — data-independent: k centres in the box scaled to
  [−1, 1]^d at distance ≥ 2r from each other and r from the faces, for the largest r
  (shrinking by 10%) at which random placement (CSPRNG) succeeds;
- ``init="random"`` — data-independent, uniform in the box;
- ``init="grid"`` — the hybrid of Su et al. 2016 (§5, EUGkM, and §6, EUGkM followed by
  DPLloyd): a fraction ``init_fraction`` of ε releases a noisy histogram of the clipped rows
  on the fixed grid of b^d equal cells of the box (b = ``grid_bins``; one row is in one cell:
  L1 sensitivity 1), and non-private k-means (scikit-learn, k-means++ seeded from the CSPRNG)
  on the cell centres weighted by the positive noisy counts gives the start —
  post-processing. The Lloyd iterations get the rest of ε. A good start matters more than
  the noise here: on Adult's 5 numeric columns (k = 5, ε = 1) noiseless Lloyd from a
  sphere-packing start ends at ≈ 1.13× the best within-cluster sum of squares.

``method="sample_and_aggregate"`` with ``delta`` — Nissim, Raskhodnikova & Smith, "Smooth
sensitivity and sampling in private data analysis", STOC 2007 (NRS07), §4: sample and
aggregate with the *centre of attention* as the aggregation g. Every row is put in one of
m = ``n_blocks`` blocks, its block drawn independently and uniformly (CSPRNG): the blocks
partition the rows, so one row (or, under a Session, one privacy unit, whose rows are
bounded before the fit) changes one block. Each block is clustered by non-private k-means
(20 plain Lloyd iterations from the public start on the rows clipped and scaled to
[−1, 1]^d, an empty cluster keeping its centre), and its k centres are ordered by a
minimum-cost matching to the public start (Hungarian algorithm): block b's answer is a
point z_b ∈ [−1, 1]^D, D = kd, a function of the block and public values only.

The centre of attention (NRS07 §4): with r_i(t) the ℓ1 distance from z_i to its t-th
nearest point among z_1 … z_m (itself first; the diameter Λ = 2D for t > m) and
t₀ = ⌊(m + 1)/2⌋ + 1, g(z) = z_{i*}, i* = argmin_i r_i(t₀). Its smooth bound: with
ρ_j = the (j+1)-th smallest of r_1(t₀ + j), …, r_m(t₀ + j) (Λ past m) and
U_j = min(ρ_j + ρ_{j+1}, Λ), S(z) = max_{j ≥ 0} e^{−βj}·U_j(z). Why it is a β-smooth upper
bound on the local sensitivity (NRS07 Def. 2.1 and Prop. 3.3's pattern): (i) if z′ differs
from z in ≤ j points, one of the j + 1 indices achieving ρ_j is unchanged, and its ball of
radius ρ_j holds ≥ t₀ points of z′, so g(z′) has ≥ t₀ points of z′ within ρ_j; (ii) for a
neighbour z″ of z′ the two balls (radii ρ_j, ρ_{j+1}) each hold ≥ t₀ − 1 of the m − 1
shared points, and 2(t₀ − 1) > m − 1, so they meet: ‖g(z′) − g(z″)‖₁ ≤ U_j (j = 0 bounds
the local sensitivity); (iii) for neighbours x, y, r_i^x(t) ≤ r_i^y(t + 1) at every
unchanged i, hence ρ_j(x) ≤ ρ_{j+1}(y), U_j(x) ≤ U_{j+1}(y) and S(x) ≤ e^β·S(y). Floats
compute S with a relative error < 2^-40 (D ≤ 256, m ≤ 4096); S̃ = S·(1 + 2^-38) rounded
up is ≥ S and (β + 2^-36)-smooth.

Release: g(z) is rounded to the fixed lattice 2^-20 (adding D·2^-20 to the ℓ1 local
sensitivity) and D independent discrete Laplace draws of scale b(z) = (S̃ + D·2^-20)/(2^-20·a),
a = ε/2, are added in lattice units (:func:`dpkit.mechanisms.frontend.noisy`, the scale
rounded up by < 2^-40: b is (β + η)-smooth, η = 2^-34), then clamped to [−1, 1].

Privacy ((ε, δ), one block changed; NRS07 Lemma 2.5 for a D-dimensional discrete Laplace,
redone here). Let β′ = β + η with D·β′ ≤ ε/2, 2β′·T ≤ ε/2, β′ ≤ 1/2 (so e^{β′} − 1 ≤ 2β′),
T = 2 ln(1/δ) + 2D ln 2 + ε/2 (:func:`attention_beta`). For an output o, the centres differ
by ‖c_x − c_y‖₁ ≤ a·min(b_x, b_y). If b_x ≤ b_y, P_x(o)/P_y(o) ≤ (Z(b_y)/Z(b_x))^D·e^{a} ≤
e^{Dβ′ + a} ≤ e^ε (Z(b) = coth(1/(2b)), Z(b_y)/Z(b_x) ≤ b_y/b_x as u·coth u increases). If
b_x > b_y, it is ≤ exp(a + W·(e^{β′} − 1)) with W = ‖o − c_x‖₁/b_x, ≤ e^ε unless W > T;
under P_x, W is a sum of D discrete-Laplace magnitudes, E e^{|Y|/(2b)} ≤ 2e^{1/(2b)} and
D/b ≤ a, so P(W > T) ≤ e^{−T/2}·2^D·e^{ε/4} = δ (Chernoff). Hence the release is (ε, δ)-DP
in one block answer, and so in one row; conditioning on the blocks of the shared rows and
averaging over the changed row's block (a mixture of (ε, δ) pairs) keeps (ε, δ). With the
``"grid"`` start (pure ε₀ = ``init_fraction``·ε) the whole fit is (ε, δ)-DP by sequential
composition, the release running at ε − ε₀. ``max_iter`` and ``schedule`` are unused.
The cost is O(n·d·k + m²·D) — declared quantities and the row count only.

``method="sample_and_aggregate"`` without ``delta`` — the matched-mean aggregator (kept, not
deprecated: on Adult's held-out rows it is 1.2–7.4× scikit-learn's cost where the centre of
attention is 8.5–25×, ``bench/results/learn_kmeans_coreset.md``): T rounds match each
block answer C_b (k × d) to the current public centres and release S_t = Σ_b C_b[π_b]
with the grid Laplace mechanism at L1 sensitivity 2kd and ε_t (one row moves one C_b,
every entry in [−1, 1]); new centres clamp(S_t/m).
Pure ε-DP by sequential composition over the rounds.

``method="coreset"`` — Feldman, Xiang, Zhu & Rus, IPSN 2017: an ε-DP weighted coreset
(:mod:`dpkit.learn.coreset`: noisy counts of a hierarchical grid's cells, ``levels`` L,
``max_cells``), then weighted k-means (scikit-learn, k-means++ seeded from the CSPRNG) on
it — post-processing. Pure ε-DP; ``init`` and ``max_iter`` are unused.

Every method but the centre of attention is pure ε-DP: PureDP(ε) (ApproxDP(ε, δ) for the
centre of attention) is debited through the accountant before any row is read.
"""

from __future__ import annotations

import warnings
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import KMeans as _PlainKMeans

from dpkit.core import rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ApproxDP, PrivacyLoss, PureDP
from dpkit.core.metrics import AddRemoveDistance, HammingDistance
from dpkit.core.numbers import fraction_down, log_up, to_fraction
from dpkit.core.record import NoiseRow
from dpkit.core.rng import uniforms
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_bounds, check_epsilon, exact_sums, plan
from dpkit.learn._validation import ArrayLike, fit_features, predict_features
from dpkit.learn.coreset import (
    COUNTS,
    MAX_DEPTH_BITS,
    level_counts,
    private_coreset,
    split_width,
)
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["KMeans", "budget_schedule", "grid_start", "sphere_packing", "attention_beta",
           "centre_of_attention", "release_centre_of_attention"]

METHODS = ("lloyd", "sample_and_aggregate", "coreset")
INITS = ("auto", "sphere_packing", "random", "grid")
MAX_CELLS = 1 << 16
BLOCK_ITERATIONS = 20
CELLS, SIZES, SUMS, MATCHED = ("grid start cells", "cluster sizes", "cluster sums",
                               "matched centre sums")
ATTENTION = "centre of attention"
ATTENTION_ETA = Fraction(1, 1 << 34)  # smoothness lost to float distances and rounding up
ATTENTION_GRID = 20  # the output lattice 2^-20 of the [−1, 1] scale (fixed: data-free)
MAX_ATTENTION_BLOCKS = 4096  # the m × m distances stay ≤ 128 MiB
MAX_ATTENTION_DIM = 256  # k·d: float ℓ1 distances then err by < 2^-44 (relative)


def sphere_packing(k: int, lower: np.ndarray, upper: np.ndarray, tries: int = 5
                   ) -> np.ndarray:
    """k centres spread as in Su et al. 2016 §4.1 (module docstring); data-independent."""
    d = lower.size
    mid, half = (lower + upper) / 2, (upper - lower) / 2
    r = 1.0
    while r > 1e-3:
        for _ in range(tries):
            points: list[np.ndarray] = []
            for _ in range(50 * k):
                c = (uniforms(d) * 2 - 1) * (1 - r)
                if all(np.linalg.norm(c - p) >= 2 * r for p in points):
                    points.append(c)
                    if len(points) == k:
                        return mid + np.array(points) * half
        r *= 0.9
    return lower + uniforms(k * d).reshape(k, d) * (upper - lower)


def budget_schedule(epsilon: Fraction, iterations: int, schedule: str) -> list[Fraction]:
    """ε per iteration: equal parts, or halving with the last taking the rest (sum = ε)."""
    if iterations < 1:
        raise DomainError("max_iter must be positive")
    if schedule == "fixed":
        return [epsilon / iterations] * iterations
    if schedule == "halving":
        parts = [epsilon / 2 ** (t + 1) for t in range(iterations - 1)]
        return parts + [epsilon - sum(parts, Fraction(0))]
    raise DomainError("schedule must be 'fixed' or 'halving'")


def _integer_at_least(value: Any, name: str, low: int) -> int:
    """A declared integer parameter ≥ ``low`` (bools refused), else DomainError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise DomainError(f"{name} must be an integer ≥ {low}")
    return int(value)


def _seed() -> int:
    """A seed for scikit-learn's k-means++ drawn from the CSPRNG (post-processing only:
    no privacy argument rests on it)."""
    return int(rng.words(1)[0] >> np.uint64(33))


def grid_start(z: np.ndarray, k: int, bins: int, epsilon: Fraction) -> np.ndarray:
    """Starting centres in [−1, 1]^d from an ε-DP histogram (module docstring, ``"grid"``).

    ``z`` are the rows clipped and scaled to [−1, 1]^d. The bins^d cell counts have L1
    sensitivity 1 (one row, one cell) and are released by grid Laplace at ε
    (:func:`dpkit.mechanisms.frontend.noisy`);
    k-means on the cell centres weighted by the positive noisy counts is post-processing.
    Falls back to the sphere-packing start when fewer than k cells are positive.
    """
    d = z.shape[1]
    shape = (bins,) * d
    cells = np.minimum(((z + 1) * (bins / 2)).astype(np.int64), bins - 1)
    counts = np.bincount(np.ravel_multi_index(cells.T, shape), minlength=bins ** d)
    noisy = frontend.noisy(counts.astype(np.float64), 1, epsilon, output="grid",
                           statistic=CELLS).value
    keep = np.flatnonzero(noisy > 0)
    if keep.size < k:
        return sphere_packing(k, -np.ones(d), np.ones(d))
    points = (np.array(np.unravel_index(keep, shape), dtype=np.float64).T + 0.5) * (2 / bins) - 1
    plain = _PlainKMeans(k, n_init=10, random_state=_seed())
    return np.asarray(plain.fit(points, sample_weight=noisy[keep]).cluster_centers_)


def attention_beta(epsilon: Fraction, delta: Fraction, dim: int) -> Fraction:
    """The smoothness β of the centre-of-attention release: β + η ≤ min(ε/(2D), ε/(4T), 1/2)
    with T = 2 ln(1/δ) + 2D ln 2 + ε/2 and η = 2^-34 (module docstring), ln rounded up.

    Raises DomainError when no β > 0 fits (ε too small)."""
    tail = 2 * log_up(1 / delta) + 2 * dim * log_up(Fraction(2)) + epsilon / 2
    beta = min(epsilon / (2 * dim), epsilon / (4 * tail), Fraction(1, 2)) - ATTENTION_ETA
    if beta <= 0:
        raise DomainError("epsilon is too small for the centre-of-attention release")
    return beta


def centre_of_attention(points: np.ndarray, beta: Fraction) -> tuple[int, Fraction]:
    """The centre of attention of m points in [−1, 1]^D (ℓ1) and S̃, a (β + η)-smooth upper
    bound on its local sensitivity (module docstring, NRS07 §4).

    Parameters
    ----------
    points : ndarray of shape (m, D)
        The block answers, entries in [−1, 1]; m ≥ 2.
    beta : Fraction
        β > 0.

    Returns
    -------
    (int, Fraction)
        The index i* = argmin_i r_i(t₀) (smallest index on ties) and S̃ ≥ max_j e^{−βj}·U_j.
    """
    m, dim = points.shape
    diameter = 2.0 * dim
    t0 = (m + 1) // 2 + 1
    radii = np.sort(cdist(points, points, "cityblock"), axis=1)  # radii[i, t−1] = r_i(t)
    centre = int(np.argmin(radii[:, t0 - 1]))
    # rho[j] = (j+1)-th smallest over i of r_i(t0 + j); the diameter once t0 + j > m
    columns = np.sort(radii[:, t0 - 1:], axis=0)
    span = columns.shape[1]
    rho = np.full(span + 2, diameter)
    rho[:span] = columns[np.arange(span), np.arange(span)]
    bound = np.minimum(rho[:-1] + rho[1:], diameter)  # U_j, j = 0 … span
    decay = np.exp(-float(beta) * np.arange(bound.size))
    smooth = float(np.max(bound * decay))
    # float error < 2^-40 relative (D ≤ 256 terms, j ≤ 4096): rounding up by 2^-38 covers it
    return centre, Fraction(smooth) * (1 + Fraction(1, 1 << 38))


def release_centre_of_attention(points: np.ndarray, epsilon: Fraction, delta: Fraction,
                                size: int = 1) -> np.ndarray:
    """``size`` releases of the centre of attention of ``points`` ((m, D) in [−1, 1]) with
    discrete Laplace noise on the 2^-20 lattice at the smooth scale
    b = (S̃ + D·2^-20)/(2^-20·ε/2), drawn through :func:`dpkit.mechanisms.frontend.noisy`
    (module docstring). Returns (size, D) floats in [−1, 1]; (ε, δ)-DP in one point."""
    dim = points.shape[1]
    centre, smooth = centre_of_attention(points, attention_beta(epsilon, delta, dim))
    grid = Fraction(1, 1 << ATTENTION_GRID)
    steps = np.rint(points[centre] * float(1 << ATTENTION_GRID)).astype(np.int64)
    noisy = frontend.noisy(np.tile(steps, size), smooth / grid + dim, epsilon / 2,
                           statistic=ATTENTION, cache=False).value
    return np.clip(np.asarray(noisy, dtype=np.float64).reshape(size, dim) * float(grid),
                   -1.0, 1.0)


AUDIT_DELTA = Fraction(1, 10**6)
# six block answers in [−1, 1] (D = 1) with one changed: centres of attention −1 and +1
ATTENTION_PAIR = (np.array([[-1.0], [-1.0], [-1.0], [1.0], [1.0], [1.0]]),
                  np.array([[1.0], [-1.0], [-1.0], [1.0], [1.0], [1.0]]))
CORESET_PAIR = (np.full((3, 1), 0.5), np.full((4, 1), 0.5))  # one row added


def audit_cases() -> list[AuditCase]:
    """The centre of attention on six block answers (ε = 1, δ = 10^-6, one answer changed)
    and the coreset (L = 1, d = 1, ε = 1, one row added; output: the weight of the cell
    that holds the rows). Broken: 4ε for the same claim."""
    def attention(epsilon: int) -> Sampler:
        return lambda x, n: release_centre_of_attention(np.asarray(x), Fraction(epsilon),
                                                        AUDIT_DELTA, n)[:, 0]

    def coreset(epsilon: int) -> Sampler:
        def sample(x: np.ndarray, n: int) -> np.ndarray:
            # level 1 of private_coreset (L = 1), n times: its counts, its noise, its weights
            counts = level_counts(np.asarray(x), np.arange(2), 1, 1)
            noisy = frontend.noisy(np.tile(counts, n), 1, Fraction(epsilon), statistic=COUNTS)
            return np.maximum(np.asarray(noisy.value).reshape(n, 2)[:, 1], 0).astype(float)
        return sample

    def claim(name: str, loss: PrivacyLoss, metric: HammingDistance | AddRemoveDistance,
              sample: Sampler) -> Measurement:
        rows = VectorDomain(VectorDomain(AtomDomain(Kind.FLOAT)))  # a 2-D array of floats
        return Measurement(lambda x: sample(x, 1)[0], metric, type(loss),
                           lambda d: loss, name, input_domain=rows)

    eps = Fraction(1)
    return [
        AuditCase("kmeans_centre_of_attention",
                  claim("kmeans_centre_of_attention", ApproxDP(eps, AUDIT_DELTA),
                        HammingDistance(), attention(1)),
                  attention(1), attention(4), *ATTENTION_PAIR),
        AuditCase("kmeans_coreset", claim("kmeans_coreset", PureDP(eps), AddRemoveDistance(),
                                          coreset(1)),
                  coreset(1), coreset(4), *CORESET_PAIR),
    ]


@register(audit=lambda: audit_cases())  # the audit battery's cases, next to the code
class KMeans(ClusterMixin, BaseEstimator):
    """ε-DP k-means (module docstring).

    Parameters
    ----------
    n_clusters : int
        k ≥ 1.
    epsilon : float
        ε > 0 (nats) for the whole fit, start included: PureDP(ε).
    bounds : (lower, upper)
        Declared feature bounds; required.
    max_iter : int
        T ≥ 1: noisy Lloyd iterations, or aggregation rounds for sample-and-aggregate
        (default 5).
    schedule : {"fixed", "halving"}
        How the iterations' ε is split over the T iterations (:func:`budget_schedule`).
    accountant : None, PrivacyFilter or Session
        Debited PureDP(ε) before any row is read.
    init : {"auto", "sphere_packing", "random", "grid"}
        The starting centres (module docstring). ``"grid"`` spends ``init_fraction``·ε; on
        Adult (k = 5, ε = 1, T = 3) it ends at ≈ 1.07× the non-private WCSS against
        ≈ 1.15–1.2× from ``"sphere_packing"``. ``"auto"`` (default) takes ``"grid"`` where
        b^d ≤ 65,536.
    method : {"lloyd", "sample_and_aggregate", "coreset"}
        Noisy Lloyd iterations (SuLQ), sample-and-aggregate with the centre of attention
        (NRS07 §4; needs ``delta``, without it the matched mean runs) or Lloyd on
        a private coreset (Feldman et al. 2017), module docstring.
    init_fraction : float
        Share of ε for the ``"grid"`` histogram, in (0, 1) (default 1/2; rounded down to an
        exact fraction with denominator ≤ 2^20).
    grid_bins : int
        b ≥ 2, cells per feature for ``"grid"``; b^d ≤ 65536 (default 3).
    n_blocks : int
        m ≥ 2, blocks for sample-and-aggregate (default 1000). Declared, never taken from n;
        at most 4096 for the centre of attention (m² distances).
    delta : float, optional
        δ ∈ (0, 1/2] of the centre of attention (``"sample_and_aggregate"``); its fit is
        (ε, δ)-DP, ApproxDP(ε, δ) debited. Omitted: the pure-ε matched mean.
    levels : int
        L ≥ 1 grid levels of the coreset (default 3), L·min(d, ⌊log₂ max_cells⌋) ≤ 62.
    max_cells : int
        Candidate cells per coreset level, ≥ 2 (default 4096).

    Attributes
    ----------
    cluster_centers_ : ndarray (k, d)
    labels_ : ndarray (n,), the training points' nearest centres (not released by the
        mechanism: computed from the private data and the public centres, for sklearn
        compatibility; do not publish them)

    Raises
    ------
    DomainError
        Missing bounds, ε ≤ 0, k < 1, a bad schedule, method, init, init_fraction, grid_bins
        (or b^d > 65536), n_blocks, delta (or n_blocks > 4096, k·d > 256, an ε too small
        for the centre of attention), levels or max_cells — all before any budget is
        debited.

    Notes
    -----
    Guarantee (add/remove or substitution of one row; one privacy unit under a Session):
    ``"lloyd"``, ``"coreset"`` and the matched mean: ε-DP; the centre of
    attention: (ε, δ)-DP with β from :func:`attention_beta` (module docstring: the smooth
    bound after NRS07 §4, the noise after NRS07 Lemma 2.5, redone for D-dimensional
    discrete Laplace). Sources: Blum et al. 2005 §5, Su et al. 2016 §4–6, Nissim,
    Raskhodnikova & Smith STOC 2007 §4, Feldman, Xiang, Zhu & Rus IPSN 2017.

    On held-out real data neither non-default method beats the default: in
    ``bench/floor.py`` (MovieLens, d = 22, k = 8, ε ∈ {0.1, 1}) the coreset's cost is
    ≈ 1.4× that of one exact centre at the mean (its cells are coarse when d exceeds
    log₂ ``max_cells``: a cell's centre stands for its rows) and the centre of attention's
    ≈ 3.8× (its noise per coordinate is ≈ 2S̃/ε with S̃ ≥ ρ₀ + ρ₁, an ℓ1 spread of the block
    answers over D = kd coordinates, unless m ≫ D·ln(1/δ)/ε); on Adult
    (``bench/learn_kmeans_coreset.py``) the coreset lands at 1.2–1.3× the non-private cost,
    below the trivial baselines, and the centre of attention above them. Prefer
    ``method="lloyd"`` (the default, ≈ 1.0× on both).
    """

    def __init__(self, n_clusters: int = 8, epsilon: float = 1.0, bounds: Any = None,
                 max_iter: int = 5, schedule: str = "fixed", accountant: AccountantLike = None,
                 init: str = "auto", method: str = "lloyd",
                 init_fraction: float = 0.5, grid_bins: int = 3, n_blocks: int = 1000,
                 delta: float | None = None, levels: int = 3, max_cells: int = 4096) -> None:
        self.init = init
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.schedule = schedule
        self.accountant = accountant
        self.method = method
        self.init_fraction = init_fraction
        self.grid_bins = grid_bins
        self.n_blocks = n_blocks
        self.delta = delta
        self.levels = levels
        self.max_cells = max_cells

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> KMeans:
        x = fit_features(X)
        eps = check_epsilon(self.epsilon)
        lower, upper = check_bounds(self.bounds, x.shape[1])
        k, d = int(self.n_clusters), x.shape[1]
        if k < 1:
            raise DomainError("n_clusters must be positive")
        if self.method not in METHODS:
            raise DomainError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.init not in INITS:
            raise DomainError(f"init must be one of {INITS}, got {self.init!r}")
        init = self._init(d)
        start_eps = Fraction(0)
        if init == "grid":
            start_eps = self._grid_share(eps, d)
        parts = budget_schedule(eps - start_eps, int(self.max_iter), self.schedule)
        blocks = self._blocks() if self.method == "sample_and_aggregate" else 0
        attention = self._attention(eps - start_eps, k * d, blocks)
        if self.method == "coreset":
            return self._fit_coreset(x, eps, k, lower, upper)

        def compute() -> KMeans:
            mid, half = (lower + upper) / 2, (upper - lower) / 2
            clipped = np.clip(x, lower, upper)
            z = (clipped - mid) / half  # in [−1, 1]^d: a public map of each row
            if init == "grid":
                start = grid_start(z, k, int(self.grid_bins), start_eps)
            elif init == "sphere_packing":
                start = sphere_packing(k, -np.ones(d), np.ones(d))
            else:
                start = uniforms(k * d).reshape(k, d) * 2 - 1
            if self.method == "lloyd":
                centres = self._lloyd(clipped, mid + start * half, parts, lower, upper)
            elif attention is not None:
                centres = mid + self._attend(z, start, blocks, *attention) * half
            else:
                centres = mid + self._sample_and_aggregate(z, start, parts, blocks) * half
            self.cluster_centers_ = centres
            self.labels_ = self._nearest(clipped, self.cluster_centers_)
            self.n_features_in_ = d
            self.n_iter_ = len(parts)
            return self

        loss: PrivacyLoss = PureDP(eps)
        if attention is None:
            rows = self._plan(k, lower, upper, start_eps, parts)
        else:  # the attention's scale is data-dependent: an open row in the plan
            loss = ApproxDP(eps, attention[1])
            rows = self._plan(k, lower, upper, start_eps, []) + (
                NoiseRow("discrete Laplace", None, None, ATTENTION),)
        return charge(self.accountant, loss,
                      f"KMeans(ε={eps}, k={k}, T={len(parts)}, {self.method}, {init})",
                      compute, rows)

    def _attention(self, eps: Fraction, dim: int, blocks: int
                   ) -> tuple[Fraction, Fraction] | None:
        """(ε, δ) of the centre-of-attention release, or None for the matched
        mean (sample-and-aggregate without δ). Checked before the debit."""
        if self.method != "sample_and_aggregate":
            return None
        if self.delta is None:  # the matched mean (pure ε)
            return None
        try:
            delta = fraction_down(self.delta)
        except (TypeError, ValueError, DomainError) as err:
            raise DomainError("delta must be a number in (0, 1/2]") from err
        if not 0 < delta <= Fraction(1, 2):
            raise DomainError("delta must be in (0, 1/2]")
        if blocks > MAX_ATTENTION_BLOCKS or dim > MAX_ATTENTION_DIM:
            raise DomainError(f"the centre of attention takes n_blocks ≤ {MAX_ATTENTION_BLOCKS}"
                              f" and n_clusters·d ≤ {MAX_ATTENTION_DIM}")
        attention_beta(eps, delta, dim)  # raises for an ε too small
        return eps, delta

    @staticmethod
    def _attend(z: np.ndarray, start: np.ndarray, m: int, eps: Fraction, delta: Fraction
                ) -> np.ndarray:
        """NRS07 §4 with the centre of attention (module docstring): block answers in the
        start's order, then one (ε, δ) release of their centre of attention."""
        k, d = start.shape
        answers = KMeans._block_answers(z, start, m)
        ordered = np.empty((m, k * d))
        for b in range(m):  # each block's centres matched to the public start
            cost = ((answers[b][:, None, :] - start[None, :, :]) ** 2).sum(axis=2)
            mine, theirs = linear_sum_assignment(cost)
            for i, j in zip(mine, theirs, strict=True):
                ordered[b, j * d:(j + 1) * d] = answers[b][i]
        return release_centre_of_attention(ordered, eps, delta)[0].reshape(k, d)

    def _fit_coreset(self, x: np.ndarray, eps: Fraction, k: int, lower: np.ndarray,
                     upper: np.ndarray) -> KMeans:
        """ε-DP coreset (:mod:`dpkit.learn.coreset`), then weighted Lloyd on it."""
        d = x.shape[1]
        levels = _integer_at_least(self.levels, "levels", 1)
        cells = _integer_at_least(self.max_cells, "max_cells", 2)
        if levels * split_width(d, cells) > MAX_DEPTH_BITS:
            raise DomainError(f"levels·min(d, log2 max_cells) must be ≤ {MAX_DEPTH_BITS}")

        def compute() -> KMeans:
            mid, half = (lower + upper) / 2, (upper - lower) / 2
            clipped = np.clip(x, lower, upper)
            points, weights = private_coreset((clipped - mid) / half, eps, levels, cells)
            if points.shape[0] < k:  # too few cells cleared the noise: a data-free start
                start = sphere_packing(k, -np.ones(d), np.ones(d))
            else:
                plain = _PlainKMeans(k, n_init=10, random_state=_seed())
                with warnings.catch_warnings():  # no data-dependent text after the debit
                    warnings.simplefilter("ignore")
                    fitted = plain.fit(points, sample_weight=weights)
                start = np.asarray(fitted.cluster_centers_)
            self.cluster_centers_ = mid + start * half
            self.labels_ = self._nearest(clipped, self.cluster_centers_)
            self.n_features_in_ = d
            self.n_iter_ = levels
            return self

        rows = plan(frontend.noise_row(1, eps / levels, COUNTS))
        return charge(self.accountant, PureDP(eps),
                      f"KMeans(ε={eps}, k={k}, L={levels}, coreset)", compute, rows)

    def _plan(self, k: int, lower: np.ndarray, upper: np.ndarray, start_eps: Fraction,
              parts: list[Fraction]) -> tuple[NoiseRow, ...]:
        """The noise rows of the fit's draws (the start's histogram, then every round's)."""
        d, half = lower.size, (upper - lower) / 2
        rows = [] if start_eps == 0 else [frontend.noise_row(
            1, start_eps, CELLS, output="grid", count=int(self.grid_bins) ** d)]
        for eps_t in parts:
            if self.method == "lloyd":
                rows += [frontend.noise_row(1, eps_t / (d + 1), SIZES, output="grid", count=k),
                         *(frontend.noise_row(h, eps_t / (d + 1), SUMS, output="grid", count=k)
                           for h in half)]
            else:
                rows.append(frontend.noise_row(2 * k * d, eps_t, MATCHED, output="grid",
                                               count=k * d))
        return plan(*rows)

    def _init(self, d: int) -> str:
        """The start ``init="auto"`` stands for at d features (public inputs only)."""
        if self.init != "auto":
            return str(self.init)
        bins = self.grid_bins
        fits = isinstance(bins, (int, np.integer)) and not isinstance(bins, bool) and (
            bins >= 2 and int(bins) ** d <= MAX_CELLS)
        return "grid" if fits else "sphere_packing"

    def _grid_share(self, eps: Fraction, d: int) -> Fraction:
        try:
            asked = to_fraction(self.init_fraction)
        except DomainError as err:
            raise DomainError("init_fraction must be a number in (0, 1)") from err
        frac = asked.limit_denominator(1 << 20)
        if frac > asked:  # round down: never spend more than asked
            frac -= Fraction(1, 1 << 20)
        if not 0 < frac < 1:
            raise DomainError("init_fraction must be in (0, 1)")
        bins = _integer_at_least(self.grid_bins, "grid_bins", 2)
        if bins ** d > MAX_CELLS:
            raise DomainError(f"grid_bins^d = {bins}^{d} cells exceeds {MAX_CELLS}; use "
                              "fewer bins or init='sphere_packing'")
        return eps * frac

    def _blocks(self) -> int:
        return _integer_at_least(self.n_blocks, "n_blocks", 2)

    @classmethod
    def _lloyd(cls, clipped: np.ndarray, centres: np.ndarray, parts: list[Fraction],
               lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """SuLQ iterations on the clipped rows, in their own units (module docstring)."""
        k, d = centres.shape
        mid, half = (lower + upper) / 2, (upper - lower) / 2
        centres = centres.copy()
        for eps_t in parts:
            share = eps_t / (d + 1)
            label = cls._nearest(clipped, centres)
            counts = frontend.noisy(np.bincount(label, minlength=k).astype(float), 1, share,
                                    output="grid", statistic=SIZES).value
            moved = counts >= 1
            for j in range(d):
                sums = frontend.noisy(exact_sums(label, clipped[:, j] - mid[j], half[j], k),
                                     half[j], share, output="grid", statistic=SUMS).value
                centres[moved, j] = np.clip(sums[moved] / counts[moved] + mid[j], lower[j],
                                            upper[j])
        return centres

    @staticmethod
    def _sample_and_aggregate(z: np.ndarray, start: np.ndarray, parts: list[Fraction],
                              m: int) -> np.ndarray:
        """NRS07 §4 (module docstring): block answers, then T matched noisy means."""
        k, d = start.shape
        answers = KMeans._block_answers(z, start, m)
        centres = start.copy()
        for eps_t in parts:
            total = np.zeros((k, d))
            for b in range(m):
                cost = ((answers[b][:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
                mine, theirs = linear_sum_assignment(cost)
                total[theirs] += answers[b][mine]
            noisy = frontend.noisy(total, 2 * k * d, eps_t, output="grid",
                                   statistic=MATCHED).value.reshape(k, d)
            centres = np.clip(noisy / m, -1.0, 1.0)
        return centres

    @staticmethod
    def _block_answers(z: np.ndarray, start: np.ndarray, m: int) -> np.ndarray:
        """(m, k, d): plain Lloyd in every block at once, from the public start; each row's
        block drawn independently and uniformly (CSPRNG)."""
        k, d = start.shape
        block = rng.uniform_below(m, size=z.shape[0]).astype(np.int64)  # independent per row
        answers = np.broadcast_to(start, (m, k, d)).copy()
        for _ in range(BLOCK_ITERATIONS):  # plain Lloyd in every block at once, from the start
            label = ((z[:, None, :] - answers[block]) ** 2).sum(axis=2).argmin(axis=1)
            cell = block * k + label
            counts = np.bincount(cell, minlength=m * k)
            sums = np.stack([np.bincount(cell, z[:, j], minlength=m * k) for j in range(d)], 1)
            filled = counts > 0  # an empty cluster keeps its centre
            flat = answers.reshape(m * k, d)
            flat[filled] = sums[filled] / counts[filled, None]
        return answers

    @staticmethod
    def _nearest(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
        dist = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        return np.argmin(dist, axis=1)

    def predict(self, X: ArrayLike) -> np.ndarray:
        return self._nearest(predict_features(self, X), self.cluster_centers_)

    def inertia(self, X: ArrayLike) -> float:
        """Within-cluster sum of squares of ``X`` around the centres."""
        x = predict_features(self, X)
        return float(((x - self.cluster_centers_[self.predict(x)]) ** 2).sum())
