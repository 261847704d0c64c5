"""Safe k-anonymisation (Li, Qardaji & Su 2012) and crowd-blending privacy (Gehrke, Hay, Lui
& Pass 2012).

- The (ε, δ) table at k = 20: δ = d(k, β, ε) of Li et al.'s Thm. 5, checked against a naive
  recomputation (every term summed in Fractions over a long range of n, γ at 80 digits).
  The paper's text was not accessible here: the printed values are computed from the
  theorem's formula, not copied from its Table 2.
- Brute force: on every pair of neighbouring tables of up to 6 rows over a two-value domain,
  the exact output law of the mechanism's data side (every sampling mask enumerated, with
  its probability in Fractions) satisfies P[M(D) ∈ S] ≤ e^ε P[M(D′) ∈ S] + δ for every S,
  both ways. Broken variants (no sampling while β = 1/2 is claimed; suppression below k − 1
  while k is claimed) are caught by the same check.
- The sampler: the released count's mean over 1200 real runs is within a Hoeffding bound at
  false-positive rate 1e-6 of its exact expectation; a broken sampler (β = 1) is caught.
- Plan-time validation: nothing is debited when a parameter is refused.
No test here is statistical except the sampler test (false-positive rate ≤ 1e-6).
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from tests import kanon_laws

import dpkit as dp
from dpkit.core import numbers
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import ApproxDP, CrowdBlending
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.release.generalization import (
    Ranges,
    Taxonomy,
    kanon_delta,
    kanon_loss,
    safe_k_anonymize,
)
from dpkit.release.generalization import kanon as kanon_module

# -- the (ε, δ) table -----------------------------------------------------------------------

# k = 20: δ = d(20, β, ε) to 4 significant digits, computed from Thm. 5's formula
TABLE = {
    (Fraction(1, 10), Fraction(1, 2)): 1.6063e-09, (Fraction(1, 10), Fraction(1)): 4.0725e-14,
    (Fraction(1, 10), Fraction(2)): 1.8910e-18, (Fraction(1, 5), Fraction(1, 2)): 8.0184e-06,
    (Fraction(1, 5), Fraction(1)): 6.0329e-09, (Fraction(1, 5), Fraction(2)): 1.5875e-12,
    (Fraction(3, 10), Fraction(1)): 1.1761e-06, (Fraction(2, 5), Fraction(1)): 5.3590e-05,
    (Fraction(1, 2), Fraction(1)): 7.7194e-04, (Fraction(1, 2), Fraction(2)): 1.0490e-05,
}


def naive_delta(k: int, beta: Fraction, epsilon: Fraction, span: int = 150) -> Fraction:
    """Thm. 5 summed term by term over n < ⌈k/γ − 1⌉ + span, γ at 80 digits."""
    ctx = decimal.Context(prec=80)
    e = ctx.exp(decimal.Decimal(epsilon.numerator) / decimal.Decimal(epsilon.denominator))
    gamma = Fraction((e - 1 + decimal.Decimal(beta.numerator) / beta.denominator) / e)
    start = math.ceil(k / gamma - 1)
    best = Fraction(0)
    for n in range(start, start + span):
        first = math.floor(gamma * n) + 1
        best = max(best, sum(Fraction(math.comb(n, j)) * beta**j * (1 - beta)**(n - j)
                             for j in range(first, n + 1)))
    return best


@pytest.mark.parametrize(("beta", "epsilon"), sorted(TABLE))
def test_delta_table(beta, epsilon):
    delta = kanon_delta(20, beta, epsilon)
    assert isinstance(delta, Fraction)
    assert delta == naive_delta(20, beta, epsilon)
    assert float(f"{float(delta):.4e}") == TABLE[beta, epsilon]


def test_delta_is_monotone():
    """δ falls as ε or k grows and rises with β (at fixed k, ε)."""
    b = Fraction(1, 5)
    assert kanon_delta(20, b, 1) > kanon_delta(20, b, 2) > kanon_delta(30, b, 2)
    assert kanon_delta(20, Fraction(1, 10), 1) < kanon_delta(20, b, 1)


def test_charged_delta_is_rounded_up_and_short():
    exact = kanon_delta(20, Fraction(1, 10), 1)
    loss = kanon_loss(20, Fraction(1, 10), 1)
    assert loss.epsilon == 1 and exact <= loss.delta <= exact * (1 + Fraction(1, 2**62))
    assert loss.delta.numerator.bit_length() <= 65  # 64 significant bits


def test_small_case_by_hand():
    """k = 2, β = 1/2, ε = 1: γ = 1 − 1/(2e) ≈ 0.816, n ≥ ⌈2/γ − 1⌉ = 2, tails 1/4, 1/8, …"""
    assert kanon_delta(2, Fraction(1, 2), 1) == Fraction(1, 4)


# -- brute force on neighbouring tables -----------------------------------------------------

CASES = [(Fraction(1, 2), 2, Fraction(1)), (Fraction(1, 2), 3, Fraction(3, 4)),
         (Fraction(1, 3), 2, Fraction(1, 2)), (Fraction(1, 4), 2, Fraction(2))]


def worst_excess(beta: Fraction, k: int, epsilon: Fraction, *, floor: int | None = None
                 ) -> Fraction:
    """The least δ at e^ε over all neighbours; ``floor`` (a broken variant) suppresses
    below it instead of k."""
    # a smaller e^ε only makes the check stricter
    return kanon_laws.worst_excess(beta, floor or k, numbers.exp_down(epsilon))


@pytest.mark.parametrize(("beta", "k", "epsilon"), CASES)
def test_brute_force_neighbours_meet_the_claim(beta, k, epsilon):
    assert worst_excess(beta, k, epsilon) <= kanon_delta(k, beta, epsilon)


def test_brute_force_catches_no_sampling():
    """Broken: every row kept (β = 1) while (ε, δ) is claimed for β = 1/2."""
    claimed = kanon_delta(2, Fraction(1, 2), 1)
    assert worst_excess(Fraction(1), 2, Fraction(1)) > claimed


def test_brute_force_catches_a_lower_suppression_threshold():
    """Broken: groups suppressed below k − 1 = 2 while k = 3 is claimed."""
    beta, eps = Fraction(1, 2), Fraction(3, 4)
    assert worst_excess(beta, 3, eps, floor=2) > kanon_delta(3, beta, eps)


# -- the real mechanism ---------------------------------------------------------------------

ADULTISH = pl.DataFrame({"age": [23, 35, 35, 47, 61, 29] * 50,
                         "sex": ["Male", "Female", "Male", "Male", "Female", "Male"] * 50})
AGE = Ranges([17, 30, 45, 91])
SEX = Taxonomy({"Male": "*", "Female": "*"}, level=0)


def test_release_is_k_anonymous_and_generalised():
    out = safe_k_anonymize(ADULTISH, {"age": AGE, "sex": SEX}, k=5, beta=Fraction(1, 2),
                           epsilon=1)
    assert out.groups.columns == ["age", "sex", "count"]
    assert (out.groups["count"] >= 5).all()
    assert set(out.groups["age"]) <= set(AGE.labels()) | {"*"}
    assert out.table.height == out.groups["count"].sum()
    assert out.crowd_blending == CrowdBlending(5, 0)
    assert out.loss == kanon_loss(5, Fraction(1, 2), 1)


def test_data_side_is_total_on_odd_values():
    odd = pl.DataFrame({"age": ["x", None, "1e9", "-3", "NaN", "40"],
                        "sex": [None, "other", "Male", "", "Female", "Male"]})
    table = kanon_module._generalise(odd, {"age": AGE, "sex": SEX})
    assert table["age"].to_list() == ["*", "*", "*", "*", "*", "[30, 45)"]
    assert table["sex"].to_list() == ["*", "*", "Male", "*", "Female", "Male"]
    typed = pl.DataFrame({"age": pl.Series([None, True, False], dtype=pl.Boolean),
                          "sex": pl.Series(["Male", None, "x"], dtype=pl.Categorical)})
    out = safe_k_anonymize(typed, {"age": AGE, "sex": SEX}, k=2, beta=Fraction(1, 2),
                           epsilon=1)
    assert set(out.groups.columns) == {"age", "sex", "count"}


def test_taxonomy_levels():
    tree = Taxonomy({"Bachelors": "Higher", "Masters": "Higher", "Higher": "Any",
                     "HS-grad": "Any"}, level=1)
    assert [tree.ancestor(v) for v in ("Bachelors", "HS-grad", "Any")] == [
        "Higher", "Any", "Any"]
    assert Taxonomy(tree.parent, level=5).ancestor("Masters") == "Any"


def mean_count(runs: int) -> float:
    data = pl.DataFrame({"q": ["x"] * 6})
    scheme = {"q": Taxonomy({"x": "*"}, level=0)}
    total = 0
    for _ in range(runs):
        counts = safe_k_anonymize(data, scheme, k=2, beta=Fraction(1, 2), epsilon=1
                                  ).groups["count"]
        total += int(counts.sum())
    return total / runs


def test_sampling_law(monkeypatch):
    """Released count on 6 rows of one value, k = 2, β = 1/2: E = 3 − 6/64. Hoeffding on
    1200 runs of a variable in [0, 6]: |mean − E| ≤ 6·√(ln(2/1e-6)/2400) ≈ 0.466 fails a
    correct sampler with probability ≤ 1e-6. Broken (every row kept): mean 6."""
    bound = 6 * math.sqrt(math.log(2 / 1e-6) / (2 * 1200))
    assert abs(mean_count(1200) - (3 - 6 / 64)) <= bound
    monkeypatch.setattr(kanon_module, "_keep", lambda size, beta: np.ones(size, dtype=bool))
    assert abs(mean_count(200) - (3 - 6 / 64)) > bound


def test_charged_once_through_a_session():
    session = dp.Session(ADULTISH, privacy_unit=dp.PrivacyUnit.rows(),
                         budget=dp.ApproxDP(2, Fraction(1, 5)))
    out = safe_k_anonymize(ADULTISH, {"age": AGE}, k=5, beta=Fraction(1, 2), epsilon=1,
                           accountant=session)
    assert session.last_release.loss == out.loss
    assert "safe k-anonymisation" in session.last_release.description
    with pytest.raises(BudgetExceededError):
        safe_k_anonymize(ADULTISH, {"age": AGE}, k=5, beta=Fraction(1, 2), epsilon=1,
                         accountant=session)


# -- plan-time validation: refused before the debit -----------------------------------------

@pytest.mark.parametrize("bad", [
    {"beta": 0}, {"beta": 1}, {"beta": Fraction(3, 2)}, {"beta": -0.1},
    {"beta": Fraction(1, 2**40)}, {"k": 1}, {"k": 2.5}, {"k": True}, {"k": 10**6},
    {"epsilon": Fraction(1, 2)},  # below −ln(1 − 1/2) ≈ 0.693
    {"epsilon": -1}, {"schemes": {}}, {"schemes": {"nope": AGE}},
    {"schemes": {"age": (17, 30)}}, {"data": {"age": [1, 2]}},
    {"data": pl.DataFrame({"age": [[1, 2], [3]]})},  # a nested column: refused up front
])
def test_plan_time_validation(bad):
    budget = PrivacyFilter(ApproxDP(10, Fraction(1, 2)))
    args = {"data": ADULTISH, "schemes": {"age": AGE}, "k": 5, "beta": Fraction(1, 2),
            "epsilon": 1, **bad}
    with pytest.raises(DomainError):
        safe_k_anonymize(args.pop("data"), args.pop("schemes"), accountant=budget, **args)
    assert budget.spent == ApproxDP.zero()


def test_person_level_unit_refused():
    data = ADULTISH.with_columns(pl.Series("id", list(range(150)) * 2))
    session = dp.Session(data, privacy_unit=dp.PrivacyUnit.by("id", 2),
                         budget=dp.ApproxDP(5, Fraction(1, 10)))
    with pytest.raises(DomainError, match="one row per person"):
        safe_k_anonymize(data, {"age": AGE}, k=5, beta=Fraction(1, 2), epsilon=1,
                         accountant=session)


@pytest.mark.parametrize("edges", [[1], [3, 2], [1, float("inf")], "ab", 5])
def test_ranges_validation(edges):
    with pytest.raises(DomainError):
        Ranges(edges)


def test_taxonomy_validation():
    with pytest.raises(DomainError, match="cycle"):
        Taxonomy({"a": "b", "b": "a"})
    for bad in ({}, {"a": 1}, [("a", "b")]):
        with pytest.raises(DomainError):
            Taxonomy(bad)


# -- crowd-blending privacy -----------------------------------------------------------------

def test_crowd_blending_order():
    assert CrowdBlending(10, Fraction(1, 2)) <= CrowdBlending(5, 1)
    assert CrowdBlending(10, Fraction(1, 2)) < CrowdBlending(5, 1)
    assert not CrowdBlending(4, Fraction(1, 2)) <= CrowdBlending(5, 1)
    assert not CrowdBlending(10, 2) <= CrowdBlending(5, 1)
    with pytest.raises(DomainError):
        CrowdBlending(0, 1)
    with pytest.raises(DomainError):
        CrowdBlending(2, -1)


def test_presampled_epsilon_worked_values():
    """ε′ = ln(p(2 − p)/(1 − p)·e^ε + 1 − p): p = 1/2, ε = 0 gives ln 2; p = 1/2, ε = 1
    gives ln(3e/2 + 1/2) ≈ 1.4834; p = 1/10, ε = 0 gives ln(1 + 1/9) ≈ 0.10536."""
    cases = [(Fraction(1, 2), 0, math.log(2)), (Fraction(1, 2), 1, math.log(1.5 * math.e + .5)),
             (Fraction(1, 10), 0, math.log(1 + 1 / 9))]
    for p, eps, expected in cases:
        got = CrowdBlending(2, eps).presampled_epsilon(p)
        assert isinstance(got, Fraction)
        assert abs(float(got) - expected) < 1e-12
    # rounded up: at ε = 0 the argument is rational, ln 2 and ln(10/9) exactly
    assert CrowdBlending(2, 0).presampled_epsilon(Fraction(1, 2)) >= numbers.log_down(
        Fraction(2))
    assert CrowdBlending(2, 0).presampled_epsilon(Fraction(1, 10)) >= numbers.log_down(
        Fraction(10, 9))


def test_presampled_epsilon_is_monotone():
    ps = [Fraction(i, 20) for i in range(1, 20)]
    for eps in (0, Fraction(1, 2), 2):
        values = [CrowdBlending(5, eps).presampled_epsilon(p) for p in ps]
        assert values == sorted(values) and len(set(values)) == len(values)
    at = [CrowdBlending(5, e).presampled_epsilon(Fraction(1, 4)) for e in (0, 1, 2, 3)]
    assert at == sorted(at)


@pytest.mark.parametrize(("k", "p"), [(1, Fraction(1, 2)), (2, 0), (2, 1), (2, 2)])
def test_presampled_epsilon_refuses(k, p):
    with pytest.raises(DomainError):
        CrowdBlending(k, 1).presampled_epsilon(p)


# -- the audit case ------------------------------------------------------------------------

def test_audit_case_passes_and_broken_is_flagged():
    """The registered case: k = 2, β = 1/2, ε = 1, δ = 1/4 on x = two rows, x′ = three.
    The lower bound is certified at confidence 1 − 1e-6 (false-positive rate ≤ 1e-6); the
    histogram test's majority of 9 votes fails a correct mechanism with probability < 1e-11.
    Broken (no sampling): the outputs on x and x′ are disjoint, so it is flagged."""
    from dpkit.audit import CASES, run_audit

    case = CASES["safe_k_anonymize"]
    good = run_audit(case, 20_000, confidence=1 - 1e-6)
    assert good.histogram_passed and good.lower_bound <= good.claimed_epsilon
    bad = run_audit(case, 20_000, broken=True, confidence=1 - 1e-6)
    assert (not bad.histogram_passed) or bad.lower_bound > bad.claimed_epsilon
