"""Mean estimation under local DP (dpkit.local.numeric, issue 21 part B): exact output laws
with broken variants, unbiasedness and the closed-form variances, the audit cases and bad
input.

Every statistical test rejects a correct mechanism with probability ≤ 1e-6
(tests.stats.FALSE_POSITIVE_RATE, Bonferroni-split where a test makes several comparisons).
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import stats
from tests.stats import FALSE_POSITIVE_RATE, chi2_pvalue

import dpkit.local as ldp
from dpkit.audit import run_audit
from dpkit.errors import DomainError
from dpkit.mechanisms.registry import registered

N_LAW = 100_000
FPR = FALSE_POSITIVE_RATE


def duchi_law(mech: ldp.Duchi, u: np.ndarray) -> np.ndarray:
    """P[sign pattern s | u] exactly (patterns coded as Σ_j [s_j > 0]·2^j)."""
    d, p = mech.d, mech.p
    law = np.zeros(2**d, dtype=object)
    signs = list(itertools.product((-1, 1), repeat=d))
    for v in signs:
        pv = Fraction(1)
        for vj, uj in zip(v, u, strict=True):
            up = (1 + Fraction(float(uj))) / 2
            pv *= up if vj > 0 else 1 - up
        for s in signs:
            dot = sum(a * b for a, b in zip(s, v, strict=True))
            plus = dot > 0 or (d % 2 == 0 and dot == 0)
            minus = dot < 0 or (d % 2 == 0 and dot == 0)
            code = sum(1 << j for j, sj in enumerate(s) if sj > 0)
            law[code] += pv * (p * plus + (1 - p) * minus) / mech.size
    return np.array([float(x) for x in law])


def sign_codes(y: np.ndarray) -> np.ndarray:
    s = (np.asarray(y).reshape(len(y), -1) > 0).astype(np.int64)
    return (s << np.arange(s.shape[1])).sum(axis=1)


@pytest.mark.parametrize("u", [[0.5], [0.5, -0.25, 1.0], [0.0, 0.75, -1.0, 0.25]])
def test_duchi_follows_its_exact_law_and_swapped_probabilities_are_rejected(u):
    mech = ldp.Duchi(1, [(-1, 1)] * len(u))
    law = duchi_law(mech, np.array(u))
    values = np.tile(np.array(u), (N_LAW, 1))
    codes = np.arange(law.size)
    y = mech.randomize(values)
    assert set(np.unique(np.abs(y))) == {float(mech.B)}
    assert chi2_pvalue(sign_codes(y), codes, law) > FPR
    broken = ldp.Duchi(1, [(-1, 1)] * len(u))
    broken.p = 1 - mech.p
    assert chi2_pvalue(sign_codes(broken.randomize(values)), codes, law) < FPR


def test_duchi_constant_matches_the_paper():
    """B = (e^ε + 1)/(e^ε − 1)·C_d with the paper's C_d (the exact p in place of e^ε/(e^ε+1))."""
    for d in range(1, 9):
        mech = ldp.Duchi(1, [(-1, 1)] * d)
        if d % 2:
            c_d = Fraction(2 ** (d - 1), comb(d - 1, (d - 1) // 2))
        else:
            c_d = (2 ** (d - 1) + Fraction(comb(d, d // 2), 2)) / comb(d - 1, d // 2)
        assert c_d / (2 * mech.p - 1) == mech.B, d
        assert float(mech.B) == pytest.approx((np.e + 1) / (np.e - 1) * float(c_d), rel=1e-8)


def pm_bins(mech: ldp.Piecewise, u: float, bins: int = 40) -> np.ndarray:
    """P[report in each of ``bins`` equal bins of [−C, C] | u], exactly (from the cells)."""
    n, w, p_cells = mech.N, mech.W, mech.P
    edges = [max(0, -(-(2 * n * b - bins) // (2 * bins))) for b in range(bins + 1)]
    edges[-1] = n  # cell k lies in bin b iff its midpoint (k + 1/2)·N/bins ≥ b ...
    t = (float(u) + 1) / 2 * p_cells
    j0 = int(np.floor(t))
    theta = Fraction(t) - j0
    p_in = mech.a / (mech.a + 1)
    out = np.zeros(bins, dtype=object)
    for j, weight in ((j0, 1 - theta), (min(j0 + 1, p_cells), theta)):
        for b in range(bins):
            lo, hi = edges[b], edges[b + 1]
            inside = max(0, min(hi, j + w) - max(lo, j))
            out[b] += weight * (inside * p_in / w + (hi - lo - inside) * (1 - p_in) / (n - w))
    return np.array([float(x) for x in out])


def pm_codes(mech: ldp.Piecewise, y: np.ndarray, bins: int = 40) -> np.ndarray:
    c = float(mech.C)
    return np.clip(np.floor((np.asarray(y) + c) / (2 * c) * bins), 0, bins - 1).astype(int)


@pytest.mark.parametrize("u", [-1.0, 0.3, 1.0])
def test_piecewise_follows_its_exact_law_and_a_broken_epsilon_is_rejected(u):
    """40 equal bins of [−C, C], each with its exact probability from the grid law; the
    broken variant (ε = 1.5 reports) must be rejected against the ε = 1 law."""
    mech = ldp.Piecewise(1)
    law = pm_bins(mech, u)
    y = mech.randomize(np.full(N_LAW, u))
    assert np.all(np.abs(y) <= float(mech.C))
    assert chi2_pvalue(pm_codes(mech, y), np.arange(40), law) > FPR / 3
    broken = ldp.Piecewise(Fraction(3, 2))
    assert chi2_pvalue(pm_codes(mech, broken.randomize(np.full(N_LAW, u))), np.arange(40),
                       law) < FPR


def test_piecewise_grid_is_exact():
    """The window is 2^32 whole cells, its probability is a/(a + 1), the reports are the
    cells' midpoints and (C + 1)/(C − 1) = a, the identity that aligns the windows."""
    mech = ldp.Piecewise(2)
    assert mech.N == mech.P + mech.W and mech.a == (mech.C + 1) / (mech.C - 1)
    assert mech.a * mech.a <= np.e**2 and mech.N * mech.h == 2 * mech.C
    k = mech.cells(np.full(1000, 1.0))
    assert k.min() >= 0 and k.max() < mech.N
    y = mech.midpoints(k)
    back = np.rint((y + float(mech.C)) / float(mech.h) - 0.5).astype(np.int64)
    assert np.array_equal(back, k)


def test_hybrid_follows_its_exact_law():
    """Atoms ±B (Duchi et al.'s part, weight 1 − β) and the piecewise bins (weight β)."""
    mech = ldp.Hybrid(2)
    assert 0 < mech.beta < 1 and abs(float(mech.beta) - (1 - np.exp(-1))) < 1e-9
    u = 0.3
    y = mech.randomize(np.full(N_LAW, u))
    b = float(mech.duchi.B)
    atom = np.isin(y, [-b, b])
    p_plus = float(Fraction(1, 2) + Fraction(u) * (2 * mech.duchi.p - 1) / 2)
    beta = float(mech.beta)
    law = np.concatenate([[(1 - beta) * (1 - p_plus), (1 - beta) * p_plus],
                          beta * pm_bins(mech.pm, u)])
    codes = np.where(atom, (y > 0).astype(int), 2 + pm_codes(mech.pm, y))
    assert chi2_pvalue(codes, np.arange(42), law) > FPR
    pure_pm = np.concatenate([[0, 0], pm_bins(mech.pm, u)])  # β = 1: the atoms vanish
    assert chi2_pvalue(codes, np.arange(42), pure_pm + 1e-12) < FPR


def test_sampled_mean_follows_its_exact_law_and_a_broken_epsilon_is_rejected():
    """d = 3, k = 1, Duchi base: attribute uniform, then Duchi et al. at ε on it."""
    u = np.array([0.5, -0.75, 0.0])
    mech = ldp.SampledMean(1, [(-1, 1)] * 3, k=1, base="duchi")
    p = mech.base.p
    law = []
    for j in range(3):
        plus = Fraction(1, 2) + Fraction(float(u[j])) * (2 * p - 1) / 2
        law += [float(Fraction(1, 3) * (1 - plus)), float(Fraction(1, 3) * plus)]

    def codes(y: np.ndarray) -> np.ndarray:
        j = np.argmax(y != 0, axis=1)
        assert np.all((y != 0).sum(axis=1) == 1)
        return 2 * j + (y[np.arange(len(y)), j] > 0)

    values = np.tile(u, (N_LAW, 1))
    y = mech.randomize(values)
    assert set(np.unique(np.abs(y[y != 0]))) == {3 * float(mech.base.B)}
    assert chi2_pvalue(codes(y), np.arange(6), np.array(law)) > FPR
    broken = ldp.SampledMean(2, [(-1, 1)] * 3, k=1, base="duchi")
    assert chi2_pvalue(codes(broken.randomize(values)), np.arange(6), np.array(law)) < FPR
    assert ldp.SampledMean(10, [(-1, 1)] * 6).k == 4 and ldp.SampledMean(1, [(0, 1)] * 6).k == 1


MECHANISMS = {
    "duchi": lambda: ldp.Duchi(1),
    "duchi_d3": lambda: ldp.Duchi(2, [(-1, 1)] * 3),
    "duchi_d4": lambda: ldp.Duchi(1, [(-1, 1)] * 4),
    "piecewise": lambda: ldp.Piecewise(1),
    "piecewise_eps4": lambda: ldp.Piecewise(4),
    "hybrid": lambda: ldp.Hybrid(2),
    "hybrid_small": lambda: ldp.Hybrid(Fraction(1, 2)),
    "sampled_hm": lambda: ldp.SampledMean(6, [(-1, 1)] * 3),
    "sampled_pm_k2": lambda: ldp.SampledMean(2, [(-1, 1)] * 3, k=2, base="pm"),
}


def population(mech: ldp.NumericMechanism, n: int) -> np.ndarray:
    x = np.linspace(-1, 1, n) ** 3
    return x if mech.d == 1 else x[:, None] * np.linspace(1, -0.5, mech.d)[None, :]


def trial_estimates(mech: ldp.NumericMechanism, x: np.ndarray, reps: int) -> np.ndarray:
    n = x.shape[0]
    tiled = np.tile(x, reps) if x.ndim == 1 else np.tile(x, (reps, 1))
    y = mech.randomize(tiled).reshape(reps, n, -1)
    return y.mean(axis=1)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_estimators_are_unbiased_with_the_closed_form_variance(name):
    """R = 300 trials of n = 2000 users: z-test of the mean error and R·MSE/Var ~ χ²_R
    (two-sided) per attribute, Bonferroni over the 2d comparisons."""
    mech = MECHANISMS[name]()
    n, reps = 2000, 300
    x = population(mech, n)
    truth = np.atleast_1d(x.mean(axis=0))
    var = mech.variance(x)
    est = trial_estimates(mech, x, reps)
    alpha = FPR / (2 * mech.d)
    z = (est.mean(axis=0) - truth) / np.sqrt(var / reps)
    assert np.all(np.abs(z) < stats.norm.isf(alpha / 2)), z
    ratio = ((est - truth) ** 2).sum(axis=0) / var
    assert np.all(ratio > stats.chi2.ppf(alpha / 2, reps)), ratio / reps
    assert np.all(ratio < stats.chi2.isf(alpha / 2, reps)), ratio / reps
    assert np.all(var <= mech.worst_variance() / n + 1e-15)


def test_the_variance_test_rejects_a_wrong_formula():
    """The piecewise variance without its u²/(a − 1) term, at ε = 4 on a population at
    ±1 (about 2.8× too small), is rejected by the same χ² statistic."""
    mech = ldp.Piecewise(4)
    n, reps = 2000, 300
    x = np.where(np.arange(n) % 2, 1.0, -1.0)
    est = trial_estimates(mech, x, reps)[:, 0]
    a = float(mech.a)
    wrong = (a + 3) / (3 * (a - 1) ** 2) / n
    assert ((est - 0.0) ** 2).sum() / wrong > stats.chi2.isf(FPR, reps)


def test_estimate_frame_is_in_data_units_and_covers():
    """Adult-like ages in [17, 90]: the frame's CI covers the true mean in ≥ 90% of 200
    trials (a binomial tail < 1e-6 for a 95% interval), per attribute names x0, x1."""
    mech = ldp.SampledMean(2, [(17, 90), (1, 99)], k=1)
    n = 4000
    x = np.stack([np.linspace(17, 90, n), np.linspace(1, 99, n) ** 1], axis=1)
    covered = 0
    y = mech.randomize(np.tile(x, (200, 1))).reshape(200, n, 2)
    for block in y:
        frame = mech.estimate(block)
        assert frame["attribute"].to_list() == ["x0", "x1"]
        truth = x.mean(axis=0)
        lo, hi = frame["ci_low"].to_numpy(), frame["ci_high"].to_numpy()
        covered += int(((lo <= truth) & (truth <= hi)).sum())
    assert covered / 400 > 0.9


@pytest.mark.parametrize("name", ["Duchi", "Piecewise", "Hybrid", "SampledMean"])
def test_audit_cases_pass_and_their_broken_variants_are_flagged(name):
    """Broken: the same mechanism at ε = 2 under the claim ε = 1."""
    for case in registered()[name].audit():
        ok = run_audit(case, 30_000, confidence=1 - FPR)
        assert ok.histogram_passed and ok.lower_bound <= ok.claimed_epsilon == 1.0, case.name
        bad = run_audit(case, 30_000, broken=True, confidence=1 - FPR)
        assert (not bad.histogram_passed) or bad.lower_bound > 1.0, case.name


def test_bad_input_follows_the_documented_rules():
    mech = ldp.Piecewise(1, (0, 10), fallback=5)
    u = mech.unit(np.array([-3.0, 14.0, np.nan, np.inf, 2.5]))
    assert u[:, 0].tolist() == [-1.0, 1.0, 0.0, 0.0, -0.5]
    assert mech.unit(np.array([None, "x", 10], dtype=object))[:, 0].tolist() == [0, 0, 1]
    assert mech.randomize(np.array([None, "x"], dtype=object)).shape == (2,)
    assert ldp.Duchi(1).randomize(np.zeros(5)).shape == (5,)  # one attribute: a vector
    assert ldp.Duchi(1).randomize(np.zeros((5, 1))).shape == (5, 1)
    assert ldp.Hybrid(Fraction(1, 2)).pm is None  # ε ≤ ε*: Duchi et al. only
    multi = ldp.SampledMean(1, [(0, 1), (0, 2)])
    with pytest.raises(DomainError):
        multi.randomize(np.zeros((3, 3)))
    for cls in (ldp.Duchi, ldp.Piecewise, ldp.Hybrid):
        for eps in (0, -1, 0.0):
            with pytest.raises(DomainError):
                cls(eps)
        for bounds in ((1, 1), (2, 1), (0, float("inf")), "ab", (0,)):
            with pytest.raises(DomainError):
                cls(1, bounds)
        with pytest.raises(DomainError):
            cls(1, (0, 1), fallback=2)
    with pytest.raises(DomainError):
        ldp.Piecewise(1, [(0, 1), (0, 1)])  # one attribute only
    with pytest.raises(DomainError):
        ldp.Duchi(1, [(0, 1)] * 61)
    with pytest.raises(DomainError):
        ldp.SampledMean(1, [(0, 1)] * 3, k=4)
    with pytest.raises(DomainError):
        ldp.SampledMean(1, [(0, 1)] * 3, base="laplace")
    with pytest.raises(DomainError):
        ldp.Piecewise(2**-40)
    with pytest.raises(DomainError):
        mech.estimate(np.zeros(0))
    with pytest.raises(DomainError):
        mech.estimate(np.zeros(5), confidence=1)
