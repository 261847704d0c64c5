"""Declared metadata (dpkit.frame.schema): declared once, round-trips, never read from data."""

import polars as pl
import pytest

import dpkit as dp
from dpkit.frame.schema import SchemaError


def _schema() -> dp.Schema:
    return dp.Schema({"age": dp.Numeric(17, 90, integer=True),
                      "sex": dp.Categorical(["Male", "Female"]), "id": dp.Text()},
                     privacy_unit=dp.PrivacyUnit.by("id", 4))


def test_round_trip_through_plain_data():
    assert dp.Schema.from_dict(_schema().to_dict()) == _schema()


def test_session_takes_the_privacy_unit_from_the_schema():
    df = pl.DataFrame({"age": [20, 30], "sex": ["Male", "Female"], "id": ["a", "b"]})
    session = dp.Session(df, budget=dp.PureDP(1), schema=_schema())
    assert session.privacy_unit == dp.PrivacyUnit.by("id", 4)
    assert session.declared() == _schema()
    with pytest.raises(dp.errors.DomainError, match="differs from the schema"):
        dp.Session(df, dp.PrivacyUnit.by("id", 2), dp.PureDP(1), schema=_schema())


def test_template_reads_types_only_and_is_refused_until_filled():
    template = dp.Schema.template(pl.Schema({"age": pl.Int64, "sex": pl.String}))
    assert template["columns"]["age"]["lower"] is None
    with pytest.raises(SchemaError, match="needs lower and upper"):
        dp.Schema.from_dict(template)


@pytest.mark.parametrize("raw, match", [
    ({"columns": {"a": {"type": "numeric", "lower": 1, "upper": 0}}}, "lower < upper"),
    ({"columns": {"a": {"type": "numeric", "lower": 0, "upper": 1, "extra": 2}}}, "unknown key"),
    ({"columns": {"a": {"type": "sql"}}}, "numeric, categorical or text"),
    ({"columns": {"a": {"type": "categorical", "categories": ["x", "x"]}}}, "repeat"),
    ({"tables": {}}, "unknown key"),
])
def test_malformed_declarations_name_the_fix(raw, match):
    with pytest.raises(SchemaError, match=match):
        dp.Schema.from_dict(raw)


def test_missing_bounds_error_names_the_declaration():
    with pytest.raises(SchemaError, match=r"dp.Numeric\(lower, upper\)"):
        _schema().require_bounds("sex", "dp.mean")
