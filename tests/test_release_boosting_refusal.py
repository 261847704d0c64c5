"""Boosting for queries is refused (dpkit.release.synthetic.boosting): the numbers behind the
refusal, recomputed here from the theorems' statements (Dwork & Roth Thm 6.1: T = log|Q|/η²
rounds and ε ≥ T·ε_base; Thm 4.5, eq. 4.3: SmallDB's records for accuracy α)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpkit.errors import DomainError
from dpkit.release.synthetic.boosting import boosting_floor
from dpkit.release.synthetic.domain import Domain
from dpkit.release.synthetic.median import MedianMechanism

ADULT_ROWS = 48_842


def test_the_default_setting_needs_more_records_than_adult_has():
    floor = boosting_floor()  # |X| = 2^10, |Q| = 300, η = 1/4, α = 1/10, k = 3, ε = 10
    assert floor.rounds == math.ceil(math.log(300) * 16) == 92
    assert floor.epsilon_base == 10 / 92
    need = 16 * math.log(1024) * math.log(3) + 4 * math.log(92 * 20)
    assert floor.records == math.ceil(need / ((10 / 92) * 0.1 ** 3))
    assert 1_390_000 < floor.records < 1_400_000 and floor.records > 28 * ADULT_ROWS
    assert floor.smalldb_records == math.ceil(math.log(3) / 0.05 ** 2) == 440
    assert math.isclose(floor.log10_candidates, math.log10(math.comb(1024 + 439, 440)),
                        rel_tol=1e-9)


def test_no_setting_of_alpha_or_k_brings_the_floor_to_adult():
    for alpha in (Fraction(1, 20), Fraction(1, 10), Fraction(1, 4)):
        for k in (3, 30, 300):
            assert boosting_floor(alpha=alpha, sampled=k).records > ADULT_ROWS


def test_the_floor_falls_with_epsilon_and_alpha():
    assert boosting_floor(epsilon=100).records < boosting_floor().records
    assert boosting_floor(alpha=Fraction(1, 4)).records < boosting_floor().records


def test_the_candidates_smalldb_needs_cannot_be_enumerated():
    """The median mechanism's enumeration refuses the candidate sets SmallDB would need on
    2^10 cells beyond m = 2 records, where Thm 4.2's √(ln|Q|/m) > 1 (vacuous)."""
    domain = Domain(("x",), (1024,))
    MedianMechanism.check(domain, 1, 10, size=2)  # C(1025, 2) = 524,800: allowed
    with pytest.raises(DomainError, match="candidate"):
        MedianMechanism.check(domain, 1, 10, size=3)
    assert math.sqrt(math.log(300) / 2) > 1


@pytest.mark.parametrize("bad", [{"cells": 1}, {"queries": 2}, {"sampled": True},
                                 {"eta": Fraction(1, 2)}, {"alpha": 0}, {"failure": 1},
                                 {"epsilon": 0}])
def test_bad_parameters_are_refused(bad):
    with pytest.raises(DomainError):
        boosting_floor(**bad)
