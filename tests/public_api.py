"""dpkit's public callables and their parameters, found with ``inspect`` (for the naming and
typing tests): every module whose dotted name has no ``_``-prefixed part, the functions and
classes it defines (not re-exports) whose names do not start with ``_``, and each class's
public methods and ``__init__``. ``self``/``cls`` are not parameters; ``*args``/``**kwargs``
are."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from types import ModuleType

import dpkit


def modules() -> Iterator[ModuleType]:
    yield dpkit
    for info in pkgutil.walk_packages(dpkit.__path__, "dpkit."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield importlib.import_module(info.name)


def _own(module: ModuleType) -> Iterator[tuple[str, object]]:
    for name, obj in vars(module).items():
        if (not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                and getattr(obj, "__module__", None) == module.__name__):
            yield name, obj


def callables() -> Iterator[tuple[str, Callable[..., object]]]:
    """(qualified name, function) for every public function and method."""
    for module in modules():
        for name, obj in _own(module):
            where = f"{module.__name__}.{name}"
            if inspect.isfunction(obj):
                yield where, obj
                continue
            for attr, member in vars(obj).items():
                if isinstance(member, staticmethod | classmethod):
                    member = member.__func__
                if inspect.isfunction(member) and (attr == "__init__"
                                                   or not attr.startswith("_")):
                    yield f"{where}.{attr}", member


def parameters() -> Iterator[tuple[str, inspect.Parameter]]:
    """(qualified name, parameter) for every parameter of a public callable."""
    seen = set()
    for where, fn in callables():
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        for p in inspect.signature(fn).parameters.values():
            if p.name not in ("self", "cls"):
                yield where, p
