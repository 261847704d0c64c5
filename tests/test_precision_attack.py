"""Regression for floating-point precision attacks (Mironov 2012; Haney et al. 2022).

Releasing x = 0 and x = 1 many times with the same scale: every output of both lies on the
same grid 2^k ℤ, so the distinguishing event "the output is not on the grid the other input
can reach" never occurs. The textbook float mechanism (the broken variant, built here in the
test from float noise) triggers it."""

import numpy as np

from dpkit.core.samplers import grid_exponent
from dpkit.mechanisms import make_gaussian, make_laplace
from dpkit.mechanisms._common import representable_scale


def on_grid(values: np.ndarray, k: int) -> np.ndarray:
    scaled = np.ldexp(values, -k)
    return scaled == np.round(scaled)


def test_grid_outputs_never_distinguish_inputs():
    for make in (make_laplace, make_gaussian):
        m = make(1.0, max_size=100_000)
        k = grid_exponent(representable_scale(1.0))
        out0 = m(np.zeros(100_000))
        out1 = m(np.ones(100_000))
        assert on_grid(out0, k).all() and on_grid(out1, k).all()


def test_textbook_float_laplace_is_caught():
    # broken variant: x + float Laplace noise from inverse-CDF on a float uniform
    u = np.frombuffer(np.random.SeedSequence().generate_state(100_000, np.uint64).tobytes(),
                      dtype=np.uint64)
    uniform = (u >> np.uint64(11)).astype(np.float64) * 2.0**-53 - 0.5
    noise = -np.sign(uniform) * np.log1p(-2 * np.abs(uniform))
    k = grid_exponent(representable_scale(1.0))
    assert not on_grid(0.0 + noise, k).all()
