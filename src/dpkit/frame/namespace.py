"""Namespaces on :class:`~dpkit.frame.Query`: how packages below ``frame`` add methods to a
query without ``frame`` importing them (in the spirit of Polars' ``register_*_namespace``).

A package registers a class under a name; ``query.<name>`` is then an instance of it bound to
the query (``query.publish.histogram(…)`` once :mod:`dpkit.release` is imported). The
package's own import registers it, so the import order follows the layer map
(docs/architecture.md): ``release`` imports ``frame``, never the reverse. ``dpkit/__init__.py``
declares which module provides each built-in namespace (:func:`provide_query_namespace`), so
the namespace is there after ``import dpkit`` and the module is imported on first use only.
"""

from __future__ import annotations

import importlib
import keyword
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

from dpkit.errors import DomainError
from dpkit.frame.query import Query

__all__ = ["register_query_namespace", "provide_query_namespace"]

T = TypeVar("T", bound=type)


class _Namespace:
    """The descriptor ``Query.<name>``: the class on the class, an instance on a query."""

    def __init__(self, name: str, cls: type) -> None:
        self.name, self.cls = name, cls

    def __get__(self, query: Any, owner: type) -> Any:
        return self.cls if query is None else self.cls(query)


class _Provided:
    """A namespace whose module is not imported yet: importing it registers the namespace."""

    def __init__(self, name: str, module: str) -> None:
        self.name, self.module = name, module

    def __get__(self, query: Any, owner: type) -> Any:
        importlib.import_module(self.module)
        registered = owner.__dict__[self.name]
        if not isinstance(registered, _Namespace):
            raise DomainError(f"importing {self.module} did not register the query namespace "
                              f"{self.name!r}")
        return registered.__get__(query, owner)


def _check_name(name: Any) -> None:
    if not (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
            and not name.startswith("_")):
        raise DomainError(f"a query namespace needs a public identifier, not {name!r}")
    if isinstance(Query.__dict__.get(name), _Namespace | _Provided):
        return  # a namespace again: replaced
    if name in {f.name for f in fields(Query)} or hasattr(Query, name):
        raise DomainError(f"Query.{name} exists; a namespace never replaces a query attribute")


def register_query_namespace(name: str) -> Callable[[T], T]:
    """Class decorator: ``query.<name>`` becomes ``cls(query)``.

    Parameters
    ----------
    name : str
        A public identifier that is not already a :class:`~dpkit.frame.Query` attribute
        (registering a namespace name again replaces the previous class).

    Returns
    -------
    callable
        The decorator; it returns the class unchanged.

    Raises
    ------
    DomainError
        For a name that is not a public identifier or that would shadow a query method,
        attribute or field.

    Examples
    --------
    >>> @register_query_namespace("mine")        # doctest: +SKIP
    ... class Mine:
    ...     def __init__(self, query): self.query = query
    """
    _check_name(name)

    def decorate(cls: T) -> T:
        setattr(Query, name, _Namespace(name, cls))
        return cls
    return decorate


def provide_query_namespace(name: str, module: str) -> None:
    """Declare that importing ``module`` registers the namespace ``name``; the module is
    imported the first time ``query.<name>`` is read (keeps ``import dpkit`` light).

    Raises
    ------
    DomainError
        As :func:`register_query_namespace`; on first use, if the module did not register it.
    """
    _check_name(name)
    if not isinstance(Query.__dict__.get(name), _Namespace):
        setattr(Query, name, _Provided(name, module))
