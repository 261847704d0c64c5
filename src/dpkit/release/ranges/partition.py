"""Data-dependent partitioning of 1-D histograms: DAWA, NoiseFirst, StructureFirst, P-HP.

Each algorithm groups the n cells into contiguous buckets, measures the bucket totals with
noise and spreads each bucket's estimate uniformly over its cells (:func:`spread`). Where the
buckets come from the data, the choice is itself private: noisy costs (DAWA), the
exponential mechanism (StructureFirst, P-HP) or post-processing of noisy cells (NoiseFirst).

Privacy (pure ε-DP, add/remove-one-record neighbours: histograms x, x ± e_j). DAWA,
StructureFirst and P-HP spend ε₁ on the structure and ε₂ = ε − ε₁ on the bucket totals;
sequential (adaptive) composition gives ε₁ + ε₂ = ε (Dwork & Roth Thm 3.16). NoiseFirst
spends all of ε on the cells and derives the structure by post-processing. Sensitivities are exact
Fractions; all Laplace noise is drawn by :func:`dpkit.mechanisms.frontend.noisy` and every
selection by :func:`dpkit.mechanisms.frontend.select` with the exponential mechanism
"exponential_many" (McSherry & Talwar 2007; scale 2Δ/ε rounded up, map-checked), which draws
for several disjoint intervals at once (parallel composition).

Exact scores. The exponential mechanism needs its scores exactly. Scores here are sums of
per-bucket costs that are rationals with different denominators (a bucket's mean), so each
cost c is replaced by ⌊G·c⌋ (G = :data:`SCORE_GRID`), computed in integer arithmetic. If a
record moves c by strictly less than D (with D·G an integer), then ⌊G·c⌋ moves by at most
D·G (|⌊u⌋ − ⌊v⌋| < |u − v| + 1 < D·G + 1 and the left side is an integer), so the integer
scores have sensitivity D·G, the real bound scaled — nothing is lost to rounding. The
bounds used are strict: SAE moves by ≤ 2(1 − 1/m) < 2, clamped SSE by
≤ (2F − 1)(1 − 1/m) < 2F − 1.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpkit.core.numbers import to_fraction
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.exponential import SCORE_GRID, integer_gaps  # G: scores ⌊G·cost⌋
from dpkit.release.measure import expected_rmse
from dpkit.release.ranges.hierarchical import tree_counts, tree_inference, tree_strategy
from dpkit.release.ranges.switch import per_cell_cap, scale_switched
from dpkit.release.workload import RangeWorkload

__all__ = ["dawa", "dawa_cap", "phpartition_cap", "cell_cap",
           "noise_first", "structure_first", "phpartition", "spread",
           "bucket_totals", "dyadic_deviations", "dyadic_partition", "penalized_partition",
           "sse_scores", "sse_tables", "sae_prefix", "SCORE_GRID"]

_INT_LIMIT = 1 << 62  # integer arithmetic must stay below this (int64 headroom)


# ----------------------------------------------------------------------------- helpers

# Signals N̂·ε/n at and above which the partitioning algorithms hand over to Identity
# (dpkit.release.ranges.switch). Each is a decade below the smallest signal at which the
# algorithm (switch off) lost to Identity by more than 1.1× on any of the 10 DPBench 1-D
# shapes and 3 synthetic ones (scales 10^3–10^7, ε ∈ {0.1, 1}, 3 trials): the measured signals
# are a decade apart, so the crossover may sit anywhere in the decade below. Checked out of
# sample by leaving each dataset out (bench/auto_rule.py; bench/results/auto.md). NoiseFirst
# and P-HPartition already lose at the smallest measured signal (0.024): their thresholds only
# bound the damage, and they are registered robust=False.
SWITCH = 0.024  # StructureFirst (lost from signal 0.24 on; 2.05× held out at 0.24 in issue 18)
SWITCH_PHPARTITION = 0.0024
SWITCH_DAWA = 24.0  # lost 1.26× at signal 244 on one shape
SWITCH_NOISE_FIRST = 0.0024


def _ratio(ratio: object, name: str = "ratio") -> Fraction:
    try:
        r = to_fraction(ratio)
    except DomainError:
        raise DomainError(f"{name} must be a number in (0, 1); got {ratio!r}") from None
    if not 0 < r < 1:
        raise DomainError(f"{name} must be in (0, 1) (the share of ε spent on the "
                          f"partition); got {ratio!r}")
    return r


def _positive_int(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DomainError(f"{name} must be an integer ≥ {minimum}; got {value!r}")
    return int(value)


def cell_cap(n: int, factor: int) -> int:
    """The largest count c with n·c·factor < 2^62: cells clamped to c keep every integer
    cost (a total times ``factor``) inside int64. From the declared size n only."""
    return per_cell_cap(n * factor, _INT_LIMIT)


def dawa_cap(n: int) -> int:
    """DAWA's per-cell clamp c(n) = ⌊(2^62 − 1)/(4n²)⌋ (≥ 1; 2^36 at n = 4,096): m·dev(B)
    ≤ 2n·N ≤ 2n²c stays below 2^62 with room for its noise."""
    return cell_cap(n, 4 * n)


def phpartition_cap(n: int) -> int:
    """P-HPartition's per-cell clamp ⌊(2^62 − 1)/(4G·n²)⌋ (≥ 1): G·c·SAE stays below 2^62."""
    return cell_cap(n, 4 * SCORE_GRID * n)


def bucket_totals(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Σ x over each bucket [edges[b], edges[b+1]) (edges start at 0, end at n)."""
    csum = np.concatenate([[0], np.cumsum(x, dtype=np.int64 if x.dtype.kind in "iub"
                                          else np.float64)])
    return csum[edges[1:]] - csum[edges[:-1]]


def spread(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Spread each bucket's total uniformly over its cells (cell i of bucket b gets
    values[b]/|b|); the totals are preserved exactly up to float rounding."""
    edges = np.asarray(edges, dtype=np.int64)
    sizes = np.diff(edges)
    if np.any(sizes <= 0) or edges[0] != 0:
        raise DomainError("bucket edges must start at 0 and strictly increase")
    return np.repeat(np.asarray(values, dtype=np.float64) / sizes, sizes)


_integer_gaps = integer_gaps  # the exact integer gaps of the vectorised sampler


def _discrete_laplace_variance(scale: Fraction) -> float:
    """Var of the discrete Laplace law of scale s: 2e^{−1/s}/(1 − e^{−1/s})²."""
    a = math.exp(-1 / float(scale))
    return 2 * a / (1 - a) ** 2


# ----------------------------------------------------------------------------- DAWA

def dyadic_deviations(x: np.ndarray) -> list[np.ndarray]:
    """m·dev(B) for every aligned dyadic interval B = [j·m, (j+1)·m) ⊆ [0, n), m = 2^k,
    k = 1 … ⌊log₂ n⌋, where dev(B) = Σ_{i∈B} |x_i − x̄_B| is the bucket's L1 deviation from
    its mean. Returns one int64 array per level (k = 1 first): m·dev = Σ |m·x_i − S_B| is an
    integer."""
    out = []
    m = 2
    while m <= x.size:
        blocks = x[: (x.size // m) * m].reshape(-1, m)
        totals = blocks.sum(axis=1)
        out.append(np.abs(m * blocks - totals[:, None]).sum(axis=1))
        m *= 2
    return out


def dyadic_partition(deviations: list[np.ndarray], n: int, bucket_cost: float) -> np.ndarray:
    """The partition of [0, n) into aligned dyadic intervals minimising
    Σ_buckets (dev(B) + bucket_cost), given dev for every interval of length ≥ 2
    (``deviations[k−1][j]`` for [j·2^k, (j+1)·2^k); singletons have dev 0).

    Bottom-up over the dyadic tree: best(B) = min(dev(B) + cost, best(left) + best(right)),
    intervals not inside [0, n) must split, empty ones cost 0. Ties keep the larger bucket.
    Returns the bucket edges (0 = e₀ < … < e_k = n)."""
    levels = max((n - 1).bit_length(), 0)
    width = 1 << levels
    best = np.where(np.arange(width) < n, bucket_cost, 0.0)
    whole = [np.arange(width) < n]  # whole[k][j]: node j of level k is a bucket
    for k in range(1, levels + 1):
        m = 1 << k
        nodes = width // m
        children = best.reshape(nodes, 2).sum(axis=1)
        single = np.full(nodes, np.inf)
        dev = deviations[k - 1] if k - 1 < len(deviations) else np.zeros(0)
        single[: dev.size] = np.asarray(dev, dtype=np.float64) + bucket_cost
        take = single <= children
        whole.append(take)
        best = np.where(take, single, children)
    # top-down: a node is a bucket if it is chosen and no ancestor is
    covered = np.zeros(1, dtype=bool)
    starts = []
    for k in range(levels, -1, -1):
        m = 1 << k
        nodes = width // m
        cov = np.repeat(covered, 2)[:nodes] if k < levels else covered
        chosen = whole[k] & ~cov & (np.arange(nodes) * m < n)
        starts.append(np.flatnonzero(chosen) * m)
        covered = cov | chosen
    edges = np.sort(np.concatenate(starts + [np.array([n])]))
    return edges.astype(np.int64)


def _bucket_workload(workload: RangeWorkload, edges: np.ndarray, limit: int = 2048
                     ) -> np.ndarray:
    """The workload on bucket totals for uniformly spread estimates: query q puts weight
    |q ∩ B|/|B| on bucket B (dense, at most ``limit`` queries taken at a fixed stride)."""
    stride = max(1, -(-len(workload) // limit))
    lo, hi = workload.lo[::stride, 0], workload.hi[::stride, 0]
    start, stop = edges[:-1], edges[1:]
    overlap = np.clip(np.minimum(hi[:, None], stop[None, :]) - np.maximum(lo[:, None],
                      start[None, :]), 0, None)
    return overlap / (stop - start)[None, :]


def _stage_two(totals: np.ndarray, edges: np.ndarray, epsilon: Fraction,
               workload: RangeWorkload | None, max_choose: int = 512,
               strategy: str = "auto") -> tuple[np.ndarray, str]:
    """Measure the k bucket totals at ε and return least-squares estimates.

    A simplified GreedyH: the strategy is either Identity on the buckets (sensitivity 1) or
    the binary tree over the buckets (Hay et al. 2010; sensitivity = its number of levels,
    consistent estimates by :func:`~dpkit.release.ranges.hierarchical.tree_inference`). With a
    workload and k ≤ ``max_choose`` the one with the smaller expected error on the
    bucket-level workload is used (a data-independent choice given the partition);
    otherwise the tree (range workloads, e.g. all ranges or prefixes). ``strategy``
    "identity" or "tree" fixes the choice."""
    _check_strategy(strategy)
    k = totals.size
    use_tree = k > 2 and strategy != "identity"
    if use_tree and strategy == "auto" and workload is not None and k <= max_choose:
        wb = _bucket_workload(workload, edges)
        eps = float(epsilon)
        height = len(tree_counts(np.zeros(k, dtype=np.int64), 2))
        err_id = expected_rmse(wb, np.eye(k), eps, 1.0)
        err_tree = expected_rmse(wb, tree_strategy(k, 2), eps, float(height))
        use_tree = err_tree < err_id
    if not use_tree:
        return frontend.noisy(totals, 1, epsilon).value.astype(np.float64), "identity"
    levels = tree_counts(totals, 2)
    noisy = frontend.noisy(np.concatenate(levels), Fraction(len(levels)), epsilon).value
    parts = np.split(noisy, np.cumsum([lv.size for lv in levels])[:-1])
    return tree_inference(parts, 2)[:k], "tree"


def dawa_options(ratio: Fraction | float = Fraction(1, 4), strategy: str = "auto"
                 ) -> tuple[Fraction, str]:
    """DAWA's options checked (for the scale switch, before any noise is drawn).

    Raises
    ------
    DomainError
        ``ratio`` outside (0, 1) or ``strategy`` not "auto", "identity" or "tree"."""
    return _ratio(ratio), _check_strategy(strategy)


def _check_strategy(strategy: object) -> str:
    if strategy not in ("auto", "identity", "tree"):
        raise DomainError(f"strategy must be 'auto', 'identity' or 'tree'; got {strategy!r}")
    return str(strategy)


def _no_options() -> None:
    return None


@scale_switched(SWITCH_DAWA, dawa_options)
def dawa(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
         ratio: Fraction | float = Fraction(1, 4), strategy: str = "auto") -> np.ndarray:
    """DAWA: private L1 partition on dyadic intervals, then bucket totals by a simplified
    GreedyH (Li, Hay, Miklau & Wang, PVLDB 2014, Algorithms 1–2 and §4). ε-DP. On held-out
    real data (bench/floor.py: UCI bike-sharing daily counts, 731 days, ε = 1) its range
    error was 1.0–1.3× Identity's across runs (0.7–0.9× on MovieLens items): on short,
    smooth domains the partition's ε share does not pay; prefer "auto" (it runs the matrix
    mechanism at high signal).

    Parameters
    ----------
    x : ndarray of int64, shape (n,)
    epsilon : Fraction
        Total ε; ε₁ = ratio·ε for the partition, ε₂ = ε − ε₁ for the totals.
    workload : RangeWorkload, optional
        Stage 2 picks Identity or a binary tree over the buckets by expected error on it;
        without one, the tree (good for all-range / prefix workloads).
    ratio : number in (0, 1)
        Share of ε for the partition (default 1/4, the paper's choice).
    strategy : {"auto", "identity", "tree"}
        Stage 2's strategy over the buckets; "auto" chooses as described above.

    Raises
    ------
    DomainError
        A bad ``ratio`` or ``strategy`` (before any debit: the registry's plan-time check).
        Counts of any magnitude are accepted: each cell is clamped to :func:`dawa_cap`
        (n) (a declared bound from the size alone; 2^36 at n = 4,096), which keeps the
        neighbour relation (a record moves one clamped cell by at most 1), so the
        guarantee is unchanged and nothing raises after the debit.

    Notes
    -----
    Stage 1 (partition, Alg. 1/2 restricted to aligned dyadic intervals, the paper's
    O(n log n) variant uses power-of-two lengths). A bucket B costs dev(B) + 1/ε₂, with
    dev(B) = Σ_{i∈B}|x_i − x̄_B|; the minimum-cost partition into dyadic intervals is found by
    :func:`dyadic_partition` on noisy deviations. Sensitivity: adding one record to cell j
    moves x̄_B by 1/|B| and so dev(B) by at most (|B| − 1)/|B| from the other cells plus
    1 − 1/|B| from cell j: |Δdev(B)| ≤ 2(1 − 1/|B|), tight. A cell lies in exactly one
    dyadic interval per level, so level k (m = 2^k) is measured as the integers m·dev(B),
    L1 sensitivity Δ_k = 2(m − 1), with ε₁,k = ε₁·(1 − 2^{−k})/Z, Z = Σ_k (1 − 2^{−k}) over
    the L = ⌊log₂ n⌋ levels: Σ_k ε₁,k = ε₁, and every dev gets noise of scale 2Z/ε₁ (the
    whole cost vector has L1 sensitivity 2Z = 2L − 2 + 2^{1−L}). We charge this full
    sensitivity of the cost vector (plain Laplace mechanism and composition), not the
    per-interval bound 2; this makes the partition noisier than the paper's, never less
    private. The noisy deviations are clamped at 0 (dev ≥ 0; post-processing): without it
    the bottom-up minimum sums ever more negative noise over finer splits and the partition
    degenerates towards singletons (measured: 2,000+ buckets of 4,096 at 1,000 records,
    against 2–100 with the clamp). Counts n = 1: no partition, ε₂ = ε.

    Stage 2: the bucket totals (sensitivity 1 per strategy row; tree: h + 1 levels) at ε₂,
    least squares, uniform spread. Total ε₁ + ε₂ = ε by sequential composition.

    Scale switch (default on, :mod:`dpkit.release.ranges.switch`; options ``switch``, ``scale``,
    ``scale_fraction``): with N̂·ε'/n ≥ ``switch`` (default :data:`SWITCH_DAWA`, 24) Identity
    runs at ε' instead: switch off, DAWA lost 1.26× to Identity at signal 244 on one DPBench
    shape (bias of the buckets on a smooth shape). Out of sample (that shape held out, the
    threshold would not fire) the loss is that 1.26×.
    """
    r = _ratio(ratio)
    n = x.size
    eps1 = r * epsilon
    eps2 = epsilon - eps1
    x = np.minimum(x, dawa_cap(n))  # declared clamp (from n): exact int64 costs, any input
    devs = dyadic_deviations(x)
    if not devs:  # n = 1: nothing to partition, all of ε measures the one cell
        eps2 = epsilon
    z = sum((1 - Fraction(1, 1 << k) for k in range(1, len(devs) + 1)), Fraction(0))
    noisy = []
    for k, dev in enumerate(devs, start=1):
        m = 1 << k
        eps_k = eps1 * (1 - Fraction(1, m)) / z
        noisy_dev = frontend.noisy(dev, Fraction(2 * (m - 1)), eps_k).value / m
        noisy.append(np.maximum(noisy_dev, 0.0))  # dev ≥ 0: clamping is post-processing
    edges = dyadic_partition(noisy, n, 1 / float(eps2))
    est, _ = _stage_two(bucket_totals(x, edges), edges, eps2, workload, strategy=strategy)
    return spread(est, edges)


# ----------------------------------------------------------------------------- NoiseFirst

def penalized_partition(values: np.ndarray, penalty: float) -> np.ndarray:
    """Edges of the partition of ``values`` into contiguous buckets minimising
    Σ_buckets (SSE(B) + penalty), SSE(B) = Σ_{i∈B}(v_i − v̄_B)², exactly by dynamic
    programming with PELT pruning (Killick, Fearnhead & Eckley 2012; SSE needs no
    constant, adding a cut never raises SSE). Equals min over k of the optimal
    k-bucket (v-optimal) SSE + k·penalty."""
    v = np.asarray(values, dtype=np.float64)
    v = v - v.mean()  # SSE is shift invariant; centring reduces cancellation
    n = v.size
    s1 = np.concatenate([[0.0], np.cumsum(v)])
    s2 = np.concatenate([[0.0], np.cumsum(v * v)])
    f = np.empty(n + 1)
    f[0] = 0.0
    last = np.zeros(n + 1, dtype=np.int64)
    cand = np.array([0], dtype=np.int64)
    for t in range(1, n + 1):
        seg = s1[t] - s1[cand]
        cost = np.maximum(s2[t] - s2[cand] - seg * seg / (t - cand), 0.0)
        total = f[cand] + cost
        b = int(np.argmin(total))
        f[t] = total[b] + penalty
        last[t] = cand[b]
        cand = np.append(cand[total <= f[t]], t)
    edges = [n]
    while edges[-1] > 0:
        edges.append(int(last[edges[-1]]))
    return np.array(edges[::-1], dtype=np.int64)


@scale_switched(SWITCH_NOISE_FIRST, _no_options)
def noise_first(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None
                ) -> np.ndarray:
    """NoiseFirst: Laplace on every cell, then the v-optimal merge of the noisy cells with
    the number of buckets chosen by estimated error (Xu, Zhang, Xiao, Yang, Yu & Winslett,
    ICDE 2012 / VLDBJ 2013, §4 NoiseFirst). ε-DP. On held-out real data (bench/floor.py:
    bike-sharing days, ε = 1) its range error was 1.2–1.3× Identity's (two runs); prefer
    Identity or HDMM ("mm") when the counts per cell are large.

    Notes
    -----
    Privacy: the cells (L1 sensitivity 1) get discrete Laplace noise of scale 1/ε, ε-DP;
    everything after is post-processing of the noisy cells.

    Merging: a bucket B estimated by the mean of its noisy cells has expected squared error
    SSE_true(B) + σ², while E[SSE_noisy(B)] = SSE_true(B) + (|B| − 1)σ² (σ² the noise
    variance, 2e^{−ε}/(1 − e^{−ε})² for discrete Laplace). Xu et al. pick k minimising the
    estimated error Σ_B [SSE_noisy(B) − (|B| − 2)σ²] = SSE_k − nσ² + 2kσ² over the optimal
    k-bucket histograms; minimising over k and the partition jointly is the penalised problem
    with penalty 2σ² per bucket, solved exactly by :func:`penalized_partition` (O(n²) worst
    case, near-linear with pruning). The output is each bucket's noisy mean.

    Scale switch (:mod:`dpkit.release.ranges.switch`; options ``switch``, ``scale``,
    ``scale_fraction``): with N̂·ε'/n ≥ ``switch`` (default :data:`SWITCH_NOISE_FIRST`,
    0.0024) plain Identity runs at ε' instead. Not robust (registered ``robust=False``):
    switch off, the merge lost to Identity by 1.6–2.7× at every measured signal (0.024–2,441,
    DPBench 1-D shapes; the bias of merging cells whose true counts differ); below the
    threshold it may still lose. ``method="auto"`` never picks it.
    """
    noisy = frontend.noisy(x, 1, epsilon).value.astype(np.float64)
    sigma2 = _discrete_laplace_variance(1 / epsilon)
    edges = penalized_partition(noisy, 2 * sigma2)
    return spread(bucket_totals(noisy, edges), edges)


# ----------------------------------------------------------------------------- StructureFirst

def sse_scores(x: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Integer bucket costs ⌊G·SSE([cuts[a], cuts[b]))⌋ for all a < b (G = SCORE_GRID),
    as an int64 matrix (entries with a ≥ b are 0). SSE·m = m·Σx² − (Σx)² exactly."""
    c1 = np.concatenate([[0], np.cumsum(x, dtype=np.int64)])[cuts]
    c2 = np.concatenate([[0], np.cumsum(x * x, dtype=np.int64)])[cuts]
    m = cuts[None, :] - cuts[:, None]
    s = c1[None, :] - c1[:, None]
    q = c2[None, :] - c2[:, None]
    upper = m > 0
    num = np.where(upper, m * q - s * s, 0)
    return np.where(upper, (SCORE_GRID * num) // np.where(upper, m, 1), 0)


def sse_tables(x: np.ndarray, cuts: np.ndarray, levels: int
               ) -> tuple[np.ndarray, list[np.ndarray]]:
    """The integer costs C = :func:`sse_scores` and E_t(b) = min over partitions of
    [cuts[0], cuts[b]) into t buckets (at the cut positions) of Σ C, for t = 1 … levels
    (E_t(b) = 2^62 when b < t). Exact dynamic programming in int64, O(levels·|cuts|²)."""
    cost = sse_scores(x, cuts)
    size = cuts.size
    big = np.int64(_INT_LIMIT)
    order = np.arange(size)
    table = [np.where(order > 0, cost[0], big)]  # E_1(b) = C(0, b)
    for _ in range(2, levels + 1):
        prev = table[-1]
        valid = (order[:, None] < order[None, :]) & (prev[:, None] < big)
        table.append(np.where(valid, prev[:, None] + cost, big).min(axis=0))
    return cost, table


def _structure_first_options(buckets: int = 32, bound: int = 100,
                             ratio: Fraction | float = Fraction(1, 2), grid: int = 512
                             ) -> tuple[int, int, Fraction, int]:
    return (_positive_int(buckets, "buckets"), _positive_int(bound, "bound"),
            _ratio(ratio), _positive_int(grid, "grid", 2))


def _structure_first_scores_fit(shape: tuple[int, ...], bound: int = 100, **_: object) -> None:
    """Refuse n²·bound² beyond exact int64 scores (public: the size and the option), on
    either branch of the switch and before any noise."""
    n, f = int(np.prod(shape)), _positive_int(bound, "bound")
    if SCORE_GRID * n * n * f * f >= _INT_LIMIT:  # bounds G·m·SSE·m and every DP sum
        raise DomainError("structure_first: n²·bound² too large for exact integer scores; "
                          "lower bound")


@scale_switched(SWITCH, _structure_first_options, check_shape=_structure_first_scores_fit)
def structure_first(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
                    buckets: int = 32, bound: int = 100, ratio: Fraction | float =
                    Fraction(1, 2), grid: int = 512) -> np.ndarray:
    """StructureFirst: k bucket boundaries drawn one by one by the exponential mechanism on
    the optimal SSE, then noisy bucket totals (Xu, Zhang, Xiao, Yang, Yu & Winslett,
    ICDE 2012 / VLDBJ 2013, §5 StructureFirst). ε-DP. On held-out real data (bench/floor.py:
    MovieLens ratings per item, ε ∈ {0.1, 1}) its range error was 1.2–1.25× Identity's (two
    runs); prefer DAWA or HDMM ("mm") when the histogram is not piecewise flat.

    Parameters
    ----------
    buckets : int
        k, the number of buckets (default 32; capped by the candidate cut positions).
    bound : int
        F ≥ 1: for the structure scores only, counts are clamped to [0, F] (the paper's
        bound on counts); the totals measured in stage 2 are not clamped. Default 100.
    ratio : number in (0, 1)
        ε₁ = ratio·ε for the k − 1 boundaries, ε₂ = ε − ε₁ for the totals (default 1/2).
    grid : int
        Cuts are placed at multiples of ⌈n/grid⌉ (default 512); for n ≤ grid every
        position is a candidate, as in the paper. This keeps the O(k·grid²) dynamic program
        fast at large n.

    Notes
    -----
    Privacy. With x̃ = min(x, F), a record changes one clamped cell by 1 within [0, F]
    (x̃_j → x̃_j + 1 ≤ F), and SSE(B) = Σx̃² − S²/m by 2(x̃_j − S/m) + 1 − 1/m, of absolute
    value ≤ (2F − 1)(1 − 1/m) < 2F − 1. The score of cut a given the next cut j is
    −(E_{t−1}(a) + SSE(a, j)), E_t(a) the least total SSE of t buckets on [0, a): every
    partition puts the record's cell in one bucket, so each partition's sum and hence the
    minimum moves by < 2F − 1; with integer costs ⌊G·SSE⌋ (module notes) the scores have
    sensitivity Δ = G(2F − 1). The cuts are drawn right to left, each by the exponential
    mechanism at ε₁/(k − 1) (scale 2Δ(k − 1)/ε₁); the k totals (sensitivity 1, discrete
    Laplace 1/ε₂) follow. Adaptive sequential composition: ε₁ + ε₂ = ε.

    Scale switch (default on, :mod:`dpkit.release.ranges.switch`; options ``switch``, ``scale``,
    ``scale_fraction``): with N̂·ε'/n ≥ ``switch`` (default :data:`SWITCH`, 0.024) Identity
    runs instead — k buckets cannot follow a detailed shape once the noise is small (switch
    off it lost to Identity from signal 0.24 on, up to 10⁴×).
    """
    k, f, r, g = _structure_first_options(buckets, bound, ratio, grid)
    n = x.size
    step = -(-n // g)
    cuts = np.unique(np.concatenate([np.arange(0, n, step), [n]])).astype(np.int64)
    positions = cuts.size - 1  # number of elementary segments
    k = min(k, positions)
    clamped = np.minimum(x, f)  # n²·bound² checked by the decorator, before any noise
    eps1 = r * epsilon
    eps2 = epsilon - eps1
    chosen = [positions]
    if k > 1:
        cost, table = sse_tables(clamped, cuts, k - 1)
        sensitivity = Fraction(SCORE_GRID * (2 * f - 1))
        eps_step = eps1 / (k - 1)
        j = positions
        for t in range(k, 1, -1):  # choose the cut before the t-th bucket
            cand = np.arange(t - 1, j)  # t − 1 buckets must fit on [0, a)
            scores = -(table[t - 2][cand] + cost[cand, j])
            pick = frontend.select([scores], sensitivity, eps_step, mechanism="exponential_many")
            j = int(cand[pick.value[0]])
            chosen.append(j)
    chosen.append(0)
    edges = cuts[np.array(sorted(set(chosen)), dtype=np.int64)]
    noisy = frontend.noisy(bucket_totals(x, edges), 1, eps2).value.astype(np.float64)
    return spread(noisy, edges)


# ----------------------------------------------------------------------------- P-HP

def sae_prefix(rows: np.ndarray, lengths: np.ndarray, chunk: int = 1 << 21) -> np.ndarray:
    """N[v, c] = Σ_{i<c} |c·x_{v,i} − S_{v,c}| = c·SAE(first c cells of row v), S the prefix
    sum, for c = 1 … lengths[v] (int64; N[v, 0] = 0, entries past the length 0). ``rows`` is
    (g, P) zero-padded. O(g·P²) work, in chunks."""
    return _sae_at(rows, np.arange(rows.shape[1] + 1), lengths, chunk)


def _sae_at(rows: np.ndarray, cs: np.ndarray, lengths: np.ndarray, chunk: int = 1 << 21
            ) -> np.ndarray:
    """N[v, t] = Σ_{i<c} |c·x_{v,i} − S_{v,c}| for c = cs[t] (0 where c > lengths[v])."""
    g, p = rows.shape
    csum = np.concatenate([np.zeros((g, 1), dtype=np.int64), np.cumsum(rows, axis=1)], axis=1)
    out = np.zeros((g, cs.size), dtype=np.int64)
    step = max(1, chunk // max(1, g * p))
    idx = np.arange(p)
    for t0 in range(0, cs.size, step):
        c = cs[t0: t0 + step]
        w = int(c.max())  # only the first max(c) cells can count
        dev = np.abs(c[None, :, None] * rows[:, None, :w] - csum[:, c, None])
        out[:, t0: t0 + step] = np.where(idx[None, None, :w] < c[None, :, None], dev, 0
                                         ).sum(axis=2)
    out[cs[None, :] > lengths[:, None]] = 0
    return out


def _floor_cost(numer: np.ndarray, m: np.ndarray) -> np.ndarray:
    """⌊G·numer/m⌋ (0 where m = 0)."""
    return np.where(m > 0, (SCORE_GRID * numer) // np.maximum(m, 1), 0)


def _cut_candidates(length: int, max_cuts: int) -> np.ndarray:
    """The cut offsets considered in an interval of this length: every c in 1 … L − 1 when
    L − 1 ≤ max_cuts, else the multiples of ⌈(L − 1)/max_cuts⌉ (data-independent)."""
    step = max(1, -(-(length - 1) // max_cuts))
    return np.arange(step, length, step, dtype=np.int64)


def _split_scores(x: np.ndarray, intervals: list[tuple[int, int]], penalty: int,
                  max_cuts: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each interval [lo, hi): (scores, cuts). Score 0 is "keep as one bucket",
    −(⌊G·SAE(B)⌋ + penalty); score t ≥ 1 the cut at lo + cuts[t − 1] into L, R,
    −(⌊G·SAE(L)⌋ + ⌊G·SAE(R)⌋ + 2·penalty). Intervals of the same padded length are
    computed together."""
    out: list[tuple[np.ndarray, np.ndarray]] = [None] * len(intervals)  # type: ignore
    groups: dict[int, list[int]] = {}
    for i, (lo, hi) in enumerate(intervals):
        length = hi - lo
        pad = 1 << max(0, (length - 1).bit_length()) if length <= 64 else length
        groups.setdefault(pad, []).append(i)
    for pad, members in groups.items():
        lengths = np.array([intervals[i][1] - intervals[i][0] for i in members])
        rows = np.zeros((2 * len(members), pad), dtype=np.int64)
        for r, i in enumerate(members):
            lo, hi = intervals[i]
            rows[r, : hi - lo] = x[lo:hi]
            rows[len(members) + r, : hi - lo] = x[lo:hi][::-1]
        both = np.concatenate([lengths, lengths])
        # prefix lengths needed: the cuts c, the suffix lengths L − c, and L itself
        if pad <= 64:
            cs = np.arange(pad + 1)
            n_at = _sae_at(rows, cs, both)
            table = _floor_cost(n_at, cs[None, :])
            for r, i in enumerate(members):
                length = int(lengths[r])
                cuts = _cut_candidates(length, max_cuts)
                scores = np.concatenate([[-(table[r, length] + penalty)],
                                         -(table[r, cuts] + table[len(members) + r,
                                                                  length - cuts] + 2 * penalty)])
                out[i] = (scores.astype(np.int64), cuts)
        else:
            for r, i in enumerate(members):
                length = int(lengths[r])
                cuts = _cut_candidates(length, max_cuts)
                cs = np.unique(np.concatenate([cuts, length - cuts, [length]]))
                pair = rows[[r, len(members) + r]]
                n_at = _sae_at(pair, cs, np.array([length, length]))
                table = _floor_cost(n_at, cs[None, :])
                left = table[0, np.searchsorted(cs, cuts)]
                right = table[1, np.searchsorted(cs, length - cuts)]
                scores = np.concatenate([[-(table[0, -1] + penalty)],
                                         -(left + right + 2 * penalty)])
                out[i] = (scores.astype(np.int64), cuts)
    return out


def _phpartition_options(ratio: Fraction | float = Fraction(1, 2), depth: int | None = None,
                         max_cuts: int = 128) -> tuple[Fraction, int | None, int]:
    return (_ratio(ratio), None if depth is None else _positive_int(depth, "depth"),
            _positive_int(max_cuts, "max_cuts"))


@scale_switched(SWITCH_PHPARTITION, _phpartition_options)
def phpartition(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
                ratio: Fraction | float = Fraction(1, 2), depth: int | None = None,
                max_cuts: int = 128) -> np.ndarray:
    """P-HPartition: recursive binary splits chosen by the exponential mechanism on the
    partition's absolute error, then noisy partition counts (Ács, Castelluccia & Chen,
    ICDM 2012, §V "P-HPartition"). ε-DP. On held-out real data (bench/floor.py: MovieLens
    ratings per item, ε = 1) its range error was 1.1–1.4× Identity's (two runs); prefer DAWA or
    HDMM ("mm").

    Parameters
    ----------
    ratio : number in (0, 1)
        ε₁ = ratio·ε for the splits, ε₂ = ε − ε₁ for the counts (default 1/2).
    depth : int, optional
        Maximum recursion depth D (default ⌈log₂ n⌉).
    max_cuts : int
        Cut candidates per interval (default 128): every position in intervals of up to
        max_cuts + 1 cells, evenly spaced ones (stride ⌈(L − 1)/max_cuts⌉) in longer
        ones — a data-independent restriction for speed.

    Notes
    -----
    Quality. An interval B is either kept (score −(SAE(B) + 1/ε₂)) or cut at c into L, R
    (score −(SAE(L) + SAE(R) + 2/ε₂)), SAE(B) = Σ_{i∈B}|x_i − x̄_B| the error of spreading B's
    total uniformly and 1/ε₂ the expected absolute Laplace error of one more count. One
    exponential-mechanism draw per interval at each depth picks among keep and the cuts;
    kept intervals and single cells stop.

    Privacy. A record changes one cell and so one of L, R (or B), whose SAE moves by
    ≤ 2(1 − 1/m) < 2 (see :func:`dawa`); with integer costs ⌊G·SAE⌋ and the penalty an
    integer constant ⌈G/ε₂⌉, every score moves by at most Δ = 2G. The intervals at one
    depth are disjoint, so their draws at ε₁/D each cost ε₁/D in total (parallel
    composition); D depths cost ε₁. The final buckets' totals (sensitivity 1) get discrete
    Laplace noise of scale 1/ε₂. Adaptive sequential composition: ε₁ + ε₂ = ε.

    Any magnitude: cells are clamped to :func:`phpartition_cap` (n) first (declared, from
    the size; a record still moves one clamped cell by at most 1), so the integer scores
    stay exact in int64 and nothing raises after the debit.

    This follows the paper's recursive-bisection outline; the explicit "keep" candidate
    and the 1/ε₂ penalty (as in DAWA's cost) are this implementation's stopping rule.

    Scale switch (default on, :mod:`dpkit.release.ranges.switch`; options ``switch``, ``scale``,
    ``scale_fraction``): with N̂·ε'/n ≥ ``switch`` (default :data:`SWITCH_PHPARTITION`,
    0.0024) Identity runs instead — D greedy bisections cannot isolate many spikes.

    Not robust (registered ``robust=False``): switch off, it lost to Identity by 1.5–1.6× even
    at the smallest measured signal (0.024, DPBench 1-D shapes); below the threshold it may
    still lose. ``method="auto"`` never picks it.
    """
    r, depth, k = _phpartition_options(ratio, depth, max_cuts)
    n = x.size
    d = max(1, (n - 1).bit_length()) if depth is None else depth
    x = np.minimum(x, phpartition_cap(n))  # declared clamp (from n): exact int64 scores
    eps1 = r * epsilon
    eps2 = epsilon - eps1
    eps_level = eps1 / d
    penalty = math.ceil(SCORE_GRID / eps2)
    sensitivity = Fraction(2 * SCORE_GRID)
    active = [(0, n)] if n > 1 else []
    final = [] if n > 1 else [(0, n)]
    for _ in range(d):
        if not active:
            break
        scored = _split_scores(x, active, penalty, k)
        picks = frontend.select([sc for sc, _ in scored], sensitivity, eps_level,
                                mechanism="exponential_many").value
        nxt: list[tuple[int, int]] = []
        for (lo, hi), (_, cuts), t in zip(active, scored, picks, strict=True):
            if t == 0:
                final.append((lo, hi))
                continue
            c = lo + int(cuts[t - 1])
            for part in ((lo, c), (c, hi)):
                (nxt if part[1] - part[0] > 1 else final).append(part)
        active = nxt
    final.extend(active)
    edges = np.array(sorted({0, n, *(lo for lo, _ in final)}), dtype=np.int64)
    noisy = frontend.noisy(bucket_totals(x, edges), 1, eps2).value.astype(np.float64)
    return spread(noisy, edges)
