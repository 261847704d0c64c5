"""The one calibrated-noise entry (issue 17): dpkit.mechanisms.make_noise / make_selection.

Every returned measurement meets its budget on its own exact privacy map, with a scale within
a hair of the closed form (2^-20 relative plus the grid allowance); the cache returns the same
object; broken calibrations (half the scale, the textbook Δ/ε that ignores the grid, a broken
closed form) are caught by the map check; the release paths draw their noise by calling the
measurement. Statistical tests state their false-positive rate."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit.core import rng
from dpkit.core.component import Measurement
from dpkit.core.measures import ZCDP, ApproxDP, PureDP, largest_rho, zcdp_to_epsilon
from dpkit.core.samplers import GRID_BITS
from dpkit.errors import DomainError, InsecureRandomnessError, MeasureError
from dpkit.mechanisms import (
    CalibratedNoise,
    make_exponential,
    make_gaussian,
    make_laplace,
    make_noise,
    make_selection,
    make_vector_laplace,
)
from dpkit.mechanisms import calibrated as C  # noqa: N812

TIGHT = 1 + Fraction(1, 1 << 20)
SENSITIVITIES = [Fraction(1), Fraction(3, 7), Fraction(365, 10), Fraction(2**20 + 1, 3),
                 Fraction(1) - Fraction(1, 1 << 22)]  # the last sits just below a power of 2
EPSILONS = [Fraction(1, 1000), Fraction(1, 3), Fraction(1), Fraction(7, 2)]
RHOS = [Fraction(1, 5000), Fraction(1, 30), Fraction(1, 2), Fraction(9)]
SIZES = [1, 4, 1000]


def _sqrt(x: Fraction) -> float:
    return math.sqrt(float(x))


# ------------------------------------------------------------------- the map check and the scale

@pytest.mark.parametrize("sens", SENSITIVITIES)
@pytest.mark.parametrize("eps", EPSILONS)
def test_integer_laplace_meets_epsilon_at_the_closed_form(sens, eps):
    noise = make_noise(sens, epsilon=eps)
    assert isinstance(noise, CalibratedNoise) and noise.mechanism == "discrete Laplace"
    assert noise.privacy_map(sens) <= PureDP(eps) and noise.loss == noise.privacy_map(sens)
    assert sens / eps <= noise.scale <= sens / eps * TIGHT
    assert noise.grid is None and noise.budget == PureDP(eps)


def _grid_bounds(noise: CalibratedNoise, closed: Fraction, allowance: Fraction) -> None:
    """scale between the closed form and (closed + allowance)·(1 + 2^-20) + one grid step,
    the grid 2^k being the one rule's: 2^k ≤ scale·2^-GRID_BITS, within a factor 4."""
    assert noise.grid is not None
    step = Fraction(2) ** noise.grid
    assert step <= noise.scale / 2**GRID_BITS < 4 * step
    assert closed <= noise.scale <= (closed + step * allowance) * TIGHT + step


@pytest.mark.parametrize("sens", SENSITIVITIES)
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("size", SIZES)
def test_grid_laplace_meets_epsilon_with_the_rounding_allowance(sens, eps, size):
    noise = make_noise(sens, epsilon=eps, output="grid", size=size)
    assert noise.privacy_map(sens) <= PureDP(eps)
    _grid_bounds(noise, sens / eps, 2 * Fraction(size) / eps)
    # a mechanism rebuilt from the scale alone (its default grid) meets ε as well
    assert make_laplace(noise.scale, max_size=size).check(sens, PureDP(eps))


@pytest.mark.parametrize("power", [0, -3, 7])
def test_a_scale_rounded_up_across_a_power_of_two_keeps_its_grid_allowance(power):
    """Δ/ε = 2^j(1 − 5·2^-33), ε = 1: Δ/ε + 2^k lands within a grid step below 2^j, so the
    grid steps round the scale up to exactly 2^j, whose default grid is twice as coarse. The
    allowance must cover that coarser grid, for the measurement and for one rebuilt from its
    scale (broken: an allowance for the first grid only gives ε·(1 + 3·2^-33) rebuilt)."""
    top = Fraction(2) ** power
    sens = top * (1 - 5 * Fraction(1, 1 << 33))
    noise = make_noise(sens, epsilon=1, output="grid", size=1)
    assert noise.scale >= top and noise.privacy_map(sens) <= PureDP(1)
    assert make_laplace(noise.scale, max_size=1).check(sens, PureDP(1))


@pytest.mark.parametrize("sens", SENSITIVITIES)
@pytest.mark.parametrize("eps", EPSILONS[1:])
@pytest.mark.parametrize("dim", [1, 4, 9])
def test_vector_laplace_meets_epsilon(sens, eps, dim):
    noise = make_noise(sens, epsilon=eps, norm="l2", output="grid", size=dim)
    assert noise.mechanism == "vector Laplace (grid)"
    assert noise.privacy_map(sens) <= PureDP(eps)
    _grid_bounds(noise, sens / eps, 2 * Fraction(math.isqrt(dim) + 1) / eps)
    assert make_vector_laplace(noise.scale, dim).check(sens, PureDP(eps))


@pytest.mark.parametrize("sens", SENSITIVITIES)
@pytest.mark.parametrize("rho", RHOS)
def test_integer_gaussian_meets_rho(sens, rho):
    noise = make_noise(sens, rho=rho, norm="l2")
    loss = noise.privacy_map(sens)
    assert isinstance(loss, ZCDP) and loss <= ZCDP(rho)
    sigma = noise.scale
    assert sigma * sigma >= sens * sens / (2 * rho)  # σ² ≥ Δ²/(2ρ), exactly
    assert float(sigma) <= float(sens) / _sqrt(2 * rho) * float(TIGHT)


@pytest.mark.parametrize("sens", SENSITIVITIES)
@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("size", SIZES)
def test_grid_gaussian_meets_rho(sens, rho, size):
    noise = make_noise(sens, rho=rho, norm="l2", output="grid", size=size)
    assert noise.privacy_map(sens) <= ZCDP(rho)
    root = Fraction(math.isqrt(size) + 1)
    closed = Fraction(float(sens) / _sqrt(2 * rho)) * (1 - Fraction(1, 1 << 40))
    _grid_bounds(noise, closed, 2 * root / Fraction(_sqrt(2 * rho) * (1 - 1e-9)))
    assert make_gaussian(noise.scale, max_size=size).check(sens, ZCDP(rho))


@pytest.mark.parametrize("eps,delta", [(Fraction(1), Fraction(1, 10**6)),
                                       (Fraction(1, 10), Fraction(1, 10**9)),
                                       (Fraction(3), Fraction(1, 100))])
@pytest.mark.parametrize("output", ["integer", "grid"])
def test_approximate_dp_goes_through_zcdp(eps, delta, output):
    sens = Fraction(5, 2)
    noise = make_noise(sens, epsilon=eps, delta=delta, norm="l2", output=output, size=8)
    rho = largest_rho(eps, delta)
    loss = noise.privacy_map(sens)
    assert isinstance(loss, ZCDP) and loss.rho <= rho
    assert zcdp_to_epsilon(loss.rho, delta) <= eps and noise.budget == ApproxDP(eps, delta)
    assert noise.scale <= make_noise(sens, rho=rho, norm="l2", output=output, size=8).scale


def test_selection_meets_epsilon_and_is_exact_for_short_numbers():
    for mechanism in ("exponential", "exponential_many", "permute_and_flip",
                      "report_noisy_max"):
        sel = make_selection(Fraction(5), Fraction(2), mechanism=mechanism)
        assert sel.scale == 5 and sel.privacy_map(5) == PureDP(2)
    mono = make_selection(3, Fraction(1, 4), monotonic=True)
    assert mono.scale == 12 and mono.privacy_map(3) == PureDP(Fraction(1, 4))
    long = make_selection(Fraction(1) + Fraction(1, 1 << 20), Fraction(math.sqrt(2) / 7))
    assert long.privacy_map(long.sensitivity) <= PureDP(Fraction(math.sqrt(2) / 7))
    assert long.scale.denominator < 1 << 32  # rounded up to what the samplers take
    assert long.scale <= 2 * long.sensitivity / Fraction(math.sqrt(2) / 7) * TIGHT


# -------------------------------------------------------------------------------- the cache

def test_the_cache_returns_the_same_object_for_equal_arguments():
    a = make_noise(1, epsilon=1)
    assert a is make_noise(Fraction(1), epsilon=Fraction(1)) is make_noise(1.0, epsilon=1.0)
    assert make_noise(2, rho=Fraction(1, 2), norm="l2", size=7) is make_noise(
        2, rho=Fraction(1, 2), norm="l2", size=99)  # size is ignored for integers
    g = make_noise(3, epsilon=1, output="grid", size=16)
    assert g is make_noise(3, epsilon=1, output="grid", size=16)
    assert g is not make_noise(3, epsilon=1, output="grid", size=17)
    assert make_selection(1, 1) is make_selection(1, 1)
    assert C._make_noise.cache_info().maxsize == C.CACHE_SIZE  # bounded
    assert C._by_arguments.cache_info().maxsize == C.CACHE_SIZE


# ---------------------------------------------------------------------- broken calibrations

@pytest.mark.parametrize("kwargs", [{"epsilon": Fraction(1, 3)},
                                    {"epsilon": Fraction(1, 3), "output": "grid", "size": 4},
                                    {"rho": Fraction(1, 8), "norm": "l2"},
                                    {"rho": Fraction(1, 8), "norm": "l2", "output": "grid"},
                                    {"epsilon": Fraction(1, 3), "norm": "l2", "output": "grid",
                                     "size": 3}])
def test_half_the_scale_is_caught_by_the_map_check(kwargs):
    good = make_noise(Fraction(7, 4), **kwargs)
    with pytest.raises(MeasureError):
        make_noise(Fraction(7, 4), scale=good.scale / 2, **kwargs)
    # the calibrated scale passes the same check
    assert make_noise(Fraction(7, 4), scale=good.scale, **kwargs).loss <= good.budget


def test_the_textbook_scale_that_ignores_the_grid_is_caught():
    sens, eps = Fraction(3), Fraction(1, 7)
    with pytest.raises(MeasureError):
        make_noise(sens, epsilon=eps, output="grid", size=8, scale=sens / eps)
    with pytest.raises(MeasureError):
        make_noise(sens, epsilon=eps, output="grid", size=8,
                   scale=sens / eps * (1 - Fraction(1, 10**9)))


def test_a_broken_closed_form_is_repaired_by_bisection_and_never_cached(monkeypatch):
    C.clear_cache()
    monkeypatch.setattr(C, "_closed_form", lambda kind, sens, eps, rho, norm, n: sens / eps / 2)
    noise = make_noise(Fraction(3), epsilon=Fraction(1, 7), output="grid", size=4)
    assert noise.privacy_map(3) <= PureDP(Fraction(1, 7))  # the map check caught it
    assert noise.scale >= 21  # bisection on the map: at least Δ/ε
    C.clear_cache()
    monkeypatch.setattr(C, "calibrate_scale", lambda make, d, target, start: start)
    with pytest.raises(MeasureError):
        make_noise(Fraction(3), epsilon=Fraction(1, 7), output="grid", size=4)
    monkeypatch.undo()
    C.clear_cache()
    assert make_noise(Fraction(3), epsilon=Fraction(1, 7), output="grid", size=4).scale >= 21


# ------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("kwargs", [
    {"epsilon": 1, "norm": "l3"}, {"epsilon": 1, "output": "float"},
    {"epsilon": 1, "rho": 1}, {}, {"rho": 1}, {"epsilon": 1, "delta": 1e-6},
    {"epsilon": 1, "norm": "l2"}, {"epsilon": 1, "delta": 1, "norm": "l2"},
    {"rho": 1, "delta": 1e-6, "norm": "l2"}, {"epsilon": 0}, {"epsilon": -1},
    {"epsilon": float("nan")}, {"epsilon": 1, "output": "grid", "size": 0}])
def test_bad_budgets_and_kinds_raise_before_any_draw(kwargs):
    with rng.deterministic_for_tests(1), pytest.raises(DomainError):
        make_noise(1, **kwargs)


@pytest.mark.parametrize("sens", [0, -1, float("inf"), "1"])
def test_bad_sensitivities_raise(sens):
    with pytest.raises(DomainError):
        make_noise(sens, epsilon=1)
    with pytest.raises(DomainError):
        make_selection(sens, 1)


def test_unknown_selection_raises():
    with pytest.raises(DomainError):
        make_selection(1, 1, mechanism="gumbel")


# ----------------------------------------------------------------- the noise's distribution

def test_integer_laplace_noise_has_the_calibrated_scale():
    """Discrete Laplace of scale s has P(Z = 0) = (1 − q)/(1 + q), q = e^(−1/s). Δ = 3,
    ε = 3/2: s = 2, P(0) = 0.2449. 40,000 draws; accept iff the count of zeros lies inside
    the exact two-sided binomial interval of level 1 − 1e-6 (false-positive rate ≤ 1e-6).
    Broken variant: the noise of half the scale (P(0) = 0.4621) is rejected."""
    n, alpha = 40_000, 1e-6

    def accepted(draws: np.ndarray, scale: float) -> bool:
        q = math.exp(-1 / scale)
        lo, hi = stats.binom.ppf([alpha / 2, 1 - alpha / 2], n, (1 - q) / (1 + q))
        return bool(lo <= np.count_nonzero(draws == 0) <= hi)

    noise = make_noise(3, epsilon=Fraction(3, 2))
    assert noise.scale == 2
    assert accepted(np.asarray(noise(np.zeros(n, dtype=np.int64))), 2.0)
    broken = make_noise(3, epsilon=3)  # half the scale passed off as ε = 3/2's
    assert not accepted(np.asarray(broken(np.zeros(n, dtype=np.int64))), 2.0)


# ------------------------------------------------------- release paths call a Measurement

def _spy_measurements(monkeypatch) -> list[Measurement]:
    called: list[Measurement] = []
    real = Measurement.__call__

    def spy(self, data):
        called.append(self)
        return real(self, data)

    monkeypatch.setattr(Measurement, "__call__", spy)
    return called


def test_release_paths_draw_noise_by_calling_a_calibrated_measurement(monkeypatch):
    from dpkit.core.measures import ZCDP
    from dpkit.mechanisms import frontend

    called = _spy_measurements(monkeypatch)
    x = np.arange(6, dtype=np.int64)
    frontend.noisy(x, Fraction(2), Fraction(1, 2))
    frontend.noisy(x, Fraction(2), Fraction(1, 2), weights=np.array([1, 2] * 3))
    frontend.noisy(x.astype(float), Fraction(2), Fraction(1, 2), output="grid", size=6)
    frontend.noisy(x, Fraction(1), ZCDP(Fraction(1, 3)))
    frontend.noisy(x.astype(float), 2, Fraction(1, 2), output="grid")
    frontend.select([np.array([3, 1]), np.array([0, 0, 5])], Fraction(1), Fraction(1),
                    mechanism="exponential_many")
    assert len(called) == 7 and all(isinstance(m, CalibratedNoise) for m in called)
    assert [m.mechanism for m in called] == [
        "discrete Laplace", "discrete Laplace", "discrete Laplace", "Laplace (grid)",
        "discrete Gaussian", "Laplace (grid)", "exponential_many"]


def test_release_paths_refuse_the_test_stream_before_drawing():
    from dpkit.mechanisms import frontend

    with rng.deterministic_for_tests(2), pytest.raises(InsecureRandomnessError):
        frontend.noisy(np.arange(3), Fraction(1), Fraction(1))
    with rng.deterministic_for_tests(2), pytest.raises(InsecureRandomnessError):
        make_exponential(1)(np.array([1, 2]))


# ------------------------------------------------------------------------- rng.uniforms

def test_uniforms_are_on_the_53_bit_grid_and_refuse_the_test_stream():
    u = rng.uniforms(20_000)
    assert u.shape == (20_000,) and u.min() >= 0 and u.max() < 1
    assert np.all(u * 2.0**53 == np.floor(u * 2.0**53))
    # uniform: Kolmogorov–Smirnov at false-positive rate 1e-6
    assert stats.kstest(u, "uniform").pvalue > 1e-6
    with rng.deterministic_for_tests(3), pytest.raises(InsecureRandomnessError):
        rng.uniforms(1)


def test_a_data_dependent_sensitivity_is_never_cached():
    """make_noise(..., cache=False) (smooth sensitivity) builds the same calibration and leaves
    no entry behind: the caches' sizes do not move."""
    from dpkit.mechanisms import calibrated

    sizes = (calibrated._by_arguments.cache_info().currsize,
             calibrated._make_noise.cache_info().currsize)
    fresh = make_noise(Fraction(12345, 7), epsilon=Fraction(1, 3), cache=False)
    assert (calibrated._by_arguments.cache_info().currsize,
            calibrated._make_noise.cache_info().currsize) == sizes
    assert fresh.scale == make_noise(Fraction(12345, 7), epsilon=Fraction(1, 3)).scale
