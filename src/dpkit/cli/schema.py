"""``dpkit schema PATH``: a declared-metadata template from a file's column types, no values.

The curator fills in the template (numeric bounds, categories, the privacy unit) and passes
it to ``dp.Session(..., schema=dp.Schema.from_dict(...))`` or to a served dataset's
``schema:`` in the server's YAML; :meth:`dpkit.Schema.from_dict` refuses it until every
placeholder is filled, so nothing undeclared is used by accident.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import typer
from rich.console import Console

from dpkit.errors import DomainError
from dpkit.frame.schema import Schema

__all__ = ["schema"]

# lazy scans by file suffix: each reads the file's metadata (Parquet, Arrow) or, for CSV,
# the rows Polars infers the types from — none of whose values reaches the template
_SCANS: dict[str, Callable[[Path], pl.LazyFrame]] = {
    ".parquet": pl.scan_parquet, ".pq": pl.scan_parquet, ".csv": pl.scan_csv,
    ".arrow": pl.scan_ipc, ".ipc": pl.scan_ipc, ".feather": pl.scan_ipc}


def schema(
    path: Path = typer.Argument(..., help="A Parquet (.parquet, .pq), CSV (.csv) or Arrow "
                                          "IPC (.arrow, .ipc, .feather) file."),
    table: str = typer.Option(None, "--table", help="Write the template under this table "
                                                    "name ({NAME: {columns: …}}, the "
                                                    "shape of Session(schema={table: …}))."),
    out: Path = typer.Option(None, "--out", help="The YAML file to write (default: standard "
                                                 "output)."),
) -> None:
    """Write a YAML schema template from a file's column names and types, without values.

    Parquet and Arrow: only the file's metadata is read.
    CSV: Polars infers the types from a sample of rows; no value is written to the output.
    Fill in lower/upper and categories (or set type: text), and add privacy_unit.
    """
    template = template_of(path)
    text = _header(path) + _yaml({table: template} if table else template)
    if out is None:
        typer.echo(text, nl=False)
        return
    if not out.parent.is_dir() or out.is_dir():
        raise DomainError(f"--out {out}: not a file in an existing directory")
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise DomainError(f"--out {out}: cannot write it ({exc.strerror})") from None
    Console(stderr=True).print(f"[green]✓[/green] wrote {out}", soft_wrap=True)


def template_of(path: Path) -> dict[str, object]:
    """:meth:`Schema.template` of the column types of the file at ``path`` (a lazy scan's
    ``collect_schema()``).

    Raises
    ------
    DomainError
        If the file is missing, its suffix is not a supported format, or it cannot be read
        (the message names the file and the error's type, never a value).
    """
    scan = _SCANS.get(path.suffix.lower())
    if scan is None:
        raise DomainError(f"{path}: use a .parquet, .csv or .arrow file "
                          f"(suffixes: {', '.join(_SCANS)})")
    if not path.is_file():
        raise DomainError(f"{path}: no such file")
    try:
        types = scan(path).collect_schema()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DomainError(f"{path}: cannot read its column types "
                          f"({type(exc).__name__})") from None
    return Schema.template(types)


def _header(path: Path) -> str:
    return (f"# dpkit schema template from the column types of {path.name} (no value read).\n"
            "# Fill in lower/upper and categories (or set type: text), add privacy_unit:\n"
            "# {column: ..., max_rows: ...}; then dp.Schema.from_dict(yaml.safe_load(...))\n"
            "# or a served dataset's schema: in the server's YAML.\n")


def _yaml(doc: dict[str, object]) -> str:
    try:
        import yaml
    except ModuleNotFoundError:
        raise ImportError("dpkit schema writes YAML: pip install pyyaml (or "
                          "'dpkit[server]')") from None
    return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
