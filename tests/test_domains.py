"""Input domains (dpkit.core.domains): membership, the metric-space check at construction,
and the call-time check that refuses out-of-domain data before any noise is drawn.

Attacks: a component whose metric is not defined on its inputs (an L1 distance between
category labels; add/remove neighbours of a fixed-size vector) was accepted, so its privacy
map was about nothing; ``make_exponential_many`` truncated float scores to integers after
the caller had bounded their sensitivity (truncation can double a change of 1 into 2), and
``make_partition_selection`` / ``make_tree_quantile`` did the same to fractional counts, all
drawing noise for a claim that no longer held; randomized response put the refused value in
its error message (a data value in a log)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.core import rng
from dpkit.core.component import Measurement, Transformation
from dpkit.core.domains import (
    AnyDomain,
    AtomDomain,
    CategoricalDomain,
    Kind,
    VectorDomain,
    check_space,
)
from dpkit.core.measures import PureDP
from dpkit.core.metrics import (
    AddRemoveDistance,
    HammingDistance,
    L1Distance,
    L2Distance,
    LInfDistance,
)
from dpkit.errors import DomainError
from dpkit.mechanisms import (
    make_discrete_laplace,
    make_exponential_many,
    make_laplace,
    make_randomized_response,
    make_vector_laplace,
)
from dpkit.mechanisms.partition_selection import PartitionSelection, make_partition_selection
from dpkit.mechanisms.tree_quantile import make_tree_quantile


@pytest.fixture
def draws(monkeypatch):
    """Counts the calls to the one entry of random bits (dpkit.core.rng.random_bytes)."""
    calls = []
    real = rng.random_bytes

    def spy(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(rng, "random_bytes", spy)
    return calls


# -- membership ---------------------------------------------------------------------------

def test_atom_membership_is_elementwise_and_exact():
    floats = AtomDomain(Kind.FLOAT, (Fraction(1, 10), 1))
    x = np.array([0.1, 0.09999999999999999, 1.0, np.nan, np.inf])
    # 0.1 (the float) is above 1/10, its predecessor below: bounds compare exactly
    assert floats.member(x).tolist() == [True, False, True, False, False]
    assert AtomDomain("float", nan=True).member(x).tolist() == [True] * 5
    assert AtomDomain("float", infinity=False).member(x).tolist() == [True] * 3 + [False] * 2
    ints = AtomDomain(Kind.INTEGER, (0, None))
    assert ints.member(np.array([-1, 0, 2**62])).tolist() == [False, True, True]
    assert ints.member(np.array([0.0])).tolist() == [False]  # floats are not integers
    assert ints.member(np.array([True, False])).all()  # bools count as 0/1
    big = np.array([2**64 - 1], dtype=np.uint64)
    assert AtomDomain(Kind.INTEGER, (None, 2**63)).member(big).tolist() == [False]
    objects = np.array([Fraction(1, 2), 3, "a", None], dtype=object)
    assert AtomDomain(Kind.FLOAT).member(objects).tolist() == [True, True, False, False]
    assert AtomDomain(Kind.BOOL).member(np.array([True, 1], dtype=object)).tolist() == [
        True, False]


def test_vector_and_categorical_membership():
    v = VectorDomain(AtomDomain(Kind.FLOAT), size=3)
    assert v.member([1, 2, 3]) and not v.member([1, 2]) and not v.member(np.zeros((2, 2)))
    assert not VectorDomain(AtomDomain(Kind.FLOAT), max_size=2).member(np.zeros(3))
    assert VectorDomain(AtomDomain(Kind.INTEGER)).member(5)  # a scalar is a vector of one
    cats = VectorDomain(CategoricalDomain(["a", 1]))
    assert cats.member(["a", 1, 1]) and not cats.member(["a", "1"])
    assert not cats.member([["unhashable"]])
    rows = VectorDomain(VectorDomain(AtomDomain(Kind.INTEGER), size=2))
    assert rows.member(np.zeros((4, 2), dtype=int)) and rows.member([])
    assert not rows.member(np.zeros((4, 3), dtype=int)) and not rows.member(np.zeros(4))
    ragged = VectorDomain(VectorDomain(AtomDomain(Kind.INTEGER)))
    assert ragged.member([np.array([1, 2]), np.array([3])])
    assert not ragged.member([np.array([1, 2]), np.array([0.5])])
    assert VectorDomain(AnyDomain()).member(["x", None]) and not VectorDomain(
        AnyDomain()).member(3)


def test_bad_domains_are_refused():
    with pytest.raises(DomainError):
        AtomDomain("complex")
    with pytest.raises(DomainError):
        AtomDomain(Kind.FLOAT, (1, 0))
    with pytest.raises(DomainError):
        AtomDomain(Kind.FLOAT, (0, float("inf")))
    with pytest.raises(DomainError):
        CategoricalDomain(["a", "a"])
    with pytest.raises(DomainError):
        VectorDomain(AtomDomain(Kind.FLOAT), size=-1)


# -- the metric-space check at construction ------------------------------------------------

@pytest.mark.parametrize("domain,metric", [
    (VectorDomain(CategoricalDomain(["a", "b"])), L1Distance()),
    (VectorDomain(CategoricalDomain(["a", "b"])), L2Distance()),
    (VectorDomain(AnyDomain()), LInfDistance()),
    (VectorDomain(AtomDomain(Kind.FLOAT), size=3), AddRemoveDistance()),
    (AtomDomain(Kind.FLOAT), AddRemoveDistance()),
])
def test_a_metric_not_defined_on_the_domain_is_refused(domain, metric):
    with pytest.raises(DomainError, match="not defined on the domain"):
        Measurement(lambda x: x, metric, PureDP, PureDP, input_domain=domain)
    with pytest.raises(DomainError, match="not defined on the domain"):
        Transformation(lambda x: x, metric, L1Distance(), lambda d: d, input_domain=domain)


@pytest.mark.parametrize("domain,metric", [
    (VectorDomain(CategoricalDomain(["a", "b"])), HammingDistance()),
    (VectorDomain(AtomDomain(Kind.INTEGER)), L1Distance()),
    (VectorDomain(AtomDomain(Kind.FLOAT), size=3), L2Distance()),
    (VectorDomain(AnyDomain()), AddRemoveDistance()),
    (AnyDomain(), L1Distance()),
])
def test_metric_spaces_that_are_accepted(domain, metric):
    check_space(domain, metric)
    Measurement(lambda x: x, metric, PureDP, PureDP, input_domain=domain)


def test_every_mechanism_declares_a_domain_consistent_with_its_metric():
    built = [make_discrete_laplace(2), make_laplace(1.0), make_vector_laplace(1.0, 2),
             make_randomized_response(["a", "b"], 1), make_exponential_many(1),
             make_partition_selection(PartitionSelection(1, Fraction(1, 100)), 1),
             make_tree_quantile(16, Fraction(1, 2), 1, 1)]
    for m in built:
        assert not isinstance(m.input_domain, AnyDomain), m.name
        check_space(m.input_domain, m.input_metric)


# -- the call-time check, before any noise ------------------------------------------------

def test_float_scores_are_refused_before_the_exponential_draws(draws):
    m = make_exponential_many(1)
    with pytest.raises(DomainError, match="integer"):
        m([np.array([0.5, 0.9]), np.array([1, 2])])
    assert draws == []
    assert m([np.array([0, 9]), np.array([1, 2])])[0] in (0, 1)
    assert draws


def test_fractional_counts_are_refused_before_any_draw(draws):
    select = make_partition_selection(PartitionSelection(1, Fraction(1, 100)), 1)
    tree = make_tree_quantile(4, Fraction(1, 2), 1, 1, branching=2)
    with pytest.raises(DomainError):
        select(np.array([1.5, 3.0]))
    with pytest.raises(DomainError):
        select(np.array([-1, 3]))
    with pytest.raises(DomainError):
        tree(np.array([[0.5, 1, 2, 3]]))
    with pytest.raises(DomainError):
        tree(np.array([[0, 1, 2]]))  # 3 cells where 4 are declared
    assert draws == []
    assert tree(np.array([[0, 1, 2, 3]])).shape == (1,)


def test_out_of_domain_values_are_refused_before_any_draw(draws):
    with pytest.raises(DomainError, match="NaN"):
        make_laplace(1.0)(np.array([0.0, np.nan]))
    with pytest.raises(DomainError, match="integer"):
        make_discrete_laplace(1)(np.array([0.5]))
    with pytest.raises(DomainError, match="at most 2"):
        make_laplace(1.0, max_size=2)(np.zeros(3))
    assert draws == []


def test_refused_category_is_not_in_the_message(draws):
    m = make_randomized_response(["a", "b"], 1)
    with pytest.raises(DomainError) as err:
        m(np.array(["a", "secret-value-42"], dtype=object))
    assert "secret-value-42" not in str(err.value)
    assert draws == []


def test_a_chain_checks_the_intermediate_value_against_the_inner_domain(draws):
    halve = Transformation(lambda x: np.asarray(x) / 2, L1Distance(), L1Distance(),
                           lambda d: d / 2)
    chained = halve >> make_discrete_laplace(2)
    with pytest.raises(DomainError, match="integer"):
        chained(np.array([2, 3]))  # 1.5 is not an integer
    assert draws == []
    assert chained.privacy_map(2) == PureDP(Fraction(1, 2))
    post = make_discrete_laplace(2) >> (lambda y: y * 0)
    assert post.input_domain == make_discrete_laplace(2).input_domain
    with pytest.raises(DomainError):
        post(np.array([0.5]))


# -- the output side: PrivacyLoss is an abstract base class --------------------------------

def test_a_measure_must_implement_the_whole_loss_algebra():
    """A measure without ``-`` was accepted and failed only when a budget's remainder was
    asked for; now it cannot be instantiated."""
    from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss
    from dpkit.core.renyi import RenyiDP

    class Partial(PrivacyLoss):
        @classmethod
        def zero(cls) -> Partial:
            return cls()

        def __add__(self, other):
            return self

        def __le__(self, other):
            return True

    with pytest.raises(TypeError):
        Partial()
    with pytest.raises(TypeError):
        PrivacyLoss()
    for loss in (PureDP(1), ApproxDP(1, Fraction(1, 10)), ZCDP(1), RenyiDP.zero()):
        assert isinstance(loss, PrivacyLoss)
        assert loss - loss == type(loss).zero() or isinstance(loss, RenyiDP)
        assert type(loss).zero() <= loss and sum([loss]) == loss  # 0 + loss (builtin sum)
