"""dpkit.apps.mobility: Google-style mobility reports on the continual release.

Statistical tests (each states its false-positive rate, each paired with a broken variant it
catches): the noise law's mass at 0 and the error bars' coverage, both binomial tests at a
two-sided or one-sided tail of at most 1e-6, computed exactly by scipy's binomial law.
"""

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy.stats import binom

import dpkit as dp
from dpkit.apps.mobility import MobilityReport, bound_visits, percent_change
from dpkit.audit import CASES, run_audit
from dpkit.core.accuracy import laplace_tail
from dpkit.core.compose import PrivacyFilter
from dpkit.errors import DomainError

FPR = 1e-6
N = 3000  # days of a long report used as independent draws (each day its own noise)


def visits(users, cats, day=1):
    return pl.DataFrame({"user": users, "category": cats, "day": [day] * len(users)})


# -- user-level bounding ------------------------------------------------------------------

def test_bound_visits_keeps_per_day_per_category():
    f = visits(["h"] * 5 + ["a"], ["x", "x", "x", "y", "y", "x"])
    kept = bound_visits(f, "user", "category", 2)
    assert kept.group_by("user", "category").len().sort("user", "category").rows() == [
        ("a", "x", 1), ("h", "x", 2), ("h", "y", 2)]


def test_user_above_the_bounds_is_clipped():
    """A heavy user is cut to per_day per day and category, then to w over the stream."""
    r = MobilityReport(3, epsilon=1, categories=["x", "y"], per_day=2, contributions=5,
                       unit="user")
    r.feed(visits(["h"] * 6 + ["a"], ["x"] * 4 + ["y"] * 2 + ["x"]))  # h: 2 x + 2 y kept
    assert r.stream.state["units"][repr("h")] == 4
    assert r.stream.state["units"][repr("a")] == 1
    r.feed(visits(["h"] * 3, ["x"] * 3, day=2))  # per_day allows 2, w = 5 allows 1 more
    assert r.stream.state["units"][repr("h")] == 5


# -- the noise law, exactly ---------------------------------------------------------------

def test_scale_is_w_over_epsilon_exactly():
    r = MobilityReport(7, epsilon=Fraction(7, 2), categories=["x", "y", "z"], per_day=2)
    assert r.contributions == 2 * 3 * 7
    assert r.scale == Fraction(42) / Fraction(7, 2)
    assert "discrete Laplace" in r.stream.counters[0].noise.mechanism


def test_neighbours_brute_force_within_epsilon():
    """Every neighbour (one user removed) of a tiny two-day stream moves the bounded counts
    by at most w in L1: the discrete Laplace of scale w/ε gives a likelihood ratio of at most
    exp(L1/scale) ≤ e^ε for every output (exact, in Fractions)."""
    days = [visits(["a", "a", "a", "b", "c"], ["x", "x", "y", "x", "y"], 1),
            visits(["a", "b", "b", "b", "c"], ["y", "y", "y", "x", "x"], 2)]
    eps = Fraction(1)

    w, per_day = 3, 2
    scale = MobilityReport(2, epsilon=eps, categories=["x", "y"], per_day=per_day,
                           contributions=w, unit="user").scale

    def counts(frames):  # the stated rule: per_day per (user, day, category), then first w
        out, spent = [], {}
        for f in frames:
            row = {"x": 0, "y": 0}
            for u, c in bound_visits(f, "user", "category", per_day).select(
                    "user", "category").iter_rows():
                if spent.get(u, 0) < w:
                    spent[u] = spent.get(u, 0) + 1
                    row[c] += 1
            out += [row["x"], row["y"]]
        return np.array(out)

    full = counts(days)
    assert scale == Fraction(w) / eps
    for user in ("a", "b", "c"):
        nb = counts([f.filter(pl.col("user") != user) for f in days])
        assert Fraction(int(np.abs(full - nb).sum())) / scale <= eps


def _long_report(cls=MobilityReport, scale=2, beta=0.2):
    # per_day 1, one category, T = N: w = N; ε = N/scale gives the scale exactly
    return cls(N, epsilon=Fraction(N, scale), categories=["x"], beta=beta)


def _noise(report, truth=10):
    return np.array([report.feed({"x": truth}).raw["x"] - truth for _ in range(N)])


class _HalfScaleNoise(MobilityReport):
    """Broken: a report whose stream runs at twice the budget (half the noise scale)."""

    def __init__(self, horizon, *, epsilon, **kw):
        super().__init__(horizon, epsilon=2 * epsilon, **kw)


def _zero_mass_ok(z, scale):
    p = np.exp(-1 / scale)
    p0 = (1 - p) / (1 + p)  # discrete Laplace P(Z = 0)
    lo, hi = binom.ppf(FPR / 2, N, p0), binom.isf(FPR / 2, N, p0)
    return lo <= int((z == 0).sum()) <= hi


def test_noise_mass_at_zero_matches_the_law():
    """P(Z = 0) = (1 − p)/(1 + p), p = e^(−1/b), b = 2: a two-sided binomial test at 1e-6."""
    assert _zero_mass_ok(_noise(_long_report()), 2)


def test_noise_law_test_catches_half_scale():
    assert not _zero_mass_ok(_noise(_long_report(_HalfScaleNoise)), 2)


# -- error bars' coverage -----------------------------------------------------------------

class _HalfScaleBars(MobilityReport):
    """Broken: the error bars computed at half the noise scale."""

    def half_width(self, window):
        return laplace_tail(float(self.scale) / 2, self.stream.config["beta"], discrete=True)


def _misses(report, truth=10):
    days = [report.feed({"x": truth}) for _ in range(N)]
    return sum(abs(d.raw["x"] - truth) > d.half_width for d in days)


LIMIT = binom.isf(FPR, N, 0.2)  # P(misses > LIMIT) ≤ 1e-6 when P(miss) ≤ β = 0.2


def test_error_bars_cover_at_the_stated_confidence():
    assert _misses(_long_report()) <= LIMIT


def test_coverage_test_catches_half_scale_bars():
    # half-scale bars miss with probability 0.46 at b = 2 (mean 1,370 of 3,000 ≫ LIMIT ≈ 710)
    assert _misses(_long_report(_HalfScaleBars)) > LIMIT


def test_bars_of_another_mechanism_come_from_the_stream():
    def report():
        return MobilityReport(8, epsilon=8, categories=["x"], mechanism="tree")

    day = report().feed({"x": 5})
    assert day.half_width == report().stream.feed({"x": 5}).windows["x"].half_width > 0


# -- percent change (post-processing) -----------------------------------------------------

def test_percent_change_from_weekday_median():
    t = list(range(1, 15))
    table = pl.DataFrame({"t": t, "category": ["x"] * 14,
                          "count": [float(10 * (i % 7 + 1)) for i in range(7)]
                          + [20.0] * 6 + [None], "weekday": [(i - 1) % 7 for i in t]})
    out = percent_change(table, (1, 7), released=14)
    assert out["baseline"].to_list() == [10.0 * (i % 7 + 1) for i in range(14)]
    assert out["percent_change"][7] == 100.0  # day 8: weekday 0, 20 against 10
    assert out["percent_change"][13] is None  # suppressed
    with pytest.raises(DomainError):
        percent_change(table, (1, 6), released=14)
    with pytest.raises(DomainError):
        percent_change(table, (1, 20), released=14)


def test_suppression_below_min_count():
    r = MobilityReport(2, epsilon=100, categories=["x"], min_count=50)
    day = r.feed({"x": 0})
    assert day.counts["x"] is None


# -- plan-time validation, one debit ------------------------------------------------------

@pytest.mark.parametrize("kw", [
    {"horizon": 0}, {"categories": []}, {"categories": ["a", "a"]}, {"categories": "ab"},
    {"per_day": 0}, {"contributions": 10**9}, {"mechanism": "nope"}, {"beta": 1.5},
    {"epsilon": 0}, {"origin": "2011-01-01"}, {"unit": 3},
])
def test_plan_time_validation_debits_nothing(kw):
    budget = PrivacyFilter(dp.PureDP(10))
    args = {"horizon": 5, "epsilon": 1, "categories": ["a", "b"], **kw}
    with pytest.raises(DomainError):
        MobilityReport(args.pop("horizon"), accountant=budget, **args)
    assert budget.spent == dp.PureDP(0)


def test_frame_without_columns_refused_before_the_step():
    r = MobilityReport(2, epsilon=1, categories=["x"], unit="user")
    with pytest.raises(DomainError):
        r.feed(pl.DataFrame({"category": ["x"], "day": [1]}))
    assert r.stream.t == 0 and not r.days


def test_session_charged_once_with_its_unit():
    table = pl.DataFrame({"user": [1], "category": ["x"], "day": [1]})
    session = dp.Session(table, dp.PrivacyUnit.by("user", 3), dp.PureDP(2))
    r = MobilityReport(2, epsilon=1, categories=["x"], accountant=session)
    assert r.unit == "user"
    r.feed(visits([1, 1], ["x", "x"]))
    r.feed(visits([1], ["x"], day=2))
    assert session.spent == dp.PureDP(1)


# -- the audit case -----------------------------------------------------------------------

def test_audit_case_passes_and_its_broken_variant_is_flagged():
    case = CASES["mobility_report"]
    good = run_audit(case, 50_000, confidence=1 - FPR)
    assert good.histogram_passed and good.lower_bound <= good.claimed_epsilon
    bad = run_audit(case, 50_000, broken=True, confidence=1 - FPR)
    assert (not bad.histogram_passed) or bad.lower_bound > bad.claimed_epsilon
