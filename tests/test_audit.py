"""The audit battery over every registered mechanism, with a broken variant (half the noise)
that must be flagged, and the grey-box sensitivity recorder on interface mode's statistics
with broken variants (missing clamp, sensitivity off by one).

False-positive rates: the histogram test's majority of 9 votes fails a correct mechanism with
probability < 1e-11; the ε lower bound is computed at confidence 1 − 1e-6."""

import narwhals as nw
import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.audit import CASES, neighbouring_tables, record_sensitivity, run_audit
from dpkit.frame import engine
from dpkit.frame.aggregates import Statistic

CONFIDENCE = 1 - 1e-6
SAMPLES = {"gaussian": 30_000, "discrete_gaussian": 30_000, "permute_and_flip": 20_000,
           "report_noisy_max": 20_000, "tree_quantile": 20_000}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", sorted(CASES))
def test_correct_mechanism_passes_audit(name):
    result = run_audit(CASES[name], SAMPLES.get(name, 50_000), confidence=CONFIDENCE)
    assert result.histogram_passed
    assert result.lower_bound <= result.claimed_epsilon


@pytest.mark.parametrize("name", sorted(CASES))
def test_broken_mechanism_is_flagged(name):
    result = run_audit(CASES[name], SAMPLES.get(name, 50_000), broken=True,
                       confidence=CONFIDENCE)
    assert (not result.histogram_passed) or result.lower_bound > result.claimed_epsilon


# -- grey box: interface mode's exact statistics against the core's declared sensitivity --

def base_table() -> pl.DataFrame:
    return pl.DataFrame({"id": [1, 2, 3, 4], "x": [1.0, 5.0, 9.0, 2.5],
                         "g": ["a", "b", "a", "b"]})


def statistics_of(query_for, stat_filter=None):
    """Per statistic: (function table ↦ exact values in data units, declared sensitivity)."""
    def evaluate(df: pl.DataFrame, key: str) -> np.ndarray:
        q = query_for(dp.Session(df, privacy_unit=dp.PrivacyUnit.by("id", 2),
                                 budget=dp.PureDP(1)))
        lf, planned = q.plan(epsilon=1)
        stats = [p.stat for p in planned]
        if stat_filter is not None:
            stats = [stat_filter(s) for s in stats]
        bounded = engine.bound_contributions(lf, dp.PrivacyUnit.by("id", 2), q.columns())
        raw = engine.compute(bounded, q.keys, stats)
        p = next(p for p in planned if p.stat.key == key)
        scale = 2.0 ** p.stat.n_bins if p.stat.kind == "sum" else 1.0
        return raw[key].astype(np.float64) * scale

    q0 = query_for(dp.Session(base_table(), privacy_unit=dp.PrivacyUnit.by("id", 2),
                              budget=dp.PureDP(1)))
    _, planned = q0.plan(epsilon=1)
    out = []
    for p in planned:
        scale = 2.0 ** p.stat.n_bins if p.stat.kind == "sum" else 1.0
        out.append((lambda df, key=p.stat.key: evaluate(df, key), float(p.sensitivity) * scale))
    return out


def grouped(session):
    return session.query().group_by("g", keys=["a", "b"]).agg(
        dp.count(), dp.sum("x", bounds=(0, 10)), dp.mean("x", bounds=(0, 10)))


def test_declared_sensitivities_hold_on_stress_pairs():
    pairs = neighbouring_tables(base_table(), "x", unit="id", max_rows=2)
    for function, declared in statistics_of(grouped):
        report = record_sensitivity(function, declared, pairs)
        assert report.passed, report.observed
        assert report.observed["reversed row order"] == 0


def test_missing_clamp_is_flagged():
    def unclamped(stat: Statistic) -> Statistic:
        if stat.kind != "sum":
            return stat
        # the declared bounds (0, 10) are never applied: only a far wider safety clip
        step = 2.0 ** -stat.n_bins
        wide = (nw.col("x").fill_nan(0).clip(-1e9, 1e9) * step).cast(nw.Int64)
        return Statistic(stat.key, "sum", expr=wide.sum(), lower=stat.lower, upper=stat.upper,
                         n_bins=stat.n_bins)

    pairs = neighbouring_tables(base_table(), "x", unit="id", max_rows=2,
                                extremes=(1e6, -1e6))
    reports = [record_sensitivity(f, d, pairs) for f, d in statistics_of(grouped, unclamped)]
    assert not all(r.passed for r in reports)


def test_sensitivity_off_by_one_is_flagged():
    pairs = neighbouring_tables(base_table(), "x", unit="id", max_rows=2)
    function, declared = statistics_of(lambda s: s.query().count())[0]
    assert declared == 2
    assert record_sensitivity(function, declared, pairs).passed
    assert not record_sensitivity(function, declared - 1, pairs).passed


def test_audit_cli_table():
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dpkit", "audit", "discrete_laplace",
                          "--samples", "20000"], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, COLUMNS="160"))
    assert out.returncode == 0, out.stderr
    assert "discrete_laplace" in out.stdout and "claimed" in out.stdout
    assert "0.5" in out.stdout  # the claimed ε of scale 2 at d_in = 1
