"""One served dataset for the server tests: ``frame`` written as a CSV behind a fresh app,
with its ledger and one analyst granted on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl


def serve_one(tmp_path: Path, frame: pl.DataFrame, unit: Any, budget: dict[str, Any], *,
              name: str = "t", analyst: str = "ann") -> tuple[Any, Any, str]:
    """(app, ledger, the analyst's token) for one dataset ``name`` with privacy unit ``unit``
    (the config's form) and ``budget``."""
    from dpkit.server.app import create_app
    from dpkit.server.config import parse_config

    frame.write_csv(tmp_path / f"{name}.csv")
    cfg = parse_config({
        "ledger": "ledger.sqlite",
        "datasets": [{"name": name, "source": {"kind": "csv", "path": f"{name}.csv"},
                      "privacy_unit": unit, "budget": budget}]}, base=tmp_path)
    app = create_app(cfg)
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst(analyst)
    ledger.grant(analyst, name)
    return app, ledger, token
