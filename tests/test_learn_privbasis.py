"""dpkit.learn.privbasis: PrivBasis top-k frequent itemsets (Li et al. 2012).

Statistical tests reject a correct implementation with probability ≤ 1e-6
(tests/stats.FALSE_POSITIVE_RATE) and each is paired with a broken variant it catches.
No production noise is seeded: the randomness below only builds test inputs."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kit_spies import spy_noisy, spy_select  # noqa: E402
from stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_laplace_pmf

from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.learn import privbasis as PB  # noqa: N812
from dpkit.learn.itemsets import false_negative_rate


def _random_tx(seed: int, n: int, m: int, p: float) -> list[list[int]]:
    rng = np.random.default_rng(seed)  # test input
    return [np.flatnonzero(rng.random(m) < p).tolist() for _ in range(n)]


def _support(tx: list[list[int]], itemset: tuple[int, ...]) -> int:
    return sum(set(itemset) <= set(t) for t in tx)


def _planted_two_groups() -> list[list[int]]:
    """4,000 transactions: A = {0,1,2} together in rows [0, 2000), B = {3,4,5} in
    [2000, 3500); extras make the item supports 2300, 2200, 2100, 1700, 1600, 1500. No row
    holds an item of A and one of B, so the top-14 (7 subsets of A, 7 of B, supports ≥
    1500) lead every other itemset (support 0) by 1500."""
    rows = [[0, 1, 2]] * 2000 + [[3, 4, 5]] * 1500
    rows += [[0, 1, 2]] * 100 + [[0, 1]] * 100 + [[0]] * 100
    rows += [[3, 4]] * 100 + [[3]] * 100 + [[]] * 300
    return [list(r) for r in rows]


A_AND_B = [s for g in ((0, 1, 2), (3, 4, 5)) for r in (1, 2, 3)
           for s in itertools.combinations(g, r)]


# ---------------------------------------------------------------- exact (non-private) parts

def test_top_supports_match_brute_force():
    tx = _random_tx(1, 300, 7, 0.45)
    brute = sorted(((_support(tx, s), s) for r in range(1, 8)
                    for s in itertools.combinations(range(7), r)),
                   key=lambda p: (-p[0], len(p[1]), p[1]))
    brute = [p for p in brute if p[0] > 0]
    matrix = PB.incidence(tx, range(7))
    assert PB._top_supports(matrix, 127) == brute
    assert PB._top_supports(matrix, 20) == brute[:20]
    small = [p for p in brute if len(p[1]) <= 2]
    assert PB._top_supports(matrix, 25, max_size=2) == small[:25]
    labels = "abcdefg"
    assert PB.exact_top_k_all([[labels[i] for i in t] for t in tx], labels, 10) == [
        tuple(labels[i] for i in s) for _, s in brute[:10]]


def test_reconstruction_is_exact_without_noise():
    tx = _random_tx(2, 400, 9, 0.4)
    matrix = PB.incidence(tx, range(9))
    bases = [(0, 1, 2, 3), (2, 3, 4), (5, 7, 8), (6,)]
    member, est = PB._reconstruct(PB.basis_bin_counts(matrix, bases), bases, 9)
    expected = {s for b in bases for r in range(1, len(b) + 1)
                for s in itertools.combinations(b, r)}
    got = {tuple(np.flatnonzero(row).tolist()): e for row, e in zip(member, est, strict=True)}
    assert set(got) == expected  # every non-empty subset of a basis, once
    for s, e in got.items():  # (2, 3) and its subsets are under two bases: averaged
        assert e == _support(tx, s)
    # noisy bins disagree: {0} from basis (0,) is one bin (weight 1), from (0, 1, 2) the
    # sum of four (weight 1/4): the inverse-variance average (10·1 + 20·¼)/(1 + ¼) = 12
    member, est = PB._reconstruct([np.array([0, 10]), np.array([0, 5, 0, 5, 0, 5, 0, 5])],
                                  [(0,), (0, 1, 2)], 3)
    row = next(i for i, r in enumerate(member) if r.tolist() == [True, False, False])
    assert est[row] == 12


def test_superset_sums_broken_variant_is_caught():
    counts = np.arange(8)
    ok = PB._superset_sums(counts, 3)
    for s in range(8):  # f[S] = Σ_{T ⊇ S} counts[T]
        assert ok[s] == sum(counts[t] for t in range(8) if t & s == s)
    assert ok[0] == counts.sum()
    assert not np.array_equal(counts, ok)  # the identity (no transform) differs


def test_bin_count_sensitivity_equals_number_of_bases():
    """Each transaction is in one bin of each basis: on every neighbour (one transaction
    removed, or one added) the concatenated bin counts move by exactly w in L1, which the
    declared sensitivity must cover; a broken declaration of 1 is caught."""
    tx = _random_tx(3, 120, 10, 0.35)
    bases = [(0, 1, 2, 3), (3, 4, 5), (6, 7), (8,), (2, 9)]

    def vec(rows: list[list[int]]) -> np.ndarray:
        return np.concatenate(PB.basis_bin_counts(PB.incidence(rows, range(10)), bases))

    base = vec(tx)
    extra = _random_tx(4, 30, 10, 0.5) + [[], list(range(10))]
    moves = [int(np.abs(base - vec(tx[:i] + tx[i + 1:])).sum()) for i in range(len(tx))]
    moves += [int(np.abs(base - vec(tx + [t])).sum()) for t in extra]
    assert set(moves) == {len(bases)}

    def holds(declared) -> bool:
        return max(moves) <= declared(bases)

    assert holds(PB._bin_sensitivity)
    assert not holds(lambda b: Fraction(1))  # broken: "one count moves"


def test_lambda_score_sensitivity_is_one():
    tx = _random_tx(5, 60, 8, 0.4)

    def scores(rows: list[list[int]]) -> np.ndarray:
        matrix = PB.incidence(rows, range(8))
        top = PB._top_supports(matrix, 12)
        fk = top[11][0] if len(top) >= 12 else 0
        return PB._lambda_scores(matrix.sum(axis=0), fk, 12)

    base = scores(tx)
    neighbours = [tx[:i] + tx[i + 1:] for i in range(len(tx))]
    neighbours += [tx + [t] for t in _random_tx(6, 20, 8, 0.6) + [list(range(8))]]
    assert max(int(np.abs(base - scores(d)).max()) for d in neighbours) == 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 9), theta=st.integers(2, 5), data=st.data())
def test_basis_set_covers_items_pairs_and_small_cliques(n, theta, data):
    all_pairs = list(itertools.combinations(range(n), 2))
    pairs = data.draw(st.lists(st.sampled_from(all_pairs), unique=True) if all_pairs
                      else st.just([]))
    bases = [set(b) for b in PB.basis_set(n, pairs, theta)]
    assert all(1 <= len(b) <= theta for b in bases)
    assert set().union(*bases) == set(range(n))
    assert all(any({a, c} <= b for b in bases) for a, c in pairs)
    edges = set(pairs)
    cliques = [set(s) for r in range(1, n + 1) for s in itertools.combinations(range(n), r)
               if all(p in edges for p in itertools.combinations(s, 2))]
    maximal = [c for c in cliques if not any(c < d for d in cliques)]
    assert all(any(c <= b for b in bases) for c in maximal if len(c) <= theta)


# ---------------------------------------------------------------- inputs and budget

def test_bad_inputs_raise_before_any_debit():
    tx = [[1, 2], [2, 3]]
    acct = PrivacyFilter(PureDP(10))
    bad: list[dict[str, Any]] = [
        dict(k=0), dict(k=-1), dict(k=True), dict(k=2.5), dict(k=8), dict(epsilon=0),
        dict(epsilon=-1), dict(max_basis_size=0), dict(max_basis_size=17),
        dict(split=(0, 0.4, 0.1)), dict(split=(0.5, 0.4, 0.1)), dict(split=(1, 2)),
        dict(max_size=0), dict(max_size=1, k=4)]
    for kw in bad:
        args: dict[str, Any] = {"k": 2, "epsilon": 1, **kw}
        with pytest.raises(DomainError):
            PB.privbasis(tx, [1, 2, 3], args.pop("k"), args.pop("epsilon"),
                         accountant=acct, **args)
    with pytest.raises(DomainError, match="declared universe"):
        PB.privbasis([[1, 2], [2, 4]], [1, 2, 3], 2, 1, accountant=acct)  # 4 unknown
    with pytest.raises(DomainError):
        PB.privbasis(tx, [1, 2, 2], 2, 1, accountant=acct)  # repeated item
    with pytest.raises(DomainError):  # not transactions
        PB.privbasis([1, 2], [1, 2, 3], 2, 1, accountant=acct)  # type: ignore[list-item]
    with pytest.raises(DomainError):
        PB.privbasis(tx, [], 1, 1, accountant=acct)
    assert acct.spent == PureDP(0)
    out = PB.privbasis(tx, [1, 2, 3], 7, 1, accountant=acct)  # k = 2^3 − 1 is allowed
    assert acct.spent == PureDP(1) and len(out.itemsets) <= 7


def test_accountant_debited_exactly_epsilon_before_fitting(monkeypatch):
    acct = PrivacyFilter(PureDP(3))
    seen = []
    real = PB._top_supports

    def spy(matrix, k, max_size=None):
        seen.append(acct.spent)
        return real(matrix, k, max_size)

    monkeypatch.setattr(PB, "_top_supports", spy)
    out = PB.privbasis(_planted_two_groups(), range(6), 14, Fraction(3, 2), accountant=acct)
    assert seen == [PureDP(Fraction(3, 2))] and acct.spent == PureDP(Fraction(3, 2))
    assert out.epsilon == Fraction(3, 2)
    with pytest.raises(BudgetExceededError):  # an overrun fits nothing
        PB.privbasis(_planted_two_groups(), range(6), 14, 2, accountant=acct)
    assert len(seen) == 1 and acct.spent == PureDP(Fraction(3, 2))


def _spy_noise(monkeypatch):
    calls: list[tuple] = []
    def expo(scores, scale, k):  # peeling: k rounds, each on the scores not yet picked
        calls.extend(("exp", len(scores) - i, scale) for i in range(k))

    def lap(values, sensitivity, epsilon):
        calls.append(("lap", np.asarray(values).size, Fraction(sensitivity),
                      Fraction(epsilon)))

    spy_select(monkeypatch, expo)
    spy_noisy(monkeypatch, lap)
    return calls


def test_budget_split_single_basis(monkeypatch):
    calls = _spy_noise(monkeypatch)
    eps = Fraction(2)
    PB.privbasis(_planted_two_groups(), range(6), 14, eps)
    # λ: candidates 1 … min(14, 6), ε₁ = ε/10, sensitivity 1, not monotone: scale 2/ε₁
    assert calls[0] == ("exp", 6, 2 / (eps / 10))
    lam = len(calls) - 2  # λ item rounds at ε₂/λ = (0.4ε)/λ, then one Laplace release
    assert [c[0] for c in calls[1:-1]] == ["exp"] * lam
    assert [c[2] for c in calls[1:-1]] == [lam / (eps * Fraction(4, 10))] * lam
    # λ ≤ 12: one basis F (2^λ bins, sensitivity 1) at ε₄ = ε − ε₁ − ε₂ (ε₃ unused)
    assert calls[-1] == ("lap", 2 ** lam, Fraction(1), eps / 2)


def test_budget_split_multiple_bases(monkeypatch):
    calls = _spy_noise(monkeypatch)
    eps = Fraction(10)
    seen = {}
    real = PB.basis_set

    def spy(n, pairs, theta):
        seen["bases"] = real(n, pairs, theta)
        return seen["bases"]

    monkeypatch.setattr(PB, "basis_set", spy)
    PB.privbasis(_planted_two_groups(), range(6), 14, eps, max_basis_size=3)
    lam = calls[1][1]  # the first item round sees all 6 items …
    assert lam == 6 and [c[1] for c in calls[1:7]] == [6, 5, 4, 3, 2, 1]
    # … λ = 6 > 3: λ₂ = min(k − λ, 15) = 8 pair rounds at ε₃/λ₂ over the C(6, 2) pairs
    assert calls[7:15] == [("exp", 15 - i, 8 / (eps / 10)) for i in range(8)]
    w = len(seen["bases"])
    bins = sum(2 ** len(b) for b in seen["bases"])
    # the rest, 0.4ε, on Σ 2^|B| bins of L1 sensitivity w; the parts sum to ε exactly
    assert calls[15:] == [("lap", bins, Fraction(w), eps * Fraction(4, 10))]
    assert eps / 10 + 6 * (eps * Fraction(4, 10) / 6) + 8 * (eps / 10 / 8) \
        + eps * Fraction(4, 10) == eps


# ---------------------------------------------------------------- statistical tests

def test_bin_noise_is_discrete_laplace_of_scale_w_over_epsilon(monkeypatch):
    """The noise on the bin counts is discrete Laplace of scale w/ε₄ (χ², p > 1e-6 for a
    correct sampler); a broken sensitivity of 1 (scale 1/ε₄) gives p < 1e-6."""
    tx = _random_tx(7, 200, 9, 0.4)
    matrix = PB.incidence(tx, range(9))
    bases = [(0, 1, 2, 3), (4, 5, 6, 7), (1, 8)]  # w = 3, 36 bins
    exact = np.concatenate(PB.basis_bin_counts(matrix, bases))
    eps = Fraction(1)

    def draws() -> np.ndarray:
        return np.concatenate([np.concatenate(PB._noisy_bins(matrix, bases, eps)) - exact
                               for _ in range(250)])  # 9,000 noise values

    support = np.arange(-60, 61)
    pmf = discrete_laplace_pmf(support, 3.0)
    assert chi2_pvalue(draws(), support, pmf) > FALSE_POSITIVE_RATE
    monkeypatch.setattr(PB, "_bin_sensitivity", lambda b: Fraction(1))  # broken
    assert chi2_pvalue(draws(), support, pmf) < FALSE_POSITIVE_RATE


def test_planted_itemsets_recovered_at_large_epsilon(monkeypatch):
    """ε = 10 on the two planted groups (the truth, 14 itemsets of 1–3 items, leads every
    other itemset by 1500 counts). Failure bounds, single basis (λ ≤ 12): λ = 6 has score
    0, the others ≤ −100 at scale 2/ε₁ = 2 (P(λ ≠ 6) ≤ 5e^−50); the item rounds at scale
    6/4 face gaps ≥ 1500 among candidates (≤ 6e^−1000); the 63 subset estimates each sum ≤
    32 bins with discrete Laplace noise of scale 1/5, so one misses by 750 with probability
    < 64·32·e^−(750/32)·5 ≈ 1e-47. Multi-basis (max_basis_size=3): the 6 within-group
    pairs lead the 9 cross pairs (support 0) by 1500 at scale 8/1 (P ≤ 9e^−187), the two
    remaining pair picks cannot join a group (that takes 3 cross edges), so A and B are
    bases and the supports, ≤ 4 bins at scale ≤ 5/4 (w ≤ 5 bases), err by < 750 except
    with probability < 1e-100. Recovery (FNR 0, supports within 750) fails with
    probability < 1e-6 in both. The broken variant (no superset sums: raw bin counts
    ranked as supports) releases {0} at ≈ 100 against a true 2300."""
    tx = _planted_two_groups()

    def recovered(out) -> bool:
        return false_negative_rate(out.itemsets, A_AND_B) == 0 and all(
            abs(int(v) - _support(tx, s)) < 750
            for s, v in zip(out.itemsets, out.supports, strict=True))

    assert recovered(PB.privbasis(tx, range(6), 14, 10))
    assert recovered(PB.privbasis(tx, range(6), 14, 10, max_basis_size=3))
    monkeypatch.setattr(PB, "_superset_sums", lambda counts, b: np.asarray(counts))
    assert not recovered(PB.privbasis(tx, range(6), 14, 10))


def test_itemsets_of_any_size_and_max_size():
    """A planted 5-itemset (rows [0, 1500)) with distinct item supports: the top-31 are
    its subsets, including the 4- and 5-item ones that a ≤ 3-item method cannot return;
    with max_size=3 only its 25 subsets of ≤ 3 items can come back (same bounds as the
    planted test: gaps of 1500 at ε = 10)."""
    rows = [[0, 1, 2, 3, 4]] * 1500 + [[i] for i in range(5) for _ in range(50 * (i + 1))]
    rows += [[5, 6]] * 10 + [[]] * 200
    out = PB.privbasis(rows, range(7), 31, 10)
    assert {len(s) for s in out.itemsets} == {1, 2, 3, 4, 5}
    assert false_negative_rate(out.itemsets, PB.exact_top_k_all(rows, range(7), 31)) == 0
    small = PB.privbasis(rows, range(7), 25, 10, max_size=3)
    assert max(len(s) for s in small.itemsets) == 3
    assert false_negative_rate(small.itemsets,
                               PB.exact_top_k_all(rows, range(7), 25, max_size=3)) == 0
