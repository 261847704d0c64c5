"""Issue 33, notebooks: the HTML displays of a Release, a Query, a Session and a histogram
release (content, and every value escaped), the pandas spellings' messages, and a light
``import dpkit``."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

import dpkit as dp
from dpkit.core import markup

EVIL = "<script>alert(1)</script>"


@pytest.fixture()
def session() -> dp.Session:
    df = pl.DataFrame({"id": list(range(300)), EVIL: [i % 3 for i in range(300)],
                       "age": [20 + i % 50 for i in range(300)]})
    return dp.Session(df, dp.PrivacyUnit.by("id", 1), dp.PureDP(5))


def _query(session: dp.Session) -> dp.Query:
    return session.query().group_by(EVIL, keys=[0, 1, 2]).agg(
        dp.count(), dp.mean("age", bounds=(0, 100)))


def assert_escaped(html: str) -> None:
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_query_display_is_its_explain_table(session):
    html = _query(session)._repr_html_()
    assert_escaped(html)
    assert "<table>" in html and "explain at ε = 1" in html
    for text in ("count", "age_mean", "discrete Laplace", "sensitivity", "loss", "PureDP"):
        assert text in html
    assert session.spent == dp.PureDP(0)  # free: nothing spent


def test_query_display_says_why_it_cannot_be_planned(session):
    html = session.query().agg(dp.mean("age"))._repr_html_()
    assert "Not releasable yet" in html and "bounds" in html
    assert "No aggregation yet" in session.query()._repr_html_()


def test_query_display_in_a_zcdp_session_uses_rho():
    df = pl.DataFrame({"x": [1, 2, 3]})
    s = dp.Session(df, dp.PrivacyUnit.rows(), dp.ZCDP(1))
    assert "ρ = 1/2" in s.query().count()._repr_html_()


def test_session_and_release_displays(session):
    assert "No release yet" in session._repr_html_()
    _query(session).release(epsilon=1)
    _query(session).release(epsilon=1)
    html = session._repr_html_()
    assert_escaped(html)
    assert "budget</b>: ε = 5" in html and "spent</b>: ε = 2" in html
    assert "remaining</b>: ε = 3" in html
    assert html.count("<td>released</td>") == 2
    rel = session.last_release._repr_html_()
    assert rel is not None
    assert_escaped(rel)
    assert "age_mean_ci_low" in rel and "ε = 1" in rel
    assert "<html" not in rel  # a fragment, not a page


def test_histogram_release_display(session):
    hist = session.query().publish.histogram("age", [20, 40, 60, 80], epsilon=1)
    html = hist._repr_html_()
    assert "<svg" in html and html.count("<rect") == 3
    assert "[20, 40)" in html and "estimated count" in html and "auto" in html


def test_chart_and_table_escape_labels():
    html = markup.table([EVIL], [[EVIL]]) + markup.bar_chart([EVIL], [1.0], half_width=0.5)
    assert_escaped(html)
    assert html.count("<line") == 2  # the axis and one error bar


@pytest.mark.parametrize(("name", "fix"), [
    ("groupby", "group_by"), ("apply", "with_columns"), ("loc", "filter"),
    ("head", "never shows rows"), ("value_counts", "dp.count()")])
def test_pandas_spellings_give_the_dpkit_spelling(session, name, fix):
    with pytest.raises(AttributeError, match=fix):
        getattr(session.query(), name)


def test_unknown_attributes_and_namespaces_are_unchanged(session):
    q = session.query()
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        q.nonsense  # noqa: B018
    assert not hasattr(q, "nonsense")
    assert type(q.publish).__name__ == "ReleaseNamespace"
    assert type(q.continual).__name__ == "ContinualNamespace"


def test_agg_with_a_pandas_dict_shows_the_dpkit_spelling(session):
    with pytest.raises(dp.errors.DomainError) as err:
        session.query().agg({"age": "mean", "id": ["count", "nunique"]})
    text = str(err.value)
    assert "agg(dp.mean('age', bounds=(lo, hi)), dp.count(), dp.count_distinct('id'))" in text


def test_import_dpkit_is_light():
    code = ("import sys, dpkit\n"
            "heavy = [m for m in ('httpx', 'dpkit.client', 'fastapi', 'sqlglot', 'uvicorn',"
            " 'sqlalchemy', 'matplotlib', 'dpkit.report', 'dpkit.server') if m in sys.modules]\n"
            "print(','.join(heavy))\n"
            "assert dpkit.Client.__module__ == 'dpkit.client'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""
