from fractions import Fraction

import numpy as np
import pytest

from dpkit.core import (
    AddRemoveDistance,
    L1Distance,
    L2Distance,
    PrivacyFilter,
    PureDP,
    Transformation,
    calibrate_scale,
    make_sequential_composition,
)
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms import make_discrete_gaussian, make_discrete_laplace


def count_transformation(stability: int = 1) -> Transformation:
    return Transformation(lambda rows: np.array([len(rows)]), AddRemoveDistance(),
                          L1Distance(), lambda d: Fraction(d) * stability, "count")


def test_chain_maps_compose():
    m = count_transformation(3) >> make_discrete_laplace(6)
    assert m.privacy_map(1) == PureDP(Fraction(1, 2))
    assert m.check(2, PureDP(1)) and not m.check(3, PureDP(1))
    out = m(list(range(10)))
    assert out.shape == (1,)
    post = m >> (lambda x: int(x[0]))
    assert isinstance(post(list(range(10))), int)
    assert post.privacy_map(1) == m.privacy_map(1)  # post-processing is free


def test_chain_rejects_metric_mismatch():
    with pytest.raises(DomainError):
        _ = count_transformation() >> make_discrete_gaussian(1)  # L1 output, L2 input
    t2 = Transformation(lambda x: x, L1Distance(), L2Distance(), lambda d: d)
    assert (count_transformation() >> t2).output_metric == L2Distance()


def test_sequential_composition_sums():
    comp = make_sequential_composition([make_discrete_laplace(2), make_discrete_laplace(4)])
    assert comp.privacy_map(1) == PureDP(Fraction(3, 4))
    a, b = comp(np.array([0, 0]))
    assert a.shape == b.shape == (2,)


def test_privacy_filter_refuses_overrun_and_debits_nothing():
    f = PrivacyFilter(PureDP(1))
    m = make_discrete_laplace(2)  # ε = 1/2 at d_in = 1
    f.invoke(m, np.array([1]))
    f.invoke(m, np.array([1]))
    assert f.spent == PureDP(1) and f.remaining == PureDP(0)
    with pytest.raises(BudgetExceededError):
        f.invoke(m, np.array([1]))
    assert f.spent == PureDP(1)


def test_calibrate_scale_finds_smallest_passing_scale():
    target = PureDP(Fraction(1, 3))
    scale = calibrate_scale(lambda s: count_transformation(2) >> make_discrete_laplace(s), 1,
                            target)
    assert (count_transformation(2) >> make_discrete_laplace(scale)).check(1, target)
    assert abs(scale - 6) < Fraction(1, 10**6)
    exact = calibrate_scale(lambda s: make_discrete_laplace(s), 2, target, start=Fraction(6))
    assert exact == 6
