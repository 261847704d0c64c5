"""Crowd-blending with pre-sampling (Gehrke, Hay, Lui & Pass 2012): the derived δ′.

Attack: ``CrowdBlending.presampled_epsilon`` gave ε′ alone, so a crowd-blending release could
not be charged, and a δ′ "read off" the paper's e^{−Ω(k(1 − p)²)} with a guessed constant
would be unchecked. Now δ′ is derived (``CrowdBlending.presampled_delta``'s docstring) and:

- its closed form is checked against the exact tail it bounds, p·max_N P[Bin(N, p) ≥
  max(⌊γ(N + 1)⌋, k − 1)] in Fractions, on every small (k, p); a δ′ understated by reading
  the paper's Ω with the textbook Chernoff constant (p·exp(−k(1 − p)²/3)) is caught by
  the same check (at p = 1/10, k = 12 and 15);
- the whole theorem is checked on the exact output laws of suppression below k after
  sampling (every mask enumerated) on all neighbouring tables of up to 6 rows: the least δ
  at e^{ε′} = 1/(1 − p) is at most the exact tail and the closed form; a broken data side
  (suppression below k − 1 while k is claimed) is caught;
- the release debits (ε′, δ′) once and is refused before the debit when δ′ is not below the
  caller's δ, naming the least k that passes.
No test here is statistical (the audit case runs in tests/test_audit.py).
"""

from __future__ import annotations

import math
from fractions import Fraction

import polars as pl
import pytest
from tests import kanon_laws

from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import ApproxDP, CrowdBlending
from dpkit.errors import DomainError
from dpkit.release.generalization import Ranges, presampled_crowd_blending

PS = [Fraction(1, 10), Fraction(1, 5), Fraction(1, 3), Fraction(1, 2), Fraction(2, 3),
      Fraction(4, 5)]


def tail(n: int, threshold: int, p: Fraction) -> Fraction:
    """P[Bin(n, p) ≥ threshold], every term in Fractions."""
    return sum((Fraction(math.comb(n, j)) * p**j * (1 - p)**(n - j)
                for j in range(max(threshold, 0), n + 1)), Fraction(0))


def exact_delta(k: int, p: Fraction, n_max: int = 120) -> Fraction:
    """p·max_{N ≤ n_max} P[Bin(N, p) ≥ max(⌊γ(N + 1)⌋, k − 1)], γ = p(2 − p)."""
    gamma = p * (2 - p)
    return p * max(tail(n, max(math.floor(gamma * (n + 1)), k - 1), p)
                   for n in range(n_max + 1))


def applicable(k: int, p: Fraction) -> bool:
    return (k - 1) * p > 1 - p


@pytest.mark.parametrize("p", PS)
def test_closed_form_bounds_the_exact_tail(p):
    for k in range(2, 16):
        if applicable(k, p):
            assert exact_delta(k, p) <= CrowdBlending(k, 0).presampled_delta(p), (k, p)


def understated(k: int, p: Fraction) -> float:
    """Broken: the paper's e^{−Ω(k(1 − p)²)} read with the textbook Chernoff constant 1/3,
    p·exp(−k(1 − p)²/3)."""
    return float(p) * math.exp(-k * float((1 - p) ** 2) / 3)


def test_an_understated_closed_form_is_caught():
    caught = [(k, p) for p in PS for k in range(2, 16)
              if applicable(k, p) and exact_delta(k, p) > understated(k, p)]
    assert caught


def test_delta_falls_with_k_and_is_refused_below_one_over_p():
    values = [CrowdBlending(k, 0).presampled_delta(Fraction(1, 2)) for k in range(3, 60)]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)
    for k, p in [(2, Fraction(1, 2)), (5, Fraction(1, 5)), (1, Fraction(1, 2))]:
        with pytest.raises(DomainError):
            CrowdBlending(k, 0).presampled_delta(p)
    loss = CrowdBlending(50, 1).presampled_loss(Fraction(1, 2))
    assert loss.epsilon == CrowdBlending(50, 1).presampled_epsilon(Fraction(1, 2))
    assert loss.delta.numerator.bit_length() <= 65  # short for the ledger


# -- the whole theorem on exact laws of small tables ---------------------------------------

def worst_excess(p: Fraction, floor: int) -> Fraction:
    """The least δ at e^{ε′} = 1/(1 − p) (ε = 0: exact) over all neighbours, both ways."""
    return kanon_laws.worst_excess(p, floor, 1 / (1 - p))


@pytest.mark.parametrize(("k", "p"), [(3, Fraction(1, 2)), (4, Fraction(1, 2)),
                                      (3, Fraction(2, 3)), (5, Fraction(1, 3))])
def test_brute_force_neighbours_meet_the_derived_delta(k, p):
    worst = worst_excess(p, k)
    assert worst <= exact_delta(k, p) <= CrowdBlending(k, 0).presampled_delta(p)


def test_brute_force_catches_a_lower_suppression_threshold():
    """Broken: suppression below k − 1 = 2 while k = 3 is claimed."""
    p = Fraction(1, 2)
    assert worst_excess(p, 2) > exact_delta(3, p)


# -- the release -----------------------------------------------------------------------------

DATA = pl.DataFrame({"age": [23, 35, 35, 47, 61, 29] * 50})
AGE = {"age": Ranges([17, 30, 45, 91])}


def test_release_debits_the_presampled_loss_once():
    budget = PrivacyFilter(ApproxDP(10, Fraction(1, 100)))
    out = presampled_crowd_blending(DATA, AGE, k=50, p=Fraction(1, 2),
                                    delta=Fraction(1, 100), accountant=budget)
    assert out.loss == CrowdBlending(50, 0).presampled_loss(Fraction(1, 2))
    assert budget.spent == out.loss
    assert out.crowd_blending == CrowdBlending(50, 0)
    assert (out.groups["count"] >= 50).all()


@pytest.mark.parametrize("bad", [{"k": 20}, {"k": 2}, {"p": 0}, {"p": 1}, {"delta": 0},
                                 {"delta": 1}, {"schemes": {}}])
def test_refused_before_the_debit(bad):
    budget = PrivacyFilter(ApproxDP(10, Fraction(1, 2)))
    args = {"schemes": AGE, "k": 50, "p": Fraction(1, 2), "delta": Fraction(1, 100), **bad}
    with pytest.raises(DomainError):
        presampled_crowd_blending(DATA, args.pop("schemes"), accountant=budget, **args)
    assert budget.spent == ApproxDP.zero()


def test_refusal_names_the_k_that_passes():
    with pytest.raises(DomainError, match=r"k = (\d+) passes") as info:
        presampled_crowd_blending(DATA, AGE, k=20, p=Fraction(1, 2), delta=Fraction(1, 10**6))
    k = int(info.value.args[0].split("k = ")[-1].split()[0])
    assert CrowdBlending(k, 0).presampled_delta(Fraction(1, 2)) < Fraction(1, 10**6)
    assert CrowdBlending(k - 1, 0).presampled_delta(Fraction(1, 2)) >= Fraction(1, 10**6)
