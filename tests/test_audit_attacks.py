"""The attacks DP answers (issue 37, item 3): each succeeds on exact answers and is bounded
through a dpkit Session.

Exact answers: the attacks are deterministic given the data and the attacker's own choices
(the subsets of the reconstruction come from a seeded generator: the attacker's randomness,
not a release's noise), so they assert success 1.0 exactly. Through dpkit: the accountant's
spend is the claimed ε exactly, and the differencing pair's distinguishability is measured by
:func:`dpkit.audit.audit_release`'s threshold attack (false-positive rate 1e-6, stated where
it is asserted), paired with a broken variant (each count's noise for 4ε while the claim
stays ε) that the same audit catches. The larger runs are in ``bench/attacks.py``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.audit import CASES, attacks, claimed_epsilon_delta, epsilon_lower_bound

SECRET = pl.col("income") == ">50K"
QI = ["age", "sex", "race", "native-country"]


@pytest.fixture(scope="module")
def adult() -> pl.DataFrame:
    rows = dp.datasets.load_adult("train").head(120)
    return rows.with_row_index("rid").with_columns(pl.col("rid").cast(pl.Int64))


def _session(table: pl.DataFrame, budget: int = 100) -> dp.Session:
    return dp.Session(table, privacy_unit=dp.PrivacyUnit.rows(), budget=dp.PureDP(budget))


# -- exact answers: every attack succeeds, deterministically ---------------------------------
def test_differencing_reveals_every_secret_from_exact_answers(adult):
    out = attacks.differencing(adult, range(30), secret=SECRET)
    assert out.success_rate == 1.0 and out.claimed_epsilon is None and out.queries == 60


def test_tracker_defeats_query_set_size_control(adult):
    out = attacks.tracker(adult, range(30), secret=SECRET, tracker_set=pl.col("rid") < 60,
                    min_size=10)
    assert out.parameters["direct_refused"]  # the server refuses every target's own query
    assert out.success_rate == 1.0


def test_tracker_identity_brute_force():
    """q(C) = q(C ∨ T) + q(C ∨ ¬T) − q(T) − q(¬T) for every target and every T of a tiny
    table with |T| in [k + 1, n − k − 1], k = 1 (Denning et al. 1979): every such T."""
    table = pl.DataFrame({"rid": range(6), "income": [">50K", "<=50K"] * 3})
    tried = 0
    for size in range(2, 5):
        for members in itertools.combinations(range(6), size):
            out = attacks.tracker(table, range(6), secret=SECRET,
                            tracker_set=pl.col("rid").is_in(list(members)), min_size=1)
            assert out.success_rate == 1.0
            tried += 1
    assert tried == 15 + 20 + 15  # |T| ∈ {2, 3, 4}


def test_tracker_refuses_a_tracker_outside_its_range(adult):
    with pytest.raises(dp.errors.DomainError):
        attacks.tracker(adult, [0], secret=SECRET, tracker_set=pl.col("rid") < 5, min_size=10)


def test_reconstruction_recovers_every_bit_from_exact_answers(adult):
    out = attacks.reconstruction(adult.head(40), secret=SECRET, attacker=np.random.default_rng(7))
    assert out.queries == 160 and out.success_rate == 1.0


def test_lp_decoding_brute_force():
    """On n = 8, every one of the 2⁸ columns is recovered from m = 32 exact subset sums
    (the subsets fixed, full rank): the LP's optimum 0 is attained only at the truth."""
    subsets = np.random.default_rng(3).random((32, 8)) < 0.5
    assert np.linalg.matrix_rank(subsets.astype(float)) == 8
    for bits in itertools.product([0, 1], repeat=8):
        truth = np.array(bits)
        x = attacks.lp_decode(subsets, subsets.astype(int) @ truth)
        assert np.array_equal(x >= 0.5, truth == 1)


def test_linkage_reads_each_unique_row_off_an_exact_table(adult):
    domains = {c: sorted(adult[c].drop_nulls().unique().to_list()) for c in QI}
    out = attacks.linkage(adult, quasi_identifiers=QI, secret=SECRET, domains=domains)
    assert out.success_rate == 1.0 and 0 < out.parameters["unique_fraction"] <= 1


# -- through dpkit: the accountant composes, the audit bounds ---------------------------------
def test_each_attack_spends_exactly_its_claimed_epsilon(adult):
    small = adult.head(30)
    domains = {c: sorted(adult[c].drop_nulls().unique().to_list()) for c in QI}
    runs = [
        lambda s: attacks.differencing(small, range(5), secret=SECRET, session=s, epsilon=1),
        lambda s: attacks.tracker(small, range(5), secret=SECRET, tracker_set=pl.col("rid") < 15,
                            min_size=3, session=s, epsilon=1),
        lambda s: attacks.reconstruction(small, secret=SECRET, attacker=np.random.default_rng(1),
                                   session=s, epsilon=1),
        lambda s: attacks.linkage(small, quasi_identifiers=QI, secret=SECRET, domains=domains,
                            session=s, epsilon=1),
    ]
    for run, targets in zip(runs, (5, 5, 1, 1), strict=True):
        session = _session(small)
        out = run(session)
        assert out.claimed_epsilon == 1 and out.bound == attacks.guessing_bound(1)
        assert session.spent == dp.PureDP(targets)  # ε per target, composed exactly


def test_session_without_epsilon_is_refused_before_any_query(adult):
    session = _session(adult)
    with pytest.raises(dp.errors.DomainError):
        attacks.differencing(adult, [0], secret=SECRET, session=session)
    assert session.spent == dp.PureDP(0)


def test_guessing_bound():
    assert attacks.guessing_bound(None) == 1.0
    assert attacks.guessing_bound(Fraction(1, 2)) == pytest.approx(np.e / (1 + np.e))


def _secret_row(adult: pl.DataFrame) -> int:
    return int(adult.filter(SECRET)["rid"][0])


def test_differencing_pair_is_indistinguishable_at_the_claim(adult):
    """Fails with probability ≤ 1e-6 (the lower bound's confidence is 1 − 1e-6)."""
    audit = attacks.audit_differencing(adult, _secret_row(adult), secret=SECRET, epsilon=1,
                                 samples=240)
    assert audit.passed and audit.lower_bound.epsilon <= 1


def test_differencing_audit_catches_too_little_noise(adult):
    """Broken: each count at 4ε (the claim stays ε); the outputs on x and x′ are nearly
    disjoint, so the certified bound exceeds ε in effect always."""
    audit = attacks.audit_differencing(adult, _secret_row(adult), secret=SECRET, epsilon=1,
                                 samples=240,
                                 answer=lambda s, eps: attacks.session_oracle(s, 8 * eps))
    assert not audit.passed and audit.lower_bound.epsilon > 1


def test_registered_case_and_its_broken_variant():
    """The battery's case (vectorised samples through the kit's ``noisy``). Correct: the
    certified bound is ≤ ε except with probability ≤ 1e-6 (confidence 1 − 1e-6). Broken
    (each count at 4ε): its true ε on the pair is 4 (one count moves), so the bound from
    20,000 samples clears 1 in effect always."""
    case = CASES["differencing"]
    assert claimed_epsilon_delta(case) == (1.0, 0.0)
    for sample, caught in ((case.sample, False), (case.broken, True)):
        bound = epsilon_lower_bound(sample, case.x, case.x_prime, samples=20_000,
                                    confidence=1 - 1e-6)
        assert (bound.epsilon > 1) is caught
