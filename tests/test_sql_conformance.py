"""SQL conformance on UCI Adult (issue 32): every supported statement translates to the query
the builder writes for it (the same ``describe()``, so the same canonical plan the ledger
records), and every refused statement is refused before anything is read or spent, with the
line, column and fragment of the offending text."""

from __future__ import annotations

import pytest
import sql_cases as cases

from dpkit.frame.sql import SQLError, to_query


@pytest.fixture(scope="module")
def session():
    return cases.session()


def test_the_battery_has_at_least_sixty_statements():
    assert len(cases.SUPPORTED) + len(cases.REFUSED) >= 60
    forms = {(text, repr(options)) for text, _, options in cases.SUPPORTED} | {
        (text, repr(options)) for text, *_, options in cases.REFUSED}
    assert len(forms) == len(cases.SUPPORTED) + len(cases.REFUSED)  # (one text is both:
    # GROUP BY an undeclared column, refused without selection= and supported with it)


@pytest.mark.parametrize("text, build, options", cases.SUPPORTED,
                         ids=[t[:60] for t, *_ in cases.SUPPORTED])
def test_supported_statement_is_the_builders_query(session, text, build, options):
    translated = to_query(session, text, **options)
    assert translated.query.describe() == build(session).describe()


@pytest.mark.parametrize("text, line, column, fragment, options", cases.REFUSED,
                         ids=[t[:60] for t, *_ in cases.REFUSED])
def test_refused_statement_points_at_its_span(session, text, line, column, fragment, options):
    with pytest.raises(SQLError) as caught:
        session.sql(text, epsilon=1, **options)
    error = caught.value
    assert (error.line, error.column, error.fragment) == (line, column, fragment)
    assert f"line {line}, column {column}" in str(error)
    assert session.last_release is None and session.spent == type(session.spent).zero()


def test_refusals_say_what_is_supported(session):
    with pytest.raises(SQLError, match="supported: SELECT of COUNT"):
        to_query(session, "SELECT COUNT(*) FROM adult WHERE foo(age) > 1")
    with pytest.raises(SQLError, match="non-deterministic"):
        to_query(session, "SELECT COUNT(*) FROM adult WHERE RANDOM() < 0.5")
    with pytest.raises(SQLError, match="window function"):
        to_query(session, "SELECT COUNT(*) OVER () FROM adult")


def test_a_missing_declaration_is_named(session):
    """The error names the declaration to add (dpkit.frame.schema's texts)."""
    with pytest.raises(SQLError, match=r"declare the column .* as dp\.Categorical.*"
                                       r"declared as dp\.Text\(\)"):
        to_query(session, "SELECT education, COUNT(*) FROM adult GROUP BY education")
    with pytest.raises(SQLError, match=r"AVG on 'fnlwgt' needs bounds.*dp\.Numeric"):
        to_query(session, "SELECT AVG(fnlwgt) FROM adult")
    with pytest.raises(SQLError, match="interval arithmetic"):
        to_query(session, 'SELECT AVG(age / "hours-per-week") FROM adult')
