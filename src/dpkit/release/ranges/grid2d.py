"""Two-dimensional histograms: quadtree, uniform and adaptive grids, k-d tree (DPCube).

All four partition the n1 × n2 cells into rectangles (or a hierarchy of them), measure the
rectangles' counts with discrete Laplace noise through :mod:`dpkit.release.measure` and
post-process. The privacy arguments share one fact: **the counts of disjoint cell groups
form a vector of L1 sensitivity 1** (a record is in exactly one group), so discrete Laplace
of scale 1/ε_i on such a vector is ε_i-DP, and a sequence of such measurements, each
possibly chosen from the previous noisy outputs, is (Σ ε_i)-DP by adaptive sequential
composition (Dwork & Roth Thm 3.16 / McSherry 2009). Every ε_i is a Fraction rounded *down*
so that the sampler's scale 1/ε_i is exactly representable (:func:`_budget`), so Σ ε_i ≤ ε
holds exactly. Choices made from noisy outputs (grid sizes, split points) and all
inference are post-processing.

Algorithms (registered for ``dims=(2,)``):

- ``quadtree`` — Cormode, Procopiuc, Srivastava, Shen & Yu, ICDE 2012;
- ``ug`` — uniform grid (UG), Qardaji, Yang & Li, ICDE 2013;
- ``ag`` — adaptive grid (AG), same paper;
- ``kdtree`` — DPCube, Xiao, Xiong, Fan & Goryczka (TDP 2014) / Xiao, Xiong & Yuan (SDM 2010).

UG and AG choose their grid from the number of records N. DPBench (Hay et al. SIGMOD 2016)
treats N as public; here N is either passed as the ``scale`` option (declared public, spends
nothing) or estimated with a fraction ``scale_fraction`` (default 1/20) of ε by a noisy total
(sensitivity 1).

Any magnitude: every algorithm here first clamps each cell to :func:`float_cap` (cells), so the
total stays below 2^53 and every float64 group sum is exact. The cap comes from the declared
shape alone (2^37 per cell at 256 × 256); a record still moves one clamped cell by at most 1,
so the neighbours and every guarantee are unchanged, and nothing after the debit reads the
total to refuse it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpkit.core.numbers import Number, fraction_down
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.measure import check_counts
from dpkit.release.ranges.switch import (
    clamp_cells,
    exact_budget,
    noisy_scale,
    per_cell_cap,
    scale_switched,
    switch_options,
    use_identity,
)
from dpkit.release.workload import RangeWorkload

__all__ = ["FLOAT_EXACT", "float_cap",
           "quadtree", "ug", "ag", "kdtree", "quadtree_levels", "quadtree_budgets",
           "quadtree_inference", "grid_edges", "grid_labels", "group_sums", "spread",
           "ag_labels", "ag_split_sizes", "ag_inference", "kd_partition", "kd_inference",
           "discrete_laplace_variance", "quadtree_options", "grid_options"]


# Signal thresholds N̂·ε/cells at and above which Identity runs instead
# (dpkit.release.ranges.switch): a decade below the smallest signal at which the algorithm
# (switch off) lost to Identity by more than 1.1× on any of the 5 DPBench 2-D shapes and 3
# synthetic ones (scales 10^3–10^7, ε ∈ {0.1, 1}, 3 trials; the measured signals are a decade
# apart). Checked by leaving each dataset out (bench/auto_rule.py, bench/results/auto.md):
# the held-out dataset never lost by more than 1.0× below its threshold. UG's and the k-d
# tree's fixed-rule structures lose from signal 0.015 on; AG from 153.
SWITCH = {"ug": 0.0015, "kdtree": 0.0015, "ag": 15.0}


# ----------------------------------------------------------------------------- shared pieces

def discrete_laplace_variance(epsilon: Number) -> float:
    """Variance 2p/(1 − p)², p = e^{−ε}, of discrete Laplace noise of scale 1/ε
    (sensitivity-1 counts measured at ε); ≈ 2/ε² for small ε."""
    p = math.exp(-float(epsilon))
    return 2 * p / (1 - p) ** 2


def _fraction(value: Number, name: str, low: Fraction, high: Fraction) -> Fraction:
    try:
        f = fraction_down(value)
    except (TypeError, ValueError, DomainError) as err:
        raise DomainError(f"{name} must be a number; got {value!r}") from err
    if not low < f < high:
        raise DomainError(f"{name} must be in ({low}, {high}); got {value!r}")
    return f


def _int_option(value: object, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise DomainError(f"{name} must be an integer; got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"≥ {low}" if high is None else f"in [{low}, {high}]"
        raise DomainError(f"{name} must be {bound}; got {value!r}")
    return int(value)


def _positive_float(value: object, name: str) -> float:
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as err:
        raise DomainError(f"{name} must be a positive number; got {value!r}") from err
    if not (f > 0 and math.isfinite(f)):
        raise DomainError(f"{name} must be a positive number; got {value!r}")
    return f


FLOAT_EXACT = 1 << 53  # float64 sums of integers are exact below this


def float_cap(cells: int) -> int:
    """⌊(2^53 − 1)/cells⌋: cells clamped to it total below 2^53, so every float64 group sum
    is exact. A declared bound (from the shape alone; 2^37 per cell at 256 × 256)."""
    return per_cell_cap(cells, FLOAT_EXACT)


def _check(x: np.ndarray) -> np.ndarray:
    """The counts, each clamped to :func:`float_cap` (size): any magnitude is accepted after
    the debit; a record still moves one clamped cell by at most 1 (same neighbours)."""
    x = check_counts(x, (2,))
    return clamp_cells(x, FLOAT_EXACT)


def grid_edges(n: int, m: int) -> np.ndarray:
    """Boundaries of ``m`` contiguous pieces of ``n`` cells, sizes ⌊n/m⌋ or ⌈n/m⌉ (an uneven
    split: edges[k] = ⌊k·n/m⌋); ``m`` is clipped to [1, n]."""
    m = max(1, min(int(m), n))
    return (np.arange(m + 1, dtype=np.int64) * n) // m


def grid_labels(shape: tuple[int, int], row_edges: np.ndarray, col_edges: np.ndarray
                ) -> np.ndarray:
    """Group id of every cell for the grid with these edges (row-major over grid cells)."""
    rows = np.searchsorted(row_edges, np.arange(shape[0]), side="right") - 1
    cols = np.searchsorted(col_edges, np.arange(shape[1]), side="right") - 1
    return rows[:, None] * (len(col_edges) - 1) + cols[None, :]


def group_sums(x: np.ndarray, labels: np.ndarray, groups: int) -> np.ndarray:
    """Σ of ``x`` over the cells of each group (exact int64 for integer ``x`` < 2^53 in
    total; float64 otherwise)."""
    sums = np.bincount(labels.ravel(), weights=np.asarray(x, dtype=np.float64).ravel(),
                       minlength=groups)
    return np.rint(sums).astype(np.int64) if np.asarray(x).dtype.kind in "iub" else sums


def spread(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each group's value spread evenly over its cells (totals are preserved)."""
    areas = np.bincount(labels.ravel(), minlength=values.size).astype(np.float64)
    per_cell = np.divide(values, areas, out=np.zeros(values.size), where=areas > 0)
    return per_cell[labels]


# ----------------------------------------------------------------------------------- quadtree

def quadtree_levels(x: np.ndarray, height: int) -> tuple[list[np.ndarray], int]:
    """Node counts per level of a full quadtree over ``x`` padded with zeros to 2^H × 2^H,
    H = ⌈log₂ max(n1, n2)⌉, cut ``height`` levels below the root: leaves first (blocks of
    2^(H−height) × 2^(H−height) cells), root last. Returns (levels, block side)."""
    big = max(int(math.ceil(math.log2(max(x.shape)))), 0) if max(x.shape) > 1 else 0
    side = 1 << big
    block = 1 << (big - height)
    padded = np.zeros((side, side), dtype=np.int64)
    padded[: x.shape[0], : x.shape[1]] = x
    m = side // block
    level = padded.reshape(m, block, m, block).sum(axis=(1, 3))
    levels = [level]
    while level.shape[0] > 1:
        k = level.shape[0] // 2
        level = level.reshape(k, 2, k, 2).sum(axis=(1, 3))
        levels.append(level)
    return levels, block


def _check_budget(budget: object) -> str:
    if budget not in ("geometric", "uniform"):
        raise DomainError(f"budget must be 'geometric' or 'uniform'; got {budget!r}")
    return str(budget)


def quadtree_options(shape: tuple[int, ...], height: object = None,
                     budget: object = "geometric") -> int:
    """The quadtree's height h after checking ``height`` (an integer in [0, H], H the
    default: ⌈log₂ max(n1, n2)⌉) and ``budget``, from the shape alone (no data, no noise).

    Raises
    ------
    DomainError
        A bad ``height`` or ``budget``."""
    _check_budget(budget)
    big = max(int(math.ceil(math.log2(max(shape)))), 0) if max(shape) > 1 else 0
    return big if height is None else _int_option(height, "height", 0, big)


def quadtree_budgets(epsilon: Fraction, levels: int, budget: str = "geometric"
                     ) -> list[Fraction]:
    """Per-level ε, leaves first. Geometric (Cormode et al. 2012's geometric budget):
    ε_i ∝ 2^{(h−i)/3} for the level at height i above the leaves (leaves, i = 0, get the
    most), h = levels − 1; uniform: ε/levels each. The ratios 2^{k/3} are rationalised
    (denominators ≤ 10⁴), the split is exact (Σ = ε) and each part is then rounded down by
    :func:`_budget`."""
    if _check_budget(budget) == "geometric":
        weights = [Fraction(2 ** ((levels - 1 - i) / 3)).limit_denominator(10_000)
                   for i in range(levels)]
    else:
        weights = [Fraction(1)] * levels
    total = sum(weights, Fraction(0))
    return [exact_budget(epsilon * w / total) for w in weights]


def quadtree_inference(noisy: list[np.ndarray], variances: list[float]) -> np.ndarray:
    """Ordinary (generalised) least squares for a quadtree whose level i (leaves first) is
    measured with noise variance ``variances[i]`` — Cormode et al.'s OLS post-processing
    (weighted averaging bottom-up, mean consistency top-down — §3.3 per DPBench's
    implementation notes), i.e. Hay et al. 2010
    Thm 3 generalised to unequal per-level variances. O(#nodes).

    Bottom-up: z = y at the leaves with V_0 = σ_0²; a node at height i combines its own
    y (variance σ_i²) with the sum s of its 4 children's z (variance 4·V_{i−1}) by inverse
    variance, z = (y/σ_i² + s/(4V_{i−1})) / (1/σ_i² + 1/(4V_{i−1})), V_i = that
    denominator⁻¹. Top-down: x̂_root = z_root; each child u of v gets
    x̂_u = z_u + (x̂_v − Σ_siblings z)/4 (the siblings' z have equal variance). This is the
    minimiser of Σ_i Σ_{v at level i} (y_v − x̂_v)²/σ_i² over consistent trees (checked
    against dense weighted least squares in the tests). Returns the leaf estimates."""
    z = [np.asarray(noisy[0], dtype=np.float64)]
    v = variances[0]
    for y, var in zip(noisy[1:], variances[1:], strict=True):
        k = z[-1].shape[0] // 2
        s = z[-1].reshape(k, 2, k, 2).sum(axis=(1, 3))
        vs = 4 * v
        z.append((np.asarray(y, dtype=np.float64) / var + s / vs) / (1 / var + 1 / vs))
        v = 1 / (1 / var + 1 / vs)
    est = z[-1]
    for zl in reversed(z[:-1]):
        k = zl.shape[0] // 2
        gap = (est - zl.reshape(k, 2, k, 2).sum(axis=(1, 3))) / 4
        est = zl + np.repeat(np.repeat(gap, 2, axis=0), 2, axis=1)
    return est


def quadtree(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
             height: int | None = None, budget: str = "geometric") -> np.ndarray:
    """Quadtree with geometric budget and OLS inference (Cormode, Procopiuc, Srivastava,
    Shen & Yu, "Differentially private spatial decompositions", ICDE 2012). ε-DP. On held-out
    real data (bench/floor.py: bike rentals by temperature × humidity and MovieLens rater age ×
    release year, ε = 1) its rectangle error was 1.3× Identity's; prefer HDMM ("mm").

    The cells are padded with structural zeros to 2^H × 2^H, H = ⌈log₂ max(n1, n2)⌉, and
    covered by a full quadtree cut ``height`` levels below the root (default H: leaves are
    single cells, 9 levels for 256×256 — DPBench's QuadTree, ``height = ⌈log₂ √(n1·n2)⌉``
    for square domains). Level i (height above the leaves, i = 0 … h) is measured with
    discrete Laplace of scale 1/ε_i, ε_i = 2^{(h−i)/3}·ε·(2^{1/3} − 1)/(2^{(h+1)/3} − 1)
    (Cormode et al.'s geometric budget; ``budget="uniform"`` gives ε/(h+1)), then
    :func:`quadtree_inference` (their OLS post-processing) and each leaf's estimate
    is spread evenly over its real (unpadded) cells.

    Privacy: the nodes of one level are disjoint, so each level's count vector has L1
    sensitivity 1 and its measurement is ε_i-DP; the h + 1 levels compose sequentially:
    Σ_i ε_i ≤ ε (each ε_i rationalised and rounded down). Data-independent.

    Simplifications: the 2^{k/3} ratios are rationalised to denominators ≤ 10⁴ (the split
    stays exact); non-square or non-power-of-two domains are padded to a square (the
    padding is treated as unknown by the inference, as in DPBench, and gets no mass in the
    output).
    """
    x = _check(x)
    h = quadtree_options(x.shape, height, budget)
    levels, block = quadtree_levels(x, h)
    eps = quadtree_budgets(epsilon, len(levels), budget)
    noisy = [frontend.noisy(lv, 1, e).value for lv, e in zip(levels, eps, strict=True)]
    leaves = quadtree_inference(noisy, [discrete_laplace_variance(e) for e in eps])
    labels = grid_labels(x.shape, np.arange(0, leaves.shape[0] * block + 1, block),
                         np.arange(0, leaves.shape[1] * block + 1, block))
    return spread(leaves.ravel(), labels)


# ------------------------------------------------------------------------------ uniform grid

def grid_options(shape: tuple[int, ...], c: object = 10, alpha: Number = Fraction(1, 2),
                 **switch: object) -> tuple[float, Fraction]:
    """(c, α): UG's and AG's ``c`` (a positive number) and AG's ``alpha`` (in (0, 1)),
    after checking them and the scale switch's options (:func:`~dpkit.release.ranges.switch.
    switch_options`): no data, no noise.

    Raises
    ------
    DomainError
        A bad ``c``, ``alpha``, ``switch``, ``scale`` or ``scale_fraction``."""
    switch_options(**switch)
    return _positive_float(c, "c"), _fraction(alpha, "alpha", Fraction(0), Fraction(1))


def ug(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
       c: float = 10, scale: int | None = None, scale_fraction: Number = Fraction(1, 20),
       switch: Number | None = SWITCH["ug"]) -> np.ndarray:
    """Uniform grid (UG; Qardaji, Yang & Li, "Differentially private grids for geospatial
    data", ICDE 2013, with their grid-size guideline m = √(Nε/c)): an m × m grid,
    m = ⌈√(N·ε'/c)⌉, c = 10, discrete Laplace of scale 1/ε' on every grid cell's count,
    spread evenly inside the grid cell. ε-DP. On held-out real data (bench/floor.py: bike
    rentals by temperature × humidity, ε ∈ {0.1, 1}) its rectangle error was up to 1.1×
    Identity's; prefer HDMM ("mm") there.

    The grid splits each axis into m contiguous pieces of ⌊n/m⌋ or ⌈n/m⌉ cells (an uneven
    split, :func:`grid_edges`; m is capped at the axis length), so every piece is a union of
    whole cells. N: the ``scale`` option if the record count is public (spends nothing,
    ε' = ε), else N̂ = max(0, N + Lap(1/ε₀)) with ε₀ = ``scale_fraction``·ε and ε' = ε − ε₀.

    Privacy: ε₀ for the noisy total (sensitivity 1), then ε' for the grid counts (disjoint
    cells: sensitivity 1) chosen from N̂ only; sequential composition ε₀ + ε' ≤ ε. The
    spreading is post-processing. With N̂·ε'/cells ≥ ``switch`` the cells are released by
    Identity at ε' instead (:mod:`dpkit.release.ranges.switch`; None: never).
    """
    x = _check(x)
    c, _ = grid_options(x.shape, c, switch=switch, scale=scale, scale_fraction=scale_fraction)
    n_hat, eps = noisy_scale(x, epsilon, scale, scale_fraction)
    if use_identity(n_hat, eps, x.size, switch):
        return frontend.noisy(x, 1, eps).value.astype(np.float64)
    m = max(1, math.ceil(math.sqrt(n_hat * float(eps) / c)))
    labels = grid_labels(x.shape, grid_edges(x.shape[0], m), grid_edges(x.shape[1], m))
    groups = int(labels.max()) + 1
    noisy = frontend.noisy(group_sums(x, labels, groups), 1, eps).value
    return spread(noisy.astype(np.float64), labels)


# ----------------------------------------------------------------------------- adaptive grid

def ag_split_sizes(noisy1: np.ndarray, epsilon2: Fraction, c2: float) -> np.ndarray:
    """AG's second-level grid size per first-level cell, m2 = ⌈√(max(N', 0)·ε₂/c₂)⌉ ≥ 1
    (Qardaji et al. 2013, AG) — a function of the noisy counts N' only."""
    n = np.maximum(np.asarray(noisy1, dtype=np.float64), 0.0)
    return np.maximum(np.ceil(np.sqrt(n * float(epsilon2) / c2)), 1).astype(np.int64)


def ag_labels(shape: tuple[int, int], row_edges: np.ndarray, col_edges: np.ndarray,
              m2: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Second-level group of every cell: first-level cell k (row-major) of h × w cells is
    split into min(m2_k, h) × min(m2_k, w) pieces by :func:`grid_edges`. Returns (labels,
    parent first-level cell of each group, number of groups). Vectorised, O(n1·n2)."""
    mr1, mc1 = len(row_edges) - 1, len(col_edges) - 1
    heights, widths = np.diff(row_edges), np.diff(col_edges)
    m2 = np.asarray(m2, dtype=np.int64).reshape(mr1, mc1)
    pr = np.minimum(m2, heights[:, None])
    pc = np.minimum(m2, widths[None, :])
    sizes = (pr * pc).ravel()
    offset = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rows = np.searchsorted(row_edges, np.arange(shape[0]), side="right") - 1
    cols = np.searchsorted(col_edges, np.arange(shape[1]), side="right") - 1
    k = rows[:, None] * mc1 + cols[None, :]
    pr_cell, pc_cell = pr.ravel()[k], pc.ravel()[k]
    sub_r = ((np.arange(shape[0]) - row_edges[rows])[:, None] * pr_cell) // heights[rows][
        :, None]
    sub_c = ((np.arange(shape[1]) - col_edges[cols])[None, :] * pc_cell) // widths[cols][
        None, :]
    labels = offset[k] + sub_r * pc_cell + sub_c
    parent = np.repeat(np.arange(sizes.size), sizes)
    return labels, parent, int(sizes.sum())


def ag_inference(noisy1: np.ndarray, var1: float, noisy2: np.ndarray, var2: float,
                 parent: np.ndarray) -> np.ndarray:
    """AG's constrained inference (Qardaji et al. 2013): for a first-level cell with
    noisy count v (variance σ₁²) and k children whose noisy sum s has variance k·σ₂², the
    inverse-variance combination v' = (v/σ₁² + s/(kσ₂²)) / (1/σ₁² + 1/(kσ₂²)) (for Laplace
    this is their α²m₂²/((1−α)² + α²m₂²) weight), then each child gets u + (v' − s)/k.
    Returns the adjusted second-level counts."""
    groups = noisy1.size
    k = np.bincount(parent, minlength=groups).astype(np.float64)
    s = np.bincount(parent, weights=np.asarray(noisy2, dtype=np.float64), minlength=groups)
    w1, w2 = 1 / var1, 1 / (k * var2)
    combined = (np.asarray(noisy1, dtype=np.float64) * w1 + s * w2) / (w1 + w2)
    return np.asarray(noisy2, dtype=np.float64) + ((combined - s) / k)[parent]


def ag(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
       c: float = 10, alpha: Number = Fraction(1, 2), scale: int | None = None,
       scale_fraction: Number = Fraction(1, 20), switch: Number | None = SWITCH["ag"]
       ) -> np.ndarray:
    """Adaptive grid (AG; Qardaji, Yang & Li, ICDE 2013). ε-DP. On held-out real data
    (bench/floor.py: MovieLens rater age × release year, 64×64, ε = 1; bike rentals by
    temperature × humidity) its rectangle error was up to 1.15× Identity's (two runs); prefer
    HDMM ("mm") there.

    Level 1: an m1 × m1 grid, m1 = max(10, ⌈⌈√(N·ε'/c)⌉/4⌉) (c = 10; capped at the axis
    lengths), discrete Laplace of scale 1/ε₁, ε₁ = α·ε' (α = 1/2). Level 2: each first-level
    cell with noisy count N' is split into m2 × m2 pieces, m2 = ⌈√(max(N', 0)·ε₂/c₂)⌉,
    c₂ = c/2, ε₂ = ε' − ε₁ (:func:`ag_split_sizes`; capped at the cell's sides), and all
    second-level counts get discrete Laplace of scale 1/ε₂ in one measurement. Then the
    paper's constrained inference between the levels (:func:`ag_inference`) and each
    second-level piece is spread evenly. Both grids use the uneven split of
    :func:`grid_edges`. N as for :func:`ug` (``scale`` public, or a noisy total at
    ``scale_fraction``·ε; then ε' = ε − ε₀).

    Privacy: ε₀ (total) + ε₁ (disjoint first-level cells, sensitivity 1) + ε₂ (disjoint
    second-level pieces, sensitivity 1; the pieces depend only on the level-1 noisy output)
    ≤ ε by adaptive sequential composition. Inference and spreading are post-processing.
    With N̂·ε'/cells ≥ ``switch`` the cells are released by Identity at ε' instead
    (:mod:`dpkit.release.ranges.switch`; None: never).
    """
    x = _check(x)
    c, a = grid_options(x.shape, c, alpha, switch=switch, scale=scale,
                        scale_fraction=scale_fraction)
    n_hat, eps = noisy_scale(x, epsilon, scale, scale_fraction)
    if use_identity(n_hat, eps, x.size, switch):
        return frontend.noisy(x, 1, eps).value.astype(np.float64)
    m1 = max(10, math.ceil(math.ceil(math.sqrt(n_hat * float(eps) / c)) / 4))
    eps1 = exact_budget(eps * a)
    eps2 = exact_budget(eps - eps1)
    rows, cols = grid_edges(x.shape[0], m1), grid_edges(x.shape[1], m1)
    labels1 = grid_labels(x.shape, rows, cols)
    groups1 = (len(rows) - 1) * (len(cols) - 1)
    noisy1 = frontend.noisy(group_sums(x, labels1, groups1), 1, eps1).value
    m2 = ag_split_sizes(noisy1, eps2, c / 2)
    labels2, parent, groups2 = ag_labels(x.shape, rows, cols, m2)
    noisy2 = frontend.noisy(group_sums(x, labels2, groups2), 1, eps2).value
    adjusted = ag_inference(noisy1, discrete_laplace_variance(eps1), noisy2,
                            discrete_laplace_variance(eps2), parent)
    return spread(adjusted, labels2)


# ----------------------------------------------------------------------------- k-d tree

def kd_partition(noisy: np.ndarray, var1: float, var2: float, max_depth: int
                 ) -> tuple[np.ndarray, int]:
    """A k-d tree partition of the cells computed from phase-1 noisy counts only.

    A rectangle is split at the median of its (clipped ≥ 0) noisy marginal mass along one
    axis (the geometric middle when that mass is 0) — DPCube's median k-d split, trying
    both axes and keeping the better — if the split lowers the estimated squared error of
    uniform spreading:
    B(P) + σ₂²/|P| > B(L) + σ₂²/|L| + B(R) + σ₂²/|R|, where
    B(P) = Σ_{c∈P}(ŷ_c − ȳ_P)² − (|P| − 1)σ₁² is the unbiased estimate of P's
    non-uniformity (Σ of squared deviations; the noise adds (|P|−1)σ₁² in expectation; not
    clipped at 0, which would bias the comparison against splitting) and σ₂²/|P| the
    per-partition noise spread over its cells. Equivalently: split iff the halves'
    between-group sum of squares |L||R|/|P|·(ȳ_L − ȳ_R)² exceeds its noise expectation σ₁²
    by more than σ₂²(1/|L| + 1/|R| − 1/|P|). Stops at single cells or depth ``max_depth``.
    Returns (labels, number of partitions). Post-processing of ``noisy``."""
    y = np.asarray(noisy, dtype=np.float64)
    n1, n2 = y.shape
    s = np.zeros((n1 + 1, n2 + 1))
    q = np.zeros((n1 + 1, n2 + 1))
    s[1:, 1:] = y.cumsum(0).cumsum(1)
    q[1:, 1:] = (y * y).cumsum(0).cumsum(1)

    def rect(t: np.ndarray, r0: int, r1: int, c0: int, c1: int) -> float:
        return float(t[r1, c1] - t[r0, c1] - t[r1, c0] + t[r0, c0])

    def cost(r0: int, r1: int, c0: int, c1: int) -> float:
        """B(P) + σ₂²/|P| (see above) for the rectangle."""
        area = (r1 - r0) * (c1 - c0)
        total = rect(s, r0, r1, c0, c1)
        sse = rect(q, r0, r1, c0, c1) - total * total / area
        return sse - (area - 1) * var1 + var2 / area

    def median_split(r0: int, r1: int, c0: int, c1: int, rows: bool
                     ) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
        if rows:  # the noisy mass of each row (column) of the rectangle, clipped at 0
            marg = s[r0 + 1: r1 + 1, c1] - s[r0 + 1: r1 + 1, c0] - s[r0: r1, c1] + s[
                r0: r1, c0]
        else:
            marg = s[r1, c0 + 1: c1 + 1] - s[r0, c0 + 1: c1 + 1] - s[r1, c0: c1] + s[
                r0, c0: c1]
        cum = np.cumsum(np.maximum(marg, 0.0))
        length = marg.size
        cut = int(np.searchsorted(cum, cum[-1] / 2)) + 1 if cum[-1] > 0 else length // 2
        cut = min(max(cut, 1), length - 1)
        if rows:
            return (r0, r0 + cut, c0, c1), (r0 + cut, r1, c0, c1)
        return (r0, r1, c0, c0 + cut), (r0, r1, c0 + cut, c1)

    labels = np.zeros((n1, n2), dtype=np.int64)
    parts = 0
    stack = [(0, n1, 0, n2, 0)]
    while stack:
        r0, r1, c0, c1, depth = stack.pop()
        if (r1 - r0) * (c1 - c0) > 1 and depth < max_depth:
            best = None
            for rows in (True, False):
                if (r1 - r0 if rows else c1 - c0) > 1:
                    left, right = median_split(r0, r1, c0, c1, rows)
                    split_cost = cost(*left) + cost(*right)
                    if best is None or split_cost < best[0]:
                        best = (split_cost, left, right)
            if best is not None and cost(r0, r1, c0, c1) > best[0]:
                stack.append((*best[2], depth + 1))
                stack.append((*best[1], depth + 1))
                continue
        labels[r0:r1, c0:c1] = parts
        parts += 1
    return labels, parts


def kd_inference(phase1: np.ndarray, var1: float, noisy2: np.ndarray, var2: float,
                 labels: np.ndarray) -> np.ndarray:
    """DPCube's combination of the two phases: each partition P's total is the
    inverse-variance combination T = (y₂/σ₂² + s₁/(|P|σ₁²)) / (1/σ₂² + 1/(|P|σ₁²)) of its
    phase-2 count y₂ and the sum s₁ of its phase-1 cell counts (the least-squares estimate of
    P's total from both phases). Returns the partition totals."""
    parts = noisy2.size
    s1 = group_sums(np.asarray(phase1, dtype=np.float64), labels, parts)
    areas = np.bincount(labels.ravel(), minlength=parts).astype(np.float64)
    w2, w1 = 1 / var2, 1 / (areas * var1)
    return (np.asarray(noisy2, dtype=np.float64) * w2 + s1 * w1) / (w1 + w2)


def _kdtree_options(rho: Number = Fraction(1, 2), max_depth: int | None = None
                    ) -> tuple[Fraction, int | None]:
    return (_fraction(rho, "rho", Fraction(0), Fraction(1)),
            None if max_depth is None else _int_option(max_depth, "max_depth", 0))


@scale_switched(SWITCH["kdtree"], _kdtree_options, dims=(2,))
def kdtree(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
           rho: Number = Fraction(1, 2), max_depth: int | None = None) -> np.ndarray:
    """k-d tree partitioning, DPCube (Xiao, Xiong, Fan & Goryczka, "DPCube: differentially
    private histogram release through multidimensional partitioning", TDP 2014; Xiao,
    Xiong & Yuan, SDM 2010 workshop). ε-DP. On held-out real data (bench/floor.py: bike rentals
    by temperature × humidity and MovieLens rater age × release year, ε = 1) its rectangle error
    was 1.1× Identity's; prefer HDMM ("mm").

    Phase 1: discrete Laplace of scale 1/ε₁ on every cell, ε₁ = ρ·ε (ρ = 1/2). Partitioning:
    :func:`kd_partition` on the phase-1 noisy counts (median splits while the estimated
    non-uniformity outweighs one more partition's noise; ``max_depth`` defaults to
    ⌈log₂ n1⌉ + ⌈log₂ n2⌉, deep enough to reach single cells). Phase 2: discrete Laplace of
    scale 1/ε₂, ε₂ = ε − ε₁, on the partition totals in one measurement. Inference (DPCube's
    combination of the two phases, :func:`kd_inference`): a partition P's total is the
    inverse-variance combination T = (y₂/σ₂² + s₁/(|P|σ₁²)) / (1/σ₂² + 1/(|P|σ₁²)) of its
    phase-2 count y₂ and the sum s₁ of its phase-1 cells, spread evenly over P.

    Privacy: the cells are disjoint (sensitivity 1): ε₁-DP; the partition is a function of
    the phase-1 output only (post-processing — free); the partition totals are disjoint
    (sensitivity 1): ε₂-DP; ε₁ + ε₂ ≤ ε by adaptive sequential composition.

    Simplification: the stopping rule is the cost comparison above (DPCube's criterion is a
    uniformity threshold; DPBench's DPCube picks the best split position on a UG phase 1
    instead of the median), and the phase-1 cells are not themselves kept in the output.

    Scale switch (default on, :mod:`dpkit.release.ranges.switch`): options ``switch``, ``scale``,
    ``scale_fraction``; with N̂·ε'/cells ≥ ``switch`` Identity runs instead.
    """
    x = _check(x)
    r, max_depth = _kdtree_options(rho, max_depth)
    default_depth = sum(max((n - 1).bit_length(), 0) for n in x.shape)
    depth = default_depth if max_depth is None else max_depth
    eps1 = exact_budget(epsilon * r)
    eps2 = exact_budget(epsilon - eps1)
    var1, var2 = discrete_laplace_variance(eps1), discrete_laplace_variance(eps2)
    phase1 = frontend.noisy(x, 1, eps1).value
    labels, parts = kd_partition(phase1, var1, var2, depth)
    noisy2 = frontend.noisy(group_sums(x, labels, parts), 1, eps2).value
    return spread(kd_inference(phase1, var1, noisy2, var2, labels), labels)
