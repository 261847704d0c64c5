"""dpkit.mechanisms.frontend: one charge, draws through the calibrated entry, the rows they
return, and every learn fit recording its noise (issue 31)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from kit_spies import spy_rows
from scipy import stats

import dpkit as dp
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import ZCDP, ApproxDP, PureDP
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend, make_noise, make_selection

FALSE_POSITIVE_RATE = 1e-6


class _Model:
    """A scikit-learn-style estimator (``get_params``) for the record-keeping tests."""

    def get_params(self, deep=True):
        return {}


def test_an_unaccounted_run_still_has_its_record():
    model = frontend.charge(None, PureDP(1), "fit", _Model)
    assert model.release_.release_id is None and model.release_.loss == PureDP(1)
    assert model.release_.noise == ()


def test_a_filter_is_debited_once_and_the_alternative_is_taken():
    acct = PrivacyFilter(ZCDP(1))
    # (ε, δ) cannot be debited from a ρ budget; its ρ alternative is
    frontend.charge(acct, ApproxDP(1, Fraction(1, 10**6)), "fit", _Model,
                    alternatives=(ZCDP(Fraction(1, 4)),))
    assert acct.spent == ZCDP(Fraction(1, 4))


def test_the_wrong_accountant_is_refused_before_anything_runs():
    ran = []
    with pytest.raises(DomainError):
        frontend.charge("session", PureDP(1), "fit", lambda: ran.append(1))
    with pytest.raises(DomainError):
        frontend.check_accountant(object())
    assert not ran


def test_a_session_unit_is_charged_only_where_the_front_end_bounds_it():
    """A Session whose unit is not a row reaches a front end over rows: refused before the
    debit (the loss would be one row's, not one person's); a front end that bounds each unit
    says so (``unit_bounded``) and is debited; row-level Sessions pass as before."""
    frame = pl.DataFrame({"id": [1, 1], "x": [0, 1]})
    by_id = dp.Session(frame, dp.PrivacyUnit.by("id", 2), PureDP(2))
    ran: list[int] = []
    with pytest.raises(DomainError, match="privacy unit"):
        frontend.charge(by_id, PureDP(1), "rows", lambda: ran.append(1))
    with pytest.raises(DomainError, match="privacy unit"):
        frontend.check_accountant(by_id)
    assert ran == [] and by_id.accountant.spent == PureDP(0)
    frontend.charge(by_id, PureDP(1), "bounded", lambda: ran.append(1), unit_bounded=True)
    rows = dp.Session(frame, dp.PrivacyUnit.rows(), PureDP(2))
    frontend.charge(rows, PureDP(1), "rows", lambda: ran.append(2))
    assert ran == [1, 2] and by_id.accountant.spent == PureDP(1) == rows.accountant.spent


def test_draws_during_a_run_are_its_noise_rows():
    def compute():
        frontend.noisy(np.zeros(3), 1, PureDP(1), output="grid", statistic="a")
        frontend.select(np.zeros(4), 1, 1, statistic="b")
        return _Model()

    rows = frontend.charge(PrivacyFilter(PureDP(3)), PureDP(2), "fit", compute).release_.noise
    assert [r.statistic for r in rows] == ["a", "b"]
    assert rows[0] == frontend.noise_row(1, PureDP(1), "a", output="grid", size=4)
    planned = (frontend.noise_row(1, 1, "planned"),)
    again = frontend.charge(None, PureDP(2), "fit", compute, planned).release_.noise
    assert again == planned  # a plan given before the debit is the record


def test_noisy_draws_through_the_entry_and_returns_its_row():
    m = make_noise(3, epsilon=Fraction(1, 2))
    out, row = frontend.noisy(np.arange(5), 3, PureDP(Fraction(1, 2)))
    assert out.shape == (5,) and out.dtype == np.int64
    assert (row.name, row.scale, row.sensitivity) == (m.mechanism, m.scale, m.sensitivity)
    value, row = frontend.noisy(7, 1, ZCDP(1))
    assert isinstance(value, int) and row.name == "discrete Gaussian"


def _gamma_ok(noise: np.ndarray, scale: float) -> bool:
    """Σ|Laplace(b)| over N draws is Gamma(N, b): accept between its FPR/2 quantiles."""
    lo, hi = stats.gamma.ppf([FALSE_POSITIVE_RATE / 2, 1 - FALSE_POSITIVE_RATE / 2],
                             noise.size, scale=scale)
    return bool(lo <= np.abs(noise).sum() <= hi)


def test_noisy_grid_laplace_has_the_calibrated_scale():
    """FPR ≤ 1e-6 (exact Gamma quantiles; the 2^-30 grid moves the sum by far less than the
    interval). Broken: the noise of 2ε (half the scale) passed off as ε's is caught."""
    sens, eps = Fraction(5, 2), Fraction(1, 8)
    b = float(sens / eps)
    good = frontend.noisy(np.zeros(1 << 15), sens, eps, output="grid").value
    assert _gamma_ok(good, b)
    broken = frontend.noisy(np.zeros(1 << 15), sens, 2 * eps, output="grid").value
    assert not _gamma_ok(broken, b)


def _zero_share_ok(noise: np.ndarray, scale: int) -> bool:
    """P(Z = 0) = (1 − e^{−1/s})/(1 + e^{−1/s}) for discrete Laplace of scale s; Hoeffding
    at false-positive rate 1e-6."""
    a = np.exp(-1 / scale)
    p = (1 - a) / (1 + a)
    slack = np.sqrt(np.log(2 / FALSE_POSITIVE_RATE) / (2 * noise.size))
    return bool(abs(np.mean(noise == 0) - p) <= slack)


def test_noisy_weights_draw_each_value_at_its_weighted_scale():
    """Privelet's weights: value i at scale wᵢ·Δ/ε (Δ = 1, ε = 1: scales 1 and 4). FPR ≤ 1e-6
    per check; broken: the weights dropped (every value at scale 1) is caught."""
    n = 20_000
    weights = np.tile([1, 4], n // 2)
    out, row = frontend.noisy(np.zeros(n, dtype=np.int64), 1, 1, weights=weights)
    assert out.shape == (n,) and row == frontend.noise_row(1, 1)
    assert _zero_share_ok(out[weights == 1], 1) and _zero_share_ok(out[weights == 4], 4)
    broken = frontend.noisy(np.zeros(n, dtype=np.int64), 1, 1).value
    assert not _zero_share_ok(broken[weights == 4], 4)
    with pytest.raises(DomainError):
        frontend.noisy(np.zeros(3, dtype=np.int64), 1, 1, weights=np.array([1, 0, 1]))
    with pytest.raises(DomainError):
        frontend.noisy(np.zeros(3, dtype=np.int64), 1, 1, weights=np.array([1, 2]))


def test_weighted_draws_are_the_noise_rows_of_a_run():
    def compute():
        frontend.noisy(np.zeros(4, dtype=np.int64), 2, 1, weights=np.array([1, 3, 1, 3]))
        return _Model()

    rows = frontend.charge(None, PureDP(1), "fit", compute).release_.noise
    assert sorted(r.scale for r in rows) == [2, 6]


def test_select_exponential_many_picks_one_index_per_vector():
    picks, row = frontend.select([np.array([3, 1]), np.array([0, 0, 5])], 1, 2,
                                 mechanism="exponential_many")
    assert len(picks) == 2 and 0 <= picks[0] < 2 and 0 <= picks[1] < 3
    assert row.scale == make_selection(1, 2, mechanism="exponential_many").scale
    with pytest.raises(DomainError):
        frontend.select([np.array([1, 2])], 1, 1, k=2, mechanism="exponential_many")


def test_select_peels_at_epsilon_over_k():
    scores = np.array([5.0, 1.0, 3.0, 0.0])
    one, row = frontend.select(scores, 1, 2)
    assert isinstance(one, int) and row.scale == make_selection(1, 2).scale
    picks, row = frontend.select(scores, 1, 2, k=3, monotonic=True)
    assert len(set(picks)) == 3 and row.scale == make_selection(1, Fraction(2, 3),
                                                               monotonic=True).scale
    assert frontend.select(scores, 1, 1, k=1).value in ([0], [1], [2], [3])
    assert frontend.select(scores, 1, 1, size=5).value.shape == (5,)
    with pytest.raises(DomainError):
        frontend.select(scores, 1, ZCDP(1))
    with pytest.raises(DomainError):
        frontend.select(scores, 1, 1, k=2, mechanism="permute_and_flip")


def _learn_fits():
    pytest.importorskip("sklearn")
    from dpkit import learn

    rng = np.random.default_rng(3)  # test input
    y = rng.integers(0, 2, 600)
    x = np.clip(rng.normal(0, 1, (600, 3)) + 1.5 * y[:, None], -4, 6)
    labels = np.where(y == 1, "yes", "no")
    b = {"bounds": (-4, 6)}
    return [
        (learn.GaussianNB(2, classes=["no", "yes"], **b), (x, labels)),
        (learn.CategoricalNB(2, categories=[[0, 1], [0, 1]], classes=["no", "yes"]),
         ((x[:, :2] > 0).astype(int), labels)),
        (learn.LogisticRegression(2, classes=["no", "yes"], **b), (x, labels)),
        (learn.LinearRegression(2, y_bounds=(-4, 6), **b), (x[:, :2], x[:, 2])),
        (learn.KMeans(2, 2, **b), (x,)),
        (learn.PCA(1, 2, **b), (x,)),
        (learn.StandardScaler(2, **b), (x,)),
        (learn.RandomForestClassifier(2, 2, epsilon=2, classes=["no", "yes"], **b),
         (x, labels)),
        (learn.DecisionTreeClassifier(2, 2, classes=["no", "yes"], **b), (x, labels)),
    ]


def test_every_learn_fit_records_its_noise_rows():
    """Issue 31: before the kit, ``release_.noise`` was empty for every learn fit."""
    for model, data in _learn_fits():
        fitted = model.fit(*data)
        assert fitted.release_.noise, type(model).__name__


def test_a_planned_fit_writes_the_rows_it_draws(monkeypatch, tmp_path):
    """LinearRegression plans its rows before the debit (``noise_row(count=…)``), so the
    ledger's row (written at the debit) and the record agree; the plan must be exactly what
    ``noisy`` then draws with (a broken plan without ``count`` has another grid scale)."""
    from dpkit.learn import LinearRegression

    drawn = spy_rows(monkeypatch)
    for d in (1, 3, 6):
        drawn.clear()
        x = np.linspace(0, 1, 50 * d).reshape(-1, d)
        s = dp.Session(pl.DataFrame({"a": [1]}), dp.PrivacyUnit.rows(), dp.PureDP(5),
                       ledger=str(tmp_path / f"l{d}.sqlite"), dataset="d")
        model = LinearRegression(epsilon=1, bounds=(0, 1), y_bounds=(0, 2), accountant=s)
        model.fit(x, x.sum(axis=1))
        assert tuple(drawn) == model.release_.noise
        row = s.ledger.release(model.release_.release_id)
        assert row is not None and row["noise"] and "Laplace (grid)" in row["noise"]
    broken = frontend.noise_row(Fraction(7, 4), 0.5, output="grid")  # no count: size 1
    assert broken.scale != frontend.noise_row(Fraction(7, 4), 0.5, output="grid", count=3).scale
