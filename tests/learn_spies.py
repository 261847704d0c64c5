"""A spy on dpkit.learn's grid Laplace releases, shared by the learn tests."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit.learn import _privacy


def spy_laplace_noise(monkeypatch, *modules) -> list[tuple[int, Fraction, Fraction]]:
    """Record (size, Δ, ε) of every ``laplace_noise`` call made through ``modules`` (the
    name each imported); the noise itself is the real one."""
    calls: list[tuple[int, Fraction, Fraction]] = []
    real = _privacy.laplace_noise

    def spy(values, sensitivity, epsilon):
        calls.append((np.asarray(values).size, Fraction(sensitivity), Fraction(epsilon)))
        return real(values, sensitivity, epsilon)

    for module in modules:
        monkeypatch.setattr(module, "laplace_noise", spy)
    return calls
