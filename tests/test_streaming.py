"""Larger than memory: a session over a file runs the release with Polars' streaming engine,
bounding contributions in a lazy plan that is never materialised (issue 19)."""

from __future__ import annotations

import narwhals as nw
import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.frame import backend, engine

K, USERS, N_KEYS = 3, 200, 20


def _frame(n: int = 4000, seed: int = 0) -> pl.DataFrame:
    """Test data only (numpy's generator): users with ~20 rows each over 20 keys."""
    g = np.random.default_rng(seed)
    return pl.DataFrame({"user": g.integers(0, USERS, n), "key": g.integers(0, N_KEYS, n),
                         "value": g.uniform(0, 100, n)})


@pytest.fixture
def parquet(tmp_path):
    df = _frame()
    path = tmp_path / "t.parquet"
    df.write_parquet(path, row_group_size=500)
    return df, path


class _Collects:
    """Records every Polars collect: its engine and the number of rows it returned."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        original = pl.LazyFrame.collect

        def spy(lf: pl.LazyFrame, *args, **kwargs):
            out = original(lf, *args, **kwargs)
            self.calls.append((str(kwargs.get("engine", "auto")), out.height))
            return out

        monkeypatch.setattr(pl.LazyFrame, "collect", spy)


def _release(source, epsilon=1):
    s = dp.Session(source, dp.PrivacyUnit.by("user", max_rows=K), dp.PureDP(10**6))
    return s.query().group_by("key", keys=list(range(N_KEYS))).agg(
        dp.count(), dp.sum("value", bounds=(0, 100))).release(epsilon=epsilon)


def test_a_parquet_release_streams_and_collects_only_aggregated_rows(parquet, monkeypatch):
    """The old engine collected the bounded table in memory (every kept row, default engine);
    now every collect of the release — dry run included — is a streaming one that returns at
    most one row per group."""
    _, path = parquet
    spy = _Collects(monkeypatch)
    _release(str(path))
    assert spy.calls and all(e == "streaming" for e, _ in spy.calls), spy.calls
    assert max(rows for _, rows in spy.calls) <= N_KEYS
    spy.calls.clear()
    _release(pl.scan_parquet(path))  # a lazy scan given directly
    assert spy.calls and all(e == "streaming" for e, _ in spy.calls)


def test_in_memory_frames_keep_the_in_memory_path(parquet, monkeypatch):
    df, _ = parquet
    spy = _Collects(monkeypatch)
    _release(df)
    assert spy.calls and all(e == "auto" for e, _ in spy.calls)
    assert not engine.is_scan(nw.from_native(df.lazy()))


def test_streaming_release_keeps_min_rows_per_user_exactly(parquet):
    """With M = K only, the bounded table has exactly Σ_u min(n_u, K) rows whatever rows are
    chosen. At ε = 10^6 the discrete noise on a count (scale K/ε = 3·10^-6) is non-zero
    with probability below 10^-100, so the released total equals it (false positives: none
    at 10^-6)."""
    df, path = parquet
    expected = df.group_by("user").len()["len"].clip(upper_bound=K).sum()
    out = _release(str(path), epsilon=10**6)
    assert out["count"].sum() == expected
    assert df.height > expected  # the bound binds


@pytest.mark.parametrize("g,r,m", [(2, 3, 5), (5, 2, 10), (1, 4, 4), (3, 1, 2), (2, 2, 3)])
def test_every_bound_holds_on_the_streaming_plan(parquet, g, r, m):
    _, path = parquet
    unit = dp.PrivacyUnit.by("user", max_rows=m, max_groups=g, max_rows_per_group=r)
    lf = nw.from_native(pl.scan_parquet(path))
    out = nw.to_native(engine.bound_contributions(lf, unit, ["value"], ["key"]))
    assert isinstance(out, pl.LazyFrame)  # a plan, not a materialised table
    kept = out.collect(engine="streaming")
    b = unit.bounds
    assert kept.group_by("user").len()["len"].max() <= b.max_rows
    assert kept.group_by("user", "key").len()["len"].max() <= b.max_rows_per_group
    assert kept.group_by("user").agg(pl.col("key").n_unique())["key"].max() <= b.max_groups


@pytest.mark.parametrize("ints", [True, False])
@pytest.mark.parametrize("g,r,m", [(2, 3, 5), (5, 2, 10), (1, 4, 4), (3, 1, 2), (2, 2, 3),
                                   (9, 9, 4)])
def test_the_lazy_rule_keeps_the_rows_of_the_in_memory_rule(g, r, m, ints):
    """For the same unique row words, the streaming plan keeps exactly the rows that
    :func:`backend.bound_polars` keeps (packed and sort paths; nulls as one unit/group)."""
    gen = np.random.default_rng(g * 100 + r * 10 + m)  # test data and words only
    n = 3000
    users = gen.integers(0, 150, n)
    keys = gen.integers(0, 5, n) if ints else gen.choice(["a", "b", "c", "d", None],
                                                          n).tolist()
    frame = pl.DataFrame({"u": users if ints else [None if u == 0 else u for u in users],
                          "k": keys, "x": gen.uniform(0, 1, n)})
    words = gen.permutation(n).astype(np.uint32)  # unique: no ties to break
    in_memory = backend.bound_polars(frame, "u", ["k"], g, r, m, words)
    lazy = backend.bound_polars_lazy(frame.lazy().with_columns(w=pl.Series(words)), "u", ["k"],
                                     g, r, m, words=pl.col("w")).drop("w")
    assert lazy.collect(engine="streaming").rows() == in_memory.rows()
    split = backend.bound_polars_lazy(frame.lazy().with_columns(w=pl.Series(words)), "u",
                                      ["k"], g, r, m, words=pl.col("w"), buckets=3).drop("w")
    assert sorted(split.collect(engine="streaming").rows(), key=str) == sorted(
        in_memory.rows(), key=str)  # the same rows, bucket by bucket
    single = backend.bound_polars_lazy(frame.lazy().with_columns(w=pl.Series(words)), "u", [],
                                       g, r, m, words=pl.col("w")).drop("w")
    assert (single.collect(engine="streaming").rows()
            == backend.bound_polars(frame, "u", [], g, r, m, words).rows())


def test_rows_are_chosen_at_random_not_in_file_order(tmp_path):
    """One user with 100 rows (key = position in the file), M = 1: a file-order rule would
    always keep key 0. Four bounding passes (fresh salts) all keeping key 0 has probability
    100^-4 = 10^-8 under the random rule (the false-positive rate)."""
    path = tmp_path / "one.parquet"
    pl.DataFrame({"user": [7] * 100, "key": list(range(100))}).write_parquet(path)
    unit = dp.PrivacyUnit.by("user", max_rows=1)
    lf = nw.from_native(pl.scan_parquet(path))
    kept = [nw.to_native(engine.bound_contributions(lf, unit, ["key"])).collect(
        engine="streaming")["key"].to_list() for _ in range(4)]
    assert all(len(k) == 1 for k in kept)
    assert any(k != [0] for k in kept)


def test_partition_selection_and_csv_stream_too(parquet, tmp_path, monkeypatch):
    df, _ = parquet
    path = tmp_path / "t.csv"
    df.write_csv(path)
    spy = _Collects(monkeypatch)
    s = dp.Session(str(path), dp.PrivacyUnit.by("user", max_rows=K), dp.ApproxDP(10, 1e-6))
    out = s.query().group_by("key", selection=dp.PartitionSelection(1, 1e-7)).agg(
        dp.count()).release(epsilon=1)
    assert out.height <= N_KEYS
    assert spy.calls and all(e == "streaming" for e, _ in spy.calls)
    assert max(rows for _, rows in spy.calls) <= N_KEYS


def test_the_keyed_order_is_uniform_within_a_unit():
    """3000 users with 10 consecutive rows each, M = 1: the kept row's position within its
    user must be uniform on 0..9 (chi-square, 9 degrees of freedom, rejected below p = 10^-7:
    the false-positive rate). A file-order or badly mixed key concentrates the positions."""
    from scipy import stats

    users, per = 3000, 10
    frame = pl.DataFrame({"user": np.repeat(np.arange(users), per),
                          "pos": np.tile(np.arange(per), users)})
    kept = backend.bound_polars_lazy(frame.lazy(), "user", [], 1, 1, 1).collect(
        engine="streaming")
    assert kept.height == users
    counts = np.bincount(kept["pos"].to_numpy(), minlength=per)
    assert stats.chisquare(counts).pvalue > 1e-7, counts


def test_buckets_are_chosen_from_the_row_count(parquet, monkeypatch):
    """4000 rows of 3 columns: one bucket by default; at 64 KiB a bucket, 4000 · 32 bytes
    need 2; a release through the split plan still streams and bounds exactly."""
    df, path = parquet
    lf = pl.scan_parquet(path)
    assert backend.stream_buckets(lf) == 1
    monkeypatch.setattr(backend, "_BUCKET_BYTES", 1 << 16)
    assert backend.stream_buckets(lf) == 2
    expected = df.group_by("user").len()["len"].clip(upper_bound=K).sum()
    assert _release(str(path), epsilon=10**6)["count"].sum() == expected  # as above
