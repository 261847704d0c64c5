"""Spies on the front-end kit's draws (:mod:`dpkit.mechanisms.frontend`), shared by the
tests of the front ends that draw through it."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from dpkit.core.record import NoiseRow
from dpkit.mechanisms import frontend

_SELECT = frontend.select
_NOISY = frontend.noisy


def spy_select(monkeypatch, record) -> None:
    """Call ``record(scores, scale, k)`` before every ``frontend.select`` draw (``scale``:
    the per-pick temperature the kit calibrated); the draw itself is the real one."""
    def fake(scores, sensitivity, budget, **kw):
        out = _SELECT(scores, sensitivity, budget, **kw)
        record(scores, Fraction(out.row.scale), kw.get("k") or 1)
        return out

    monkeypatch.setattr(frontend, "select", fake)


def replace_select(monkeypatch, pick) -> None:
    """Every ``frontend.select`` draw (k = 1) is ``pick(scores, scale)`` instead."""
    def fake(scores, sensitivity, budget, **kw):
        row = frontend.selection_row(sensitivity, budget, k=kw.get("k") or 1,
                                     monotonic=kw.get("monotonic", False))
        return frontend.Drawn(pick(scores, Fraction(row.scale)), row)

    monkeypatch.setattr(frontend, "select", fake)


def spy_noisy(monkeypatch, record) -> None:
    """Call ``record(values, sensitivity, budget)`` before every ``frontend.noisy`` draw."""
    def fake(values, sensitivity, budget, **kw):
        record(values, sensitivity, budget)
        return _NOISY(values, sensitivity, budget, **kw)

    monkeypatch.setattr(frontend, "noisy", fake)


def spy_rows(monkeypatch, names: Sequence[str] = ("noisy",)) -> list[NoiseRow]:
    """The row of every draw made through the kit's ``names`` (``noisy``, ``select``), in
    order; the draws themselves are the real ones."""
    rows: list[NoiseRow] = []
    for name in names:
        real = getattr(frontend, name)

        def spy(*args, _real=real, **kwargs):
            out = _real(*args, **kwargs)
            rows.append(out.row)
            return out

        monkeypatch.setattr(frontend, name, spy)
    return rows
