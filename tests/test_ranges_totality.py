"""After the debit the data side of release.ranges is total at any input size (issue 35,
known residuals): histograms whose totals overflowed int64 headroom (mm, auto: 2^31; DAWA,
P-HP: 2^62/factor; the 2-D grids and halfspaces: 2^53) are released, charged once, with
no error and no refusal that reads the counts. On the old code each case below raised
(ReleaseFailedError after the debit, or DomainError from a data-reading refusal)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dpkit as dp
import dpkit.release  # noqa: F401 - registers the built-in algorithms
from dpkit.core.accountant import FilterAccountant
from dpkit.core.compose import PrivacyFilter
from dpkit.errors import DomainError
from dpkit.release.ranges import matrix, switch
from dpkit.release.ranges.halfspaces import HalfspaceFamily, answer_halfspaces
from dpkit.release.ranges.histogram import release_histogram

BIG = (1 << 63) - 1  # the largest int64 count


def _charged(counts: np.ndarray, method: str, **options: object) -> np.ndarray:
    acc = FilterAccountant(dp.PureDP(4))
    out = release_histogram(counts, 1, method, accountant=acc, **options)
    assert acc.spent == dp.PureDP(1) and acc.last is not None
    assert out.counts.shape == counts.shape and not np.isnan(out.counts).any()
    return out.counts


@pytest.mark.parametrize("counts, method, options", [
    (np.array([2**31, 0, 5, 1]), "mm", {}),
    (np.array([BIG, BIG, 0, 7]), "mm", {}),
    (np.full((3, 4), BIG), "mm", {}),
    (np.array([2**31, 0, 5, 1]), "auto", {"rule": {"1/Range1D": {0: "mm"}}}),
    (np.array([BIG, BIG, 0, 7]), "auto", {}),
    (np.full(8, 1 << 58), "dawa", {"switch": None}),
    (np.full(8, BIG), "dawa", {}),
    (np.full(8, 1 << 56), "phpartition", {"switch": None}),
    (np.full((4, 4), 1 << 52), "ug", {"switch": None}),
    (np.full((4, 4), BIG), "ag", {"switch": None}),
    (np.full((4, 4), BIG), "quadtree", {}),
    (np.full((4, 4), BIG), "kdtree", {"switch": None}),
])
def test_huge_histograms_are_released_after_one_debit(counts, method, options):
    _charged(np.asarray(counts, dtype=np.int64), method, **options)


def test_mm_stays_accurate_beyond_2_63_per_query():
    """B·x is exact beyond int64: the estimate of a count of 2^62 is within a few noise
    scales of it (relative error ~2^-40), not wrapped or clipped."""
    x = np.array([1 << 62, 1 << 62, 0, 3], dtype=np.int64)
    est = _charged(x, "mm")
    assert np.allclose(est, x.astype(np.float64), rtol=1e-9, atol=1e4)


@pytest.mark.parametrize("row_sum", [None, 1 << 58])  # B's own; large: the two-half path
def test_exact_product_matches_python_integers(row_sum):
    rng = np.random.default_rng(0)  # test data only, never noise
    x = rng.integers(0, BIG, 40, dtype=np.int64)
    x[0] = BIG
    b, _ = matrix.mm_strategy((40,))[0].integer(20)
    rs = int(np.asarray(b.sum(axis=1)).max()) if row_sum is None else row_sum
    assert matrix.float_margin(rs, 40, 63) == (row_sum is None)
    hi, lo = matrix.exact_product(b.__matmul__, b.astype(np.float64).__matmul__, x, rs, 40)
    want = b.toarray().astype(object).dot(x.astype(object))
    assert [int(h) * 2**62 + int(v) for h, v in zip(hi, lo, strict=True)] == list(want)
    assert ((lo >= 0) & (lo < 2**62)).all()


def test_exact_product_2d_matches_python_integers():
    x = np.full((9, 6), BIG, dtype=np.int64)
    x[1, 2] = 12345
    (b1, _), (b2, _) = (f.integer(16) for f in matrix.mm_strategy(x.shape))
    floats = [b1.astype(np.float64), b2.astype(np.float64)]
    rs = int(np.asarray(b1.sum(axis=1)).max()) * int(np.asarray(b2.sum(axis=1)).max())
    for row_sum in (rs, 1 << 58):
        hi, lo = matrix.exact_product(lambda v: matrix._kron_apply([b1, b2], v),
                                      lambda v: matrix._kron_apply(floats, v), x, row_sum, 15)
        want = b1.toarray().astype(object).dot(x.astype(object)).dot(
            b2.toarray().astype(object).T)
        got = [int(h) * 2**62 + int(v) for h, v in zip(hi.ravel(), lo.ravel(), strict=True)]
        assert got == list(want.ravel())


def test_noisy_total_is_exact_and_clamped():
    x = np.full(4, BIG, dtype=np.int64)
    assert switch.exact_total(x) == 4 * BIG  # the int64 sum wraps
    assert switch.noisy_total(x, Fraction(1)) > 2.0**61  # clamped at 2^62, not wrapped


@pytest.mark.parametrize("method", ["laplace", "identity"])
def test_halfspaces_take_any_total_after_one_debit(method):
    family = HalfspaceFamily(4, [(1,), (1,), (1,)], [Fraction(1, 3), Fraction(2, 3), 1])
    acc = FilterAccountant(dp.PureDP(4))
    out = answer_halfspaces(np.full(4, 1 << 60, dtype=np.int64), family, 1, method,
                            accountant=acc)
    assert acc.spent == dp.PureDP(1) and out.answers.shape == (3,)


@pytest.mark.parametrize("method", ["uniform", "hierarchical", "hb", "privelet"])
def test_tree_and_total_methods_clamp_instead_of_wrapping(method):
    """Sums of 8 cells of 2^63 − 1 wrapped in int64 (a negative total, a garbage tree);
    now every cell is clamped to ⌊(2^62 − 1)/8⌋ (switch.clamp_cells, from the size only)
    and the estimate is that clamped histogram plus noise of scale ≤ a few units."""
    est = _charged(np.full(8, BIG, dtype=np.int64), method)
    cap = float(((1 << 62) - 1) // 8)
    assert np.allclose(est, cap, rtol=1e-9), est



@pytest.mark.parametrize("counts", [np.array([1.0, 2.0**63]),
                                    np.array([1, 2**63], dtype=np.uint64),
                                    np.array([2.0**64, 0.0])])
def test_counts_beyond_int64_are_refused_before_the_debit(counts):
    """Float and unsigned counts of 2^63 or more used to wrap to negative int64 counts in
    ``check_counts`` (no error: a negative histogram reached the algorithms). Refused, as a
    negative or non-integer count is, before the debit."""
    acct = FilterAccountant(PrivacyFilter(dp.PureDP(1)))
    with pytest.raises(DomainError, match="below 2\\^63"):
        release_histogram(counts, 1, "identity", accountant=acct)
    assert acct.spent == dp.PureDP(0)
