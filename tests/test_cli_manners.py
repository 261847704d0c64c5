"""The command line's manners (issue 24): one-line errors with exit code 1, validation
before any write, positive caps, retire, help on every option, --version, wide tables,
dataset prefixes, install hints."""

import subprocess
import sys
from fractions import Fraction

import click
import pytest
import typer
from typer.testing import CliRunner

import dpkit as dp
from dpkit.cli.main import app
from dpkit.errors import BudgetExceededError, DomainError, LedgerError
from dpkit.ledger import Ledger


def invoke(args, home, columns=120):
    return CliRunner().invoke(app, args, env={"DPKIT_HOME": str(home), "COLUMNS": str(columns)})


def one_line_error(result, words):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(
        result.exception, SystemExit)
    first = [line for line in result.output.splitlines() if line.startswith("error")]
    assert len(first) == 1 and words in first[0], result.output


def test_demo_with_zero_epsilon_fails_before_writing(tmp_path):
    result = invoke(["demo", "--epsilon", "0"], tmp_path)
    one_line_error(result, "--epsilon must be a finite number > 0")
    assert not (tmp_path / "demo-ledger.sqlite").exists()
    one_line_error(invoke(["demo", "--epsilon", "nan"], tmp_path), "--epsilon")


def test_debug_shows_the_exception(tmp_path):
    result = invoke(["--debug", "demo", "--epsilon", "-1"], tmp_path)
    assert result.exit_code != 0 and isinstance(result.exception, DomainError)


def test_register_needs_a_positive_cap_and_says_what_it_did(tmp_path):
    for args in ([], ["--epsilon", "0"], ["--epsilon", "-2"], ["--measure", "zcdp"],
                 ["--measure", "approx", "--epsilon", "1", "--delta", "1"],
                 ["--measure", "bogus", "--epsilon", "1"]):
        result = invoke(["ledger", "register", "d", *args], tmp_path)
        assert result.exit_code == 1 and "error (DomainError)" in result.output, args
    assert not (tmp_path / "demo-ledger.sqlite").exists()  # refused before the ledger opens
    result = invoke(["ledger", "register", "d", "--epsilon", "2"], tmp_path)
    assert result.exit_code == 0 and "'d' registered" in result.output
    assert "lifetime cap ε = 2" in result.output
    result = invoke(["ledger", "policy", "d", "--epsilon", "0.5"], tmp_path)
    assert result.exit_code == 0 and "at most ε = 0.5 per rolling 24 h" in result.output
    one_line_error(invoke(["ledger", "policy", "nope", "--epsilon", "1"], tmp_path),
                   "unknown dataset 'nope'")


@pytest.mark.parametrize("budget", [dp.PureDP(0), dp.ZCDP(0), dp.ApproxDP(0, Fraction(1, 10**6))])
def test_session_refuses_a_zero_budget(budget, tmp_path):
    frame = dp.datasets.load_adult("train").head(10)
    with pytest.raises(DomainError, match="must be positive"):
        dp.Session(frame, budget=budget, ledger=tmp_path / "l.sqlite", dataset="d")
    assert Ledger(tmp_path / "l.sqlite").datasets() == []  # nothing registered


def test_retire_refuses_new_debits_and_keeps_a_verifiable_history(tmp_path):
    path = tmp_path / "demo-ledger.sqlite"
    frame = dp.datasets.load_adult("train").head(100)
    s = dp.Session(frame, budget=dp.PureDP(1), ledger=path, dataset="adult-2024-long-name")
    s.query().count().release(epsilon=0.25)
    result = invoke(["ledger", "retire", "adult-2024"], tmp_path)  # a unique prefix
    assert result.exit_code == 0 and "'adult-2024-long-name' retired" in result.output
    with pytest.raises(BudgetExceededError, match="retired"):
        s.query().count().release(epsilon=0.25)
    reg = Ledger(path)
    assert reg.retired("adult-2024-long-name") and reg.verify() == []
    assert reg.spent("adult-2024-long-name") == dp.PureDP(Fraction(1, 4))
    with pytest.raises(LedgerError, match="retired"):
        reg.set_policy("adult-2024-long-name", None)  # final: no way back through a policy
    assert "retired" in invoke(["ledger", "datasets"], tmp_path).output
    one_line_error(invoke(["ledger", "retire", "adult-2024-long-name"], tmp_path), "retired")


def test_prefixes_and_wide_tables(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "demo-ledger.sqlite"
    reg = Ledger(path)
    long = "adult-demo-20261127T101010.123456Z-with-a-very-long-name"
    for name in (long, "adult-demo-other"):
        reg.register(name, dp.PureDP(1))
    result = invoke(["ledger", "plot", "adult-demo-2026", "--output",
                     str(tmp_path / "b.png")], tmp_path)
    assert result.exit_code == 0 and (tmp_path / "b.png").stat().st_size > 1000
    one_line_error(invoke(["ledger", "plot", "adult-demo"], tmp_path), "start of 2 datasets")
    shown = invoke(["ledger", "datasets"], tmp_path, columns=80).output
    first_column = "".join(line.split("│")[1].strip() for line in shown.splitlines()
                           if line.startswith("│"))
    assert "…" not in shown and long in first_column, shown


def test_bench_without_data_is_one_line(tmp_path):
    result = invoke(["bench", "histograms", "--data-dir", str(tmp_path / "none")], tmp_path)
    one_line_error(result, "no DPBench data")


def test_version_and_help_on_every_option(tmp_path):
    result = invoke(["--version"], tmp_path)
    assert result.exit_code == 0 and result.output.strip() == f"dpkit {dp.__version__}"
    command = typer.main.get_command(app)
    missing, bools = [], []

    def walk(cmd, path):
        for p in cmd.params:
            if isinstance(p, click.Option) and not (p.help or "").strip():
                missing.append(f"{path} {p.opts[0]}")
        help_text = invoke([*path.split()[1:], "--help"], tmp_path).output
        if "<bool>" in help_text:
            bools.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(command, "dpkit")
    assert missing == [] and bools == []


INSTALL_HINTS = """
import sys
for name in ("sklearn", "httpx", "psycopg"):
    sys.modules[name] = None
import dpkit as dp
try:
    from dpkit.learn import GaussianNB
except ModuleNotFoundError as e:
    print(e.name, "|", e)
try:
    dp.Client("http://127.0.0.1:9")
except ModuleNotFoundError as e:
    print(e.name, "|", e)
try:
    dp.Ledger("postgresql+psycopg://nobody@127.0.0.1:9/none")
except dp.errors.LedgerError as e:
    print("psycopg |", e)
"""


def test_missing_extras_give_install_hints():
    out = subprocess.run([sys.executable, "-c", INSTALL_HINTS], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.splitlines() == [
        "sklearn | dpkit.learn needs scikit-learn: pip install 'dpkit[learn]'",
        "httpx | dpkit.Client needs httpx: pip install 'dpkit[server]'",
        "psycopg | the ledger URL needs the database driver 'psycopg' (pip install "
        "'dpkit[postgres]')"], out.stderr


def test_audit_runs_with_its_progress_bar(tmp_path):
    result = invoke(["audit", "laplace", "--samples", "2000"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "laplace" in result.output and "dpkit audit" in result.output
    bad = invoke(["audit", "no-such-mechanism"], tmp_path)
    assert bad.exit_code == 2 and "unknown mechanism" in bad.output


def test_synthesize_takes_a_progress_switch():
    pytest.importorskip("mbi")
    from dpkit.release.synthetic.domain import Bins
    from dpkit.release.synthetic.synthesize import synthesize

    table = dp.datasets.load_adult("train").select("sex", "age").head(2000)
    spec = {"sex": ["Female", "Male"], "age": Bins(tuple(range(17, 93, 25)))}
    out = synthesize(table, spec, method="aim", epsilon=1, rows=50, progress=True, rounds=2,
                     iters=20, final_iters=20)
    assert out.shape == (50, 2)


@pytest.mark.parametrize("method", ["mst", "mwem"])
def test_mst_and_mwem_show_their_progress(method, monkeypatch):
    """``progress=True`` drives a Rich bar to its end (MST: measuring, then each inference
    iteration; MWEM: each round); ``progress=False`` keeps it disabled."""
    if method == "mst":
        pytest.importorskip("mbi")
    from rich.progress import Progress

    from dpkit.release.synthetic import mst, mwem
    from dpkit.release.synthetic.domain import Bins
    from dpkit.release.synthetic.synthesize import synthesize

    bars = []

    class Recorder(Progress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bars.append(self)

    monkeypatch.setattr(mst if method == "mst" else mwem, "Progress", Recorder)
    table = dp.datasets.load_adult("train").select("sex", "age").head(2000)
    spec = {"sex": ["Female", "Male"], "age": Bins(tuple(range(17, 93, 25)))}
    options = {"iters": 20} if method == "mst" else {"rounds": 3}
    for shown in (True, False):
        out = synthesize(table, spec, method=method, epsilon=1, rows=50, progress=shown,
                         **options)
        assert out.shape == (50, 2)
        (task,) = bars[-1].tasks
        assert bars[-1].disable is not shown
        assert task.completed == task.total == (21 if method == "mst" else 3)
