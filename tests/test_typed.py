"""Public parameters carry real types (issue 31, item 7): the share of dpkit's public function
and method parameters annotated ``Any`` (alone or ``Any | None``: a type that says nothing) is
below 5%. ``Mapping[str, Any]`` and the like count as typed (their shape is stated).
dpkit.learn's ``X``/``y`` are counted like the rest. The walk is tests/public_api.py (every
public module, what it defines, public methods and ``__init__``, ``*args``/``**kwargs``
included)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

import public_api

UNTYPED = re.compile(r"(typing\.)?Any( \| None)?|None \| Any|Optional\[Any\]")
LIMIT = 0.05


def untyped(parameter: inspect.Parameter) -> bool:
    """Whether the annotation is ``Any`` (a string under ``from __future__ import
    annotations``, the object otherwise)."""
    ann = parameter.annotation
    text = "Any" if ann is Any else str(ann)
    return bool(UNTYPED.fullmatch(text.strip()))


def any_share() -> tuple[int, int, list[str]]:
    found = list(public_api.parameters())
    loose = [f"{where}({p.name})" for where, p in found if untyped(p)]
    return len(loose), len(found), loose


def test_public_parameters_are_typed():
    loose, total, names = any_share()
    assert loose < LIMIT * total, (
        f"{loose}/{total} = {loose / total:.1%} public parameters are Any (limit "
        f"{LIMIT:.0%}):\n" + "\n".join(names))


def test_the_counter_sees_any_and_only_any():
    """The broken variant: each form of an untyped parameter is caught, a typed one is not."""
    def f(a: Any, b: Any | None, c: None | Any, e: Mapping[str, Any], g: int, h=None):
        return a

    marks = {p.name: untyped(p) for p in inspect.signature(f).parameters.values()}
    assert marks == {"a": True, "b": True, "c": True, "e": False, "g": False, "h": False}
    typed = inspect.Parameter("x", inspect.Parameter.KEYWORD_ONLY, annotation=Any)
    assert untyped(typed)  # an annotation object, as without the __future__ import
