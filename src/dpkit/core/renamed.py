"""Deprecated keyword names (issue 31, item 6): a public parameter that was renamed keeps its
old keyword for a while, with a DeprecationWarning, through one decorator.

``@renamed(sigma="scale")`` maps ``f(sigma=x)`` to ``f(scale=x)``;
``@renamed(alpha=("confidence", complement))`` also converts the value (α = 1 − confidence).
Positional calls are untouched; ``inspect.signature`` shows the new names only."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["renamed", "complement"]

P = ParamSpec("P")
R = TypeVar("R")
Rename = str | tuple[str, Callable[[float], float]]


def complement(level: float) -> float:
    """1 − level: a significance α as a confidence, or back."""
    return 1 - level


def renamed(**old: Rename) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Accept each old keyword for its new name, with a DeprecationWarning.

    Parameters
    ----------
    **old : str or (str, callable)
        ``old_name=new_name``, or ``old_name=(new_name, convert)`` when the value changes
        meaning too (``convert`` maps an old value to the new parameter's).

    Returns
    -------
    callable
        A decorator; the wrapped function has the new signature (``functools.wraps``).

    Raises
    ------
    TypeError
        (from the wrapped call) If both the old and the new keyword are passed.
    """
    table = {k: (v, None) if isinstance(v, str) else v for k, v in old.items()}

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            for name, (new, convert) in table.items():
                if name not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{fn.__qualname__}: pass {new}= only ({name}= is its "
                                    "deprecated name)")
                warnings.warn(f"{fn.__qualname__}({name}=…) is deprecated: use {new}=",
                              DeprecationWarning, stacklevel=2)
                value = kwargs.pop(name)
                kwargs[new] = value if convert is None else convert(value)  # type: ignore[arg-type]
            return fn(*args, **kwargs)

        return inner

    return wrap
