"""The query language is defined once (dpkit.frame.language): every registered step and
aggregation round-trips through JSON to the same plan; the server's request models and the
client come from the registry; Aggregation is an abstract base class and Statistic.kind a
closed set."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import narwhals as nw
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit as dp
from dpkit.errors import DomainError, DPError
from dpkit.frame import aggregates, language
from dpkit.frame.aggregates import Statistic, StatKind
from dpkit.frame.language import Param, ProtocolError, col, lit
from dpkit.frame.query import Query

FRAME = pl.DataFrame({
    "age": [17, 25, 33, 41, 58, 64, 70, None],
    "hours": [10.0, 20.5, None, 40.0, 45.5, 60.0, 8.0, 35.0],
    "sex": ["F", "M", "F", "M", None, "F", "M", "F"],
    "flag": [True, False, True, None, True, False, False, True]})
COLUMNS = list(FRAME.columns)


def session() -> dp.Session:
    return dp.Session(FRAME, dp.PrivacyUnit.rows(), dp.ApproxDP(10, Fraction(1, 10**6)))


# -- strategies generated from the registry's parameter types --------------------------------
ints = st.integers(-20, 120)
number = st.one_of(ints, st.floats(-20, 120, allow_nan=False),
                   st.fractions(-20, 120, max_denominator=12).map(
                       lambda f: f"{f.numerator}/{f.denominator}"))
scalar = st.one_of(st.booleans(), ints, st.floats(-20, 120, allow_nan=False),
                   st.sampled_from(["F", "M", "x", ""]))
leaf = st.one_of(st.sampled_from(COLUMNS).map(lambda c: {"col": c}),
                 scalar.map(lambda v: {"lit": v}))
expr = st.recursive(leaf, lambda sub: st.one_of(
    st.builds(lambda o, a, b: {"op": o, "args": [a, b]},
              st.sampled_from([o for o in language.OPERATORS if o not in ("~", "is_null")]),
              sub, sub),
    st.builds(lambda o, a: {"op": o, "args": [a]}, st.sampled_from(["~", "is_null"]), sub)),
    max_leaves=5)
new_column = st.sampled_from(["age", "band", "new"])


def _length(p: Param, most: int = 4) -> dict[str, int]:
    lo, hi = p.size or (0, most)
    return {"min_size": lo, "max_size": min(hi, max(lo, most))}


TYPES: dict[str, Any] = {
    "column": lambda p: st.sampled_from(COLUMNS), "new_column": lambda p: new_column,
    "label": lambda p: st.sampled_from(["out_a", "out_b"]),
    "columns": lambda p: st.lists(st.sampled_from(COLUMNS), unique=True, **_length(p)),
    "number": lambda p: number,
    "numbers": lambda p: st.lists(st.integers(0, 100), unique=True, **_length(p)).map(sorted),
    "bounds": lambda p: st.tuples(number, number).map(list), "scalar": lambda p: scalar,
    "pairs": lambda p: st.dictionaries(scalar, scalar, **_length(p)).map(
        lambda d: [[k, v] for k, v in d.items()]),
    "int": lambda p: st.integers(p.size[0] if p.size else 0, min(p.size[1], 60) if p.size
                                 else 60),
    "choice": lambda p: st.sampled_from(p.choices), "flag": lambda p: st.booleans(),
    "expr": lambda p: expr,
    "exprs": lambda p: st.dictionaries(new_column, expr, **_length(p, 2))}
assert set(TYPES) == set(language.TYPES)  # a new parameter type needs a strategy here


@st.composite
def form_json(draw: Any, form: language.Form, key: str) -> dict[str, Any]:
    """A JSON form of a registered tag: required parameters always, optional ones (or null)
    sometimes."""
    out = {key: form.tag}
    for p in form.params:
        if p.required or draw(st.integers(0, 2)) > 0:
            out[p.name] = None if not p.required and draw(st.integers(0, 5)) == 0 else draw(
                TYPES[p.type](p))
    return out


group_by = st.one_of(
    st.none(),
    st.builds(lambda keys: {"columns": ["sex"], "keys": keys},
              st.lists(st.sampled_from(["F", "M", "X"]), min_size=1, max_size=3, unique=True)),
    st.just({"columns": ["sex", "flag"], "keys": {"sex": ["F", "M"], "flag": [True, False]}}),
    st.just({"columns": ["sex"], "selection": {"epsilon": "1/2", "delta": 1e-7}}))


def plan_rows(query: Query) -> Any:
    """The planned noise (what a release would draw), or the type of the refusal."""
    try:
        _, planned = query.plan(epsilon=1)
    except DPError as exc:
        return type(exc)
    return [(p.stat.key, p.stat.kind, p.mechanism, p.scale, p.sensitivity, p.loss)
            for p in planned]


def round_trip(doc: dict[str, Any]) -> bool:
    """from_json → to_json → from_json gives the same describe(), JSON and planned noise.
    False if the drawn form is refused (it has no plan to compare)."""
    s = session()
    try:
        query = Query.from_json(s, doc)
    except DPError:
        return False
    text = query.to_json()
    json.dumps(text)  # plain JSON
    again = Query.from_json(s, json.loads(json.dumps(text)))
    assert again.describe() == query.describe()
    assert again.to_json() == text
    assert plan_rows(again) == plan_rows(query)
    return True


CHECKS = settings(max_examples=60, derandomize=True, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.mark.parametrize("tag", sorted(language.STEPS))
def test_every_step_kind_round_trips(tag):
    """Derandomised (no flakiness); at least one drawn form of each kind must be accepted, so
    a kind that no longer round-trips fails."""
    accepted = []

    @CHECKS
    @given(form_json(language.STEPS[tag], "step"), group_by)
    def case(step, group):
        doc = {"steps": [step], "aggs": [{"agg": "count"}],
               **({"group_by": group} if group else {})}
        accepted.append(round_trip(doc))

    case()
    assert any(accepted), f"no drawn {tag} step was accepted"


@pytest.mark.parametrize("tag", sorted(language.AGGREGATIONS))
def test_every_aggregation_round_trips(tag):
    accepted = []

    @CHECKS
    @given(form_json(language.AGGREGATIONS[tag], "agg"), group_by,
           st.lists(st.sampled_from(["filter", "clamp", "bin", "drop_nulls"]), max_size=2)
           .flatmap(lambda tags: st.tuples(*(form_json(language.STEPS[t], "step")
                                              for t in tags))))
    def case(agg, group, steps):
        doc = {"steps": list(steps), "aggs": [agg], **({"group_by": group} if group else {})}
        accepted.append(round_trip(doc))

    case()
    assert any(accepted), f"no drawn {tag} aggregation was accepted"


def test_a_library_query_round_trips_exactly():
    """Fractions stay exact (as "p/q"), bounds and keys tables survive, and the JSON is what
    the server takes."""
    s = session()
    q = (s.query().filter((col("age") >= 18) & ~col("sex").is_null())
         .with_columns(older=col("age") + lit(1)).clamp("hours", Fraction(1, 3), 80)
         .bin("age", [17, 30, 50, 90], name="band").map("sex", {"F": "f"}, default="o")
         .fill_null("hours", 0.5).drop_nulls("age")
         .group_by("sex", "band", keys=dp.KeySet({"sex": ["f", "o"]}) * dp.KeySet(
             {"band": [17.0, 30.0]}))
         .agg(dp.count(name="n"), dp.sum("hours"), dp.median("age", (17, Fraction(181, 2))),
              dp.std("older", (0, 100)), dp.quantile("age", 0.9, (17, 90), candidates=50,
                                                       method="tree")))
    doc = q.to_json()
    assert doc["steps"][2] == {"step": "clamp", "column": "hours", "lower": "1/3", "upper": 80}
    assert doc["group_by"]["keys"][1] == ["f", 30.0]
    assert doc["aggs"][2] == {"agg": "quantile", "column": "age", "q": "1/2",
                              "bounds": [17, "181/2"]}
    assert doc["aggs"][3]["std"] is True
    again = Query.from_json(s, json.loads(json.dumps(doc)))
    assert again.describe() == q.describe() and plan_rows(again) == plan_rows(q)
    assert again.declared == q.declared and again.keys.equals(q.keys)
    for other in (s.query().group_by("sex", selection=dp.PartitionSelection(Fraction(1, 3),
                                                                             1e-7)).count(),
                  s.query().agg(dp.histogram("age", [0, 50.5, Fraction(201, 2)])),
                  s.query().agg(dp.mean("hours", [0, 1], fill=0.5, name="m"))):
        back = Query.from_json(s, json.loads(json.dumps(other.to_json())))
        assert back.describe() == other.describe() and plan_rows(back) == plan_rows(other)
    protocol = pytest.importorskip("dpkit.server.protocol")
    served, kwargs = protocol.to_query(s, {**doc, "budget": {"epsilon": "1/2"}})
    assert served.describe() == q.describe() and kwargs["epsilon"] == Fraction(1, 2)


def test_what_has_no_json_form_is_refused():
    s = session()
    base = s.query().count()
    for query in (s.query().filter(nw.col("age") > 3), s.query().select("age", "sex"),
                  s.query().with_columns(nw.col("age").alias("a2")),
                  s.query().join(pl.DataFrame({"sex": ["F"], "r": [1]}), on="sex"),
                  s.query().partition("age", [17, 25])[17]):
        with pytest.raises(ProtocolError):
            query.count().to_json()
    with pytest.raises(ProtocolError, match="no JSON form"):  # a field JSON cannot carry
        s.query().agg(aggregates.Histogram(column="age", bins=[0, 50], bounds=(0, 1))).to_json()
    with pytest.raises(ProtocolError):
        s.query().group_by("sex", keys=["F"]).count().to_json() and s.query().agg(
            dp.sum("age", (0, float("inf")))).to_json()
    assert base.to_json() == {"steps": [], "aggs": [{"agg": "count"}]}


@pytest.mark.parametrize("doc", [
    {"steps": [], "aggs": [{"agg": "count"}], "rows": 1},
    {"steps": [{"step": "collect"}], "aggs": []},
    {"aggs": [{"agg": "rows"}]},
    {"aggs": [{"agg": "count", "where": 1}]},
    {"aggs": [{"agg": "median", "column": "age", "q": 0.3, "bounds": [0, 1]}]},
    {"aggs": [{"agg": "sum", "column": "age", "bounds": [True, 5]}]},
    {"aggs": [{"agg": "sum", "column": "age", "bounds": ["1e99999999", 5]}]},
    {"aggs": [{"agg": "quantile", "column": "age", "q": 0.5, "candidates": 1}]},
    {"aggs": [{"agg": "histogram", "column": "age", "bins": list(range(10_003))}]},
    {"steps": [{"step": "with_columns", "columns": {"__dpkit_rand": {"lit": 1}}}]},
    {"steps": [{"step": "bin", "column": "age", "width": 5, "name": "__dpkit_x"}]},
    {"steps": [{"step": "map", "column": "sex", "mapping": [[1, "a"], [True, "b"]]}]},
    {"steps": [{"step": "map", "column": "sex", "mapping": [[1, "a"]]}]},
    {"steps": [{"step": "fill_null", "column": "age", "value": "x"}]},
    {"steps": [{"step": "filter", "expr": {"col": "age"}}]},
    {"steps": [{"step": "filter", "expr": {"op": "head", "args": [{"col": "age"}]}}]},
    {"steps": [{"step": "filter", "expr": {"lit": {"a": 1}}}]},
    {"steps": [{"step": "filter", "expr": {"col": "age", "op": ">"}}]},
    {"group_by": {"columns": ["sex"]}, "aggs": []},
])
def test_malformed_json_is_refused(doc):
    """Every field is checked against the registry's allow-list (unknown fields, steps and
    aggregations, wrong types, reserved names, limits), whatever the caller (library or
    server)."""
    s = session()
    with pytest.raises(ProtocolError):
        Query.from_json(s, doc)


def test_grammar_expressions_work_in_library_mode():
    s = session()
    q = s.query().filter(col("age") >= 30, col("sex") == "F").count()
    assert len(q.steps) == 2 and len(q.to_json()["steps"]) == 2
    assert q.release(epsilon=1).height == 1
    with pytest.raises(ProtocolError, match="condition"):
        s.query().filter(col("age") + 1)
    with pytest.raises(ProtocolError, match="compares values of one kind"):
        s.query().filter(col("sex") > 3)


# -- the registry drives the server and the client ------------------------------------------
@dataclass(frozen=True)
class DummyTotal(aggregates.Sum):
    """A test aggregation: a sum under another name."""

    def output_name(self) -> str:
        return self.name or f"{self.column}_dummy"


def test_a_registered_aggregation_reaches_the_server_without_protocol_edits(tmp_path):
    pytest.importorskip("fastapi")
    protocol = pytest.importorskip("dpkit.server.protocol")
    from dpkit.server.app import create_app
    from dpkit.server.config import parse_config

    FRAME.write_csv(tmp_path / "t.csv")
    cfg = parse_config({"ledger": "l.sqlite", "datasets": [
        {"name": "t", "source": {"kind": "csv", "path": "t.csv"}, "privacy_unit": "rows",
         "budget": {"measure": "pure", "epsilon": 5}}]}, base=tmp_path)
    body = {"aggs": [{"agg": "dummy_total", "column": "age", "bounds": [0, 100]}],
            "budget": {"epsilon": "1/2"}}

    analysts = iter(range(10))

    def serve() -> tuple[Any, Any, str]:
        app, name = create_app(cfg), f"analyst{next(analysts)}"
        token = app.state.dpkit.ledger.add_analyst(name)
        app.state.dpkit.ledger.grant(name, "t")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Using `httpx` with")
            from fastapi.testclient import TestClient
        return app, TestClient(app, headers={"Authorization": f"Bearer {token}"}), token

    assert "dummy_total" not in json.dumps(protocol.QueryRequest.model_json_schema())
    language.aggregation("dummy_total", Param("column", "column"),
                         Param("bounds", "bounds", None), Param("name", "label", None))(
        DummyTotal)
    try:
        assert "dummy_total" in json.dumps(protocol.QueryRequest.model_json_schema())
        app, http, token = serve()
        assert "DummyTotalAgg" in json.dumps(app.openapi())
        r = http.post("/v1/datasets/t/release", json=body)
        assert r.status_code == 200, r.text
        assert [c["name"] for c in r.json()["columns"]][0] == "age_dummy"
        client = dp.Client(app=app, token=token)
        out = client.query("t").agg(DummyTotal(column="age", bounds=(0, 100))).release(
            epsilon=0.5)
        assert out.columns[0] == "age_dummy"
        client.close()
        http.close()
    finally:
        language.unregister("dummy_total")
    assert "dummy_total" not in json.dumps(protocol.QueryRequest.model_json_schema())
    _, http, _ = serve()
    assert http.post("/v1/datasets/t/release", json=body).status_code == 422
    http.close()


def test_the_client_reuses_the_query_builder():
    from dpkit.client import ClientQuery, RemoteSession

    assert issubclass(ClientQuery, Query)
    builder = {"filter", "with_columns", "clamp", "bin", "map", "fill_null", "drop_nulls",
               "group_by", "agg", "count", "sum", "mean", "histogram", "quantile"}
    assert not builder & set(ClientQuery.__dict__)  # inherited, not restated
    q = ClientQuery(RemoteSession(None, "t"))  # type: ignore[arg-type]
    q = (q.filter(col("age") > 3).clamp("hours", 0, 80).group_by("sex", keys=["F", "M"])
         .agg(dp.mean("hours"), dp.median("age", (0, 100))))
    assert q.to_json()["group_by"] == {"columns": ["sex"], "keys": ["F", "M"]}
    for local_only in (lambda: q.select("age"), lambda: ClientQuery(q.session).filter(
            nw.col("age") > 3), lambda: ClientQuery(q.session).join(FRAME, on="age")):
        with pytest.raises(DomainError):
            local_only()


# -- typed kinds and the abstract base -----------------------------------------------------
def test_statistic_kind_is_a_closed_set():
    assert {k.value for k in StatKind} == {"count", "sum", "distinct", "bins"}
    assert Statistic("k", "sum").kind is StatKind.SUM  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Statistic("k", "median")  # type: ignore[arg-type]
    stats = dp.mean("age", (0, 100)).statistics(nw.from_native(FRAME.lazy()).collect_schema(),
                                                "a_")
    assert [s.kind for s in stats] == [StatKind.SUM, StatKind.COUNT]


def test_aggregation_is_an_abstract_base_class():
    with pytest.raises(TypeError):
        aggregates.Aggregation()  # type: ignore[abstract]

    @dataclass(frozen=True)
    class NoFinish(aggregates.Aggregation):
        def output_name(self) -> str:
            return "x"

        def statistics(self, schema: Any, prefix: str) -> list[Statistic]:
            return []

    with pytest.raises(TypeError, match="finish"):
        NoFinish()  # type: ignore[abstract]
    with pytest.raises(DomainError):  # a parameter that is not a field: refused at once
        language.aggregation("broken", Param("colum", "column"))(DummyTotal)
    assert "broken" not in language.AGGREGATIONS
