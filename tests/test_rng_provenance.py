"""No noise comes from numpy.random or random: patch both to raise and run everything."""

import random

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit import mechanisms as M  # noqa: N812


@pytest.fixture
def no_insecure_random(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("insecure randomness used")

    for name in dir(np.random):
        if not name.startswith("_") and callable(getattr(np.random, name)):
            monkeypatch.setattr(np.random, name, boom)
    for name in ("random", "randint", "randrange", "uniform", "gauss", "choice", "choices",
                 "shuffle", "sample", "getrandbits", "expovariate", "normalvariate"):
        monkeypatch.setattr(random, name, boom)


def test_every_mechanism_uses_the_csprng(no_insecure_random):
    assert M.make_laplace(1)(np.zeros(5)).shape == (5,)
    assert M.make_discrete_laplace(1)(np.zeros(5, dtype=int)).shape == (5,)
    assert M.make_gaussian(1)(np.zeros(5)).shape == (5,)
    assert M.make_discrete_gaussian(1)(np.zeros(5, dtype=int)).shape == (5,)
    assert M.make_exponential(1)(np.array([1.0, 2.0])) in (0, 1)
    assert M.make_randomized_response([0, 1], 1)(np.array([0, 1])).shape == (2,)


def test_session_release_uses_the_csprng(no_insecure_random):
    df = pl.DataFrame({"id": [1, 1, 2, 3], "x": [1.0, 2.0, 3.0, 4.0], "g": ["a", "b", "a", "b"]})
    s = dp.Session(df, privacy_unit=dp.PrivacyUnit.by("id", 1), budget=dp.PureDP(1))
    res = s.query().group_by("g", keys=["a", "b"]).agg(
        dp.count(), dp.mean("x", bounds=(0, 5)), dp.quantile("x", 0.5, bounds=(0, 5))
    ).release(epsilon=1)
    assert res.height == 2
