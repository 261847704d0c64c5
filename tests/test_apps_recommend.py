"""dpkit.apps.recommend: McSherry & Mironov's private recommender.

Accounting (the debit is the declared budget, once, before anything runs), the sensitivity of
each release checked by brute force over every user removed from small random rating sets
(the later stages conditioned on the earlier releases, as the sequential composition
argument does), an audit of the released global statistics on neighbouring inputs with a
broken variant, and bad input (typed errors before any debit).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from dpkit.apps import fit_recommender, nonprivate_recommender
from dpkit.apps import recommend as rec
from dpkit.audit import audit_release
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import ZCDP, PureDP
from dpkit.errors import BudgetExceededError, ColumnError, DomainError
from dpkit.frame import Session

N_ITEMS = 6
BOUNDS = (1, 5)


def ratings(seed: int, users: int = 8) -> pl.DataFrame:
    gen = np.random.default_rng(seed)  # test data only
    rows = []
    for u in range(users):
        k = int(gen.integers(1, N_ITEMS + 1))
        items = gen.choice(N_ITEMS, size=k, replace=False)
        # extreme ratings stress the clipping; duplicates and out-of-universe rows too
        r = gen.choice([1.0, 5.0, 3.0], size=k)
        rows += [(u, int(i), float(x)) for i, x in zip(items, r, strict=True)]
    rows += [(0, N_ITEMS + 3, 5.0), (1, int(rows[-1][1]), 1.0)]
    u, i, r = zip(*rows, strict=True)
    return pl.DataFrame({"user": u, "item": i, "rating": r})


def stage_vectors(df: pl.DataFrame, kind: str, replay: list[np.ndarray] | None = None
                  ) -> list[np.ndarray]:
    """The three released vectors before noise; the later stages use ``replay`` (the
    first dataset's releases) as the released values they depend on."""
    seen: list[np.ndarray] = []

    def noisy(k: int, v: np.ndarray) -> np.ndarray:
        seen.append(np.asarray(v, dtype=np.float64).copy())
        return v if replay is None else replay[k]

    cfg = rec._config(N_ITEMS, BOUNDS, 3, 2, 1.0, 1.0, 5.0, 1.0, 0.0, None)
    rec._fit(df, ("user", "item", "rating"), cfg, kind, noisy, [0.0, 0.0, 0.0])
    return seen


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_sensitivity_brute_force_over_users(kind):
    norm = 1 if kind == "laplace" else 2
    bound = 2.0 if kind == "laplace" else np.sqrt(2.0)
    worst = 0.0
    for seed in range(12):
        df = ratings(seed)
        full = stage_vectors(df, kind)
        for u in df["user"].unique().to_list():
            fewer = stage_vectors(df.filter(pl.col("user") != u), kind, replay=full)
            for a, b in zip(full, fewer, strict=True):
                d = np.linalg.norm(a - b, ord=norm)
                worst = max(worst, d)
                assert d <= bound * (1 + 1e-12), (kind, seed, u, d)
    assert worst > 0.5 * bound  # the inputs reach near the bound (the check has teeth)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_broken_weighting_is_caught(monkeypatch, kind):
    """Without the per-user weights (w = 1) one user moves a release by more than the bound."""
    bound = 2.0 if kind == "laplace" else np.sqrt(2.0)
    norm = 1 if kind == "laplace" else 2
    monkeypatch.setattr(rec, "_weight", lambda n_u, kind, stage: np.ones_like(n_u))
    worst = 0.0
    for seed in range(4):
        df = ratings(seed)
        full = stage_vectors(df, kind)
        for u in df["user"].unique().to_list():
            fewer = stage_vectors(df.filter(pl.col("user") != u), kind, replay=full)
            worst = max(worst, *(np.linalg.norm(a - b, ord=norm)
                                 for a, b in zip(full, fewer, strict=True)))
    assert worst > bound


def test_debit_equals_budget_pure_and_zcdp():
    df = ratings(1)
    f = PrivacyFilter(PureDP(2))
    model = fit_recommender(df, n_items=N_ITEMS, bounds=BOUNDS, epsilon=Fraction(3, 4),
                            accountant=f, neighbours=2, rank=2)
    assert f.spent == PureDP(Fraction(3, 4))
    assert model.covariance.shape == (N_ITEMS, N_ITEMS)
    z = PrivacyFilter(ZCDP(1))
    fit_recommender(df, n_items=N_ITEMS, bounds=BOUNDS, rho=Fraction(1, 5), accountant=z,
                    neighbours=2, rank=2)
    assert z.spent == ZCDP(Fraction(1, 5))
    session = Session(df, budget=PureDP(1))
    fit_recommender(df, n_items=N_ITEMS, bounds=BOUNDS, epsilon=Fraction(1, 2),
                    accountant=session, neighbours=2, rank=2)
    last = session.accountant.last
    assert last.loss == PureDP(Fraction(1, 2))
    assert [row.statistic for row in last.noise] == ["global effect", "item effects",
                                                      "covariance"]


def test_overrun_and_bad_input_raise_before_any_debit():
    df = ratings(2)
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(BudgetExceededError):
        fit_recommender(df, n_items=N_ITEMS, bounds=BOUNDS, epsilon=2, accountant=f)
    bad = [dict(n_items=1), dict(n_items=rec.MAX_ITEMS + 1), dict(bounds=(5, 1)),
           dict(bounds=(0, float("inf"))), dict(epsilon=0), dict(epsilon=1, rho=1),
           dict(epsilon=None), dict(split=(1, 0, 0)), dict(split=(0.5, 0.5)),
           dict(neighbours=0), dict(rank=0), dict(beta_item=-1), dict(clip=0), dict(item_prior=0),
           dict(epsilon="1")]
    for extra in bad:
        kwargs = dict(n_items=N_ITEMS, bounds=BOUNDS, epsilon=1, accountant=f) | extra
        with pytest.raises(DomainError):
            fit_recommender(df, **kwargs)
    with pytest.raises(ColumnError):
        fit_recommender(df.rename({"rating": "score"}), n_items=N_ITEMS, bounds=BOUNDS,
                        epsilon=1, accountant=f)
    with pytest.raises(DomainError):
        fit_recommender(df.with_columns(pl.col("rating").cast(pl.String)), n_items=N_ITEMS,
                        bounds=BOUNDS, epsilon=1, accountant=f)
    with pytest.raises(DomainError):
        fit_recommender(df.to_dict(), n_items=N_ITEMS, bounds=BOUNDS, epsilon=1,
                        accountant=f)
    assert f.spent == PureDP(0)


def test_data_problems_after_the_debit_never_raise():
    """An empty frame, NaN ratings, items outside the universe: dropped, the fit succeeds."""
    f = PrivacyFilter(PureDP(10))
    empty = pl.DataFrame({"user": [], "item": [], "rating": []},
                         schema={"user": pl.Int64, "item": pl.Int64, "rating": pl.Float64})
    odd = pl.DataFrame({"user": [1, 1, 2], "item": [-1, 99, 2],
                        "rating": [float("nan"), 4.0, float("inf")]})
    for df in (empty, odd):
        model = fit_recommender(df, n_items=N_ITEMS, bounds=BOUNDS, epsilon=1, accountant=f)
        assert np.all(np.isfinite(model.covariance))
        pred = model.predict(df.filter(pl.col("item").is_between(0, N_ITEMS - 1)),
                             pl.DataFrame({"user": [1, 7], "item": [0, 5]}))
        assert np.all((pred >= 1) & (pred <= 5))
    assert f.spent == PureDP(2)


def test_predictions_and_top_k_shapes():
    df = ratings(4, users=20).filter(pl.col("item") < N_ITEMS)
    model = nonprivate_recommender(df, n_items=N_ITEMS, bounds=BOUNDS, neighbours=2, rank=2)
    private = fit_recommender(df, n_items=N_ITEMS, bounds=BOUNDS, rho=1, item_prior=0.5,
                              neighbours=2, rank=2)
    assert np.all(np.abs(private.item_effects) <= 2)
    pairs = df.select("user", "item")
    for method in ("knn", "factor", "baseline"):
        pred = model.predict(df, pairs, method=method)
        assert pred.shape == (df.height,) and np.all((pred >= 1) & (pred <= 5))
        top = model.top_k(df, 2, method=method)
        rated = set(zip(df["user"], df["item"], strict=True))
        assert not rated & set(zip(top["user"], top["item"], strict=True))
    with pytest.raises(DomainError):
        model.predict(df, pairs, method="svd")


# The audit: the released global statistics (noisy weighted sum + weight) of neighbouring
# rating sets, one user (a single rating of 5: the largest shift) added. False-positive rate
# 1e-6 (dpkit.audit.audit_release); the broken variant claims ε but runs at 8ε.
X = pl.DataFrame({"user": [0, 0], "item": [0, 1], "rating": [1.0, 2.0]})
X_PRIME = pl.concat([X, pl.DataFrame({"user": [1], "item": [2], "rating": [5.0]})])
SPLIT = (Fraction(8, 10), Fraction(1, 10), Fraction(1, 10))


def global_release(epsilon: float):
    def release(df: pl.DataFrame) -> float:
        m = fit_recommender(df, n_items=3, bounds=BOUNDS, epsilon=epsilon, split=SPLIT,
                            neighbours=1, rank=1)
        return float(m.global_statistics.sum())
    return release


@pytest.mark.slow
def test_audit_global_release_and_broken_variant():
    ok = audit_release(global_release(1.0), X, X_PRIME, 1.0, samples=600,
                       histogram_share=0)
    assert ok.passed, ok.lower_bound
    broken = audit_release(global_release(8.0), X, X_PRIME, 1.0, samples=600,
                           histogram_share=0)
    assert not broken.passed, broken.lower_bound


# The floor (issue 34): the guard is post-processing, and an unsupported item predicts G.


def test_guard_is_post_processing_same_debit_and_ledger_row():
    """The guard changes nothing that is charged: the loss, the description and the noise
    rows are those of the unguarded fit."""
    df = ratings(5, users=12)
    records = []
    for guard in (0, rec.GUARD):
        session = Session(df, budget=PureDP(1))
        fit_recommender(df, n_items=N_ITEMS, bounds=BOUNDS, epsilon=Fraction(1, 2),
                        accountant=session, guard=guard, neighbours=2, rank=2)
        records.append(session.accountant.last)
        assert session.accountant.spent == PureDP(Fraction(1, 2))
    a, b = records
    assert a.loss == b.loss and a.description == b.description
    assert [(r.statistic, r.scale, r.sensitivity) for r in a.noise] == [
        (r.statistic, r.scale, r.sensitivity) for r in b.noise]


def guarded_fit(df: pl.DataFrame, guard: float) -> rec.Recommender:
    """A fit whose releases are the exact statistics but whose declared noise std is 1, so
    the guard's decision is deterministic."""
    cfg = rec._config(N_ITEMS, BOUNDS, 3, 2, 1.0, 1.0, 5.0, 1.0, 0.0, None, None, guard)
    return rec._fit(df, ("user", "item", "rating"), cfg, "laplace", lambda k, v: v,
                    [1.0, 1.0, 1.0])


def test_item_with_zero_support_predicts_the_global_mean():
    df = ratings(6, users=20).filter(pl.col("item") != N_ITEMS - 1)  # last item: no rating
    for guard in (0.0, 1.0):
        model = guarded_fit(df, guard)
        assert model.item_effects[N_ITEMS - 1] == 0.0
        assert np.all(model.confidence[N_ITEMS - 1] == 0.0)
        if guard:  # a guarded pair is no coupling (unguarded: M&M's average c̄)
            assert np.all(model.covariance[N_ITEMS - 1, : N_ITEMS - 1] == 0.0)
        for method in ("knn", "factor", "baseline"):
            new = model.predict(df, pl.DataFrame({"user": [999], "item": [N_ITEMS - 1]}),
                                method=method)
            assert new[0] == pytest.approx(model.global_mean, abs=1e-12)


def test_guard_sends_items_below_the_noise_to_the_global_mean():
    """Weights Σ 1/n_u ≤ 20 here: a threshold of 100 noise stds drops every item and pair
    (every method predicts the baseline G + b_u); without the guard some items keep their
    effect (the test has teeth)."""
    df = ratings(7, users=20).filter(pl.col("item") < N_ITEMS)
    off = guarded_fit(df, 0.0)
    on = guarded_fit(df, 100.0)
    assert np.any(off.item_effects != 0) and np.all(on.item_effects == 0)
    assert np.all(on.confidence == 0)
    pairs = df.select("user", "item")
    base = on.predict(df, pairs, method="baseline")
    for method in ("knn", "factor"):
        assert np.allclose(on.predict(df, pairs, method=method), base, atol=1e-9)
