"""A spy on dpkit.learn's grid Laplace releases (all drawn through
:func:`dpkit.mechanisms.frontend.noisy`), shared by the learn tests."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit.mechanisms import frontend, make_noise

_REAL = frontend.noisy  # the kit's own draw, whatever a test patches in


def laplace_noise(values, sensitivity, epsilon) -> np.ndarray:
    """The grid Laplace release a learn model makes: ``values`` of L1 sensitivity Δ at ε."""
    return _REAL(values, sensitivity, epsilon, output="grid").value


def grid_mechanism(sensitivity, epsilon, size):
    """The calibrated measurement behind :func:`laplace_noise` for ``size`` coordinates."""
    return make_noise(sensitivity, epsilon=epsilon, output="grid", size=size)


def patch_laplace_noise(monkeypatch, release) -> None:
    """Every grid L1 release of the kit goes through ``release(values, Δ, ε)`` instead (the
    noise row is the real calibration's); other draws are the real ones."""
    def fake(values, sensitivity, budget, **kw):
        if kw.get("output") != "grid" or kw.get("norm") not in (None, "l1"):
            return _REAL(values, sensitivity, budget, **kw)
        row = frontend.noise_row(sensitivity, budget, output="grid")
        return frontend.Drawn(release(values, sensitivity, budget), row)

    monkeypatch.setattr(frontend, "noisy", fake)


def spy_laplace_noise(monkeypatch, *modules) -> list[tuple[int, Fraction, Fraction]]:
    """Record (size, Δ, ε) of every grid Laplace release (``modules`` is kept for the old
    call form; the kit is patched once for all); the noise itself is the real one."""
    calls: list[tuple[int, Fraction, Fraction]] = []

    def spy(values, sensitivity, epsilon):
        calls.append((np.asarray(values).size, Fraction(sensitivity), Fraction(epsilon)))
        return laplace_noise(values, sensitivity, epsilon)

    patch_laplace_noise(monkeypatch, spy)
    return calls
