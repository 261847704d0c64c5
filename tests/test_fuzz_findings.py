"""Regression tests for what the grey-box fuzzer (tests/test_fuzz.py) found during issue 16,
each its minimal reproducer: it failed before the fix and passes now."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.errors import ColumnError, DomainError
from dpkit.frame import backend


def test_a_null_unit_in_the_first_sorted_row_keeps_its_own_groups():
    """NEW-A: row 0 was never a run start when its unit and keys were null, so it took the
    group flag of another unit: adding one unit moved a count vector by 4 > max_rows = 3."""
    small = pl.DataFrame({"id": [None] * 4, "g": [None, 0, 0, 3]},
                         schema={"id": pl.Int64, "g": pl.Int64})
    large = pl.concat([small, pl.DataFrame({"id": [7] * 4, "g": [1, 1, 2, 5]})])
    words = np.array([0, 5, 6, 7, 1, 2, 3, 9], dtype=np.uint64)
    kept_small = backend.bound_polars(small, "id", ["g"], 2, 2, 3, words[:4])
    kept_large = backend.bound_polars(large, "id", ["g"], 2, 2, 3, words)
    null_unit = pl.col("id").is_null()
    assert kept_small.filter(null_unit).sort("g").equals(
        kept_large.filter(null_unit).sort("g"))  # the null unit keeps the same rows


@pytest.mark.parametrize("n", [1, 2, 3, 4, 50])
def test_bin_width_is_the_same_whatever_the_number_of_rows(n):
    """NEW-B: Polars divides by a constant exactly on 1-2 rows and by its reciprocal on
    longer columns, so bin(width=0.1) put 0.3 in different bins by table size."""
    s = dp.Session(pl.DataFrame({"x": [0.3] * n}), budget=dp.PureDP(10))
    lf = s.query().bin("x", width=0.1).lazy()
    values = lf.collect().to_native()["x"].unique().to_list()
    one = dp.Session(pl.DataFrame({"x": [0.3]}), budget=dp.PureDP(10))
    assert values == one.query().bin("x", width=0.1).lazy().collect().to_native()["x"].to_list()


def test_division_by_a_constant_is_refused_in_library_steps():
    s = dp.Session(pl.DataFrame({"x": [0.3] * 4}), budget=dp.PureDP(10))
    with pytest.raises(DomainError, match="division by a constant"):
        s.query().with_columns(y=pl.col("x") / 0.1).count().release(epsilon=1)
    out = s.query().with_columns(y=pl.col("x") * 10, h=pl.col("x") / 2).count().release(
        epsilon=1)  # a power of two divides exactly on any number of rows
    assert out.height == 1


def test_server_division_by_a_literal_is_row_wise():
    from dpkit.server import protocol

    expr = protocol.compile_expr({"op": "/", "args": [{"col": "x"}, {"lit": 0.1}]})
    import narwhals as nw

    results = {tuple(nw.to_native(nw.from_native(pl.DataFrame({"x": [0.3] * n}).lazy())
                                  .select(expr.floor().alias("y")).collect())["y"].unique())
               for n in (1, 2, 3, 10)}
    assert len(results) == 1


def test_quantile_of_a_boolean_column_is_refused_before_the_debit():
    """NEW-C: the compiler and the aggregation disagreed on a boolean column's candidates;
    with method="tree" every release failed after its debit."""
    s = dp.Session(pl.DataFrame({"b": [True, False, True]}), budget=dp.PureDP(10))
    for method in ("tree", "exponential"):
        with pytest.raises(ColumnError):
            s.query().agg(dp.median("b", bounds=(0, 1), method=method)).release(epsilon=1)
    assert s.spent == dp.PureDP(0)


def test_tree_quantile_with_no_selected_partition_releases_an_empty_table():
    """NEW-D: when partition selection kept no key, the tree quantile failed after its debit."""
    s = dp.Session(pl.DataFrame({"g": [1, 2], "n": [1, 2]}),
                   budget=dp.ApproxDP(10, 1e-3))
    out = s.query().group_by("g", selection=dp.PartitionSelection(1, 1e-6)).agg(
        dp.min("n", bounds=(0, 3), candidates=11, method="tree")).release(epsilon=1)
    assert out.height <= 2  # almost surely 0 rows: two singleton groups rarely pass
