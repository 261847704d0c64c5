"""dpkit.apps.topk: top-k over an unknown domain with user-level contribution bounds.

The release is one Session release of two audited mechanisms (partition selection and the
calibrated count noise, both in the registry's audit battery); here: accounting, plan-time
refusals, the contribution bound, and the released counts' noise law. False-positive rate of
the χ² test: ≤ 1e-6 (tests/stats.py); the same test must reject the law of a release that
ignores the bound d (noise for d = 1)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_laplace_pmf

import dpkit as dp
from dpkit.apps.topk import top_k_query, top_k_unknown_domain
from dpkit.core import samplers
from dpkit.core.compose import PrivacyFilter
from dpkit.errors import BudgetExceededError, ColumnError, DomainError

D, EPS_C, USERS_PER_ITEM, ITEMS = 4, Fraction(1), 200, 400


def _grid() -> pl.DataFrame:
    """ITEMS items with exactly USERS_PER_ITEM users each; every user in exactly D items (so
    the bound drops nothing and every true count is USERS_PER_ITEM)."""
    users = ITEMS * USERS_PER_ITEM // D
    u = np.repeat(np.arange(users), D)
    i = (np.arange(users)[:, None] * D + np.arange(D)[None, :]).ravel() % ITEMS
    return pl.DataFrame({"user": u, "item": i})


def test_debit_is_the_declared_budget() -> None:
    f = PrivacyFilter(dp.ApproxDP(3, 1e-5))
    top_k_unknown_domain(_grid(), user="user", item="item", k=3, d=D, epsilon=2,
                         delta=1e-6, accountant=f)
    assert f.spent.epsilon == 2 and f.spent.delta == Fraction(1e-6)


@pytest.mark.parametrize("kwargs", [
    {"k": 0}, {"d": 0}, {"epsilon": 0}, {"delta": 0}, {"delta": 1}, {"selection_share": 0},
    {"selection_share": 1}, {"method": "magic"}, {"user": "item"}, {"accountant": 1},
    {"d": 10**6},
])
def test_bad_input_raises_before_any_debit(kwargs: dict) -> None:
    f = PrivacyFilter(dp.ApproxDP(3, 1e-5))
    args = {"user": "user", "item": "item", "k": 3, "d": 2, "epsilon": 1, "delta": 1e-6,
            "accountant": f} | kwargs
    with pytest.raises(DomainError):
        top_k_unknown_domain(_grid(), **args)
    with pytest.raises(ColumnError):
        top_k_unknown_domain(_grid(), user="nope", item="item", k=3, d=2, epsilon=1,
                             delta=1e-6, accountant=f)
    with pytest.raises(DomainError):
        top_k_unknown_domain({"user": [1]}, user="user", item="item", k=3, d=2, epsilon=1,
                             delta=1e-6, accountant=f)
    assert f.spent.epsilon == 0


def test_over_budget_is_refused() -> None:
    f = PrivacyFilter(dp.ApproxDP(1, 1e-5))
    with pytest.raises(BudgetExceededError):
        top_k_unknown_domain(_grid(), user="user", item="item", k=3, d=2, epsilon=2,
                             delta=1e-6, accountant=f)
    assert f.spent.epsilon == 0


def test_a_user_counts_once_per_item_and_in_at_most_d_items() -> None:
    """Neighbouring tables differ by one user: here a user with 5,000 rows of one item and
    rows in 50 others. Duplicates count once, so their item stays unreleased (one user);
    with ε large the popular item's count is its number of users."""
    crowd = pl.DataFrame({"user": np.arange(1, 1001), "item": np.zeros(1000, dtype=np.int64)})
    heavy = pl.DataFrame({"user": np.zeros(5050, dtype=np.int64),
                          "item": np.concatenate([np.full(5000, 7), np.arange(100, 150)])})
    table = pl.concat([crowd, heavy])
    out = top_k_unknown_domain(table, user="user", item="item", k=10, d=2, epsilon=400,
                               delta=1e-6)
    assert out["item"].to_list() == [0]
    assert abs(out["count"][0] - 1000) <= 2  # scale d/ε_c = 1/100; user 0 not in item 0


def _noise(counts: pl.Series) -> np.ndarray:
    return counts.to_numpy() - USERS_PER_ITEM


def test_counts_have_the_declared_noise_law() -> None:
    out = top_k_unknown_domain(_grid(), user="user", item="item", k=ITEMS, d=D,
                               epsilon=2 * EPS_C, delta=1e-6)
    assert out.height == ITEMS  # 200 users per item: always past the threshold
    support = np.arange(-80, 81)
    scale = float(D / EPS_C)
    assert chi2_pvalue(_noise(out["count"]), support,
                       discrete_laplace_pmf(support, scale)) > FALSE_POSITIVE_RATE


def test_noise_law_test_catches_a_release_that_ignores_d() -> None:
    broken = samplers.discrete_laplace(Fraction(1) / EPS_C, ITEMS)  # noise for d = 1
    support = np.arange(-80, 81)
    assert chi2_pvalue(np.asarray(broken), support,
                       discrete_laplace_pmf(support, float(D / EPS_C))) < FALSE_POSITIVE_RATE


def test_from_a_session() -> None:
    s = dp.Session(_grid(), dp.PrivacyUnit.by("user", D, max_groups=D, max_rows_per_group=1),
                   dp.ApproxDP(3, 1e-5))
    out = top_k_query(s, "item", 5, selection=dp.PartitionSelection(1, 1e-6), epsilon=1)
    assert out.height == 5 and s.spent.epsilon == 2
    loose = dp.Session(_grid(), dp.PrivacyUnit.by("user", D, max_groups=D),
                       dp.ApproxDP(3, 1e-5))
    with pytest.raises(DomainError):
        top_k_query(loose, "item", 5, selection=dp.PartitionSelection(1, 1e-6), epsilon=1)
    assert loose.spent.epsilon == 0


def _clicked() -> pl.DataFrame:
    """_grid() with one click column: user u clicks u % 3 times on each of its items, over
    two rows per (user, item) (summed before the bound)."""
    g = _grid().with_columns(clicks=pl.col("user") % 3)
    return pl.concat([g, g.with_columns(clicks=pl.lit(0, dtype=g["clicks"].dtype))])


def test_limited_domain_with_clicks_spends_the_budget_and_ranks_best_first() -> None:
    f = PrivacyFilter(dp.ApproxDP(4, 1e-5))
    table = pl.concat([_clicked(), pl.DataFrame({"user": np.arange(5000, 5600),
                                                 "item": np.full(600, 10_000),
                                                 "clicks": np.zeros(600, dtype=np.int64)})])
    out = top_k_unknown_domain(table, user="user", item="item", k=3, d=None, epsilon=3,
                               delta=1e-6, method="limited_domain", k_bar=20,
                               clicks="clicks", click_bound=2, accountant=f)
    assert f.spent.epsilon == 3 and f.spent.delta == Fraction(1e-6)
    assert out.columns == ["item", "count", "count_ci_low", "count_ci_high", "clicks",
                           "clicks_ci_low", "clicks_ci_high"]
    assert 1 <= out.height <= 3
    assert out["item"][0] == 10_000  # 600 users against 200: first whenever anything is
    # its clicks are all 0; noise scale min(d, k)·c/(ε_c/2) = 8: |noise| > 200 w.p. < 1e-10
    assert abs(out["clicks"][0]) <= 200


@pytest.mark.parametrize("kwargs", [
    {"clicks": "clicks"}, {"click_bound": 2}, {"clicks": "clicks", "click_bound": 0},
    {"clicks": "user", "click_bound": 1}, {"method": "laplace", "k_bar": 5},
    {"method": "limited_domain", "k_bar": 1}, {"d": None},
])
def test_click_and_method_refusals_spend_nothing(kwargs: dict) -> None:
    f = PrivacyFilter(dp.ApproxDP(4, 1e-5))
    args = {"user": "user", "item": "item", "k": 3, "d": 2, "epsilon": 1, "delta": 1e-6,
            "accountant": f, **kwargs}
    with pytest.raises(DomainError):
        top_k_unknown_domain(_clicked(), **args)
    assert f.spent.epsilon == 0


def test_click_totals_have_the_declared_noise_law() -> None:
    """Threshold method, all ITEMS items released; per item the exact click total is known,
    the noise is discrete Laplace of scale d·c/(ε_c/2)."""
    table = _clicked()
    exact = (table.group_by("user", "item").agg(pl.col("clicks").sum().clip(0, 2))
             .group_by("item").agg(pl.col("clicks").sum().alias("exact")))
    out = top_k_unknown_domain(table, user="user", item="item", k=ITEMS, d=D,
                               epsilon=4 * EPS_C, delta=1e-6, clicks="clicks", click_bound=2)
    assert out.height == ITEMS
    noise = out.join(exact, on="item").select(pl.col("clicks") - pl.col("exact"))
    support = np.arange(-150, 151)
    scale = float(D * 2 / EPS_C)  # ε_c = 2·EPS_C, half of it to the clicks
    assert chi2_pvalue(noise.to_series().to_numpy().astype(np.int64), support,
                       discrete_laplace_pmf(support, scale)) > FALSE_POSITIVE_RATE
    broken = samplers.discrete_laplace(Fraction(2) / EPS_C, ITEMS)  # ignores d
    assert chi2_pvalue(np.asarray(broken), support,
                       discrete_laplace_pmf(support, scale)) < FALSE_POSITIVE_RATE


def test_from_a_session_with_top_k_selection() -> None:
    s = dp.Session(_grid(), dp.PrivacyUnit.by("user", D, max_groups=D, max_rows_per_group=1),
                   dp.ApproxDP(3, 1e-5))
    out = top_k_query(s, "item", 5, selection=dp.TopKSelection(5, 2, 1e-6, k_bar=ITEMS),
                      epsilon=1)
    assert out.height <= 5 and s.spent.epsilon == 3
