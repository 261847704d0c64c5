"""dpkit.learn itemsets at scale: sparse supports (itemsets.py), TF with candidate pruning,
SmartTrunc (smarttrunc.py) and the front door ``frequent_itemsets``.

Statistical tests reject a correct implementation with probability ≤ 1e-6
(tests/stats.FALSE_POSITIVE_RATE) and each is paired with a broken variant it catches.
No production noise is seeded: the randomness below only builds test inputs."""

from __future__ import annotations

import itertools
import math
import tracemalloc
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from kit_spies import spy_noisy, spy_select  # noqa: E402
from stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_laplace_pmf

from dpkit.core import rng
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import DomainError, InsecureRandomnessError
from dpkit.learn import itemsets as IS  # noqa: N812
from dpkit.learn import privbasis as PB  # noqa: N812
from dpkit.learn import smarttrunc as ST  # noqa: N812
from dpkit.mechanisms import frontend  # noqa: E402

transactions = st.lists(st.lists(st.integers(0, 6), max_size=7), min_size=1, max_size=40)


def _support(tx: list[list[int]], itemset: tuple[int, ...]) -> int:
    return sum(set(itemset) <= set(t) for t in tx)


def _random_tx(seed: int, n: int, m: int, p: float) -> list[list[int]]:
    g = np.random.default_rng(seed)  # test input
    return [np.flatnonzero(g.random(m) < p).tolist() for _ in range(n)]


# ---------------------------------------------------------------- sparse supports (exact)

@settings(max_examples=60, deadline=None)
@given(tx=transactions)
def test_sparse_incidence_matches_membership(tx):
    x = IS.sparse_incidence(tx, range(7))
    assert sp.isspmatrix_csr(x) and x.shape == (len(tx), 7)
    dense = x.toarray()
    assert set(np.unique(dense)) <= {0, 1}  # a repeated item counts once
    assert all(dense[r, c] == (c in tx[r]) for r in range(len(tx)) for c in range(7))
    again = IS.sparse_incidence(sp.csr_matrix(dense * 3), range(7))  # nonzero = present
    assert (again != x).nnz == 0
    assert np.array_equal(IS.incidence(tx, range(7)), dense.astype(bool))


def test_sparse_incidence_refuses_unknown_items_and_bad_shapes():
    with pytest.raises(DomainError, match="declared universe"):
        IS.sparse_incidence([[1, 9]], range(3))
    assert IS.sparse_incidence([[1, 9]], range(3), strict=False).toarray().tolist() == [
        [0, 1, 0]]
    with pytest.raises(DomainError):
        IS.sparse_incidence(sp.csr_matrix(np.ones((2, 4))), range(3))
    with pytest.raises(DomainError):
        IS.sparse_incidence([1, 2], range(3))


@settings(max_examples=40, deadline=None)
@given(tx=transactions, max_size=st.integers(1, 3))
def test_candidate_supports_sparse_match_brute_force(tx, max_size):
    sets, counts = IS.candidate_supports(IS.sparse_incidence(tx, range(7)), max_size)
    expected = [c for r in range(1, max_size + 1) for c in itertools.combinations(range(7), r)]
    assert sets == expected
    assert counts.tolist() == [_support(tx, s) for s in sets]


@settings(max_examples=60, deadline=None)
@given(tx=transactions, k=st.integers(1, 40), max_size=st.sampled_from([None, 1, 2, 3]))
def test_top_supports_match_brute_force(tx, k, max_size):
    """Best-first search with pruning below the k-th support seen = the brute-force order
    (support descending, size, indices), support-0 itemsets left out."""
    cap = 7 if max_size is None else max_size
    brute = sorted(((_support(tx, s), s) for r in range(1, cap + 1)
                    for s in itertools.combinations(range(7), r)),
                   key=lambda p: (-p[0], len(p[1]), p[1]))
    brute = [p for p in brute if p[0] > 0][:k]
    x = IS.sparse_incidence(tx, range(7))
    assert IS.top_supports(x, k, max_size) == brute
    assert IS.top_supports(x.toarray(), k, max_size) == brute  # dense input too
    assert PB.exact_top_k_all(tx, range(7), k, max_size) == [s for _, s in brute]


@settings(max_examples=60, deadline=None)
@given(tx=transactions, size=st.integers(1, 4), data=st.data())
def test_level_counts_match_brute_force(tx, size, data):
    """Both counting paths (every i-subset of every row encoded; the sparse product, taken
    when the enumeration would be too large) give the exact supports of the candidates."""
    all_sets = list(itertools.combinations(range(7), size))
    cands = data.draw(st.lists(st.sampled_from(all_sets), min_size=1, unique=True))
    x = IS.sparse_incidence(tx, range(7))
    want = [_support(tx, c) for c in cands]
    arr = np.array(cands).reshape(len(cands), size)
    assert ST.level_counts(x, arr).tolist() == want
    limit = ST._ENUM_LIMIT
    try:
        ST._ENUM_LIMIT = -1  # force the product path
        assert ST.level_counts(x, arr).tolist() == want
    finally:
        ST._ENUM_LIMIT = limit


@settings(max_examples=40, deadline=None)
@given(tx=transactions, ell=st.integers(1, 4), data=st.data())
def test_truncate_keeps_the_first_ell_ranked_items(tx, ell, data):
    ranked = data.draw(st.permutations(range(7)))[:5]
    t = ST.truncate(IS.sparse_incidence(tx, range(7)), ranked, ell)
    for r, row in enumerate(tx):
        keep = [j for j, item in enumerate(ranked) if item in row][:ell]
        assert t[r].indices.tolist() == keep


@settings(max_examples=60, deadline=None)
@given(kept=st.lists(st.lists(st.integers(0, 6), min_size=2, max_size=2, unique=True)
                     .map(lambda s: tuple(sorted(s))), unique=True))
def test_apriori_gen_is_the_downward_closed_join(kept):
    got = set(ST.apriori_gen(kept))
    keep = set(kept)
    want = {c for c in itertools.combinations(range(7), 3)
            if all(s in keep for s in itertools.combinations(c, 2))}
    assert got == want


def test_level_count_sensitivity_holds_after_truncation():
    """On every neighbour (a row removed, or any transaction of the universe added) the
    level-i counts of the truncated data move by at most the declared
    min(C(ℓ, i), |C_i|) in L1; without the truncation (a broken variant) a long
    transaction moves them by C(|t|, i) > C(ℓ, i) and the check catches it."""
    tx = _random_tx(3, 40, 8, 0.5)
    ranked, ell = [3, 1, 7, 0, 5, 2, 6, 4], 3
    extra = [list(s) for r in (0, 1, 4, 8) for s in itertools.combinations(range(8), r)]

    def worst(i: int, cands: np.ndarray, cut: int | None) -> int:
        def counts(rows: list[list[int]]) -> np.ndarray:
            t = ST.truncate(IS.sparse_incidence(rows, range(8)), ranked, cut)
            return ST.level_counts(t, cands)

        base = counts(tx)
        moves = [np.abs(base - counts(tx[:r] + tx[r + 1:])).sum() for r in range(len(tx))]
        moves += [np.abs(base - counts(tx + [t])).sum() for t in extra]
        return int(max(moves))

    for i in (1, 2, 3):
        cands = np.array(list(itertools.combinations(range(8), i)))
        assert worst(i, cands, ell) <= ST._level_sensitivity(ell, i, len(cands))
        assert worst(i, cands, None) > ST._level_sensitivity(ell, i, len(cands))  # broken
    few = np.array([(0, 1), (2, 3)])  # two candidates: at most 2 move, whatever ℓ
    assert worst(2, few, ell) <= ST._level_sensitivity(ell, 2, 2) == 2


# ---------------------------------------------------------------- SmartTrunc: budget

def _spy_budget(monkeypatch) -> list[tuple[str, Fraction, Any]]:
    calls: list[tuple[str, Fraction, Any]] = []
    real_sel = frontend.select

    def lap(values, sensitivity, epsilon):
        calls.append(("laplace", Fraction(epsilon), (np.asarray(values).size,
                                                     Fraction(sensitivity))))

    def sel(scores, sensitivity, epsilon, **kw):
        calls.append(("select", Fraction(epsilon), kw.get("monotonic")))
        return real_sel(scores, sensitivity, epsilon, **kw)

    spy_noisy(monkeypatch, lap)
    monkeypatch.setattr(frontend, "select", sel)
    return calls


def _planted(groups: int = 1) -> list[list[int]]:
    """Group g holds items 3g … 3g+2 in 2000 − 500g rows, with extras giving the items
    distinct supports; other items (up to 40) appear once each."""
    rows: list[list[int]] = []
    for g in range(groups):
        a = 3 * g
        rows += [[a, a + 1, a + 2]] * (2000 - 500 * g) + [[a]] * 200 + [[a, a + 1]] * 100
    rows += [[j] for j in range(3 * groups, 40)] + [[]] * 100
    return rows


def _dense() -> list[list[int]]:
    """600 transactions of 10 of the items 0 … 11 (each misses two, in turn), 40 items."""
    return [[j for j in range(12) if j not in (r % 12, (r + 5) % 12)] for r in range(600)]


def test_budget_split_sums_exactly_in_every_strategy(monkeypatch):
    """ε = ε_n + ε_λ + ε_F + ε_m + ε_P + ε_S exactly, whichever branch runs (ε = 20: each
    branch below is taken with probability > 1 − 1e-9, by the margins in brackets).
    Dense (m̄ = 10 ≥ r ≤ 7, margin ≥ 1800 at scale ≤ 14): r peeling rounds at ε_F/r, one
    basis at ε_S + ε_P. Sparse, λ ≤ cap (m̄ ≈ 2.7 < 3 ≤ r, margin ≥ 600 at scale ≤ 14):
    the one-item Laplace selection at ε_F, one basis at ε_S + ε_P. Sparse, λ > cap
    (max_size=1: λ_lo = k = 20 is above 16 items, no cap): no pairs, bases at ε_S + ε_P;
    with counting="levels", ℓ at ε_P and one level at ε_S."""
    eps = Fraction(20)
    a_n, a_l, a_f, a_m, a_p = ST.DEFAULT_SPLIT
    e_s = eps * (1 - a_n - a_l - a_f - a_m - a_p)
    calls = _spy_budget(monkeypatch)
    acct = PrivacyFilter(PureDP(eps))
    ST.smarttrunc(_dense(), range(40), 7, eps, accountant=acct)
    assert acct.spent == PureDP(eps)
    assert sum(c[1] for c in calls) == eps
    r = sum(c[0] == "select" for c in calls) - 1
    assert calls[:3] == [("laplace", a_n * eps, (1, Fraction(1))),  # n̂
                         ("select", a_l * eps, False),  # λ: not monotone
                         ("laplace", a_m * eps, (1, Fraction(2 * r)))]  # density
    assert [c[1:] for c in calls[3:3 + r]] == [(a_f * eps / r, True)] * r
    assert calls[3 + r:] == [("laplace", e_s + a_p * eps, (2 ** r, Fraction(1)))]

    calls.clear()
    ST.smarttrunc(_planted(), range(40), 7, eps)
    assert sum(c[1] for c in calls) == eps
    assert [c[0] for c in calls] == ["laplace", "select", "laplace", "laplace", "laplace"]
    assert calls[3] == ("laplace", a_f * eps, (40, Fraction(1)))  # one item per transaction
    assert calls[4][1] == e_s + a_p * eps and calls[4][2][1] == 1  # one basis

    calls.clear()
    ST.smarttrunc(_planted(), range(40), 20, eps, max_size=1)
    assert sum(c[1] for c in calls) == eps
    assert [c[0] for c in calls] == ["laplace", "select", "laplace", "laplace", "laplace"]
    assert calls[4][1] == e_s + a_p * eps and calls[4][2][1] > 1  # w bases

    calls.clear()
    ST.smarttrunc(_planted(), range(40), 20, eps, max_size=1, counting="levels")
    assert sum(c[1] for c in calls) == eps
    assert [c[0] for c in calls] == ["laplace", "select", "laplace", "laplace", "select",
                                     "laplace"]
    assert calls[4] == ("select", a_p * eps, False)  # ℓ
    assert calls[5][1] == e_s and calls[5][2][0] == 20  # the one level: 20 candidates


def test_pairs_budget_in_the_multi_basis_branch(monkeypatch):
    """λ > cap with pairs: the random-pair counts (L1 sensitivity 1) at ε_P, then the cells
    of w bases at ε_S with sensitivity w; the parts sum to ε. 12 planted pairs {2g, 2g+1}
    in 300 + 10g rows, 6 rare items; a tiny noise_share puts the cap at λ_lo = 5. f_24 = 340
    and λ = 15, 16 score 0, λ ≤ 5 at most −50, at scale 2/ε_λ = 1: λ > cap except with
    probability < 5e^{−50}; m̄ ≈ 2 < r = 5 (sparse), and min(k − λ, C(λ, 2)) ≥ 8 pairs."""
    rows = [[2 * g, 2 * g + 1] for g in range(12) for _ in range(300 + 10 * g)]
    rows += [[j] for j in range(24, 30) for _ in range(5)]
    eps = Fraction(20)
    a_n, a_l, a_f, a_m, a_p = ST.DEFAULT_SPLIT
    calls = _spy_budget(monkeypatch)
    out = ST.smarttrunc(rows, range(30), 24, eps, noise_share=Fraction(1, 10**6))
    assert sum(c[1] for c in calls) == eps
    assert [c[0] for c in calls] == ["laplace", "select", "laplace", "laplace", "laplace",
                                     "laplace"]
    assert calls[4][1] == a_p * eps and calls[4][2][1] == 1  # pairs
    assert calls[5][1] == eps * (1 - a_n - a_l - a_f - a_m - a_p)
    assert calls[5][2][1] >= 3  # λ > 5 items in bases of ≤ 5: w ≥ 3
    assert len(out.itemsets) == 24


def test_accountant_debited_before_any_statistic(monkeypatch):
    acct = PrivacyFilter(PureDP(2))
    seen = []
    real = ST.top_supports

    def spy(x, k, max_size=None):
        seen.append(acct.spent)
        return real(x, k, max_size)

    monkeypatch.setattr(ST, "top_supports", spy)
    ST.smarttrunc(_planted(), range(40), 7, Fraction(3, 2), accountant=acct)
    assert seen == [PureDP(Fraction(3, 2))]


def test_bad_inputs_raise_before_any_debit():
    acct = PrivacyFilter(PureDP(10))
    tx = [[1, 2], [2, 3]]
    bad: list[dict[str, Any]] = [
        dict(k=0), dict(k=True), dict(k=8), dict(epsilon=0), dict(max_size=0),
        dict(split=(0, 0.1, 0.3, 0.05, 0.1)), dict(split=(0.5, 0.3, 0.3, 0.05, 0.1)),
        dict(split=(0.1, 0.1, 0.1, 0.1)), dict(noise_share=0), dict(threshold=-1),
        dict(length_quantile=0), dict(length_quantile=2), dict(max_candidates=0),
        dict(counting="apriori")]
    for kw in bad:
        args: dict[str, Any] = {"k": 2, "epsilon": 1, **kw}
        with pytest.raises(DomainError):
            ST.smarttrunc(tx, [1, 2, 3], args.pop("k"), args.pop("epsilon"),
                          accountant=acct, **args)
    with pytest.raises(DomainError, match="declared universe"):
        ST.smarttrunc([[1, 4]], [1, 2, 3], 2, 1, accountant=acct)
    with pytest.raises(DomainError):
        ST.smarttrunc(tx, [1, 1, 3], 2, 1, accountant=acct)
    with pytest.raises(DomainError):
        ST.frequent_itemsets(tx, [1, 2, 3], 2, 1, method="apriori", accountant=acct)
    assert acct.spent == PureDP(0)


def test_entry_points_refuse_the_test_stream():
    for call in (lambda: ST.smarttrunc(_planted(), range(40), 5, 1),
                 lambda: IS.top_k_itemsets(_planted(), range(40), 5, 1, prune=True)):
        with rng.deterministic_for_tests(18), pytest.raises(InsecureRandomnessError):
            call()
        call()


# ---------------------------------------------------------------- SmartTrunc: statistics

def test_level_noise_is_discrete_laplace_of_scale_delta_levels_over_epsilon(monkeypatch):
    """Level-1 estimates minus the exact truncated supports are discrete Laplace of scale
    Δ₁·L/ε_S = min(ℓ, |F|)·L/ε_S (χ², p > 1e-6 for a correct implementation); a broken
    sensitivity of 1 (scale L/ε_S) gives p < 1e-6."""
    x = IS.sparse_incidence(_random_tx(8, 300, 60, 0.1), range(60))
    ranked, ell, levels, eps = list(range(60)), 3, 2, Fraction(4)
    exact = np.asarray(ST.truncate(x, ranked, ell).sum(axis=0)).ravel()

    def draws() -> np.ndarray:
        out = []
        for _ in range(160):  # 9,600 values: level 1 of a run with L = 2 (ε_S/L each)
            sets, _, est = ST._levels_mode(x, ranked, ell, 1, 50, eps / levels, 100)
            out.append(est - exact[[s[0] for s in sets]])
        return np.concatenate(out)

    support = np.arange(-40, 41)  # P(|Z| > 40) < e^{-26}: no draw falls outside
    pmf = discrete_laplace_pmf(support, 3 * levels / float(eps))
    assert chi2_pvalue(draws(), support, pmf) > FALSE_POSITIVE_RATE
    monkeypatch.setattr(ST, "_level_sensitivity", lambda ell, i, n: 1)  # broken
    assert chi2_pvalue(draws(), support, pmf) < FALSE_POSITIVE_RATE


def test_cells_noise_is_discrete_laplace_of_scale_w_over_epsilon(monkeypatch):
    """Ten one-item bases: each singleton's estimate is its cell plus discrete Laplace of
    scale w/ε = 10/ε (threshold 0; χ², p > 1e-6 for a correct implementation); a broken
    sensitivity of 1 (scale 1/ε) gives p < 1e-6."""
    tx = _random_tx(9, 200, 10, 0.4)
    x = IS.sparse_incidence(tx, range(10))
    exact = IS.item_supports(x)
    bases, eps = [[j] for j in range(10)], Fraction(5)

    def draws() -> np.ndarray:
        out = []
        for _ in range(900):  # 9,000 values
            sets, _, est = ST._bins_mode(x, bases, eps, 1, Fraction(0))
            out.append(est - exact[[s[0] for s in sets]])
        return np.concatenate(out)

    support = np.arange(-60, 61)  # P(|Z| > 60) < e^{-30}: no draw falls outside
    pmf = discrete_laplace_pmf(support, 2.0)
    assert chi2_pvalue(draws(), support, pmf) > FALSE_POSITIVE_RATE
    monkeypatch.setattr(ST, "_cells_sensitivity", lambda b: Fraction(1))  # broken
    assert chi2_pvalue(draws(), support, pmf) < FALSE_POSITIVE_RATE


def test_random_truncation_is_uniform(monkeypatch):
    """One item (pair) per transaction, uniformly: 6,000 copies of a 5-item transaction
    spread evenly over its 5 items (10 pairs) — χ², p > 1e-6 for a correct implementation;
    a broken variant that keeps the first item (a data-order rule: the first pair) gives
    p < 1e-6. Rows too short are skipped (one item needs 1, one pair 2)."""
    row = [2, 3, 5, 7, 11]
    tx = [row] * 6000 + [[], [4]]
    x = IS.sparse_incidence(tx, range(12))
    items = ST.one_item(x)
    assert items.size == 6001 and items[-1] == 4
    cells = np.arange(5)
    assert chi2_pvalue(np.searchsorted(row, items[:-1]), cells, np.ones(5)) \
        > FALSE_POSITIVE_RATE
    i, j = ST.one_pair(x)
    assert i.size == 6000 and np.all(i < j)
    pair_index = {p: n for n, p in enumerate(itertools.combinations(row, 2))}
    codes = np.array([pair_index[p] for p in zip(i.tolist(), j.tolist(), strict=True)])
    assert chi2_pvalue(codes, np.arange(10), np.ones(10)) > FALSE_POSITIVE_RATE
    monkeypatch.setattr(ST.rng, "uniform_below", lambda b, size=None: np.zeros(
        b.size if size is None else size, dtype=np.uint64))  # broken: always the first
    broken = np.searchsorted(row, ST.one_item(x)[:-1])
    assert chi2_pvalue(broken, cells, np.ones(5)) < FALSE_POSITIVE_RATE
    bi, bj = ST.one_pair(x)
    broken_pairs = np.array([pair_index[p] for p in zip(bi.tolist(), bj.tolist(),
                                                         strict=True)])
    assert chi2_pvalue(broken_pairs, np.arange(10), np.ones(10)) < FALSE_POSITIVE_RATE


def test_planted_itemsets_recovered_in_both_strategies():
    """ε = 60 on the planted group {0, 1, 2} (rows: 2000 of all three, 200 of {0}, 100 of
    {0, 1}) and 37 singletons of support 1. Bins (k = 7): λ ∈ [3, 7] (λ = 3 scores −1999 at
    scale 1/3: weight e^{−6000}); the cap is 16; m̄ ≈ 2.7 < r: the random one-item
    truncation gives each group item ≥ 600 counts in expectation (≥ 500 except with
    probability < e^{−20} by Hoeffding) against ≤ 1 for the others, with noise of scale 1/24
    (failure < 40·e^{−10000}); 2^r ≤ 128 cells with noise of scale ≤ 1/24, the threshold
    ≤ 0.35·ln(128)/24 < 0.1: a subset's support (≤ 64 cells) errs by ≥ 300 with
    probability < 128·2e^{−4·24}.
    So the true top-7, the 7 subsets of the group, come back with supports within 300.
    Bases (max_size=1, k = 20: λ_lo = 20 > 16 items, no cap), at ε = 10^6: every noise
    scale is ≤ 40/(4·10^5), so every discrete Laplace draw is 0 except with probability
    < 2^20·2e^{−10^4}; the estimates are then the exact supports and the group items lead.
    Every failure bound is below 1e-6."""
    tx = _planted()
    out = ST.smarttrunc(tx, range(40), 7, 60)
    truth = [s for r in (1, 2, 3) for s in itertools.combinations((0, 1, 2), r)]
    assert IS.false_negative_rate(out.itemsets, truth) == 0
    assert all(abs(int(v) - _support(tx, s)) < 300
               for s, v in zip(out.itemsets, out.supports, strict=True))
    single = ST.smarttrunc(tx, range(40), 20, 10**6, max_size=1)
    assert {s[0] for s in single.itemsets[:3]} == {0, 1, 2}


def test_frequent_itemsets_dispatches_every_method():
    tx = _planted()
    for method in ST.METHODS:
        out = ST.frequent_itemsets(tx, range(40), 5, 30, method=method)
        assert len(out.itemsets) == 5 and out.epsilon == 30
    assert ST.DEFAULT_METHOD in ST.METHODS


# ---------------------------------------------------------------- TF pruning, scale

def test_tf_prune_runs_where_the_full_candidates_are_refused(monkeypatch):
    """200 items: C(200, ≤ 3) > 1000 candidates is refused without pruning. With it, k = 20:
    λ_p = min(M, k) = 20 items give C(20, ≤ 3) = 1350 > 1000 candidates, 19 give 1159, 18
    give 987, so ε/4 selects 18 items in 18 rounds at ε/(4·18) (temperature 72), and TF runs
    with 3ε/4: 20 rounds at 3ε/(8·20) (temperature 160/3), supports at 3ε/8 (sensitivity
    k = 20). The parts sum to ε."""
    tx = _random_tx(11, 500, 200, 0.05)
    with pytest.raises(DomainError):
        IS.top_k_itemsets(tx, range(200), 20, 1, max_candidates=1000)
    scales, laps = [], []
    spy_select(monkeypatch, lambda s, scale, k: scales.extend([scale] * k))
    spy_noisy(monkeypatch, lambda v, d, e: laps.append((Fraction(d), Fraction(e))))
    acct = PrivacyFilter(PureDP(1))
    out = IS.top_k_itemsets(tx, range(200), 20, 1, max_candidates=1000, prune=True,
                            accountant=acct)
    assert acct.spent == PureDP(1) and len(out.itemsets) == 20
    assert scales == [Fraction(72)] * 18 + [Fraction(160, 3)] * 20
    assert laps == [(Fraction(20), Fraction(3, 8))]
    assert 18 * Fraction(1, 72) + 20 * Fraction(3, 160) + Fraction(3, 8) == 1


def test_sparse_methods_do_not_build_dense_matrices():
    """Attack: PrivBasis and TF built an n × M dense matrix plus a float copy (7.3 GB on
    retail). 4,000 transactions over 50,000 items would take 4000·50000·(1 + 4) bytes = 1 GB
    that way; the sparse path stays under 150 MB (tracemalloc traces NumPy buffers)."""
    g = np.random.default_rng(12)  # test input
    m = 50_000
    tx = [np.unique(g.integers(0, m, 8)).tolist() + [0, 1] for _ in range(4000)]
    tracemalloc.start()
    PB.privbasis(tx, range(m), 10, 1)
    ST.smarttrunc(tx, range(m), 10, 1)
    IS.top_k_itemsets(tx, range(m), 10, 1, prune=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 150 * 2**20
    assert math.isfinite(peak)
