"""Domains: the sets of values a component accepts (DESIGN.md §1, ``dpkit.core.domains``).

A component's guarantee is about inputs *in its domain* that are ``d_in`` apart *in its
metric*: the input domain and the input metric of the programming framework of OpenDP
(Gaboardi et al. 2020, *A Programming Framework for OpenDP*), whose library builds a
measurement only when the pair is a metric space (``Measurement::new`` requires
``(DI, MI): MetricSpace``). dpkit does the same:

- at construction, :func:`check_space` refuses a domain on which the metric is not defined
  (an L1 distance between categories, add/remove neighbours of a fixed-size vector);
- at call time, :meth:`Domain.check` refuses data outside the domain, vectorised over NumPy
  arrays, before any noise is drawn (:class:`~dpkit.core.component.Measurement`).

Classes
-------
- :class:`AtomDomain` — one value of a kind (integer, float or bool), optionally within exact
  bounds; floats say whether NaN and ±inf belong.
- :class:`CategoricalDomain` — one of finitely many declared values.
- :class:`VectorDomain` — a vector of elements of a domain, of a fixed size, or of any size
  up to a maximum. A vector of atoms is read as the noise mechanisms read their input: any
  array, flattened in C order (a scalar is a vector of one); a vector of vectors is a 2-D
  array of rows (or a sequence of 1-D vectors of any lengths when the rows are unsized).
- :class:`AnyDomain` — no claim: every value; the default of a component that declares none.

Errors name the domain and the rule, never a data value (DESIGN.md §3.6).
"""

from __future__ import annotations

import abc
import enum
import math
import numbers
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.metrics import (
    AddRemoveDistance,
    HammingDistance,
    L1Distance,
    L2Distance,
    LInfDistance,
    MahalanobisDistance,
    Metric,
)
from dpkit.errors import DomainError

__all__ = ["Kind", "Domain", "AnyDomain", "AtomDomain", "CategoricalDomain", "VectorDomain",
           "check_space"]


class Kind(enum.Enum):
    """The kind of an atom.

    ``INTEGER``: Python and NumPy integers and booleans (dtype kinds ``i``, ``u``, ``b``).
    ``FLOAT``: real numbers — ints, floats, Fractions and booleans (dtype kinds ``i``, ``u``,
    ``f``, ``b``), read as the grid mechanisms read them. ``BOOL``: booleans only.
    """

    INTEGER = "integer"
    FLOAT = "float"
    BOOL = "bool"


_DTYPE_KINDS = {Kind.INTEGER: "iub", Kind.FLOAT: "iufb", Kind.BOOL: "b"}


class Domain(abc.ABC):
    """A set of values. Subclasses are frozen dataclasses (hashable, compared by value)."""

    @abc.abstractmethod
    def violation(self, x: object) -> str | None:
        """``None`` if ``x`` is in the domain, else the rule it breaks (no data value)."""

    @property
    @abc.abstractmethod
    def numeric(self) -> bool:
        """Whether numeric distances (L1, L2, L∞) are defined on the domain's values."""

    def member(self, x: object) -> Any:
        """Whether ``x`` is in the domain (atoms: elementwise over an array)."""
        return self.violation(x) is None

    def check(self, x: object) -> None:
        """Raise :class:`~dpkit.errors.DomainError` unless ``x`` is in the domain.

        Raises
        ------
        DomainError
            Naming the domain and the rule broken (never a data value).
        """
        reason = self.violation(x)
        if reason is not None:
            raise DomainError(f"the input is not in the domain {self}: {reason}")


@dataclass(frozen=True)
class AnyDomain(Domain):
    """Every value (no claim; the default of a component that declares no domain)."""

    def violation(self, x: object) -> str | None:
        return None

    def check(self, x: object) -> None:
        return None

    @property
    def numeric(self) -> bool:
        return False  # as an element (records of any type); alone, it takes any metric

    def __str__(self) -> str:
        return "any"


def _bound(value: Any, name: str) -> Fraction | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Rational | float | int):
        raise DomainError(f"a domain's {name} bound must be a number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise DomainError(f"a domain's {name} bound must be finite")
    return Fraction(value)


def _float_at_least(x: Fraction) -> float:
    """The smallest float ≥ x (a float y satisfies y ≥ x iff y ≥ this), ±inf beyond range."""
    try:
        f = float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def _float_at_most(x: Fraction) -> float:
    return -_float_at_least(-x)


@dataclass(frozen=True, init=False)
class AtomDomain(Domain):
    """One value of a ``kind``, optionally within exact bounds.

    Parameters
    ----------
    kind : Kind or {"integer", "float", "bool"}
        See :class:`Kind`.
    bounds : (lower, upper), optional
        Exact bounds (ints, Fractions or finite floats, taken exactly); either end may be
        ``None`` (unbounded on that side). A bounded float is finite.
    nan : bool
        Floats only: whether NaN belongs (default False).
    infinity : bool
        Floats only: whether ±inf belong when unbounded (default True: the grid mechanisms
        read ±inf as ±the largest float).

    Notes
    -----
    :meth:`member` is elementwise over an array; :meth:`violation` and :meth:`check` are
    about every element. Comparisons with the bounds are exact (a float y ≥ L iff y is at
    least the smallest float ≥ L). Integer dtypes without bounds are accepted without
    reading the values.
    """

    kind: Kind
    lower: Fraction | None
    upper: Fraction | None
    nan: bool
    infinity: bool

    def __init__(self, kind: Kind | str, bounds: tuple[Any, Any] | None = None, *,
                 nan: bool = False, infinity: bool = True) -> None:
        try:
            k = Kind(kind)
        except ValueError:
            raise DomainError(f"kind must be one of {[m.value for m in Kind]}") from None
        if bounds is not None and len(bounds) != 2:
            raise DomainError("bounds must be (lower, upper)")
        lower, upper = (None, None) if bounds is None else (
            _bound(bounds[0], "lower"), _bound(bounds[1], "upper"))
        if lower is not None and upper is not None and lower > upper:
            raise DomainError("a domain's lower bound must not exceed its upper bound")
        if k is Kind.BOOL and (lower is not None or upper is not None):
            raise DomainError("a bool domain takes no bounds")
        object.__setattr__(self, "kind", k)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "nan", bool(nan) and k is Kind.FLOAT)
        object.__setattr__(self, "infinity", bool(infinity) and k is Kind.FLOAT
                           and lower is None and upper is None)

    @property
    def numeric(self) -> bool:
        return True

    def __str__(self) -> str:
        extra = []
        if self.lower is not None or self.upper is not None:
            lo = "-∞" if self.lower is None else str(self.lower)
            hi = "∞" if self.upper is None else str(self.upper)
            extra.append(f"in [{lo}, {hi}]")
        if self.kind is Kind.FLOAT:
            extra.append("NaN allowed" if self.nan else "no NaN")
            if self.lower is None and self.upper is None and not self.infinity:
                extra.append("finite")
        return self.kind.value + (f" ({', '.join(extra)})" if extra else "")

    # -- elementwise membership ---------------------------------------------------------
    def as_array(self, x: object) -> np.ndarray:
        """``x`` as a NumPy array (values unchanged)."""
        return np.asarray(x)

    def member(self, x: object) -> Any:
        arr = self.as_array(x)
        if arr.dtype.kind == "O":
            flat = np.fromiter((self._member_one(v) for v in arr.reshape(-1)), dtype=bool,
                               count=arr.size)
            return flat.reshape(arr.shape)
        if arr.dtype.kind not in _DTYPE_KINDS[self.kind]:
            return np.zeros(arr.shape, dtype=bool)
        ok = np.ones(arr.shape, dtype=bool)
        if arr.dtype.kind == "f":
            if not self.nan:
                ok &= ~np.isnan(arr)
            if not self.infinity:
                ok &= ~np.isinf(arr)
        return self._within(arr, ok)

    def _within(self, arr: np.ndarray, ok: np.ndarray) -> np.ndarray:
        if self.lower is None and self.upper is None:
            return ok
        if arr.dtype.kind == "f":
            lo = -math.inf if self.lower is None else _float_at_least(self.lower)
            hi = math.inf if self.upper is None else _float_at_most(self.upper)
            inside = (arr >= lo) & (arr <= hi)
            return ok & (inside | np.isnan(arr)) if self.nan else ok & inside
        ints = arr.astype(np.int64) if arr.dtype.kind == "b" else arr
        info = np.iinfo(ints.dtype)
        if self.lower is not None:
            lo_int = math.ceil(self.lower)
            if lo_int > info.max:
                return np.zeros(arr.shape, dtype=bool)
            if lo_int > info.min:
                ok &= ints >= lo_int
        if self.upper is not None:
            hi_int = math.floor(self.upper)
            if hi_int < info.min:
                return np.zeros(arr.shape, dtype=bool)
            if hi_int < info.max:
                ok &= ints <= hi_int
        return ok

    def _member_one(self, v: Any) -> bool:
        """Membership of one object (object arrays: Python ints, Fractions, ...)."""
        if isinstance(v, bool | np.bool_):
            value: Fraction | float = Fraction(int(v))
        elif self.kind is Kind.BOOL:
            return False
        elif isinstance(v, int | np.integer):
            value = Fraction(int(v))
        elif self.kind is Kind.INTEGER:
            return False
        elif isinstance(v, Fraction | numbers.Rational):
            value = Fraction(v)
        elif isinstance(v, float | np.floating):
            f = float(v)
            if math.isnan(f):
                return self.nan
            if math.isinf(f):
                return self.infinity
            value = Fraction(f)
        else:
            return False
        return ((self.lower is None or value >= self.lower)
                and (self.upper is None or value <= self.upper))

    def violation(self, x: object) -> str | None:
        arr = self.as_array(x)
        bounded = self.lower is not None or self.upper is not None
        if arr.dtype.kind == "O":
            if bool(np.all(self.member(arr))):
                return None
            return f"a value is not a {self.kind.value}" + (" within the bounds" if bounded
                                                              else "")
        if arr.dtype.kind not in _DTYPE_KINDS[self.kind]:
            return f"dtype {arr.dtype} is not {self.kind.value}"
        if arr.dtype.kind == "f":
            if not self.nan and bool(np.isnan(arr).any()):
                return "NaN is not allowed; drop or fill it first"
            if not bounded and not self.infinity and bool(np.isinf(arr).any()):
                return "±inf is not allowed"
        if bounded and not bool(np.all(self._within(arr, np.ones(arr.shape, dtype=bool)))):
            return "a value is outside the bounds"
        return None


@dataclass(frozen=True, init=False)
class CategoricalDomain(Domain):
    """One of finitely many declared values (compared as a Python ``dict`` would).

    Parameters
    ----------
    categories : sequence
        At least one hashable value, no duplicates.
    """

    categories: tuple[Any, ...]

    def __init__(self, categories: Iterable[object]) -> None:
        cats = tuple(categories)
        try:
            distinct = len(set(cats))
        except TypeError:
            raise DomainError("categories must be hashable") from None
        if not cats or distinct != len(cats):
            raise DomainError("a categorical domain needs distinct categories")
        object.__setattr__(self, "categories", cats)

    @property
    def numeric(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"categorical ({len(self.categories)} categories)"

    def as_array(self, x: object) -> np.ndarray:
        """``x`` as an object array (no conversion of mixed values to strings)."""
        return np.asarray(x, dtype=object)

    def member(self, x: object) -> Any:
        arr = self.as_array(x)
        allowed = frozenset(self.categories)

        def one(v: Any) -> bool:
            try:
                return v in allowed
            except TypeError:  # unhashable
                return False

        flat = np.fromiter((one(v) for v in arr.reshape(-1)), dtype=bool, count=arr.size)
        return flat.reshape(arr.shape)

    def violation(self, x: object) -> str | None:
        if bool(np.all(self.member(x))):
            return None
        return "a value is not one of the declared categories"


@dataclass(frozen=True)
class VectorDomain(Domain):
    """A vector of elements of ``element``.

    Parameters
    ----------
    element : Domain
        The domain of each element: an atom (:class:`AtomDomain`,
        :class:`CategoricalDomain`, :class:`AnyDomain`: any array, read flat; a scalar is a
        vector of one) or a :class:`VectorDomain` of atoms (rows: a 2-D array, or a sequence
        of 1-D vectors when the rows have no fixed size).
    size : int, optional
        The exact number of elements (None: any).
    max_size : int, optional
        The largest number of elements (None: no limit).
    """

    element: Domain
    size: int | None = None
    max_size: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.element, Domain):
            raise DomainError("a vector domain's element must be a Domain")
        if isinstance(self.element, VectorDomain) and isinstance(self.element.element,
                                                                 VectorDomain):
            raise DomainError("vector domains nest two deep at most (rows of atoms)")
        for name in ("size", "max_size"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) \
                    or value < 0:
                raise DomainError(f"a vector domain's {name} must be a non-negative int")
            object.__setattr__(self, name, int(value))

    @property
    def numeric(self) -> bool:
        return self.element.numeric

    def __str__(self) -> str:
        length = [] if self.size is None else [f"size {self.size}"]
        if self.max_size is not None:
            length.append(f"at most {self.max_size}")
        return "vector" + (f" ({', '.join(length)})" if length else "") + f" of {self.element}"

    def _length(self, n: int) -> str | None:
        if self.size is not None and n != self.size:
            return f"it has {n} elements; the domain has {self.size}"
        if self.max_size is not None and n > self.max_size:
            return f"it has {n} elements; the domain takes at most {self.max_size}"
        return None

    def violation(self, x: object) -> str | None:
        inner = self.element
        if isinstance(inner, VectorDomain):
            return self._rows(x, inner)
        if isinstance(inner, AnyDomain):
            if not isinstance(x, Sized):  # what len() takes
                return "it is not a sequence of records"
            return self._length(len(x))
        assert isinstance(inner, AtomDomain | CategoricalDomain)
        arr = inner.as_array(x)
        return self._length(arr.size) or inner.violation(arr)

    def _rows(self, x: Any, row: VectorDomain) -> str | None:
        arr: np.ndarray | None = x if isinstance(x, np.ndarray) else None
        if arr is None:
            try:
                arr = np.asarray(x)
            except (ValueError, TypeError):  # ragged rows: read one by one below
                arr = None
        if arr is not None and arr.dtype.kind != "O":
            if arr.ndim == 1 and arr.size == 0:
                return self._length(0)
            if arr.ndim != 2:
                return f"rows must form a 2-D array; it has {arr.ndim} dimensions"
            return (self._length(arr.shape[0]) or row._length(arr.shape[1])
                    or row.element.violation(arr))
        try:
            items = list(x)
        except TypeError:
            return "it is not a sequence of rows"
        for item in items:
            if np.ndim(item) != 1:
                return "each row must be a 1-D vector"
            reason = row.violation(item)
            if reason is not None:
                return f"a row: {reason}"
        return self._length(len(items))


_NUMERIC = (L1Distance, L2Distance, LInfDistance, MahalanobisDistance)


def check_space(domain: Domain, metric: Metric) -> None:
    """Raise unless ``metric`` is defined on ``domain`` (the pair is a metric space).

    Allowed pairs: any metric on :class:`AnyDomain`; L1, L2 and L∞ distances on numeric
    atoms and vectors of them; the Hamming distance on atoms and vectors (a change of
    value, the length fixed); the add/remove distance on vectors of records of no fixed size
    (adding a record changes the size).

    Raises
    ------
    DomainError
        For any other pair, naming both.
    """
    if not isinstance(domain, Domain):
        raise DomainError(f"an input domain must be a Domain, got {type(domain).__name__}")
    if isinstance(domain, AnyDomain):
        return
    ok = False
    if isinstance(metric, _NUMERIC):
        ok = domain.numeric
    elif isinstance(metric, HammingDistance):
        ok = True
    elif isinstance(metric, AddRemoveDistance):
        ok = isinstance(domain, VectorDomain) and domain.size is None
    if not ok:
        raise DomainError(f"the metric {metric.name} is not defined on the domain {domain}")
