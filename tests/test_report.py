"""dpkit.report (issue 24): HTML reports of a release and of a ledger's dataset, escaped as
an attacker would probe them, written by ``dpkit report``, and drawn by a real browser
(headless Chromium, skipped with a reason when it is not installed)."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.cli.main import app
from dpkit.core.measures import PureDP
from dpkit.core.record import Accuracy, NoiseRow, Release
from dpkit.errors import DomainError, LedgerError
from dpkit.ledger import Ledger
from dpkit.report import ledger_report, release_html

pytest.importorskip("matplotlib")

EVIL = "<script>alert(1)</script>"
EVIL_ATTR = '" onerror="alert(2)'
ALLOWED = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "section", "p",
           "dl", "dt", "dd", "table", "caption", "thead", "tbody", "tr", "th", "td", "img",
           "pre", "details", "summary", "code", "br"}  # issue 33: a loss's exact part


class Markup(HTMLParser):
    """Every tag and attribute of a page, to check nothing but the report's own markup."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def problems(page: str) -> list[str]:
    """What an attacker's text could have smuggled into ``page``: a tag outside the
    report's allow-list, an event-handler attribute, an image that is not a PNG data URI."""
    parser = Markup()
    parser.feed(page)
    found = []
    for tag, attrs in parser.tags:
        if tag not in ALLOWED:
            found.append(f"tag <{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name in ("href", "srcset", "formaction"):
                found.append(f"attribute {name} on <{tag}>")
            if tag == "img" and name == "src" and not (value or "").startswith(
                    "data:image/png;base64,"):
                found.append(f"image source {value!r}")
    return found


def record(values, description=EVIL) -> Release:
    return Release(values=values, loss=PureDP(1), accuracy=Accuracy(0.05, {"n": 3.0}),
                   noise=(NoiseRow("discrete Laplace", 1, 1, f"n{EVIL}"),), release_id=7,
                   replayed=False, digest="0" * 64, description=description)


def hostile_frame() -> pl.DataFrame:
    return pl.DataFrame({f"key{EVIL}": [EVIL, EVIL_ATTR, "ok"], "count": [10, 20, 30],
                         "count_ci_low": [7, 17, 27], "count_ci_high": [13, 23, 33]})


def test_user_text_renders_as_text():
    page = release_html(record(hostile_frame()), truth={"count": [11, 19, 30]},
                        title=f"title {EVIL}")
    assert problems(page) == []
    assert EVIL not in page and EVIL_ATTR not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4  # title, query, key, noise
    assert "count (true, not private)" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert page.count("<img ") == 1  # one statistic with a CI: one chart


def test_the_markup_check_catches_an_unescaped_page():
    """The broken variant: the same page with one text left unescaped is caught."""
    page = release_html(record(hostile_frame()))
    raw = page.replace("&lt;script&gt;alert(1)&lt;/script&gt;", EVIL, 1)
    assert problems(raw) == ["tag <script>"]
    assert sorted(problems(page.replace("</dl>", '<img src="x" onerror="alert(2)"></dl>', 1))) == [
        "attribute onerror on <img>", "image source 'x'"]


def test_release_to_html_is_registered_lazily_and_draws_each_statistic(tmp_path):
    data = pl.DataFrame({"g": ["a", "b"] * 50, "x": np.linspace(0, 10, 100)})
    session = dp.Session(data, budget=dp.PureDP(1))
    session.query().group_by("g", keys=["a", "b"]).agg(
        dp.count(), dp.mean("x", bounds=(0, 10))).release(epsilon=0.5)
    page = session.last_release.to_html(truth={"count": {"a": 50, "b": 50}})
    assert problems(page) == [] and page.count("<img ") == 2
    assert "x_mean" in page and "discrete Laplace" in page and "ε = 0.5" in page
    session.query().histogram("x", bins=[0, 5, 10]).release(epsilon=0.25)
    assert session.last_release.to_html().count("<img ") == 1


def test_other_values_and_bad_truth():
    hist = release_html(record(np.array([3.0, 4.0, 5.0])), truth={"count": [3, 4, 5]})
    assert hist.count("<img ") == 1 and "CI low" in hist
    text = release_html(record({"model": EVIL}))
    assert "<img " not in text and EVIL not in text and problems(text) == []
    with pytest.raises(DomainError, match="2 values"):
        release_html(record(hostile_frame()), truth={"count": [1, 2]})
    with pytest.raises(DomainError, match="numbers"):
        release_html(record(hostile_frame()), truth={"count": ["a", "b", "c"]})
    with pytest.raises(DomainError, match="Release records"):
        release_html("not a release")  # type: ignore[arg-type]


def hostile_ledger(tmp_path: Path) -> tuple[Path, str, list[Release]]:
    path = tmp_path / "ledger.sqlite"
    name, analyst = f"adult {EVIL}", f"eve{EVIL_ATTR}"
    ledger = Ledger(path)
    ledger.register(name, dp.PureDP(1), "rows")
    ledger.add_analyst(analyst)
    ledger.grant(analyst, name)
    data = pl.DataFrame({"g": ["a", EVIL] * 20})
    session = dp.Session(data, budget=dp.PureDP(1), ledger=ledger, dataset=name,
                         analyst=analyst)
    records = []
    for eps in (0.25, 0.25):
        session.query().group_by("g", keys=["a", EVIL]).count().release(epsilon=eps)
        records.append(session.last_release)
    return path, name, records


def test_ledger_report_has_budget_burn_down_queries_and_releases(tmp_path):
    path, name, records = hostile_ledger(tmp_path)
    ledger = Ledger(path)
    truth = {records[0].release_id: {"count": {"a": 20, EVIL: 20}}}
    page = ledger_report(ledger, name, records, truth)
    assert problems(page) == [] and EVIL not in page and EVIL_ATTR not in page
    assert "spent</dt><dd>ε = 0.5</dd>" in page  # exact as a decimal: nothing collapsed
    assert page.count("<img ") == 1 + 2  # the burn-down and one chart per release
    assert len(re.findall(r"<tr><td class=\"num\">\d+</td>", page)) == 2  # queries as run
    assert page.count("(true, not private)") == 1
    with pytest.raises(LedgerError, match="unknown dataset"):
        ledger_report(ledger, "nope")


def test_cli_report_writes_the_file_and_fails_in_one_line(tmp_path, monkeypatch):
    path, name, _ = hostile_ledger(tmp_path)
    out = tmp_path / "r.html"
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(path), "adult", "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert problems(page) == [] and page.count("<img ") == 1
    missing = tmp_path / "missing.html"
    result = runner.invoke(app, ["report", str(path), "nope", "--out", str(missing)])
    assert result.exit_code == 1 and not missing.exists()
    assert [line for line in result.output.splitlines() if line.startswith("error")] == [
        f"error (LedgerError): unknown dataset 'nope' in {Ledger(path).url} (see `dpkit "
        "ledger datasets`)"]
    result = runner.invoke(app, ["report", str(path), "adult", "--out",
                                 str(tmp_path / "no-such-dir" / "r.html")])
    assert result.exit_code == 1 and "not a file in an existing directory" in result.output
    opened = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    result = runner.invoke(app, ["report", str(path), "adult", "--out", str(out), "--open"])
    assert result.exit_code == 0 and opened == [out.resolve().as_uri()]


# -- in a real browser ------------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BLUE = np.array([0x3B, 0x5B, 0xA5])  # the DP bars (dpkit.report.charts.DP_COLOUR)
GREY = np.array([0xB0, 0xB6, 0xC3])  # the true values beside them


def screenshot(page: str, tmp_path: Path) -> np.ndarray:
    """``page`` rendered by headless Chromium (1200 × 1600 px) as an RGB array."""
    html, png = tmp_path / "page.html", tmp_path / "shot.png"
    html.write_text(page, encoding="utf-8")
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'ud'}",
                    "--hide-scrollbars", "--force-device-scale-factor=1",
                    "--window-size=1200,1600", f"--screenshot={png}", html.as_uri()],
                   check=True, capture_output=True, timeout=60)
    import matplotlib.image

    return (matplotlib.image.imread(png)[..., :3] * 255).round().astype(int)


def pixels(shot: np.ndarray, colour: np.ndarray) -> int:
    """Pixels of ``colour`` (±6 per channel) whose 3 × 3 neighbourhood is of it too: the
    inside of filled shapes, not anti-aliased text."""
    near = np.abs(shot - colour).max(axis=-1) <= 6
    inside = near[1:-1, 1:-1].copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            inside &= near[1 + dy:near.shape[0] - 1 + dy, 1 + dx:near.shape[1] - 1 + dx]
    return int(inside.sum())


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install "
                    "chromium; .ci/run installs it on a best-effort basis)")
def test_chromium_draws_the_charts(tmp_path):
    frame = pl.DataFrame({"g": ["a", "b", "c"], "count": [300, 500, 200],
                          "count_ci_low": [280, 480, 180], "count_ci_high": [320, 520, 220]})
    page = release_html(record(frame), truth={"count": [310, 490, 200]})
    shot = screenshot(page, tmp_path)
    assert shot.shape[:2] == (1600, 1200)
    # three bars of ~40 × 100+ px each in the DP colour, and the true values beside them
    assert pixels(shot, BLUE) > 5_000, pixels(shot, BLUE)
    assert pixels(shot, GREY) > 5_000
    # the broken variant: the same page with its chart's PNG corrupted draws no bars
    uri = re.search(r'src="(data:image/png;base64,[^"]+)"', page).group(1)
    broken = base64.b64encode(b"\x89PNG not an image").decode()
    shot = screenshot(page.replace(uri, "data:image/png;base64," + broken), tmp_path)
    assert pixels(shot, BLUE) < 100 and pixels(shot, GREY) < 100


def test_many_bins_draw_a_line_with_a_band(monkeypatch):
    from dpkit.report import charts

    drawn = []
    for name in ("bars", "lines"):
        real = getattr(charts, name)
        monkeypatch.setattr(charts, name, lambda *a, _real=real, _n=name: (
            drawn.append((_n, len(a[0]), a[2] is not None)), _real(*a))[1])
    few = release_html(record(np.arange(40.0)), truth={"count": np.arange(40.0)})
    many = release_html(record(np.arange(100.0)), truth={"count": np.arange(100.0)})
    assert drawn == [("bars", 40, True), ("lines", 100, True)]  # ± the half-width of 3
    assert few.count("<img ") == many.count("<img ") == 1 and problems(many) == []


def test_session_report_with_and_without_a_ledger(tmp_path):
    from dpkit.report import session_report

    data = pl.DataFrame({"g": ["a", EVIL] * 20})
    session = dp.Session(data, budget=dp.ZCDP(1))
    records = []
    for rho in (Fraction(1, 4), Fraction(1, 2)):
        session.query().group_by("g", keys=["a", EVIL]).count().release(rho=rho)
        records.append(session.last_release)
    page = session_report(session, records, {1: {"count": [20, 20]}}, title=EVIL)
    assert problems(page) == [] and EVIL not in page
    # rounded (σ up to the sampler's grid): the decimal, the exact rational collapsed
    assert 'ρ ≈ 0.75<details class="exact"><summary>exact</summary><code>ρ = ' in page
    assert page.count("<img ") == 1 + 2
    assert page.count("(true, not private)") == 1
    path, name, records = hostile_ledger(tmp_path)
    ledger = Ledger(path)
    session = dp.Session(pl.DataFrame({"g": ["a"]}), budget=dp.PureDP(1), ledger=ledger,
                         dataset=name)
    assert "Queries as run" in session_report(session, records)
    with pytest.raises(DomainError, match="Session"):
        session_report(records)  # type: ignore[arg-type]


def test_infinite_and_missing_values_are_not_drawn():
    frame = pl.DataFrame({"g": ["a", "b", "c"], "x": [1.0, float("inf"), float("nan")],
                          "x_ci_low": [0.0, float("-inf"), float("nan")],
                          "x_ci_high": [2.0, float("inf"), float("nan")]})
    page = release_html(record(frame), truth={"x": [1, float("inf"), 2]})
    assert page.count("<img ") == 1 and ">inf<" in page and ">—<" in page


def test_without_matplotlib_an_install_hint(monkeypatch, tmp_path):
    path, _, _ = hostile_ledger(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'dpkit\[plot\]'"):
        release_html(record(hostile_frame()))
    result = CliRunner().invoke(app, ["report", str(path), "adult", "--out",
                                      str(tmp_path / "r.html")])
    assert result.exit_code == 1 and not (tmp_path / "r.html").exists()
    assert "error (ImportError): dpkit's HTML reports draw their charts with matplotlib" in (
        result.output)


MATHTEXT = ["$\\frac{$", "$x^{$", "a$b$c", "$\\alpha$"]  # malformed and well-formed mathtext


def test_group_keys_and_names_are_plain_text_in_charts():
    """Issue 30 (7): keys a private selection chose are data; matplotlib parsed ``$…$`` in
    them as mathtext and a malformed one made the report raise. Bars (few keys), a line chart
    (many keys), a hostile column and description: every chart is drawn, nothing raises."""
    few = pl.DataFrame({f"key{MATHTEXT[0]}": MATHTEXT, "count": [10, 20, 30, 40],
                        "count_ci_low": [7, 17, 27, 37], "count_ci_high": [13, 23, 33, 43]})
    keys = [f"{MATHTEXT[i % 4]}{i}" for i in range(60)]
    many = pl.DataFrame({"key": keys, "count": list(range(60)),
                         "count_ci_low": [v - 3 for v in range(60)],
                         "count_ci_high": [v + 3 for v in range(60)]})
    for frame in (few, many):
        page = release_html(record(frame, description=MATHTEXT[1]), title=MATHTEXT[0])
        assert page.count("<img ") == 1 and problems(page) == []


def test_charts_leave_no_text_to_the_mathtext_parser():
    """The defence itself: every text of a drawn chart is plain (so the test above does not
    pass by luck of which labels were parsed); the broken variant, the same figure drawn with
    mathtext on, raises on the first malformed key."""
    import matplotlib
    from matplotlib.text import Text

    from dpkit.report import charts

    plt = charts.pyplot()
    fig, ax = plt.subplots()
    ax.bar([0, 1], [1.0, 2.0])
    ax.set_xticks([0, 1], MATHTEXT[:2])
    ax.set_title(MATHTEXT[1])
    with pytest.raises(ValueError):  # the broken variant: mathtext parses the keys
        fig.savefig(__import__("io").BytesIO(), format="png")
    texts = charts.plain_text(fig).findobj(Text)
    assert texts and not any(t.get_parse_math() for t in texts)
    with matplotlib.rc_context({"text.parse_math": True}):
        assert charts.to_uri(fig).startswith("data:image/png;base64,")


def test_a_dataset_name_is_plain_text_in_the_burn_down(tmp_path):
    """A curator's dataset name with a malformed ``$…$`` draws (``dpkit ledger plot`` and the
    ledger report)."""
    from dpkit.ledger.plot import burn_down

    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.register(MATHTEXT[0], PureDP(1))
    assert burn_down(ledger, MATHTEXT[0], tmp_path / "b.png").stat().st_size > 0
    assert ledger_report(ledger, MATHTEXT[0]).count("<img ") >= 1
