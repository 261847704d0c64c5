"""Declared metadata wired through the builder, the server and the CLI (issue 32): group keys
and bounds default to the declaration and are written into the query; a column a step wrote
does not inherit it; every missing declaration is named; the server refuses to start on a
declared column its source lacks; ``dpkit schema`` writes a template without a value."""

import warnings
from fractions import Fraction

import polars as pl
import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.errors import BoundsError, DomainError
from dpkit.frame.language import col
from dpkit.frame.schema import SchemaError

SCHEMA = dp.Schema({"age": dp.Numeric(17, 90, integer=True),
                    "hours": dp.Numeric(0, Fraction(199, 2)),
                    "sex": dp.Categorical(["Female", "Male"]),
                    "race": dp.Categorical(["A", "B", "C"]),
                    "id": dp.Text()})
BOUNDED = [dp.sum("age"), dp.mean("age"), dp.variance("age"), dp.std("age"),
           dp.quantile("age", 0.25), dp.median("age"), dp.min("age"), dp.max("age")]


@pytest.fixture
def table():
    return pl.DataFrame({"age": [20, 35, 50, 64], "hours": [40.0, 20.5, None, 60.0],
                         "sex": ["Male", "Female", "Male", "Female"],
                         "race": ["A", "B", "C", "A"], "id": ["a", "b", "c", "d"],
                         "city": ["x", "y", "x", "y"]})


@pytest.fixture
def session(table):
    return dp.Session(table, budget=dp.PureDP(100), schema=SCHEMA)


# -- the builder's defaults ------------------------------------------------------------------
def test_group_by_takes_the_declared_categories(session, table):
    q = session.query().group_by("sex").count()
    assert q.to_json()["group_by"] == {"columns": ["sex"], "keys": ["Female", "Male"]}
    assert q.describe() == session.query().group_by(
        "sex", keys=["Female", "Male"]).count().describe()
    both = session.query().group_by("sex", "race").count()
    explicit = session.query().group_by("sex", "race", keys={
        "sex": ["Female", "Male"], "race": ["A", "B", "C"]}).count()
    assert len(both.keys) == 6 and both.describe() == explicit.describe()
    out = q.release(epsilon=1)
    assert out["sex"].to_list() == ["Female", "Male"]


@pytest.mark.parametrize("agg", BOUNDED, ids=lambda a: a.output_name())
def test_aggregations_take_the_declared_bounds(session, agg):
    q = session.query().agg(agg)
    assert q.aggs[0].bounds == (17, 90)  # written into the query, so its JSON carries them
    assert q.to_json()["aggs"][0]["bounds"] == [17, 90]
    plan = q.plan(epsilon=1)
    explicit = session.query().agg(type(agg)(**{**vars(agg), "bounds": (17, 90)}))
    assert plan.noise == explicit.plan(epsilon=1).noise
    assert plan.description == explicit.plan(epsilon=1).description


def test_the_json_form_replays_without_the_schema(session, table):
    q = session.query().group_by("sex").agg(dp.count(), dp.mean("hours"))
    bare = dp.Session(table, budget=dp.PureDP(100))
    again = dp.Query.from_json(bare, q.to_json())
    assert again.describe() == q.describe()
    assert again.plan(epsilon=1).noise == q.plan(epsilon=1).noise


def test_precedence_explicit_then_clamp_then_schema(session):
    def bounds(q):
        return q.plan(epsilon=1).query.aggs[0].bounds

    assert bounds(session.query().mean("age", bounds=(0, 10))) == (0, 10)
    assert bounds(session.query().clamp("age", 20, 50).mean("age")) == (20, 50)
    assert bounds(session.query().clamp("age", 20, 50).mean("age", bounds=(0, 9))) == (0, 9)
    assert bounds(session.query().mean("age")) == (17, 90)


@pytest.mark.parametrize("derive", [
    lambda q: q.with_columns(age=col("age") + 1),
    lambda q: q.with_columns(pl.col("age") * 2),
    lambda q: q.with_columns(pl.col("hours").alias("age")),
    lambda q: q.select(pl.col("hours").alias("age"), "sex"),
    lambda q: q.bin("age", width=10),
    lambda q: q.bin("hours", width=10, name="age"),
    lambda q: q.map("age", {20: 21}),
    lambda q: q.with_columns(__import__("narwhals").col("hours")),  # unknown outputs
], ids=["json", "polars", "alias", "select", "bin", "bin-name", "map", "narwhals"])
def test_a_column_written_by_a_step_does_not_inherit(session, derive):
    q = derive(session.query())
    with pytest.raises(BoundsError, match="'age' is written by a step"):
        q.mean("age").plan(epsilon=1)
    assert q.mean("age", bounds=(0, 200)).plan(epsilon=1).query.aggs[0].bounds == (0, 200)


@pytest.mark.parametrize("derive", [
    lambda q: q.map("sex", {"Female": "F", "Male": "M"}),
    lambda q: q.with_columns(sex=col("race")),
    lambda q: q.with_columns(pl.lit("Male").alias("sex")),
])
def test_a_key_written_by_a_step_has_no_declared_categories(session, derive):
    with pytest.raises(SchemaError, match="'sex' is written by a step"):
        derive(session.query()).group_by("sex")


def test_steps_that_keep_a_column_keep_its_declaration(session):
    q = (session.query().filter(col("age") > 18).with_columns(older=col("age") + 1)
         .with_columns(pl.col("age")).drop_nulls("hours").fill_null("sex", "Male")
         .select("age", "sex", "id"))
    assert q.mean("age").aggs[0].bounds == (17, 90)
    assert q.group_by("sex").keys["sex"].to_list() == ["Female", "Male"]


def test_missing_declarations_are_named(session, table):
    with pytest.raises(SchemaError, match=r"group_by\('city'\).*dp.Categorical") as e:
        session.query().group_by("city").count()
    assert "one type per column" not in str(e.value)
    with pytest.raises(SchemaError, match=r"group_by\('age'\).*declared as dp.Numeric"):
        session.query().group_by("sex", "age")
    with pytest.raises(SchemaError, match=r"group_by\('id'\).*declared as dp.Text"):
        session.query().group_by("sex", "id")
    with pytest.raises(BoundsError, match=r"dp.mean on 'city'.*dp.Numeric\(lower, upper\)"):
        session.query().mean("city").plan(epsilon=1)
    with pytest.raises(BoundsError, match=r"dp.std on 'sex'.*declared as dp.Categorical"):
        session.query().agg(dp.std("sex")).plan(epsilon=1)
    bare = dp.Session(table, budget=dp.PureDP(1))  # no schema: the same errors, no crash
    with pytest.raises(SchemaError, match="group_by"):
        bare.query().group_by("sex")
    with pytest.raises(BoundsError, match="dp.Numeric"):
        bare.query().sum("age").plan(epsilon=1)
    assert session.spent == dp.PureDP(0)


def test_session_checks_the_declaration_against_column_names_and_types(table):
    with pytest.raises(SchemaError, match="'salary'"):
        dp.Session(table, budget=dp.PureDP(1),
                   schema=dp.Schema({"salary": dp.Numeric(0, 1)}))
    with pytest.raises(SchemaError, match="'city' is declared dp.Numeric"):
        dp.Session(table, budget=dp.PureDP(1), schema=dp.Schema({"city": dp.Numeric(0, 1)}))
    with pytest.raises(SchemaError, match="privacy unit's column 'person'"):
        dp.Session(table, budget=dp.PureDP(1),
                   schema=dp.Schema({}, privacy_unit=dp.PrivacyUnit.by("person", 2)))


def test_plain_data_is_json_and_exact():
    doc = SCHEMA.to_dict()
    assert doc["columns"]["hours"]["upper"] == "199/2"
    assert dp.Schema.from_dict(doc) == SCHEMA


# -- the server ------------------------------------------------------------------------------
def _config(tmp_path, table, **dataset):
    from dpkit.server.config import parse_config

    table.write_csv(tmp_path / "t.csv")
    entry = {"name": "t", "source": {"kind": "csv", "path": "t.csv"},
             "budget": {"measure": "pure", "epsilon": 3}, **dataset}
    return parse_config({"ledger": "l.sqlite", "datasets": [entry]}, base=tmp_path)


def test_yaml_schema_is_parsed_and_its_unit_agrees(tmp_path, table):
    pytest.importorskip("yaml")
    cfg = _config(tmp_path, table, schema=SCHEMA.to_dict())
    assert cfg.datasets[0].schema == SCHEMA
    unit = {"column": "id", "max_rows": 2}
    cfg = _config(tmp_path, table, schema={"columns": {}, "privacy_unit": unit})
    assert cfg.datasets[0].privacy_unit == dp.PrivacyUnit.by("id", 2)
    cfg = _config(tmp_path, table, privacy_unit=unit,
                  schema={"columns": {}, "privacy_unit": unit})
    assert cfg.datasets[0].privacy_unit == dp.PrivacyUnit.by("id", 2)


@pytest.mark.parametrize("dataset, message", [
    ({"schema": {"columns": {"age": {"type": "numeric", "lower": 0, "upper": 1, "max": 2}}}},
     r"datasets\[0\].schema.columns.age: unknown key\(s\) max"),
    ({"schema": {"columns": {"age": {"type": "numeric", "lower": None, "upper": 1}}}},
     r"datasets\[0\].schema.columns.age needs lower and upper"),
    ({"schema": {"tables": {}}}, r"datasets\[0\].schema: unknown key"),
    ({"schema": ["age"]}, r"datasets\[0\].schema: expected a mapping"),
    ({"privacy_unit": {"column": "id", "max_rows": 3},
      "schema": {"privacy_unit": {"column": "id", "max_rows": 2}}},
     r"datasets\[0\].privacy_unit: .* differs from datasets\[0\].schema.privacy_unit"),
])
def test_yaml_schema_is_refused_naming_the_path(tmp_path, table, dataset, message):
    from dpkit.server.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, table, **dataset)


@pytest.mark.parametrize("dataset, column", [
    ({"privacy_unit": {"column": "patient", "max_rows": 2}}, "'patient'"),  # was accepted
    ({"schema": {"columns": {"salary": {"type": "text"}}}}, "'salary'"),
    ({"schema": {"columns": {"city": {"type": "numeric", "lower": 0, "upper": 1}}}}, "'city'"),
])
def test_server_refuses_to_start_on_a_column_its_source_lacks(tmp_path, table, dataset,
                                                               column):
    pytest.importorskip("fastapi")
    from dpkit.server.app import create_app
    from dpkit.server.config import ConfigError

    cfg = _config(tmp_path, table, **dataset)
    with pytest.raises(ConfigError, match=f"dataset 't': .*{column}"):
        create_app(cfg)


def test_server_publishes_the_declaration_and_the_client_uses_it(tmp_path, table):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from dpkit.server.app import create_app

    app = create_app(_config(tmp_path, table, schema=SCHEMA.to_dict()))
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst("ann")
    ledger.grant("ann", "t")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with")
        client = dp.Client(app=app, token=token)
    assert client.datasets()[0]["declared"] == SCHEMA.to_dict()
    assert client.declared("t") == SCHEMA
    q = client.query("t").group_by("sex").agg(dp.count(), dp.mean("hours"))
    assert q.to_json()["group_by"]["keys"] == ["Female", "Male"]
    assert q.to_json()["aggs"][1]["bounds"] == [0, "199/2"]
    assert q.release(epsilon=1)["sex"].to_list() == ["Female", "Male"]
    # the server fills what the request leaves out, from the same declaration
    raw = {"aggs": [{"agg": "mean", "column": "age"}], "budget": {"epsilon": "1/4"}}
    given = {**raw, "aggs": [{"agg": "mean", "column": "age", "bounds": [17, 90]}]}
    answer = client._post("/v1/datasets/t/explain", raw)
    assert answer["statistics"] == client._post("/v1/datasets/t/explain", given)["statistics"]
    keyless = {"group_by": {"columns": ["sex"]}, "aggs": [{"agg": "count"}],
               "budget": {"epsilon": "1/4"}}
    explained = client._post("/v1/datasets/t/explain", keyless)
    keyed = {**keyless, "group_by": {"columns": ["sex"], "keys": ["Female", "Male"]}}
    assert explained == client._post("/v1/datasets/t/explain", keyed)
    with pytest.raises(DomainError):
        client.declared("nope")


# -- the CLI ---------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", ["csv", "parquet", "arrow"])
def test_dpkit_schema_writes_a_template_without_a_value(tmp_path, suffix):
    pytest.importorskip("yaml")
    import yaml

    from dpkit.cli import app

    secret, number = "ZQX-secret-7731", 987654.25
    frame = pl.DataFrame({"who": [secret, "b"], "pay": [number, 1.0], "n": [31337, 2]})
    path = tmp_path / f"t.{suffix}"
    {"csv": frame.write_csv, "parquet": frame.write_parquet, "arrow": frame.write_ipc}[
        suffix](path)
    out = CliRunner().invoke(app, ["schema", str(path), "--table", "people", "--out",
                                   str(tmp_path / "s.yaml")])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "s.yaml").read_text()
    for value in (secret, "987654", "31337", "7731"):
        assert value not in text and value not in out.output
    doc = yaml.safe_load(text)["people"]
    assert doc["columns"]["pay"] == {"type": "numeric", "lower": None, "upper": None,
                                     "integer": False, "nullable": True}
    assert doc["columns"]["who"]["categories"] == []
    with pytest.raises(SchemaError, match="schema.columns.who needs categories"):
        dp.Schema.from_dict(doc)  # refused until the curator fills it in
    printed = CliRunner().invoke(app, ["schema", str(path)])
    assert printed.exit_code == 0 and yaml.safe_load(printed.output) == {
        "columns": doc["columns"]}


def test_dpkit_schema_refuses_what_it_cannot_read(tmp_path):
    from dpkit.cli import app

    (tmp_path / "t.xlsx").write_text("x")
    out = CliRunner().invoke(app, ["schema", str(tmp_path / "t.xlsx")])
    assert out.exit_code == 1 and ".parquet, .csv or .arrow" in out.output
    missing = CliRunner().invoke(app, ["schema", str(tmp_path / "nope.csv")])
    assert missing.exit_code == 1 and "no such file" in missing.output
