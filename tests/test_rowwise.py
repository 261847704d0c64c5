"""Row-wise steps (issue 16, findings 3, 4, 9's ``bin`` and 10): an allow-list over the
serialised expression tree, casts that cannot fail, and the privacy unit column checked
against the step's resolved output schema — all at plan time, before any debit."""

from __future__ import annotations

import datetime as dt
import warnings
from decimal import Decimal

import narwhals as nw
import polars as pl
import pytest

import dpkit as dp
from dpkit.errors import ColumnError, DomainError
from dpkit.frame import engine, rowwise
from dpkit.frame.privacy_unit import PrivacyUnit

c = pl.col
TARGET = (c("age") == 39) & (c("fnlwgt") == 77516)  # finding 3's target row


@pytest.fixture
def people() -> pl.DataFrame:
    """A small Adult-like table; row 0 is finding 3's target."""
    return pl.DataFrame({
        "age": [39, 50, 38, 53, 28, 37, 49, 52],
        "fnlwgt": [77516, 83311, 215646, 234721, 338409, 284582, 160187, 209642],
        "education-num": [13, 13, 9, 7, 13, 14, 5, 9],
        "sex": ["Male", "Male", "Male", "Male", "Female", "Female", "Female", "Male"],
        "hours": [40.0, 13.0, 40.0, 40.0, 40.0, 40.0, 16.0, 45.0],
        "born": [dt.date(1950 + i, 1, 1) for i in range(8)],
        "grade": pl.Series(["a", "b", "a", "b", "a", "b", "a", "b"],
                           dtype=pl.Enum(["a", "b"])),
    })


def _refused(session: dp.Session, build, match: str = "row-wise") -> None:
    with pytest.raises(DomainError, match=match):
        build(session.query()).count().release(epsilon=1)
    assert session.spent == dp.PureDP(0)


# -- finding 3: aggregating expressions are not row-wise ---------------------------------------
def test_the_any_attack_is_refused_before_the_debit(people):
    """`filter(target.any())` kept every row when the target existed and none otherwise."""
    s = dp.Session(people, budget=dp.PureDP(1))
    _refused(s, lambda q: q.filter(TARGET.any()), match="Boolean.Any")
    with pytest.raises(DomainError, match="Boolean.Any"):
        s.query().filter(TARGET.any()).count().plan(1)


_FLAG = pl.when(TARGET).then(1).otherwise(0)  # 1 on the target row, 0 elsewhere
warnings.simplefilter("ignore", pl.exceptions.PolarsInefficientMapWarning)  # map_elements
FINDING_3 = {  # each predicate is the same on every row and tells whether the target exists
    "any": TARGET.any(),
    "all": (~TARGET).all().not_(),
    "skew": _FLAG.skew() > 0,
    "kurtosis": _FLAG.kurtosis() > -3,
    "entropy": _FLAG.entropy() > 0,
    "approx_n_unique": _FLAG.approx_n_unique() > 1,
    "bitwise_or": _FLAG.bitwise_or() == 1,
    "bitwise_and": (1 - _FLAG).bitwise_and() == 0,
    "bitwise_xor": _FLAG.bitwise_xor() == 1,
    "corr": pl.corr(_FLAG, c("age")).is_not_nan(),
    "search_sorted": _FLAG.search_sorted(1) > 0,
    "index_of": _FLAG.index_of(1).is_not_null(),
    "max_by": c("fnlwgt").max_by(_FLAG) == 77516,
    "min_by": c("fnlwgt").min_by(1 - _FLAG) == 77516,
    "peak_max": _FLAG.peak_max(),
    "peak_min": (1 - _FLAG).peak_min(),
    "rle_id": _FLAG.rle_id() > 0,
    "extend_constant": _FLAG.extend_constant(0, 1) == 1,
    "append": _FLAG.append(_FLAG) == 1,
    "rolling_sum_by": _FLAG.rolling_sum_by("born", "100000d") > 0,
    "over": _FLAG.max().over("sex") == 1,
    "shift": _FLAG.shift(1) == 1,
    "rank": _FLAG.rank() > 1,
    "cum_sum": _FLAG.cum_sum() > 0,
    "sort": _FLAG.sort(descending=True) == 1,
    "sample": _FLAG.sample(n=8) == 1,
    "map_elements": _FLAG.map_elements(lambda v: v == 1, return_dtype=pl.Boolean),
    "map_batches": _FLAG.map_batches(lambda s: s.max() == s, return_dtype=pl.Boolean),
    "implode": _FLAG.implode().list.max() == 1,
    "repeat_by": _FLAG.repeat_by(3).list.len() > 0,
    "gather": _FLAG.gather([0]) == 1,
    "head": _FLAG.head(1) == 1,
}


@pytest.mark.parametrize("name", list(FINDING_3))
def test_finding_3_aggregations_in_a_filter_are_refused(people, name):
    s = dp.Session(people, budget=dp.PureDP(1))
    _refused(s, lambda q: q.filter(FINDING_3[name]))


def test_the_attack_is_refused_with_a_date_column(people):
    """The old behavioural check was skipped when the schema had a Date column."""
    s = dp.Session(people, budget=dp.PureDP(1))
    _refused(s, lambda q: q.filter(TARGET.any()).with_columns(y=c("born").dt.year()))
    out = s.query().filter(c("born").dt.year() >= 1953).count().release(epsilon=0.5)
    assert out.height == 1


def test_a_strict_enum_cast_is_refused(people):
    """The old check was skipped when the step raised on its synthetic rows; after the debit
    the cast raised on an unmapped value and printed it."""
    s = dp.Session(people, budget=dp.PureDP(1))
    grades = pl.Enum(["Male"])
    _refused(s, lambda q: q.with_columns(g=c("sex").cast(grades)).filter(TARGET.any()))
    _refused(s, lambda q: q.with_columns(g=c("sex").cast(grades)), match="strict=False")
    lenient = s.query().with_columns(g=c("sex").cast(grades, strict=False))
    assert lenient.filter(c("g").is_null()).count().release(epsilon=0.5).height == 1


REFUSED = {  # one of each kind; none may pass, in any position
    "any": c("b").any(), "all": c("b").all(), "mean": c("x") - c("x").mean(),
    "sum": c("x").sum(), "len": pl.len(), "count": c("x").count(),
    "n_unique": c("x").n_unique(), "null_count": c("x").null_count(), "first": c("x").first(),
    "quantile": c("x").quantile(0.5), "median": c("x").median(), "mode": c("x").mode(),
    "skew": c("x").skew(), "kurtosis": c("x").kurtosis(), "entropy": c("x").entropy(),
    "approx_n_unique": c("x").approx_n_unique(), "bitwise_and": c("age").bitwise_and(),
    "bitwise_or": c("age").bitwise_or(), "bitwise_xor": c("age").bitwise_xor(),
    "corr": pl.corr("x", "age"), "cov": pl.cov("x", "age"),
    "search_sorted": c("x").search_sorted(1.0), "index_of": c("x").index_of(1.0),
    "max_by": c("x").max_by("age"), "min_by": c("x").min_by("age"),
    "peak_max": c("x").peak_max(), "peak_min": c("x").peak_min(), "rle_id": c("x").rle_id(),
    "rle": c("x").rle(), "extend_constant": c("x").extend_constant(1.0, 1),
    "append": c("x").append(c("x")), "rolling_mean_by": c("x").rolling_mean_by("d", "2d"),
    "rolling_sum": c("x").rolling_sum(2), "ewm_mean": c("x").ewm_mean(alpha=0.5),
    "over": c("x").sum().over("s"), "shift": c("x").shift(1), "diff": c("x").diff(),
    "pct_change": c("x").pct_change(), "rank": c("x").rank(), "cum_sum": c("x").cum_sum(),
    "cum_count": c("x").cum_count(), "cum_max": c("x").cum_max(), "sort": c("x").sort(),
    "sort_by": c("x").sort_by("age"), "reverse": c("x").reverse(), "sample": c("x").sample(1),
    "shuffle": c("x").shuffle(), "unique": c("x").unique(), "is_unique": c("x").is_unique(),
    "is_duplicated": c("x").is_duplicated(), "is_first_distinct": c("x").is_first_distinct(),
    "value_counts": c("x").value_counts(), "top_k": c("x").top_k(1), "arg_max": c("x").arg_max(),
    "interpolate": c("x").interpolate(), "forward_fill": c("x").forward_fill(),
    "fill_null_strategy": c("x").fill_null(strategy="mean"), "int_range": pl.int_range(pl.len()),
    "map_elements": c("x").map_elements(lambda v: v, return_dtype=pl.Float64),
    "map_batches": c("x").map_batches(lambda v: v, return_dtype=pl.Float64),
    "name.map": c("x").name.map(lambda n: n + "2"), "hash": c("x").hash(),
    "implode": c("x").implode(), "explode": c("l").explode(), "repeat_by": c("x").repeat_by(3),
    "list.len": c("l").list.len(), "list.eval": c("l").list.eval(pl.element() * 2),
    "str.split": c("s").str.split(","), "json_decode": c("s").str.json_decode(pl.Int64),
    "gather": c("x").gather([0]), "gather_every": c("x").gather_every(2),
    "head": c("x").head(1), "tail": c("x").tail(1), "slice": c("x").slice(0, 1),
    "filter": c("x").filter(c("x") > 1), "hist": c("x").hist(),
    "struct.with_fields": pl.struct("x").struct.with_fields(pl.field("x") * 2),
    "series literal": pl.lit(pl.Series([1, 2, 3])),
    # cost that depends on the data beyond linear, or a pattern/length from the data (finding 10)
    "repeat_by column": c("x").repeat_by(c("age")),
    "contains column pattern": c("s").str.contains(c("s")),
    "extract column pattern": c("s").str.extract(c("s")),
    "replace column pattern": c("s").str.replace(c("s"), "x"),
    "zfill column": c("s").str.zfill(c("age")), "pad column": c("s").str.pad_start(c("age")),
    "is_in column": c("age").is_in(c("l")), "pow column exponent": c("age").pow(c("age")),
    # raises on a value, or panics on an out-of-range date
    "strict cast str→int": c("s").cast(pl.Int64), "strict cast float→int": c("x").cast(pl.Int32),
    "strict cast int narrowing": c("age").cast(pl.Int32),
    "strict cast u64→i64": c("u").cast(pl.Int64), "strict cast enum": c("s").cast(pl.Enum(["a"])),
    "cast date→str": c("d").cast(pl.String, strict=False), "cast to list": c("x").cast(
        pl.List(pl.Float64), strict=False), "to_integer strict": c("s").str.to_integer(),
    "to_date strict": c("s").str.to_date("%Y-%m-%d"), "to_date inferred": c("s").str.to_date(
        strict=False), "to_datetime tz": c("s").str.to_datetime("%Y", time_zone="UTC",
                                                                  strict=False),
    "replace_strict without default": c("s").replace_strict(["a"], ["b"]),
    "strftime": c("d").dt.strftime("%Y"), "truncate": c("d").dt.truncate("1mo"),
    "offset_by": c("d").dt.offset_by("1d"), "dt.date": c("t").dt.date(),
    "month_start": c("d").dt.month_start(), "decimal arithmetic": c("dec") * 2,
    "decimal literal arithmetic": c("age") * pl.lit(Decimal("1.5")),
    "invalid regex": c("s").str.contains("("), "duplicate replace keys": c("s").replace(
        ["a", "a"], ["b", "c"]),
    # narwhals expressions are compiled to Polars and vetted the same way
    "nw mean": nw.col("x") - nw.col("x").mean(), "nw any": nw.col("b").any(),
    "nw is_unique": nw.col("x").is_unique(), "nw sum over": nw.col("x").sum().over("s"),
    "nw shift": nw.col("x").shift(1).over(order_by="age"),
    "nw cum_sum": nw.col("x").cum_sum().over(order_by="age"),
    "nw rank": nw.col("x").rank().over(order_by="age"),
    "nw map_batches": nw.col("x").map_batches(lambda s: s, return_dtype=nw.Float64),
    "nw strict cast": nw.col("s").cast(nw.Int64),
}
SCHEMA = pl.Schema({"id": pl.Int64, "age": pl.Int64, "u": pl.UInt64, "x": pl.Float64,
                    "s": pl.String, "b": pl.Boolean, "d": pl.Date, "t": pl.Datetime("us"),
                    "l": pl.List(pl.Int64), "dec": pl.Decimal(20, 2)})


@pytest.mark.parametrize("name", list(REFUSED))
@pytest.mark.parametrize("op", ["with_columns", "filter"])
def test_operations_off_the_list_are_refused(name, op):
    expr = REFUSED[name]
    step = (op, (), {"y": expr}) if op == "with_columns" else (op, (expr,), {})
    with pytest.raises(DomainError):
        rowwise.check_step(*step, SCHEMA)


def test_refusals_name_the_operation():
    for expr, name in [(c("x").skew(), "Skew"), (c("x").rank(), "Rank"),
                       (c("x").sum().over("s"), "Over"), (c("x").mean(), "Agg.Mean"),
                       (c("x").repeat_by(2), "RepeatBy"), (c("s").str.split(","), "Split")]:
        with pytest.raises(DomainError, match=name):
            rowwise.check_expression(expr, SCHEMA)


def test_arguments_that_are_not_expressions_are_refused():
    """A Series assigns values by row position; a custom iterable could yield other
    expressions when the step runs than when it is checked."""
    class Flip:
        calls = 0

        def __iter__(self):
            Flip.calls += 1
            return iter([c("x") if Flip.calls == 1 else c("x").mean()])

    for arg in (pl.Series("y", [1.0]), Flip(), (e for e in [c("x")]), [[c("x")]]):
        with pytest.raises(DomainError, match="row-wise"):
            rowwise.check_step("select", (arg,), {}, SCHEMA)
    with pytest.raises(DomainError, match="row-wise"):
        rowwise.check_step("filter", ([True, False],), {}, SCHEMA)


def test_unknown_columns_are_a_column_error():
    with pytest.raises(ColumnError):
        rowwise.check_step("with_columns", (), {"y": c("nope") + 1}, SCHEMA)


# -- what users write is accepted, and nothing accepted can raise on a value -------------------
def extreme_frame() -> pl.DataFrame:
    """Integer bounds, NaN, ±inf, nulls, out-of-range dates and datetimes, odd strings."""
    i64 = [2**63 - 1, -2**63, 0, -1, 39, None]
    return pl.DataFrame({
        "id": [1, 2, 3, 4, 5, 6],
        "age": pl.Series(i64, dtype=pl.Int64),
        "fnlwgt": pl.Series([2**31 - 1, -2**31, 0, -1, 77516, None], dtype=pl.Int32),
        "i8": pl.Series([127, -128, 0, -1, 39, None], dtype=pl.Int8),
        "u": pl.Series([2**64 - 1, 0, 1, 2**63, 39, None], dtype=pl.UInt64),
        "i128": pl.Series([2**127 - 1, -2**127, 0, -1, 39, None], dtype=pl.Int128),
        "x": [float("nan"), float("inf"), -float("inf"), 1e308, -0.0, None],
        "f32": pl.Series([float("nan"), float("inf"), -3.4e38, 1e-45, 0.5, None],
                         dtype=pl.Float32),
        "dec": pl.Series([Decimal("9" * 36 + ".99"), Decimal("-" + "9" * 36 + ".99"),
                          Decimal(0), Decimal("-0.01"), Decimal("1.5"), None],
                         dtype=pl.Decimal(38, 2)),
        "s": ["", "ℵ∞ 🙂 a", " -12 ", "2020-02-30 24:00", "9" * 40, None],
        "b": [True, False, True, False, True, None],
        "d": pl.Series([2**31 - 1, -2**31, 0, -1, 18262, None], dtype=pl.Int32).cast(pl.Date),
        "t": pl.Series(i64).cast(pl.Datetime("ns")),
        "tus": pl.Series(i64).cast(pl.Datetime("us")),
        "tz": pl.Series(i64).cast(pl.Datetime("ms", "Europe/Paris")),
        "dur": pl.Series(i64).cast(pl.Duration("ms")),
        "tm": pl.Series([0, 86_399_999_999_999, 1, 43_200 * 10**9, 5, None]).cast(pl.Time),
        "e": pl.Series(["a", "b", None, "a", "b", None], dtype=pl.Enum(["a", "b"])),
        "cat": pl.Series(["a", "zz", "", "a", "b", None], dtype=pl.Categorical),
        "l": pl.Series([[1], [], None, [2**63 - 1], [1, 2], None], dtype=pl.List(pl.Int64)),
        "nul": pl.Series([None] * 6, dtype=pl.Null),
    })


_TEMPORAL = [f(col) for col in ("d", "t", "tus", "tz") for f in (
    lambda e: c(e).dt.year(), lambda e: c(e).dt.quarter(), lambda e: c(e).dt.month(),
    lambda e: c(e).dt.week(), lambda e: c(e).dt.weekday(), lambda e: c(e).dt.day(),
    lambda e: c(e).dt.century(), lambda e: c(e).dt.millennium(),
    lambda e: c(e).dt.epoch("s"), lambda e: c(e).dt.timestamp("ms"),
    lambda e: c(e).cast(pl.Date, strict=False), lambda e: c(e).cast(pl.Datetime("ns"),
                                                                     strict=False),
    lambda e: c(e).cast(pl.Int64), lambda e: c(e) >= c(e), lambda e: c(e).is_null())]
_CLOCK = [f(col) for col in ("t", "tz", "tm") for f in (
    lambda e: c(e).dt.hour(), lambda e: c(e).dt.minute(), lambda e: c(e).dt.second(),
    lambda e: c(e).dt.millisecond(), lambda e: c(e).dt.microsecond(),
    lambda e: c(e).dt.nanosecond())]
_DURATION = [c("dur").dt.total_days(), c("dur").dt.total_hours(),
             c("dur").dt.total_seconds(fractional=True), c("dur").dt.total_nanoseconds(),
             c("t") - c("tus"), c("dur") * 2, -c("dur"), c("dur").abs()]
ACCEPTED = [
    # arithmetic (integers wrap; x // 0 and x % 0 are null), comparisons, logic
    c("age") + 1, c("age") - c("fnlwgt"), c("age") * 3, c("age") / c("fnlwgt"), c("age") // 0,
    c("age") % 0, -c("age"), c("age").abs(), c("x") ** 2, c("age").pow(2), c("x").pow(0.5),
    c("i128") * 2, c("u") + c("i8"), (c("age") == 39) & (c("fnlwgt") == 77516),
    (c("age") != 1) | ~(c("x") < 2) ^ (c("x") >= 0), c("age").eq_missing(None),
    c("age").ne_missing(3), c("x") <= c("f32"), c("b").not_(),
    pl.when(c("age") > 40).then(c("x") * 2).when(c("age") > 30).then(1.0).otherwise(None),
    # casts (strict only when no value can fail)
    c("age").cast(pl.Float64), c("i8").cast(pl.Int64), c("fnlwgt").cast(pl.Int128),
    c("b").cast(pl.Int8), c("x").cast(pl.String), c("x").cast(pl.Float32),
    c("dec").cast(pl.Float64), c("e").cast(pl.String), c("s").cast(pl.Categorical),
    c("x").cast(pl.Int64, strict=False), c("s").cast(pl.Int64, strict=False),
    c("s").cast(pl.Float64, strict=False), c("s").cast(pl.Enum(["a", "b"]), strict=False),
    c("u").cast(pl.Int64, strict=False), c("age").cast(pl.UInt8, strict=False),
    c("dec").cast(pl.Int64, strict=False), pl.lit(3).cast(pl.Int8),
    # nulls and NaN
    c("x").is_null(), c("x").is_not_null(), c("x").is_nan(), c("x").is_not_nan(),
    c("x").is_finite(), c("x").is_infinite(), c("x").fill_null(0.0),
    c("age").fill_null(c("fnlwgt")), c("x").fill_nan(0.0), c("s").fill_null("?"),
    pl.coalesce("x", "f32"),
    # numbers
    c("x").clip(0, 10), c("age").clip(lower_bound=c("fnlwgt")), c("x").sign(),
    c("x").floor(), c("x").ceil(), c("x").round(2), c("x").round_sig_figs(3), c("x").sqrt(),
    c("x").cbrt(), c("x").log(), c("x").log(10), c("x").log1p(), c("x").exp(),
    c("x").sin(), c("x").arctan(), c("x").degrees(), c("age").is_between(18, 65),
    c("x").is_between(c("f32"), 10),
    # membership and mappings with literal keys
    c("age").is_in([39, 40]), c("s").is_in(["a", "b"]), c("age").replace({39: 40}),
    c("s").replace(["a"], ["b"]), c("age").replace_strict({39: 1}, default=0),
    c("s").replace_strict(["a"], ["b"], default=None),
    # strings (literal patterns, lengths and affixes)
    c("s").str.len_chars(), c("s").str.len_bytes(), c("s").str.contains("a.", literal=True),
    c("s").str.contains(r"^\s*-?\d+"), c("s").str.starts_with("a"), c("s").str.ends_with("a"),
    c("s").str.to_lowercase(), c("s").str.to_uppercase(), c("s").str.to_titlecase(),
    c("s").str.slice(0, 2), c("s").str.slice(-3), c("s").str.head(2), c("s").str.tail(-2),
    c("s").str.strip_chars(), c("s").str.strip_chars(" x"), c("s").str.strip_chars_start(),
    c("s").str.strip_chars_end(), c("s").str.strip_prefix("a"), c("s").str.strip_suffix("a"),
    c("s").str.replace("a", "b"), c("s").str.replace_all(r"\d", "#"),
    c("s").str.replace_all("a", "b", literal=True), c("s").str.zfill(5),
    c("s").str.pad_start(5), c("s").str.pad_end(5, "x"), c("s").str.reverse(),
    c("s").str.count_matches("a"), c("s").str.find("a"), c("s").str.extract(r"(\d+)", 1),
    c("s").str.to_integer(strict=False), c("s").str.to_integer(base=16, strict=False),
    c("s").str.to_date("%Y-%m-%d", strict=False),
    c("s").str.to_datetime("%Y-%m-%d %H:%M", strict=False),
    pl.concat_str([c("s"), c("e")], separator="-"), pl.format("{}: {}", c("s"), c("age")),
    # horizontal and struct
    pl.sum_horizontal("age", "fnlwgt"), pl.min_horizontal("x", "f32"),
    pl.max_horizontal("x", "f32"), pl.mean_horizontal("x", "f32"),
    pl.any_horizontal(c("b"), c("x") > 0), pl.all_horizontal(c("b"), c("x") > 0),
    pl.struct("age", "x"), pl.struct("age", "x").struct.field("age").alias("a2"),
    pl.struct(a3=c("age"), x3=c("x")).struct.unnest(),
    pl.struct("age", "x").struct.rename_fields(["p", "q"]),
    # names, selectors and literals
    (c("age") + 1).name.keep(), c("age").name.prefix("p_"), c("x").name.suffix("_2"),
    c("x").name.to_uppercase(), pl.all(), pl.col(pl.Float64) * 2, c("^f.*$"),
    pl.all().exclude("l"), pl.lit(1), pl.lit("x"), pl.lit(None), pl.lit(dt.date(2020, 1, 1)),
    pl.lit([1, 2]),
    # narwhals
    nw.col("x").clip(0.0, 1.0), (nw.col("x") * 1e300).floor() * 1e-300,
    nw.sum_horizontal((nw.col("x") >= 1).cast(nw.Int64)), nw.col("s").fill_null("?"),
    nw.col("s").replace_strict(["a"], ["b"], default=None), ~nw.col("s").is_null(),
    nw.when(nw.col("x") > 0).then(nw.lit(1.0, nw.Float64)).otherwise(nw.col("x")),
    nw.col("age").cast(nw.Float64), nw.col("s").str.len_chars(), nw.col("t").dt.year(),
    *_TEMPORAL, *_CLOCK, *_DURATION,
]


@pytest.mark.parametrize("i", range(len(ACCEPTED)))
def test_row_wise_expressions_are_accepted_and_cannot_fail_on_a_value(i):
    """Every accepted expression runs on integer bounds, NaN, ±inf, nulls, out-of-range
    dates and odd strings without raising (or panicking)."""
    frame, expr = extreme_frame(), ACCEPTED[i]
    native = isinstance(expr, pl.Expr)
    for op, args in (("with_columns", (expr,)), ("select", (expr,))):
        rowwise.check_step(op, args, {}, frame.schema)
        if native:
            getattr(frame, op)(*args)
        else:
            nw.to_native(getattr(nw.from_native(frame), op)(*args))
    if (frame.select(expr) if native else nw.from_native(frame).select(expr)).shape[1] == 1:
        predicate = expr.is_null()
        rowwise.check_step("filter", (predicate,), {}, frame.schema)
        frame.filter(predicate) if native else nw.from_native(frame).filter(predicate)


_CAST_TARGETS = [pl.Int8, pl.UInt8, pl.Int64, pl.UInt64, pl.Int128, pl.Float32, pl.Float64,
                 pl.Boolean, pl.String, pl.Categorical, pl.Enum(["a", "b"]), pl.Date,
                 pl.Datetime("ns"), pl.Datetime("ms", "UTC"), pl.Duration("us"), pl.Time,
                 pl.Decimal(10, 2), pl.Binary, pl.List(pl.Int64)]


def test_every_accepted_cast_runs_on_extreme_values():
    """The cast tables (dpkit.frame.rowwise_ops) hold: each cast the checker accepts, strict
    or not, runs on every extreme value without raising or panicking."""
    frame = extreme_frame()
    accepted = refused = 0
    for column in frame.columns:
        for target in _CAST_TARGETS:
            for strict in (True, False):
                expr = c(column).cast(target, strict=strict)
                try:
                    rowwise.check_expression(expr, frame.schema)
                except DomainError:
                    refused += 1
                    continue
                accepted += 1
                frame.select(expr)  # must not raise
    assert accepted >= 150 and refused >= 300  # the tables are neither empty nor everything


@pytest.mark.parametrize(("expr", "ok"), [
    (c("i8").cast(pl.Int16), True), (c("fnlwgt").cast(pl.Int64), True),
    (c("u").cast(pl.Int128), True), (c("b").cast(pl.UInt8), True),
    (c("age").cast(pl.Float64), True), (c("age").cast(pl.String), True),
    (c("age").cast(pl.Int32), False), (c("u").cast(pl.Int64), False),
    (c("i8").cast(pl.UInt64), False), (c("x").cast(pl.Int64), False),
    (c("s").cast(pl.Float64), False), (c("s").cast(pl.Enum(["a"])), False),
    (c("e").cast(pl.Enum(["a"])), False), (c("d").cast(pl.Datetime("ns")), False),
    (nw.col("s").cast(nw.Int64), False), (nw.col("b").cast(nw.Int64), True),
    (c("s").cast(pl.Enum(["a"]), strict=False), True), (c("x").cast(pl.Int8, strict=False), True),
    (c("age").cast(pl.Int32, wrap_numerical=True), False),
])
def test_strict_casts_must_not_fail_on_any_value(expr, ok):
    schema = extreme_frame().schema
    if ok:
        rowwise.check_expression(expr, schema)
    else:
        with pytest.raises(DomainError, match="cast"):
            rowwise.check_expression(expr, schema)


def test_map_without_a_default_does_not_raise_on_unmapped_values(people):
    """dpkit's own map is replace_strict with a default (null): accepted, and total."""
    s = dp.Session(people, budget=dp.PureDP(1))
    q = s.query().map("sex", {"Female": "F"})
    assert q.filter(c("sex").is_null()).count().release(epsilon=0.5).height == 1


def test_dpkits_own_steps_are_accepted(people):
    s = dp.Session(people, privacy_unit=PrivacyUnit.by("fnlwgt", 2), budget=dp.PureDP(1))
    q = (s.query().clamp("hours", 0, 99).clamp("age", 17, 90).bin("age", [17, 30, 50, 90])
         .bin("hours", width=10, name="h10").map("sex", {"Female": "F", "Male": "M"})
         .fill_null("sex", "?").drop_nulls("age").filter(nw.col("hours") > 0))
    out = q.group_by("sex", keys=["F", "M"]).count().release(epsilon=0.5)
    assert out.height == 2 and s.spent == dp.PureDP(0.5)


def test_a_bin_of_tiny_width_is_row_wise(people):
    """Finding 9: width=1e-300 was refused as not row-wise (the behavioural check compared
    NaN with NaN); it is element-wise."""
    s = dp.Session(people.select("age", "hours"), budget=dp.PureDP(1))
    q = s.query().bin("hours", width=1e-300).bin("age", width=1e-300)
    assert q.sum("hours", bounds=(0, 100)).release(epsilon=0.5).height == 1


def test_the_servers_operators_and_steps_are_accepted(people):
    """The server's JSON grammar compiles to narwhals expressions that pass the same check:
    every operator, and the clamp/bin/map/fill_null/drop_nulls steps it builds."""
    protocol = pytest.importorskip("dpkit.server.protocol")
    num = {"col": "hours"}
    ops = []
    for op in protocol.OPERATORS:
        if op in ("&", "|"):
            args = [{"op": ">", "args": [num, {"lit": 1}]}, {"op": "is_null", "args": [num]}]
        elif op in ("~", "is_null"):
            args = [{"op": "is_null", "args": [num]}] if op == "~" else [num]
        elif op in ("like", "ilike"):
            args = [{"col": "sex"}, {"lit": "F%"}]
        elif op == "case":
            args = [{"op": ">", "args": [num, {"lit": 1}]}, {"lit": 1}, {"lit": 0}]
        elif op in ("least", "greatest"):
            args = [num, {"lit": 2}]
        else:
            args = [num, {"lit": 2}]
        ops.append({"op": op, "args": args})
    numbers = ("+", "-", "*", "/", "case", "least", "greatest")
    conditions = [o for o in ops if o["op"] not in numbers]
    values = [o for o in ops if o["op"] in numbers]
    payload = {
        "steps": [*({"step": "filter", "expr": o} for o in conditions),
                  {"step": "with_columns", "columns": {f"v{i}": o for i, o in enumerate(values)}},
                  {"step": "clamp", "column": "hours", "lower": 0, "upper": 99},
                  {"step": "bin", "column": "age", "edges": [17, 30, 50, 90], "name": "band"},
                  {"step": "bin", "column": "hours", "width": 10},
                  {"step": "map", "column": "sex", "mapping": [["Female", "F"], ["Male", "M"]]},
                  {"step": "fill_null", "column": "sex", "value": "?"},
                  {"step": "drop_nulls", "columns": ["age"]}],
        "aggs": [{"agg": "count"}], "budget": {"epsilon": 0.5}}
    s = dp.Session(people, budget=dp.PureDP(1))
    query, kwargs = protocol.to_query(s, payload)
    assert query.release(**kwargs).height == 1
    assert {o["op"] for o in ops} == set(protocol.OPERATORS)


def test_a_duckdb_session_vets_narwhals_steps(people):
    duckdb = pytest.importorskip("duckdb")
    s = dp.Session(duckdb.from_arrow(people.drop("grade").to_arrow()), budget=dp.PureDP(1))
    _refused(s, lambda q: q.filter(nw.col("age") >= nw.col("age").mean()))
    _refused(s, lambda q: q.with_columns(a=nw.col("sex").cast(nw.Int64)), match="strict")
    ok = (s.query().filter(nw.col("age") >= 30).with_columns(h=nw.col("hours").clip(0, 80))
          .bin("age", [17, 30, 50, 90]).bin("fnlwgt", width=1000))
    assert ok.sum("h", bounds=(0, 80)).release(epsilon=0.5).height == 1


def test_integer_arithmetic_that_raises_on_the_backend_is_refused():
    """DuckDB raises on integer overflow (Polars wraps): `age + 1` would fail after the debit
    exactly when some row holds the maximum. Off Polars, integer arithmetic needs floats."""
    duckdb = pytest.importorskip("duckdb")
    table = pl.DataFrame({"age": [2**63 - 1, 1, 2], "x": [1.0, 2.0, 3.0]})
    relation = duckdb.from_arrow(table.to_arrow())
    with pytest.raises(Exception, match="Overflow"):  # what the guard prevents
        nw.from_native(relation).select(nw.col("age") + 1).collect()
    s = dp.Session(relation, budget=dp.PureDP(1))
    for expr in (nw.col("age") + 1, nw.col("age") * nw.col("age"), -nw.col("age"),
                 nw.col("age").abs(), nw.col("age") % 2, nw.sum_horizontal("age", "age")):
        _refused(s, lambda q, e=expr: q.with_columns(y=e), match="integer")
    fine = s.query().with_columns(y=nw.col("age").cast(nw.Float64) + 1, z=nw.col("x") * 2)
    assert fine.count().release(epsilon=0.5).height == 1
    polars = dp.Session(table, budget=dp.PureDP(1))  # Polars wraps: accepted there
    assert polars.query().with_columns(y=nw.col("age") + 1).count().release(
        epsilon=0.5).height == 1


# -- finding 4: the privacy unit column against the resolved output schema ---------------------
@pytest.fixture
def one_heavy_unit() -> pl.DataFrame:
    """Unit 0 has 30 rows, each with its own `id`; units 1..10 one row each."""
    return pl.DataFrame({"uid": [0] * 30 + list(range(1, 11)),
                         "id": list(range(100, 140)),
                         "x": [1.0] * 40})


FINDING_4 = {
    "name.prefix": lambda q: q.with_columns(c("^id$").name.prefix("u")),
    "struct unnest": lambda q: q.with_columns(pl.struct(uid=c("id")).struct.unnest()),
    "rename_fields unnest": lambda q: q.with_columns(
        pl.struct(c("id")).struct.rename_fields(["uid"]).struct.unnest()),
    "several names prefixed": lambda q: q.with_columns(c("id", "x").name.prefix("u")),
    "regex alias": lambda q: q.with_columns(c("^id$").alias("uid")),
    "dtype selector": lambda q: q.with_columns(c(pl.Int64) * 1000 + c("id")),
    "all, suffixed": lambda q: q.with_columns(pl.all().name.suffix("")),
    "keyword": lambda q: q.with_columns(uid=c("id")),
    "alias in select": lambda q: q.select(pl.all().exclude("uid"), c("id").alias("uid")),
    "narwhals prefix": lambda q: q.with_columns(nw.col("id").name.prefix("u")),
    "narwhals alias": lambda q: q.with_columns(nw.col("id").alias("uid")),
    "select drops the unit": lambda q: q.select("id", "x"),
}


@pytest.mark.parametrize("name", list(FINDING_4))
def test_finding_4_steps_that_rewrite_the_unit_column_are_refused(one_heavy_unit, name):
    s = dp.Session(one_heavy_unit, privacy_unit=PrivacyUnit.by("uid", max_rows=1),
                   budget=dp.PureDP(1))
    _refused(s, FINDING_4[name], match="privacy unit")


def test_a_python_function_renaming_columns_is_refused(one_heavy_unit):
    """`.name.map(f)`: f could return other names when the step runs than when checked."""
    s = dp.Session(one_heavy_unit, privacy_unit=PrivacyUnit.by("uid", max_rows=1),
                   budget=dp.PureDP(1))
    _refused(s, lambda q: q.with_columns(c("id").name.map(lambda _: "uid")), match="name.map")


def test_steps_that_pass_the_unit_column_through_are_accepted(one_heavy_unit):
    s = dp.Session(one_heavy_unit, privacy_unit=PrivacyUnit.by("uid", max_rows=1),
                   budget=dp.PureDP(10))
    for build in (lambda q: q.with_columns(pl.all()), lambda q: q.select(pl.all()),
                  lambda q: q.with_columns(uid=c("uid")), lambda q: q.select("uid", "x"),
                  lambda q: q.with_columns(c("uid").alias("uid"), c(pl.Float64) * 2),
                  lambda q: q.with_columns(c("^id$").name.prefix("p_")),
                  lambda q: q.with_columns(pl.struct("x", "id").alias("st")),
                  lambda q: q.select(nw.col("uid"), nw.col("x").alias("y"))):
        build(s.query()).count().release(epsilon=0.5)
    lf = engine.apply_steps(engine.to_lazy(one_heavy_unit),
                            s.query().with_columns(pl.all()).steps, unit=s.privacy_unit)
    assert lf.collect().to_native()["uid"].to_list() == one_heavy_unit["uid"].to_list()


def test_check_time_per_step_is_small(people):
    """The plan-time checks add well under 5 ms to a release of a few steps (the median of
    a typical step is ~0.5 ms; the bound here is loose so that CI load cannot fail it)."""
    import statistics
    import time

    schema = people.schema
    steps = [("filter", (c("age") >= 30,), {}), ("with_columns", (), {"older": c("age") > 60})]
    times = []
    for _ in range(20):
        start = time.perf_counter()
        for op, args, kwargs in steps:
            rowwise.check_step(op, args, kwargs, schema, "fnlwgt")
        times.append(time.perf_counter() - start)
    assert statistics.median(times) < 0.05
