"""Reuse of bounded tables across a session's releases (dpkit.frame.bounded_cache)."""

import polars as pl

import dpkit as dp


def _session(data=None):
    df = pl.DataFrame({"u": [1, 1, 1, 2, 2, 3] * 5, "k": [0, 1, 2, 0, 1, 2] * 5,
                       "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] * 5})
    unit = dp.PrivacyUnit.by("u", max_rows=4, max_groups=2, max_rows_per_group=2)
    return dp.Session(df if data is None else data, unit, dp.PureDP(100)), df


def test_same_query_reuses_the_bounded_table_and_still_pays():
    s, _ = _session()
    for _ in range(3):
        s.query().group_by("k", keys=[0, 1, 2]).agg(dp.count()).release(epsilon=1)
    # the same plan on the same bounded table: its exact values are remembered
    assert s._bounded.answer_hits == 2 and s.spent == dp.PureDP(3)
    s.query().group_by("k", keys=[2, 1, 0]).agg(dp.count()).release(epsilon=1)  # another plan
    assert s._bounded.hits == 1  # ... on the same bounded table
    s.query().agg(dp.count()).release(epsilon=1)  # another grouping: bounded afresh
    s.query().filter(pl.col("x") > 1).agg(dp.count()).release(epsilon=1)  # other steps
    assert (s._bounded.hits, s._bounded.answer_hits) == (1, 2)


def test_steps_with_objects_match_by_identity_only():
    s, _ = _session()
    a = pl.DataFrame({"k": [0, 1, 2], "w": [1, 2, 3]})
    b = pl.DataFrame({"k": [0, 1, 2], "w": [3, 2, 1]})  # same schema, other content
    for table in (a, b):
        s.query().join(table, on="k").group_by("w", keys=[1, 2, 3]).agg(dp.count()).release(
            epsilon=1)
    assert s._bounded.hits == 0
    s.query().join(a, on="k").group_by("w", keys=[1, 2, 3]).agg(dp.count()).release(
        epsilon=1)
    assert s._bounded.hits == 1  # the same public table object: reused
    for _ in range(2):  # two equal-looking Polars expressions are different objects
        s.query().filter(pl.col("x") > 2).agg(dp.count()).release(epsilon=1)
    assert s._bounded.hits == 1
    expr = pl.col("x") > 2
    for _ in range(2):
        s.query().filter(expr).agg(dp.count()).release(epsilon=1)
    assert s._bounded.hits == 2


def test_files_are_never_cached(tmp_path):
    _, df = _session()
    path = tmp_path / "t.parquet"
    df.write_parquet(path)
    s, _ = _session(str(path))
    for _ in range(2):
        s.query().agg(dp.count()).release(epsilon=1)
    assert s._bounded.hits == 0
