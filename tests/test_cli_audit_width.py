"""Issue 33: ``dpkit audit``'s table is readable at 80 columns: no number or header split
across lines (the old table printed ``48,00`` / ``0`` and ``claim`` / ``ed ε``); a long
mechanism name folds onto a second line instead."""

from __future__ import annotations

from typer.testing import CliRunner

from dpkit.cli import app

LONG = "stream tree, node noise halved"


def test_audit_table_at_80_columns(tmp_path):
    result = CliRunner().invoke(app, ["audit", LONG, "--samples", "2000"],
                                env={"DPKIT_HOME": str(tmp_path), "COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "mechanism" in line)
    for word in ("claimed ε", "δ", "ε ≥", "test", "samples"):
        assert word in header, result.output
    row = next(line for line in lines if "stream tree" in line)
    assert "48,000" in row and "pass" in row, result.output
    assert "…" not in result.output  # nothing truncated: the name folds
    assert "halved" in result.output
