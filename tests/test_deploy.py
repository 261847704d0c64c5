"""One source of truth for a deployment (issue 33): ``dpkit serve`` registers each dataset
from its configuration, refuses to start when the ledger holds it with another measure, cap
or privacy unit (saying what differs and how to proceed), and ``dpkit ledger migrate``
records a new entry in the chain, carrying the spend; ``dpkit ledger datasets`` and the
reports then show the entry as configured."""

import json
import re
import shlex
import sqlite3
from fractions import Fraction
from pathlib import Path
from unittest import mock

import polars as pl
import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.core.measures import PrivacyLoss
from dpkit.errors import LedgerError
from dpkit.ledger import Ledger

pytest.importorskip("fastapi")
pytest.importorskip("yaml")

from dpkit.cli.main import app  # noqa: E402
from dpkit.ledger import entries  # noqa: E402
from dpkit.server.app import create_app  # noqa: E402
from dpkit.server.state import MismatchError  # noqa: E402

PERSON = "by('nr', max_rows=8, max_groups=2, max_rows_per_group=8)"


def write(tmp_path: Path, budget: str = "{measure: zcdp, rho: 1}",
          unit: str = "{column: nr, max_rows: 8, max_groups: 2}", name: str = "wages") -> Path:
    """A per-person table and its server configuration (the issue's newcomer setup)."""
    pl.DataFrame({"nr": [1, 1, 2, 3], "wage": [10.0, 12.0, 30.0, 25.0]}).write_csv(
        tmp_path / "wages.csv")
    config = tmp_path / "server.yaml"
    config.write_text(f"ledger: ledger.sqlite\ndatasets:\n  - name: {name}\n"
                      f"    source: {{kind: csv, path: wages.csv}}\n"
                      f"    privacy_unit: {unit}\n    budget: {budget}\n")
    return config


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})  # no folded cells
    assert result.exit_code == 0, result.output
    return result.output


def serve_refusal(config: Path) -> str:
    """The text `dpkit serve` refuses with (the check runs before uvicorn starts; were it to
    start, the stand-in fails the test instead of serving forever)."""
    def started(*_: object, **__: object) -> None:
        raise AssertionError("dpkit serve started the server")

    with mock.patch("uvicorn.run", started):
        result = CliRunner().invoke(app, ["serve", "--config", str(config)])
    assert result.exit_code == 1 and not isinstance(result.exception, AssertionError), (
        result.output)
    return " ".join(result.output.split())


def open_app(config: Path) -> Ledger:
    """Start the application as a worker does, and hand back its ledger."""
    application = create_app(config)
    ledger = application.state.dpkit.ledger
    return ledger


# -- 1. serve registers, or refuses with what differs ---------------------------------------
def test_serve_registers_a_new_dataset_from_its_config(tmp_path):
    config = write(tmp_path)
    ledger = open_app(config)
    entry = ledger.entry("wages")
    assert entry is not None
    assert (entry["measure"], entry["cap"], entry["privacy_unit"]) == ("ZCDP", dp.ZCDP(1),
                                                                       PERSON)
    assert entry["schema"] == "nr:Int64,wage:Float64"
    assert ledger.verify() == []
    open_app(config)  # a second worker (or a restart) finds the same entry: no change
    assert len(Ledger(tmp_path / "ledger.sqlite").migrations("wages")) == 0


def test_the_newcomer_sequence_refuses_then_migrates_then_agrees(tmp_path):
    """register without --unit, serve a per-person config: refused, naming the unit and the
    command; migrate; serve; `ledger datasets` and the report show the per-person unit."""
    config = write(tmp_path)
    location = str(tmp_path / "ledger.sqlite")
    cli("ledger", "register", "wages", "--measure", "zcdp", "--rho", "1", "--ledger", location)
    text = serve_refusal(config)
    assert f"privacy unit: config {PERSON}, ledger rows" in text
    assert f"dpkit ledger migrate wages --config {config}" in text
    assert "new dataset name" in text
    with pytest.raises(MismatchError):
        create_app(config)
    out = cli("ledger", "migrate", "wages", "--config", str(config))
    assert "spend carried" in out and "privacy unit rows" in out
    ledger = open_app(config)  # serves now
    assert ledger.entry("wages")["privacy_unit"] == PERSON
    assert ledger.verify() == []
    listing = " ".join(cli("ledger", "datasets", "--ledger", location).split())
    assert "'nr'" in listing and "zcdp" in listing and "migrated 1×" in listing
    page = tmp_path / "report.html"
    cli("report", "wages", "--ledger", location, "--out", str(page))
    html = page.read_text()
    assert "by(&#x27;nr&#x27;" in html and "ρ-zCDP" in html
    assert "Migrations" in html and "privacy unit changed from rows before any release" in html


def test_a_pure_cap_with_a_zcdp_config_refuses_then_migrates(tmp_path):
    """The README's `--epsilon 3` with a zCDP config: refused naming the measure; before any
    release the measure can change, the grant's cap converted (ε ⇒ ε²/2)."""
    config = write(tmp_path, unit="rows")
    location = str(tmp_path / "ledger.sqlite")
    cli("ledger", "register", "wages", "--epsilon", "3", "--ledger", location)
    cli("ledger", "analyst", "ann", "--dataset", "wages", "--epsilon", "1", "--ledger",
        location)
    text = serve_refusal(config)
    assert "measure: config ZCDP, ledger PureDP" in text
    cli("ledger", "migrate", "wages", "--config", str(config))
    ledger = open_app(config)
    assert ledger.cap("wages") == dp.ZCDP(1)
    assert ledger.grant_of("ann", "wages") == {"cap": dp.ZCDP(Fraction(1, 2)),
                                               "spent": dp.ZCDP(0)}
    assert ledger.verify() == []


GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide" / "ledger-server.md"


def guide_block(tag: str) -> str:
    found = re.findall(rf"<!-- readme-test: {re.escape(tag)} -->\n```\w*\n(.*?)```",
                       GUIDE.read_text(), re.S)
    assert len(found) == 1, tag
    return str(found[0])


def run_guide(tag: str) -> list[str]:
    """Run a bash block of the guide in the current folder: each `dpkit` line through the
    command line, `dpkit serve` as a worker starts (create_app); returns the outputs."""
    outputs = []
    for line in guide_block(tag).splitlines():
        words = shlex.split(line, comments=True)
        assert words[0] == "dpkit", line
        if words[1] == "serve":
            open_app(Path(words[words.index("--config") + 1]))
            continue
        outputs.append(" ".join(cli(*words[1:]).split()))
    return outputs


def guide_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path)
    (tmp_path / "server.yaml").write_text(guide_block("deploy.yaml"))
    monkeypatch.chdir(tmp_path)


def test_the_guide_deploys_with_no_mismatch(tmp_path, monkeypatch):
    """docs/guide/ledger-server.md as written: register from the config, grant, serve; the
    listing and the report agree with the config on the per-person unit and the measure."""
    guide_setup(tmp_path, monkeypatch)
    _, _, listing, _ = run_guide("deploy")  # serve starts a worker, prints nothing
    assert PERSON in listing and "zcdp" in listing
    ledger = Ledger("ledger.sqlite")
    assert ledger.entry("wages")["privacy_unit"] == PERSON and ledger.migrations("wages") == []
    html = (tmp_path / "wages.html").read_text()
    assert "by(&#x27;nr&#x27;" in html and "ρ-zCDP" in html and "Migrations" not in html
    refused = CliRunner().invoke(app, ["ledger", "register", "wages", "--config",
                                       "server.yaml", "--epsilon", "1"])
    assert refused.exit_code == 1 and "no other option" in refused.output


def test_the_guide_refusal_and_migration_are_what_happens(tmp_path, monkeypatch):
    guide_setup(tmp_path, monkeypatch)
    cli("ledger", "register", "wages", "--measure", "zcdp", "--rho", "1", "--ledger",
        "ledger.sqlite")
    said = serve_refusal(Path("server.yaml"))
    for line in guide_block("deploy-refusal").splitlines()[1:]:
        if line.startswith("  "):  # the lines that name a value or a command
            assert " ".join(line.split()) in said
    outputs = run_guide("deploy-migrate")
    assert "✓" in outputs[-1]
    assert open_app(Path("server.yaml")).entry("wages")["privacy_unit"] == PERSON


def test_register_refuses_another_unit(tmp_path):
    location = str(tmp_path / "ledger.sqlite")
    cli("ledger", "register", "wages", "--rho", "1", "--measure", "zcdp", "--ledger", location)
    again = CliRunner().invoke(app, ["ledger", "register", "wages", "--measure", "zcdp",
                                     "--rho", "1", "--unit", "nr", "--ledger", location])
    assert again.exit_code == 1 and "privacy unit rows, not nr" in again.output


def test_another_cap_is_refused_with_both_values(tmp_path):
    config = write(tmp_path, unit="rows")
    Ledger(tmp_path / "ledger.sqlite").register("wages", dp.ZCDP(2), "rows")
    with pytest.raises(MismatchError, match=r"cap: config ρ = 1, ledger ρ = 2"):
        create_app(config)


@pytest.mark.parametrize("spelling", ["1", "1.0", "'1/1'", "'2/2'", "1.00"])
def test_equivalent_spellings_of_a_cap_agree(tmp_path, spelling):
    config = write(tmp_path, budget=f"{{measure: pure, epsilon: {spelling}}}", unit="rows")
    Ledger(tmp_path / "ledger.sqlite").register("wages", dp.PureDP(1), "rows")
    assert open_app(config).cap("wages") == dp.PureDP(1)


@pytest.mark.parametrize("spelling", ["{column: nr, max_rows: 8, max_groups: 2}",
                                      "{max_groups: 2, column: nr, max_rows: 8}",
                                      "{column: nr, max_rows: 8, max_groups: 2, "
                                      "max_rows_per_group: 8}"])
def test_equivalent_spellings_of_a_unit_agree(tmp_path, spelling):
    open_app(write(tmp_path))  # registered from the first spelling
    assert open_app(write(tmp_path, unit=spelling)).entry("wages")["privacy_unit"] == PERSON


def test_a_tenth_is_not_a_float_near_it(tmp_path):
    """ρ = 0.1 in YAML is the decimal 1/10 (as the CLI's --rho 0.1 is): they agree."""
    config = write(tmp_path, budget="{measure: zcdp, rho: 0.1}", unit="rows")
    Ledger(tmp_path / "ledger.sqlite").register("wages", dp.ZCDP(Fraction(1, 10)), "rows")
    assert open_app(config).cap("wages") == dp.ZCDP(Fraction(1, 10))


# -- 2. the migration: recorded, carried, verified -------------------------------------------
def spend(ledger: Ledger, name: str, loss: PrivacyLoss) -> None:
    ledger.mark(ledger.debit(name, loss, "q", analyst="ann"), "released", None)


@pytest.fixture
def used(tmp_path):
    """A rows-unit ledger entry with a grant and ρ = 1/4 spent."""
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.register("w", dp.ZCDP(1), "rows", "nr:Int64")
    ledger.add_analyst("ann")
    ledger.grant("ann", "w", dp.ZCDP(Fraction(1, 2)))
    spend(ledger, "w", dp.ZCDP(Fraction(1, 4)))
    return ledger


def test_a_migration_carries_the_spend_and_states_a_new_unit(used):
    body = used.migrate("w", dp.ZCDP(2), PERSON, "nr:Int64")
    assert used.spent("w") == dp.ZCDP(Fraction(1, 4))  # never reset
    assert used.grant_of("ann", "w")["spent"] == dp.ZCDP(Fraction(1, 4))
    assert body["unit_changed"] and "accounted at privacy unit rows" in body["note"]
    assert body["before"]["privacy_unit"] == "rows"
    spend(used, "w", dp.ZCDP(Fraction(1, 4)))  # the new entry takes releases
    assert used.spent("w") == dp.ZCDP(Fraction(1, 2))
    assert used.verify() == []
    assert used.checkpoint() == [] and used.verify(since_checkpoint=True) == []
    assert [m["cap"] for m in used.migrations("w")] == ['{"rho": "2"}']
    assert used.export()["migrations"]["w"][0]["before"]["privacy_unit"] == "rows"
    same_unit = used.migrate("w", dp.ZCDP(3), PERSON, "nr:Int64")
    assert not same_unit["unit_changed"] and same_unit["note"] == ""
    assert used.verify() == []


@pytest.mark.parametrize("cap, unit, match", [
    (dp.PureDP(5), "rows", "measure cannot change"),  # a release in ZCDP exists
    (dp.ZCDP(Fraction(1, 5)), "rows", "below it"),  # under the ρ = 1/4 already spent
    (dp.ZCDP(1), "rows", "nothing to migrate"),
])
def test_a_migration_is_refused_and_writes_nothing(used, cap, unit, match):
    head = used.head()
    with pytest.raises(LedgerError, match=match):
        used.migrate("w", cap, unit, "nr:Int64")
    assert used.head() == head and used.verify() == []


def test_a_migration_on_either_database(location):
    """Migrate with a grant and a release (same measure) and before any release (a new
    measure, the grant's cap converted): SQLite and PostgreSQL alike, verify passes."""
    ledger = Ledger(location)
    ledger.add_analyst("ann")
    for name in ("a", "b"):
        ledger.register(name, dp.PureDP(2))
        ledger.grant("ann", name, dp.PureDP(1))
    spend(ledger, "a", dp.PureDP(Fraction(1, 2)))
    ledger.migrate("a", dp.PureDP(3), PERSON)
    ledger.migrate("b", dp.ZCDP(2), PERSON)
    spend(ledger, "a", dp.PureDP(Fraction(1, 4)))
    spend(ledger, "b", dp.ZCDP(Fraction(1, 4)))
    assert ledger.spent("a") == dp.PureDP(Fraction(3, 4))
    assert ledger.grant_of("ann", "b") == {"cap": dp.ZCDP(Fraction(1, 2)),
                                           "spent": dp.ZCDP(Fraction(1, 4))}
    assert ledger.verify() == []
    assert ledger.checkpoint() == [] and ledger.verify(since_checkpoint=True) == []
    ledger.dispose()


def test_a_grant_cap_that_cannot_be_converted_is_named(tmp_path):
    """zCDP ⇒ pure ε has no conversion: a capped grant refuses the new measure (a grant
    without a cap moves)."""
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.register("w", dp.ZCDP(1))
    ledger.add_analyst("ann")
    ledger.add_analyst("bob")
    ledger.grant("bob", "w")
    ledger.grant("ann", "w", dp.ZCDP(Fraction(1, 2)))
    head = ledger.head()
    with pytest.raises(LedgerError, match="the grant of 'ann'.*cannot be converted"):
        ledger.migrate("w", dp.PureDP(1))
    assert ledger.head() == head
    ledger.grant("ann", "w")  # the curator lifts the cap (a recorded grant), then migrates
    ledger.migrate("w", dp.PureDP(1))
    assert ledger.grant_of("bob", "w") == {"cap": None, "spent": dp.PureDP(0)}
    assert ledger.verify() == []


def test_a_retired_or_unknown_dataset_cannot_be_migrated(used):
    used.retire("w")
    with pytest.raises(LedgerError, match="retired"):
        used.migrate("w", dp.ZCDP(2), "rows")
    with pytest.raises(LedgerError, match="unknown dataset"):
        used.migrate("nope", dp.ZCDP(2), "rows")


def sql(ledger: Ledger, statement: str, *params: str) -> None:
    with sqlite3.connect(str(ledger.path)) as db:
        db.execute(statement, params)


def test_a_tampered_migration_is_caught_by_verify(used):
    used.migrate("w", dp.ZCDP(2), PERSON, "nr:Int64")
    with sqlite3.connect(str(used.path)) as db:
        body = json.loads(db.execute("SELECT body FROM events WHERE kind = 'migrate'"
                                     ).fetchone()[0])
    body["cap"] = '{"rho": "20"}'  # a bigger cap, written into the record by hand
    sql(used, "UPDATE events SET body = ? WHERE kind = 'migrate'",
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    problems = used.verify()
    assert any("content does not match its hash" in p for p in problems), problems


def test_a_migration_row_edited_back_is_caught(used):
    """The entry in force edited back to the old unit outside the ledger."""
    used.migrate("w", dp.ZCDP(2), PERSON, "nr:Int64")
    sql(used, "UPDATE datasets SET privacy_unit = 'rows' WHERE name = 'w'")
    assert any("privacy_unit" in p for p in used.verify())


def test_verify_reports_a_migration_that_resets_the_spend():
    """Replaying a migrate event (even one signed with the key) that starts at zero or does
    not name the entry in force is a problem: a spend is never reset."""
    rows = {"datasets": {("w",): {"name": "w", "measure": "ZCDP", "cap": '{"rho": "1"}',
                                  "privacy_unit": "rows", "schema": "",
                                  "spent": '{"rho": "1/4"}', "per_day": None}},
            "grants": {}}
    before = {"measure": "ZCDP", "cap": '{"rho": "1"}', "privacy_unit": "rows", "schema": "",
              "spent": '{"rho": "1/4"}'}
    reset = {"name": "w", "measure": "ZCDP", "cap": '{"rho": "2"}', "privacy_unit": "rows",
             "schema": "", "spent": '{"rho": "0"}', "per_day": None, "before": before}
    assert any("never reset" in p for p in entries.replay_migration(
        rows, json.dumps(reset), 9, "event"))
    rows["datasets"][("w",)]["spent"] = '{"rho": "1/4"}'
    wrong = {**reset, "spent": '{"rho": "1/4"}', "before": {**before, "privacy_unit": "x"}}
    assert any("not the one the chain holds" in p for p in entries.replay_migration(
        rows, json.dumps(wrong), 9, "event"))
    fine = {**reset, "spent": '{"rho": "1/4"}'}
    rows["datasets"][("w",)]["spent"] = '{"rho": "1/4"}'
    rows["datasets"][("w",)]["cap"] = '{"rho": "1"}'
    rows["datasets"][("w",)]["privacy_unit"] = "rows"
    assert entries.replay_migration(rows, json.dumps(fine), 9, "event") == []


# -- 3. the schema: version 6, upgraded from 5 -----------------------------------------------
def test_a_version_5_ledger_upgrades_and_migrates(used):
    path = str(used.path)
    used.dispose()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    ledger = Ledger(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                          ).fetchone() == ("6",)
    assert ledger.verify() == []
    ledger.migrate("w", dp.ZCDP(2), PERSON)
    assert ledger.verify() == [] and ledger.spent("w") == dp.ZCDP(Fraction(1, 4))


# -- 4. `dpkit report` takes --ledger, like `dpkit ledger …` ---------------------------------
def test_report_takes_the_ledger_as_an_option_or_the_old_positional(tmp_path):
    location = str(tmp_path / "ledger.sqlite")
    cli("ledger", "register", "wages", "--epsilon", "1", "--ledger", location)
    new, old = tmp_path / "new.html", tmp_path / "old.html"
    cli("report", "wages", "--ledger", location, "--out", str(new))
    with pytest.warns(DeprecationWarning, match="--ledger"):
        result = CliRunner().invoke(app, ["report", location, "wages", "--out", str(old)])
    assert result.exit_code == 0, result.output
    assert "deprecated" in result.output and new.read_text().count("wages") == \
        old.read_text().count("wages")
    both = CliRunner().invoke(app, ["report", location, "wages", "--ledger", location])
    assert both.exit_code == 1 and "give the ledger once" in both.output
    assert "--ledger" in CliRunner().invoke(app, ["report", "--help"]).output


def test_ledger_commands_never_print_a_database_password(postgres_server, tmp_path,
                                                          monkeypatch):
    """A PostgreSQL URL's password stays out of every line the ledger commands print (the
    test server trusts any password, so a made-up one opens it)."""
    import pg

    monkeypatch.setenv("DPKIT_HOME", str(tmp_path))
    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    url = pg.fresh_database(postgres_server, "deploy_password").replace(
        "postgres@", "postgres:hunter2-secret@", 1)
    printed = [cli("ledger", "init", "--ledger", url),
               cli("ledger", "register", "wages", "--ledger", url, "--epsilon", "1"),
               cli("ledger", "datasets", "--ledger", url),
               cli("ledger", "verify", "--ledger", url)]
    assert all("***" in out and "hunter2" not in out for out in printed[:3]), printed
    assert "hunter2" not in printed[3]
    # the broken variant: the raw URL, as these lines printed it before, carries it
    assert "hunter2" in Ledger(url).url
