"""dpkit.release: workloads, exact measurement, the registry, and the data-independent
algorithms (identity, uniform, hierarchical / HB, Privelet)."""

from fractions import Fraction

import numpy as np
import pytest
from release_checks import record, total_epsilon
from stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_laplace_pmf

import dpkit.release as rel
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release import measure
from dpkit.release.ranges.hierarchical import (
    hb_branching,
    tree_counts,
    tree_inference,
    tree_strategy,
)
from dpkit.release.ranges.wavelet import haar_forward, haar_inverse
from dpkit.release.workload import all_range_gram


def test_workload_answers_match_the_query_matrix():
    data = np.random.default_rng(1)  # test data and workloads only
    x1 = data.integers(0, 9, 37)
    for w in (rel.prefix(37), rel.all_range(37), rel.random_ranges(37, 50, data)):
        assert np.array_equal(w.answer(x1), w.matrix() @ x1)
    x2 = data.integers(0, 9, (6, 11))
    for w in (rel.identity((6, 11)), rel.random_rectangles((6, 11), 40, data)):
        assert np.array_equal(w.answer(x2), w.matrix() @ x2.ravel())
    gram = rel.all_range(9).matrix().toarray()
    assert np.array_equal(gram.T @ gram, all_range_gram(9))


def test_bad_input_is_rejected_before_any_noise(monkeypatch):
    log = record(monkeypatch)
    for bad in ([], [1, -1], [1.5, 2], [np.nan], [[[[[1]]]]], ["a"]):
        with pytest.raises(DomainError):
            rel.release_histogram(bad, 1)
    with pytest.raises(DomainError, match="unknown histogram method"):
        rel.release_histogram([1, 2], 1, "nope")
    with pytest.raises(DomainError, match="dimensions"):
        rel.release_histogram([[1, 2]], 1, "hierarchical")
    with pytest.raises(DomainError):
        rel.release_histogram([1, 2], 0)
    with pytest.raises(DomainError, match="workload shape"):
        rel.release_histogram([1, 2], 1, workload=rel.prefix(3))
    with pytest.raises(DomainError, match="branching"):
        rel.release_histogram([1, 2], 1, "hierarchical", branching=1)
    assert log == []


@pytest.mark.parametrize("b,n", [(2, 16), (3, 20), (4, 64), (16, 300)])
def test_tree_inference_is_least_squares(b, n):
    """Hay et al.'s two passes equal dense least squares on the padded tree."""
    y_levels = [np.random.default_rng(b).normal(size=lv.size) for lv in tree_counts(
        np.zeros(n, dtype=np.int64), b)]  # arbitrary measurements
    leaves = y_levels[0].size
    a = tree_strategy(leaves, b)
    dense = measure.least_squares(a, np.concatenate(y_levels))
    assert np.allclose(tree_inference(y_levels, b), dense, atol=1e-9)


def test_haar_transform_inverts_and_has_sensitivity_one_plus_levels():
    x = np.random.default_rng(3).integers(0, 100, (16, 8))
    coef = haar_forward(haar_forward(x, 0), 1)
    assert np.allclose(haar_inverse(haar_inverse(coef, 0), 1), x)
    basis = haar_forward(np.eye(16, dtype=np.int64), axis=0)
    assert measure.l1_sensitivity(basis) == 1 + 4


def test_strategy_sensitivity_is_an_exact_upper_bound():
    assert measure.l1_sensitivity(tree_strategy(100, 2)) == 8  # ⌈log₂ 100⌉ + 1 levels
    real = np.array([[0.1, 0.2], [0.3, 0.4]])
    bound = measure.l1_sensitivity(real)
    assert bound >= Fraction(0.2) + Fraction(0.4) and bound < Fraction(6, 10) * (1 + Fraction(
        1, 10**12))


@pytest.mark.parametrize("method,levels,options", [
    ("identity", 1, {}), ("hierarchical", 7, {}), ("hb", None, {}),
    ("privelet", 7, {"transform": "haar"}), ("privelet", 1, {})])  # auto: cells at n = 40
def test_spends_epsilon_once_with_the_declared_sensitivity(monkeypatch, method, levels,
                                                           options):
    """Σε ≤ ε, and each measured vector moves by at most its declared sensitivity between
    neighbouring histograms (one record added to any cell)."""
    log = record(monkeypatch)
    x = np.random.default_rng(5).integers(0, 20, 40)
    rel.release_histogram(x, Fraction(1, 2), method, **options)
    base = list(log)
    assert total_epsilon(base) <= Fraction(1, 2)
    if levels is not None:
        assert all(m.sensitivity == levels for m in base)
    for cell in range(x.size):
        log.clear()
        neighbour = x.copy()
        neighbour[cell] += 1
        rel.release_histogram(neighbour, Fraction(1, 2), method, **options)
        moved = sum(np.abs(a.values.astype(np.int64) - b.values.astype(np.int64)).sum()
                    for a, b in zip(base, log, strict=True))
        assert moved <= max(m.sensitivity for m in base)


@pytest.mark.parametrize("n", [64, 100])
def test_exact_formula_small(n):
    """Identity's prefix RMSE is √(n+1)/ε exactly (variance 2/ε² per cell)."""
    w = rel.prefix(n).matrix()
    assert measure.expected_rmse(w, np.eye(n), 1.0) == pytest.approx(np.sqrt(n + 1))
    assert hb_branching(n) >= 2


@pytest.mark.slow
def test_exact_formula_checks_at_4096():
    """The issue's anchors at ε = 1, n = 4,096, least squares (prefix; all ranges):
    Identity 64.01; binary tree 21.77 (27.90); Haar 21.67 (26.18); HB 15.66 (19.76), ±3%."""
    n = 4096
    prefix_gram = np.minimum.outer(n - np.arange(n), n - np.arange(n)).astype(float)
    ranges_gram = all_range_gram(n)
    strategies = {"identity": np.eye(n), "tree": tree_strategy(n, 2),
                  "haar": haar_forward(np.eye(n, dtype=np.int64), axis=0),
                  "hb": tree_strategy(n, hb_branching(n))}
    want = {"identity": (64.01, None), "tree": (21.77, 27.90), "haar": (21.67, 26.18),
            "hb": (15.66, 19.76)}
    for name, a in strategies.items():
        got = measure.expected_rmse(None, a, 1.0, gram=prefix_gram, queries=n)
        assert got == pytest.approx(want[name][0], rel=0.03), name
        if want[name][1] is not None:
            got = measure.expected_rmse(None, a, 1.0, gram=ranges_gram,
                                        queries=n * (n + 1) // 2)
            assert got == pytest.approx(want[name][1], rel=0.03), name


@pytest.mark.parametrize("method,broken", [("privelet", False), ("privelet", True),
                                           ("identity", False), ("identity", True)])
def test_total_error_has_the_laplace_law(monkeypatch, method, broken):
    """The released total's error is exactly discrete Laplace: of scale (1 + log₂ m)/ε for
    Privelet (the noisy T), and the sum of n independent ones for identity (checked on one
    cell instead). χ² at false-positive rate 1e-6; the broken variant charges one level too
    few (Privelet) or uses ε·1.5 (identity), and must be caught."""
    n, eps, reps = 16, Fraction(1), 4000
    x = np.arange(n, dtype=np.int64)
    if broken:
        real = frontend.noisy
        if method == "privelet":
            def fewer(values, sensitivity, epsilon, **kw):
                return real(values, sensitivity - 1, epsilon, **kw)
        else:
            def fewer(values, sensitivity, epsilon, **kw):
                return real(values, sensitivity, epsilon * Fraction(3, 2), **kw)
        monkeypatch.setattr(frontend, "noisy", fewer)
    errors = []
    for _ in range(reps):
        options = {"transform": "haar"} if method == "privelet" else {}
        est = rel.release_histogram(x, eps, method, **options).counts
        errors.append(est.sum() - x.sum() if method == "privelet" else est[3] - x[3])
    errors = np.rint(np.array(errors)).astype(np.int64)
    scale = 5.0 if method == "privelet" else 1.0
    support = np.arange(-200, 201)  # P(|Z| > 200) < e^-40 per draw at scale 5
    p = chi2_pvalue(errors, support, discrete_laplace_pmf(support, scale))
    assert (p < FALSE_POSITIVE_RATE) == broken


def test_measurement_wrapper_composes():
    m = rel.make_histogram_release(Fraction(1, 4), "hb")
    assert m.map(2).epsilon == Fraction(1, 2)
    out = m(np.ones(50, dtype=np.int64))
    assert out.shape == (50,)


def test_postprocessing_options():
    r = rel.release_histogram(np.zeros(30, dtype=np.int64), 0.1, "identity",
                              non_negative=True, integer=True)
    assert np.all(r.counts >= 0) and np.all(r.counts == np.rint(r.counts))
    assert set(r.error(rel.prefix(30), np.zeros(30))) == {"rmse", "scaled_error"}


def test_session_column_release_charges_the_session_once(monkeypatch):
    """A user-level session (max_rows = 3) runs the algorithm at ε/3 — a unit moves the count
    vector by at most 3 — and is charged ε; bad requests spend nothing."""
    import polars as pl

    import dpkit as dp

    log = record(monkeypatch)
    df = pl.DataFrame({"u": [1, 1, 1, 1, 2, 3], "x": [0.5, 1.5, 2.5, 3.5, 1.0, 9.0]})
    s = dp.Session(df, dp.PrivacyUnit.by("u", max_rows=3), dp.PureDP(2))
    with pytest.raises(DomainError):
        s.query().group_by("u", keys=[1, 2]).release_histogram("x", [0, 1, 2], epsilon=1)
    with pytest.raises(DomainError, match="unknown histogram method"):
        s.query().release_histogram("x", [0, 1, 2], "nope", epsilon=1)
    assert s.spent == dp.PureDP(0) and log == []
    out = s.query().release_histogram("x", [0, 2, 4, 10], "identity", epsilon=Fraction(3, 4))
    assert out.labels == ("[0, 2)", "[2, 4)", "[4, 10]") and out.counts.shape == (3,)
    assert out.epsilon == Fraction(3, 4) and s.spent == dp.PureDP(Fraction(3, 4))
    assert [m.epsilon for m in log] == [Fraction(1, 4)]
    assert sum(int(v) for v in log[0].values) == 5  # unit 1 bounded to 3 of its 4 rows


def test_dpbench_harness_writes_csv_and_plot(tmp_path):
    """`dpkit bench histograms` on one DPBench shape, two scales, one trial."""
    from typer.testing import CliRunner

    from dpkit.cli.main import app
    from dpkit.release.ranges import dpbench as bench

    data_dir = bench.default_data_dir()
    if not (data_dir / "1D" / "ADULTFRANK.n4096.npy").exists():
        pytest.skip(f"DPBench data not found at {data_dir} (set DPKIT_DPBENCH; see "
                    "bench/README.md)")
    shape = bench.load_datasets(data_dir, 1, ["ADULTFRANK.n4096"])["ADULTFRANK.n4096"]
    sample = bench.resample(shape, 1000, np.random.default_rng(0))
    assert sample.sum() == 1000 and sample.shape == (4096,)
    out = tmp_path / "h"
    result = CliRunner().invoke(app, [
        "bench", "histograms", "--datasets", "ADULTFRANK.n4096", "--methods",
        "identity,hb,privelet", "--scales", "1000,100000", "--epsilons", "1", "--trials", "1",
        "--data-dir", str(data_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = (tmp_path / "h.csv").read_text().splitlines()
    assert rows[0].startswith("method,dataset") and len(rows) == 1 + 3 * 2 * 2
    assert (tmp_path / "h.png").stat().st_size > 1000
    assert (tmp_path / "h.md").read_text().startswith("| workload |")
    runs = bench.evaluate({"a": shape}, ["identity", "hb"], [1000], [1.0], 1, progress=False)
    summary = bench.summary(runs)
    assert {r["method"] for r in summary} == {"identity", "hb"}
    assert all(r["vs_identity"] == 1 for r in summary if r["method"] == "identity")


def test_hilbert_curve_visits_every_cell_by_unit_steps():
    from dpkit.release.ranges.hilbert import hilbert_order, on_hilbert_curve

    for side in (1, 2, 8, 64):
        order = hilbert_order(side)
        assert sorted(order) == list(range(side * side))
        rows, cols = np.divmod(order, side)
        assert np.all(np.abs(np.diff(rows)) + np.abs(np.diff(cols)) == 1)
    with pytest.raises(DomainError):
        hilbert_order(6)
    from dpkit.release.ranges.basic import identity

    x = np.arange(64, dtype=np.int64).reshape(8, 8)
    est = on_hilbert_curve(identity, x, Fraction(10**6))  # tiny noise, exact layout
    assert np.abs(est - x).max() < 50
    with pytest.warns(DeprecationWarning, match="on_hilbert_curve"):  # the old form: a name
        assert np.abs(on_hilbert_curve("identity", x, Fraction(10**6)) - x).max() < 50


def test_nominal_wavelet_inverts_and_its_weighted_sensitivity_is_exact():
    from dpkit.release.ranges.wavelet import (
        _hierarchy,
        nominal_forward,
        nominal_inverse,
        nominal_sensitivity,
    )

    levels = _hierarchy([[0, 0, 1, 1, 1, 2, 3, 3], [0, 0, 1, 1]], 8)  # 8 → 4 → 2 → root
    x = np.random.default_rng(2).integers(0, 50, (8, 3))
    coef, weights = nominal_forward(x, 0, levels)
    assert np.allclose(nominal_inverse(coef, 0, levels), x)
    worst = max(sum(abs(Fraction(int(v), int(w))) for v, w in zip(
        nominal_forward(np.eye(8, dtype=np.int64)[k], 0, levels)[0], weights, strict=True))
        for k in range(8))
    assert worst == nominal_sensitivity(levels) == 4  # root + three levels with fanout ≥ 2
    with pytest.raises(DomainError):
        _hierarchy([[0, 2]], 2)  # parent 1 has no children


def test_privelet_nominal_axis_spends_its_weighted_sensitivity(monkeypatch):
    log = record(monkeypatch)
    x = np.random.default_rng(4).integers(0, 9, (6, 8))
    hierarchy = {0: [[0, 0, 0, 1, 1, 2]]}
    rel.release_histogram(x, 1, "privelet", nominal=hierarchy, transform="haar")
    (base,) = log
    assert base.sensitivity == 3 * 4 and base.weights is not None  # ρ_nominal · (1 + 3)
    most = Fraction(0)
    for cell in [(0, 0), (5, 7), (3, 2)]:
        log.clear()
        y = x.copy()
        y[cell] += 1
        rel.release_histogram(y, 1, "privelet", nominal=hierarchy, transform="haar")
        moved = sum(Fraction(abs(int(a) - int(b)), int(w)) for a, b, w in zip(
            base.values.ravel(), log[0].values.ravel(), base.weights.ravel(), strict=True))
        assert moved <= base.sensitivity
        most = max(most, moved)
    assert most == base.sensitivity  # value 0 is under a fanout-3 group: tight


def test_privelet_transforms_an_axis_only_where_haar_pays():
    """The exact all-range criterion: Haar loses to cells at 256 (variance ratio 1.29) and
    wins at 1,024 (0.60) — and, computed exactly, at 2,048 and 4,096 as assumed above 1,024."""
    from dpkit.release.ranges import wavelet

    assert not wavelet.haar_pays(256) and wavelet.haar_pays(1024)
    for n in (2048, 4096):
        inverse = wavelet.haar_inverse(np.eye(n), 0)
        haar = (1 + int(np.log2(n))) ** 2 * np.sum(inverse * wavelet._gram_times(inverse))
        assert haar < np.sum((np.arange(n) + 1.0) * (n - np.arange(n)))
    small = all_range_gram(16)
    inverse = wavelet.haar_inverse(np.eye(16), 0)
    assert np.allclose(wavelet._gram_times(inverse), small @ inverse)
    with pytest.raises(DomainError, match="transform"):
        rel.release_histogram([1, 2], 1, "privelet", transform="nope")


@pytest.mark.parametrize("method", ["identity", "hierarchical", "privelet", "dawa"])
def test_float_epsilon_rounds_the_noise_scale_up(monkeypatch, method):
    """ε = √2 has a 53-bit denominator; the scale Δ/ε is rounded up to one the samplers
    accept, so the loss Δ/scale never exceeds ε."""
    import math

    from dpkit.core import samplers

    scales = []
    real = samplers.discrete_laplace

    def spy(scale, size):
        scales.append(Fraction(scale))
        return real(scale, size)

    monkeypatch.setattr(samplers, "discrete_laplace", spy)
    log = record(monkeypatch)
    rel.release_histogram(np.arange(64), math.sqrt(2), method)
    assert scales and total_epsilon(log) <= Fraction(math.sqrt(2))
    for m, scale in zip(log, scales, strict=False):
        assert m.sensitivity / scale <= m.epsilon
