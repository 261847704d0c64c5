"""The one release record: what a release returned, what it cost, the noise it added.

Every front end (a session query, ``query.publish``, ``dpkit.learn``, the server) charges
through :meth:`dpkit.core.accountant.Accountant.run`, which builds a :class:`Release`; the
ledger writes its noise rows (:func:`noise_json`) and its digest (:func:`digest_of`) the same
way for all of them, and the server's responses and ``dpkit ledger`` render it.

Contents
--------
NoiseRow     one noise addition: mechanism name, scale, sensitivity (exact)
Accuracy     half-widths of the released statistics at a failure probability β
Release      the frozen record of one release
digest_of    SHA-256 of a canonical serialization of released values
noise_json   the one JSON encoding of noise rows (the ledger's ``noise`` column)
noise_rows   its inverse (None for text written before this encoding)
register_html, provide_html   the extension point of :meth:`Release.to_html` (``dpkit.report``)

The core imports no dataframe engine: Polars frames and series are recognised by their
module and read through their public methods.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Generic, TypeVar

import numpy as np

from dpkit.core.measures import PrivacyLoss
from dpkit.core.numbers import is_shown_exactly, readable, shown
from dpkit.errors import DomainError

__all__ = ["NoiseRow", "Accuracy", "Release", "digest_of", "noise_json", "noise_rows",
           "read_only", "register_html", "provide_html"]

T = TypeVar("T")

_MAX_DEPTH = 32  # deeper values are digested by their type's name only
# a numeric column's wire form: (tag, little-endian dtype)
_NUMERIC: dict[str, tuple[str, Any]] = {
    **{f"{s}Int{b}": ("i", "<i8") for s in ("", "U") for b in (8, 16, 32, 64)},
    "Float32": ("f", "<f8"), "Float64": ("f", "<f8"), "Boolean": ("b", np.uint8)}


def _exact(value: Any, name: str) -> Fraction | None:
    """A scale or sensitivity as an exact Fraction (a float's binary value), or None."""
    if value is None or type(value) is Fraction:
        return value
    if isinstance(value, bool | np.bool_):
        raise DomainError(f"a noise row's {name} must be a number, not a bool")
    if isinstance(value, Fraction | int | np.integer):
        return Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    if isinstance(value, float | np.floating) and math.isfinite(value):
        return Fraction(float(value))
    raise DomainError(f"a noise row's {name} must be a finite number or None; got "
                      f"{type(value).__name__}")


@dataclass(frozen=True)
class NoiseRow:
    """One noise addition of a release.

    Parameters
    ----------
    name : str
        The mechanism, as its measurement names it ("discrete Laplace", "Gaussian (grid)",
        "exponential", a histogram algorithm such as "hb", ...).
    scale : Fraction or None
        The noise distribution's *scale parameter*, not its standard deviation: the Laplace
        b (std b·√2), the Gaussian σ, the exponential mechanism's temperature; in the
        statistic's units (a grid sum's scale includes its grid unit). Exact; a float is
        taken at its binary value. None when the front end cannot state one number before
        the release (an algorithm that splits its budget internally).
    sensitivity : Fraction or None
        The sensitivity the scale is calibrated to (L1 for Laplace, L2 for Gaussian), in
        the same units; None when unknown.
    statistic : str, optional
        What the noise was added to (a statistic's key, "histogram", ...).

    Raises
    ------
    DomainError
        For a scale or sensitivity that is not a finite number (or None), or an empty name.
    """

    name: str
    scale: Fraction | None
    sensitivity: Fraction | None
    statistic: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DomainError("a noise row needs a mechanism name")
        object.__setattr__(self, "scale", _exact(self.scale, "scale"))
        object.__setattr__(self, "sensitivity", _exact(self.sensitivity, "sensitivity"))

    def as_dict(self) -> dict[str, str | None]:
        """The row as JSON-ready text: exact numbers as fraction strings (``"3/2"``)."""
        return {"name": self.name,
                "scale": None if self.scale is None else str(self.scale),
                "sensitivity": None if self.sensitivity is None else str(self.sensitivity),
                "statistic": self.statistic}

    def __repr__(self) -> str:
        """Decimals, with the exact rational beside a rounded one:
        ``NoiseRow('discrete Gaussian', scale≈3.16228 (exact 3395469783/1073741824), …)``."""
        def number(v: Fraction | None) -> str:
            if v is None or is_shown_exactly(v):
                return "None" if v is None else readable(v)
            return f"≈{readable(v)} (exact {v})"
        return (f"NoiseRow({self.name!r}, scale={number(self.scale)}, "
                f"sensitivity={number(self.sensitivity)}, statistic={self.statistic!r})")

    def as_json(self) -> dict[str, object]:
        """The row for people and auditors: scale and sensitivity as decimals of
        :data:`~dpkit.core.numbers.SHOWN_DIGITS` digits (None where not stated), the exact
        fraction strings of :meth:`as_dict` under ``exact`` (what :meth:`from_dict` reads)."""
        exact = self.as_dict()
        return {"name": self.name,
                "scale": None if self.scale is None else shown(self.scale),
                "sensitivity": None if self.sensitivity is None else shown(self.sensitivity),
                "statistic": self.statistic,
                "exact": {"scale": exact["scale"], "sensitivity": exact["sensitivity"]}}

    def __str__(self) -> str:
        """One line for reports, e.g. ``count: discrete Laplace, scale 2, sensitivity 1``
        (numbers to 6 significant digits; the exact values are in :meth:`as_dict`)."""
        parts = [self.name]
        for label, value in (("scale", self.scale), ("sensitivity", self.sensitivity)):
            if value is not None:
                parts.append(f"{label} {float(value):.6g}")
        text = ", ".join(parts)
        return f"{self.statistic}: {text}" if self.statistic else text

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> NoiseRow:
        """The row written by :meth:`as_dict` or :meth:`as_json` (its ``exact`` numbers)."""
        exact = row.get("exact")
        source = exact if isinstance(exact, Mapping) else row

        def number(v: Any) -> Fraction | None:
            return None if v is None else Fraction(str(v))
        return cls(str(row["name"]), number(source.get("scale")),
                   number(source.get("sensitivity")),
                   None if row.get("statistic") is None else str(row["statistic"]))


def noise_json(rows: Sequence[NoiseRow]) -> str:
    """The one JSON encoding of noise rows (the ledger's ``noise`` column, the server's
    rows): a list of :meth:`NoiseRow.as_dict`, keys sorted, no spaces, in release order."""
    return json.dumps([r.as_dict() for r in rows], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)


def noise_rows(text: str | None) -> tuple[NoiseRow, ...] | None:
    """The rows :func:`noise_json` wrote, or None for text in another form (a ledger row
    written before this encoding: free text, or no noise recorded at all)."""
    if text is None:
        return None
    try:
        found = json.loads(text)
        if not isinstance(found, list):
            return None
        return tuple(NoiseRow.from_dict(r) for r in found)
    except (ValueError, TypeError, KeyError, AttributeError, ZeroDivisionError, DomainError):
        return None


class _Widths(Mapping[str, float]):
    """A read-only mapping whose values may be given as zero-argument callables, computed on
    first read and kept (a release need not pay for tail bounds nobody reads)."""

    def __init__(self, items: Mapping[str, float] | Mapping[str, Callable[[], float]]
                 ) -> None:
        self._items: dict[str, Any] = dict(items)

    def __getitem__(self, key: str) -> float:
        value = self._items[key]
        if callable(value):
            value = self._items[key] = float(value())
        return float(value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass(frozen=True)
class Accuracy:
    """The accuracy a release promises, fixed by its plan (never by the data).

    Parameters
    ----------
    beta : float
        The failure probability: each statistic's noise lies within ± its half-width with
        probability at least 1 − β.
    half_widths : mapping of str to float
        Per statistic (keyed as the noise rows' ``statistic``), the half-width at β in the
        statistic's units (ranks for a quantile). Read-only.
    """

    beta: float
    half_widths: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.half_widths, _Widths):
            object.__setattr__(self, "half_widths", _Widths(self.half_widths))

    def __repr__(self) -> str:
        return f"Accuracy(β={self.beta:.6g}, half_widths={self.half_widths!r})"

    @classmethod
    def deferred(cls, beta: float, widths: Mapping[str, Callable[[], float]]) -> Accuracy:
        """The accuracy whose half-widths are computed by data-free callables (from the
        plan) on first read, so that a release pays for no tail bound nobody reads."""
        return cls(beta, _Widths(widths))


@dataclass(frozen=True)
class Release(Generic[T]):
    """The record of one release, built by :meth:`~dpkit.core.accountant.Accountant.run`.

    Attributes
    ----------
    values : object
        What was released (a Polars DataFrame, a histogram, a fitted model, ...), or a
        read-only view of it (:func:`read_only`); None if nothing was released.
    loss : PrivacyLoss or None
        What this release debited, exact, in the accountant's measure; None for an
        idempotent replay (it debits nothing).
    noise : tuple of NoiseRow
        The noise plan, as written to the ledger at the debit (empty when the front end
        cannot plan its noise before the release).
    accuracy : Accuracy or None
        Half-widths at β, when the front end states them.
    release_id : int or None
        The ledger's release id (None without a ledger).
    replayed : bool
        True for an idempotent replay of a recorded answer.
    digest : str or None
        SHA-256 hex digest of the values (:func:`digest_of`), as written to the ledger's
        ``result_sha256``; a replay carries the digest recorded with the original. None if
        nothing was released.
    description : str
        The canonical text of the release (the ledger's ``query``).
    status : str
        "released"; "debited" while ``compute`` runs; "failed" if it failed after the debit
        (the loss stands).
    loss_note : str or None
        Why ``loss`` is not exactly the budget asked for, in words (e.g. "requested ρ = 0.1;
        charged ρ ≈ 0.09999999999 (1e-11 less): each noise scale was rounded up to …"), or
        None when it is (or the front end states no request).
    """

    values: T
    loss: PrivacyLoss | None
    noise: tuple[NoiseRow, ...]
    accuracy: Accuracy | None
    release_id: int | None
    replayed: bool
    digest: str | None
    description: str
    status: str = "released"
    loss_note: str | None = None

    def noise_json(self) -> str:
        """The noise rows as the ledger stores them (:func:`noise_json`)."""
        return noise_json(self.noise)

    def to_html(self, truth: Mapping[str, Any] | None = None, title: str | None = None
                ) -> str:
        """This release as a self-contained HTML page: its values (tables with confidence
        intervals, bar charts with error bars, the true values beside them when ``truth``
        gives them), its loss, noise and accuracy. Rendered by
        :func:`dpkit.report.release_html` (the core never imports the report: the renderer
        registers itself, :func:`register_html`); needs matplotlib (``dpkit[plot]``).

        Parameters
        ----------
        truth : mapping, optional
            Per statistic column, the true (non-private) values: a mapping from the row's
            key to the value, or a sequence in row order. Only the curator has them.
        title : str, optional
            The page's title (default: the release's description).

        Raises
        ------
        DomainError
            If no renderer is registered (``dpkit.report`` is not installed).
        ImportError
            Without matplotlib.
        """
        render = _renderer("render")
        if render is None:
            raise DomainError("Release.to_html needs a renderer: import dpkit.report")
        return str(render(self, truth=truth, title=title))

    def _repr_html_(self) -> str | None:
        """Notebooks' rich display: the release's section of its report (values with
        intervals and charts, loss, noise), without the page around it; None — the plain
        repr — when no renderer is registered or it cannot draw (no matplotlib)."""
        render = _renderer("section")
        if render is None:
            return None
        try:
            return str(render(self, title=f"Release: {self.description[:200]}", level=4))
        except ImportError:
            return None


_HTML: dict[str, Any] = {}  # "render", "section": the renderers; "module": who registers them


def _renderer(kind: str) -> Callable[..., str] | None:
    """The registered renderer ``kind``, importing the declared module on first use."""
    if kind not in _HTML and "module" in _HTML:
        importlib.import_module(_HTML["module"])  # registers itself
    return _HTML.get(kind)


def register_html(render: Callable[..., str],
                  section: Callable[..., str] | None = None) -> None:
    """Make ``render(release, truth=…, title=…) -> str`` the renderer of
    :meth:`Release.to_html` and ``section(release, title=…, level=…) -> str`` (an HTML
    fragment) that of its notebook display (``dpkit.report`` registers
    :func:`~dpkit.report.release_html` and :func:`~dpkit.report.release_section` when it is
    imported)."""
    _HTML["render"] = render
    if section is not None:
        _HTML["section"] = section


def provide_html(module: str) -> None:
    """Declare the module whose import registers the renderer; it is imported on the first
    :meth:`Release.to_html` (``dpkit/__init__.py`` declares ``dpkit.report``)."""
    _HTML["module"] = module


def read_only(values: object) -> Any:
    """``values`` as a :class:`Release` holds them: a NumPy array as a read-only view,
    anything else as returned to the caller (a frame, a model); :attr:`Release.digest` was
    taken at the release, so ``digest_of(values) != digest`` reveals a later edit."""
    if isinstance(values, np.ndarray):
        view = values.view()
        view.flags.writeable = False
        return view
    return values


# -- the digest -------------------------------------------------------------------------------
def digest_of(values: object) -> str:
    """SHA-256 (hex) of a canonical serialization of released values.

    One rule for every front end, so that equal values give equal digests whatever produced
    them. Each value is written as a tag and its content, lengths first, so that distinct
    structures cannot collide:

    - Polars DataFrame: its columns in order, each by name and content; Series likewise.
      A numeric or Boolean column is its null mask and its values as little-endian int64 or
      float64 (so UInt32 and Int64 holding equal values agree, and NaN stays distinct from
      null); any other column (strings, categoricals, dates) its values cast to text;
    - NumPy array: its shape and values (int64, float64 or bytes of Booleans; text for
      strings; element by element for objects); NumPy scalars as Python numbers;
    - mappings (keys sorted by their text), lists and tuples, sets (items sorted by digest);
    - None, bool, int, float (``repr``), Fraction, str, bytes;
    - an object with ``to_record()``: that record; a dataclass: its type name and fields; a
      fitted scikit-learn-style model (``get_params``): its type name, parameters and
      fitted attributes (public names ending in ``_``, except ``release_``);
    - anything else: its type's qualified name only (never its attributes, which may hold
      unreleased data).

    Parameters
    ----------
    values : object
        Released values.

    Returns
    -------
    str
        64 lowercase hex digits.
    """
    h = hashlib.sha256()
    _feed(h, values, 0)
    return h.hexdigest()


def _put(h: Any, tag: str, payload: bytes = b"") -> None:
    h.update(f"{tag}:{len(payload)}:".encode())
    h.update(payload)


def _type_name(value: Any) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}"


def _feed(h: Any, value: Any, depth: int) -> None:
    if depth > _MAX_DEPTH:
        _put(h, "deep", _type_name(value).encode())
    elif value is None:
        _put(h, "none")
    elif isinstance(value, bool | np.bool_):
        _put(h, "bool", b"1" if value else b"0")
    elif isinstance(value, int | np.integer):
        _put(h, "int", str(int(value)).encode())
    elif isinstance(value, float | np.floating):
        _put(h, "float", repr(float(value)).encode())
    elif isinstance(value, Fraction):
        _put(h, "fraction", str(value).encode())
    elif isinstance(value, str):
        _put(h, "str", value.encode())
    elif isinstance(value, bytes):
        _put(h, "bytes", value)
    elif isinstance(value, np.ndarray):
        _array(h, value, depth)
    elif _is_polars(value, "DataFrame"):
        _put(h, "frame", str(value.width).encode())
        for column in value.get_columns():
            _series(h, column)
    elif _is_polars(value, "Series"):
        _series(h, value)
    elif isinstance(value, Mapping):
        _put(h, "map", str(len(value)).encode())
        for key in sorted(value, key=str):
            _put(h, "key", str(key).encode())
            _feed(h, value[key], depth + 1)
    elif isinstance(value, list | tuple):
        _put(h, "seq", str(len(value)).encode())
        for item in value:
            _feed(h, item, depth + 1)
    elif isinstance(value, set | frozenset):
        _put(h, "set", "".join(sorted(_sub(item, depth) for item in value)).encode())
    elif callable(getattr(value, "to_record", None)) and not isinstance(value, type):
        _put(h, "record", _type_name(value).encode())
        _feed(h, value.to_record(), depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        _put(h, "dataclass", _type_name(value).encode())
        _feed(h, {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, depth + 1)
    elif callable(getattr(value, "get_params", None)) and not isinstance(value, type):
        _put(h, "model", _type_name(value).encode())
        fitted = {k: v for k, v in vars(value).items()
                  if k.endswith("_") and not k.startswith("_") and k != "release_"}
        _feed(h, {"params": value.get_params(deep=False), "fitted": fitted}, depth + 1)
    else:
        _put(h, "opaque", _type_name(value).encode())


def _sub(value: Any, depth: int) -> str:
    h = hashlib.sha256()
    _feed(h, value, depth + 1)
    return h.hexdigest()


def _is_polars(value: Any, kind: str) -> bool:
    t = type(value)
    return t.__name__ == kind and t.__module__.split(".")[0] == "polars"


def _array(h: Any, a: np.ndarray, depth: int) -> None:
    _put(h, "array", str(a.shape).encode())
    kind = a.dtype.kind
    if kind == "b":
        _put(h, "b", np.ascontiguousarray(a, dtype=np.uint8).tobytes())
    elif kind in "iu":
        _put(h, "i", np.ascontiguousarray(a, dtype="<i8").tobytes())
    elif kind == "f":
        _put(h, "f", np.ascontiguousarray(a, dtype="<f8").tobytes())
    else:  # text, objects: element by element
        for item in a.reshape(-1).tolist():
            _feed(h, item, depth + 1)


def _series(h: Any, s: Any) -> None:
    _put(h, "column", str(s.name).encode())
    dtype = str(s.dtype)
    wire = _NUMERIC.get(dtype)
    if wire is not None and not s.null_count():
        _put(h, wire[0], np.ascontiguousarray(s.to_numpy(), dtype=wire[1]).tobytes())
        return
    try:  # nulls, text, categories, dates: the values as JSON text (null for a null)
        # (a String column is its own text: no cast)
        items = s.to_list() if dtype in _NUMERIC or dtype == "String" else s.cast(str).to_list()
        text = json.dumps(items, ensure_ascii=False, allow_nan=True)
    except Exception:  # a type with no text form (nested): its values one by one
        _put(h, "items", str(len(s)).encode())
        for item in s.to_list():
            _feed(h, item, 1)
        return
    _put(h, "numbers" if dtype in _NUMERIC else "text", text.encode())
