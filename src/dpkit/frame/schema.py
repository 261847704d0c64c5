"""Declared metadata: the public facts about a private table, written down once by the curator.

A release needs public facts the data must not decide: a numeric column's bounds, a
categorical column's categories (the keys of a group-by), whether a column may be null, and
the privacy unit with its contribution bounds. :class:`Schema` holds them for one table, so
the Python API and SQL can use them as defaults (``group_by("sex")`` without ``keys=``,
``dp.mean("age")`` without ``bounds=``). Nothing here reads a value: a schema is declared by
the curator (``Session(..., schema=...)``, the server's dataset YAML) or written as a template
from the columns' *types* only (:meth:`Schema.template`), never inferred from the data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import polars as pl

from dpkit.errors import DomainError
from dpkit.frame.language import ProtocolError
from dpkit.frame.privacy_unit import PrivacyUnit

__all__ = ["Numeric", "Categorical", "Text", "Schema", "SchemaError", "ColumnSpec"]

Number = int | float | Fraction
Scalar = bool | int | float | str


class SchemaError(ProtocolError):
    """A declaration is missing or malformed; the message names the declaration to add (a
    :class:`~dpkit.frame.language.ProtocolError`: over the wire, a 422 like any query the
    language refuses)."""


@dataclass(frozen=True)
class Numeric:
    """A numeric column with declared bounds ``lower ≤ x ≤ upper`` (values outside are
    clamped by the statistics that use them).

    Parameters
    ----------
    lower, upper : number
        The public bounds, in the column's units; ``lower < upper``.
    integer : bool
        The column holds integers (a count, an age in years).
    nullable : bool
        Nulls may occur (they are filled or dropped as each statistic documents).
    """

    lower: Number
    upper: Number
    integer: bool = False
    nullable: bool = False

    def __post_init__(self) -> None:
        for name in ("lower", "upper"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | Fraction) \
                    or value != value or value in (float("inf"), float("-inf")):
                raise SchemaError(f"{name} must be a finite number, got {value!r}")
        if not self.lower < self.upper:
            raise SchemaError(f"bounds must satisfy lower < upper, got "
                              f"({self.lower}, {self.upper})")

    @property
    def bounds(self) -> tuple[Number, Number]:
        return (self.lower, self.upper)


@dataclass(frozen=True)
class Categorical:
    """A categorical column whose possible values (a public key set) are declared.

    Parameters
    ----------
    categories : sequence of scalars
        Every value the column may take, without repeats; the keys of a group-by on it.
    nullable : bool
        Nulls may occur (a null is its own group only when ``None`` is listed).
    """

    categories: tuple[Scalar | None, ...]
    nullable: bool = False

    def __init__(self, categories: Sequence[Scalar | None], nullable: bool = False) -> None:
        values = tuple(categories)
        if not values:
            raise SchemaError("categories must list at least one value")
        if any(not isinstance(v, bool | int | float | str | type(None)) for v in values):
            raise SchemaError("categories must be numbers, strings, booleans or None")
        if len(set(values)) != len(values):
            raise SchemaError("categories must not repeat a value")
        object.__setattr__(self, "categories", values)
        object.__setattr__(self, "nullable", bool(nullable))


@dataclass(frozen=True)
class Text:
    """A column with no declared domain (an identifier, free text): usable in row-wise
    filters and expressions, and as a group-by key only through private partition
    selection."""

    nullable: bool = False


ColumnSpec = Numeric | Categorical | Text
_NUMERIC_TYPE = re.compile(r"^(U?Int\d+|Float\d+|Decimal\b.*)$")  # a dtype's name
_KINDS: dict[str, type[Numeric] | type[Categorical] | type[Text]] = {
    "numeric": Numeric, "categorical": Categorical, "text": Text}


@dataclass(frozen=True)
class Schema:
    """The declared metadata of one private table.

    Parameters
    ----------
    columns : mapping of str to Numeric, Categorical or Text
        The declaration of each column the curator makes public facts about; columns not
        listed have no declared domain.
    privacy_unit : PrivacyUnit, optional
        The table's privacy unit and contribution bounds (default: as the session says).

    Raises
    ------
    SchemaError
        If a column name is not a non-empty string or a declaration is not one of the kinds.
    """

    columns: Mapping[str, ColumnSpec] = field(default_factory=dict)
    privacy_unit: PrivacyUnit | None = None

    def __post_init__(self) -> None:
        for name, spec in self.columns.items():
            if not isinstance(name, str) or not name:
                raise SchemaError("column names must be non-empty strings")
            if not isinstance(spec, Numeric | Categorical | Text):
                raise SchemaError(f"column {name!r}: declare dp.Numeric(lower, upper), "
                                  f"dp.Categorical([...]) or dp.Text(), got {spec!r}")
        if self.privacy_unit is not None and not isinstance(self.privacy_unit, PrivacyUnit):
            raise SchemaError("privacy_unit must be dp.PrivacyUnit.rows() or .by(column, n)")
        object.__setattr__(self, "columns", dict(self.columns))

    def spec(self, column: str) -> ColumnSpec | None:
        """The declaration of ``column``, or None."""
        return self.columns.get(column)

    def bounds(self, column: str) -> tuple[Number, Number] | None:
        """The declared bounds of a numeric ``column``, or None."""
        spec = self.columns.get(column)
        return spec.bounds if isinstance(spec, Numeric) else None

    def categories(self, column: str) -> tuple[Scalar | None, ...] | None:
        """The declared categories of a categorical ``column``, or None."""
        spec = self.columns.get(column)
        return spec.categories if isinstance(spec, Categorical) else None

    def require_bounds(self, column: str, what: str) -> tuple[Number, Number]:
        """The declared bounds of ``column``, or a :class:`SchemaError` naming the fix."""
        found = self.bounds(column)
        if found is None:
            raise SchemaError(missing_bounds(column, what, self.columns.get(column)))
        return found

    def check_columns(self, types: Mapping[str, object]) -> None:
        """Check the declaration against a table's column names and types (no value read).

        Parameters
        ----------
        types : mapping of str to dtype
            The table's columns and their types (Polars, narwhals or their names).

        Raises
        ------
        SchemaError
            If a declared column or the privacy unit's column is not in ``types``, or a
            ``dp.Numeric`` column does not hold numbers; the message names the column.
        """
        have = f"its columns: {', '.join(map(str, types))}"
        unit = self.privacy_unit.column if self.privacy_unit is not None else None
        if unit is not None and unit not in types:
            raise SchemaError(f"the privacy unit's column {unit!r} is not a column of the "
                              f"table; {have}")
        for name in self.columns:
            if name not in types:
                raise SchemaError(f"the schema declares column {name!r}, which the table "
                                  f"does not have; {have}")
        for name, spec in self.columns.items():
            if isinstance(spec, Numeric) and not _NUMERIC_TYPE.match(str(types[name])):
                raise SchemaError(f"column {name!r} is declared dp.Numeric but holds "
                                  f"{types[name]} values")

    def require_categories(self, column: str) -> tuple[Scalar | None, ...]:
        """The declared categories of ``column``, or a :class:`SchemaError` naming the fix."""
        found = self.categories(column)
        if found is None:
            raise SchemaError(missing_categories(column, self.columns.get(column)))
        return found

    # -- the declaration as plain data (YAML, JSON) -----------------------------------
    def to_dict(self) -> dict[str, object]:
        """The schema as plain data: ``{"columns": {name: {"type": ..., ...}},
        "privacy_unit": {...}}`` (the server's dataset YAML uses the same shape); an exact
        rational bound that is not an integer is written as its text ``"p/q"``, so the
        result is JSON and YAML as it stands."""
        out: dict[str, object] = {"columns": {n: _spec_dict(s) for n, s in self.columns.items()}}
        unit = self.privacy_unit
        if unit is not None and unit.column is not None:
            b = unit.bounds
            out["privacy_unit"] = {"column": unit.column, "max_rows": b.max_rows,
                                   "max_groups": b.max_groups,
                                   "max_rows_per_group": b.max_rows_per_group}
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> Schema:
        """Read :meth:`to_dict`'s shape; every key is on an allow-list.

        Raises
        ------
        SchemaError
            On an unknown key, a missing field or a malformed value, naming where.
        """
        if not isinstance(raw, Mapping):
            raise SchemaError("a schema must be a mapping with 'columns' (and 'privacy_unit')")
        _only(raw, {"columns", "privacy_unit"}, "schema")
        columns = raw.get("columns") or {}
        if not isinstance(columns, Mapping):
            raise SchemaError("schema.columns must map column names to declarations")
        specs = {str(name): _spec_from(body, f"schema.columns.{name}")
                 for name, body in columns.items()}
        return cls(specs, _unit_from(raw.get("privacy_unit")))

    @classmethod
    def template(cls, types: Mapping[str, pl.DataType] | pl.Schema) -> dict[str, object]:
        """A schema template from column *types* only, for the curator to fill in.

        Reads no value: numeric columns get ``lower``/``upper`` placeholders (``null``),
        string, boolean and categorical columns an empty ``categories`` list, others
        ``type: text``. :meth:`from_dict` refuses the template until the placeholders are
        filled, so nothing undeclared can be used by accident.
        """
        columns: dict[str, object] = {}
        for name, dtype in dict(types).items():
            if dtype.is_numeric():
                columns[name] = {"type": "numeric", "lower": None, "upper": None,
                                 "integer": dtype.is_integer(), "nullable": True}
            elif dtype in (pl.String, pl.Boolean, pl.Categorical) or isinstance(
                    dtype, pl.Enum | pl.Categorical):
                columns[name] = {"type": "categorical", "categories": [], "nullable": True}
            else:
                columns[name] = {"type": "text", "nullable": True}
        return {"columns": columns}


def missing_bounds(column: str, what: str, spec: ColumnSpec | None) -> str:
    """The error text when ``what`` (e.g. ``dp.mean``) needs bounds ``column`` lacks."""
    have = "" if spec is None else f" (it is declared as {_kind(spec)})"
    return (f"{what} on {column!r} needs bounds: pass bounds=(lower, upper), or declare "
            f"the column in the session's schema as dp.Numeric(lower, upper){have}")


def missing_categories(column: str, spec: ColumnSpec | None) -> str:
    """The error text when a group-by on ``column`` has no keys."""
    have = "" if spec is None else f" (it is declared as {_kind(spec)})"
    return (f"group_by({column!r}) needs its keys: pass keys=[...], declare the column in "
            f"the session's schema as dp.Categorical([...]){have}, or select the keys "
            f"privately with selection=dp.PartitionSelection(...)")


def _kind(spec: ColumnSpec) -> str:
    return {Numeric: "dp.Numeric", Categorical: "dp.Categorical", Text: "dp.Text()"}[type(spec)]


def _spec_dict(spec: ColumnSpec) -> dict[str, object]:
    if isinstance(spec, Numeric):
        return {"type": "numeric", "lower": _plain(spec.lower), "upper": _plain(spec.upper),
                "integer": spec.integer, "nullable": spec.nullable}
    if isinstance(spec, Categorical):
        return {"type": "categorical", "categories": list(spec.categories),
                "nullable": spec.nullable}
    return {"type": "text", "nullable": spec.nullable}


def _plain(value: Number) -> int | float | str:
    """A bound as plain data (YAML, JSON): an exact non-integer rational as its text "p/q",
    which :func:`_number` reads back exactly."""
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else str(value)
    return value


def _spec_from(body: object, where: str) -> ColumnSpec:
    if not isinstance(body, Mapping) or body.get("type") not in _KINDS:
        raise SchemaError(f"{where} must be a mapping with type: numeric, categorical or text")
    kind = body["type"]
    allowed = {"numeric": {"lower", "upper", "integer"}, "categorical": {"categories"},
               "text": set()}[kind] | {"type", "nullable"}
    _only(body, allowed, where)
    nullable = body.get("nullable", False)
    if not isinstance(nullable, bool):
        raise SchemaError(f"{where}.nullable must be true or false")
    try:
        if kind == "numeric":
            if body.get("lower") is None or body.get("upper") is None:
                raise SchemaError(f"{where} needs lower and upper (the declared bounds)")
            integer = body.get("integer", False)
            if not isinstance(integer, bool):
                raise SchemaError(f"{where}.integer must be true or false")
            return Numeric(_number(body["lower"], where), _number(body["upper"], where),
                           integer, nullable)
        if kind == "categorical":
            values = body.get("categories")
            if not isinstance(values, list) or not values:
                raise SchemaError(f"{where} needs categories: a non-empty list of values")
            return Categorical(values, nullable)
    except SchemaError as exc:
        if str(exc).startswith(where):
            raise
        raise SchemaError(f"{where}: {exc}") from None
    return Text(nullable)


def _number(value: object, where: str) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SchemaError(f"{where}: bounds must be numbers")
    if isinstance(value, str):
        try:
            return Fraction(value)
        except (ValueError, ZeroDivisionError):
            raise SchemaError(f"{where}: {value!r} is not a number") from None
    return value


def _unit_from(raw: object) -> PrivacyUnit | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("column"), str):
        raise SchemaError("schema.privacy_unit must be a mapping with column and max_rows "
                          "(or max_groups and max_rows_per_group)")
    _only(raw, {"column", "max_rows", "max_groups", "max_rows_per_group"},
          "schema.privacy_unit")
    bounds = {k: raw.get(k) for k in ("max_rows", "max_groups", "max_rows_per_group")}
    if any(v is not None and (isinstance(v, bool) or not isinstance(v, int))
           for v in bounds.values()):
        raise SchemaError("schema.privacy_unit bounds must be positive integers")
    try:
        return PrivacyUnit.by(str(raw["column"]), bounds["max_rows"],
                              max_groups=bounds["max_groups"],
                              max_rows_per_group=bounds["max_rows_per_group"])
    except DomainError as exc:
        raise SchemaError(f"schema.privacy_unit: {exc}") from None


def _only(raw: Mapping[str, object], allowed: set[str], where: str) -> None:
    extra = sorted(str(k) for k in raw if k not in allowed)
    if extra:
        raise SchemaError(f"{where}: unknown key(s) {', '.join(extra)}; allowed: "
                          f"{', '.join(sorted(allowed))}")
