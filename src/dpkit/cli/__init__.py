"""dpkit.cli — the ``dpkit`` command.

Contents
--------
app          the Typer application (``dpkit demo``, ``dpkit ledger ...``)
demo         the main job: a DP analysis of UCI Adult
"""

from dpkit.cli.main import app

__all__ = ["app"]
