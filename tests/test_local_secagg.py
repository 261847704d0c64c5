"""Secure aggregation (dpkit.local.secagg, Bonawitz et al. CCS 2017) and the distributed
discrete Gaussian through it: masks cancel exactly with and without dropouts, refusal
below the threshold, Shamir's scheme (any t shares rebuild, t − 1 are consistent with every
secret), the server's view of a masked input is uniform mod m, and the end-to-end sum has
the law of a sum of the surviving clients' discrete Gaussians.

Statistical tests reject a correct implementation with probability ≤ 1e-6
(tests.stats.FALSE_POSITIVE_RATE), each paired with a broken variant it catches."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from tests.stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_gaussian_pmf

import dpkit as dp
import dpkit.local as ldp
from dpkit.core.accountant import FilterAccountant
from dpkit.errors import DomainError
from dpkit.local import secagg
from dpkit.local.secagg import ProtocolAbortError, secure_sum

FPR = FALSE_POSITIVE_RATE


# -- masks cancel ----------------------------------------------------------------------------

@pytest.mark.parametrize("modulus", [2, 10, 1 << 16, (1 << 62) - 57])
def test_unmasked_sum_is_the_sum_of_inputs_mod_m(modulus):
    x = (np.arange(7 * 12).reshape(7, 12) * 7919) % modulus
    out = secure_sum(x, modulus)
    assert np.array_equal(out.total, x.sum(axis=0) % modulus)
    assert out.survivors == frozenset(range(1, 8))


def test_masks_cancel_with_dropouts_below_the_threshold():
    m = 1000003
    x = np.arange(10 * 5).reshape(10, 5) ** 3 % m
    out = secure_sum(x, m, threshold=6, drop_before_input=(2, 9), drop_before_unmask=(1, 4))
    kept = [u - 1 for u in range(1, 11) if u not in (2, 9)]  # late droppers' inputs count
    assert out.survivors == frozenset(u + 1 for u in kept)
    assert np.array_equal(out.total, x[kept].sum(axis=0) % m)
    # the server saw no masked input from the early droppers, and none equal to an input
    assert set(out.server.masked) == {u + 1 for u in kept}
    assert not any(np.array_equal(out.server.masked[u + 1], x[u]) for u in kept)


def test_refusal_when_fewer_than_t_clients_remain():
    x = np.ones((9, 3), dtype=np.int64)
    secure_sum(x, 64, threshold=6, drop_before_input=(1, 2), drop_before_unmask=(3,))
    with pytest.raises(ProtocolAbortError):
        secure_sum(x, 64, threshold=6, drop_before_input=(1, 2), drop_before_unmask=(3, 4))
    with pytest.raises(ProtocolAbortError):
        secure_sum(x, 64, threshold=7, drop_before_input=(1, 2, 3))
    for bad in ({"threshold": 0}, {"threshold": 10}, {"drop_before_input": (0,)},
                {"drop_before_unmask": (10,)}):
        with pytest.raises(DomainError):
            secure_sum(x, 64, **bad)
    with pytest.raises(DomainError):
        secure_sum(np.ones((3, 2)), 64)  # floats are not residues
    with pytest.raises(DomainError):
        secure_sum(x, 1)


def test_a_client_never_reveals_both_secrets_of_one_client():
    """An unmasking request that names a client both alive and dropped, or a second request,
    is refused: answering both would hand the server that client's input."""
    session = b"s" * 16
    clients = [secagg.Client(u, 2, 97, session) for u in (1, 2, 3)]
    keys = [c.advertise() for c in clients]
    inbox: dict[int, list] = {1: [], 2: [], 3: []}
    for c in clients:
        for msg in c.share_keys(keys):
            inbox[msg.receiver].append(msg)
    for c in clients:
        c.masked_input(np.zeros(4, dtype=np.int64), inbox[c.index])
    with pytest.raises(ProtocolAbortError):
        clients[0].unmask({1, 2, 3}, {3})
    with pytest.raises(ProtocolAbortError):
        clients[0].unmask({1}, {2, 3})  # fewer than t survivors
    answer = clients[0].unmask({1, 2}, {3})
    assert set(answer.key_shares) == {3} and set(answer.seed_shares) == {1, 2}
    with pytest.raises(ProtocolAbortError):
        clients[0].unmask({1, 3}, {2})
    server = secagg.Server(2, 97, 4, session)
    with pytest.raises(ProtocolAbortError):
        server.unmask([answer], frozenset({1, 2}), frozenset({3}))  # one answer, t = 2


# -- Shamir ----------------------------------------------------------------------------------

def test_any_t_shares_rebuild_the_secret_and_t_minus_1_do_not():
    seed = bytes(range(32))
    limbs = secagg._limbs(seed)
    shares = secagg.shamir_share(limbs, 3, 6)
    for subset in itertools.combinations(range(1, 7), 3):
        got = secagg.shamir_reconstruct({x: shares[x - 1] for x in subset}, 3)
        assert secagg._bytes(got) == seed
    for subset in itertools.combinations(range(1, 7), 2):
        with pytest.raises(ProtocolAbortError):
            secagg.shamir_reconstruct({x: shares[x - 1] for x in subset}, 3)


def _share_law(prime: int, t: int, points: tuple[int, ...], coefficients) -> dict:
    """For each secret s, the multiset of share tuples at ``points`` over every choice of
    the t − 1 random coefficients (``coefficients(s, rest)`` builds the polynomial)."""
    law = {}
    for s in range(prime):
        rows = []
        for rest in itertools.product(range(prime), repeat=t - 1):
            coeffs = np.array(coefficients(s, rest))[:, None]
            rows.append(tuple(secagg.shamir_evaluate(coeffs, np.array(points), prime)[:, 0]))
        law[s] = Counter(rows)
    return law


def test_t_minus_1_shares_are_uniform_whatever_the_secret_and_a_broken_variant_is_not():
    """Brute force over GF(7), t = 3: any 2 shares take every value pair exactly once per
    secret (information-theoretic hiding; so every secret is consistent with them). A
    broken dealer whose coefficients repeat the secret leaks it."""
    prime, t = 7, 3
    for points in ((1, 2), (3, 6), (4, 5)):
        law = _share_law(prime, t, points, lambda s, rest: (s, *rest))
        for s in range(prime):
            assert law[s] == Counter(itertools.product(range(prime), repeat=2))
        leaky = _share_law(prime, t, points, lambda s, rest: (s, s, rest[0]))
        assert leaky[0] != leaky[1]


# -- the server's view -----------------------------------------------------------------------

def _masked_views(modulus: int, runs: int, d: int) -> np.ndarray:
    """Client 1's masked input as the server sees it, over ``runs`` rounds of 3 clients whose
    inputs are fixed (client 1 sends 3 in every coordinate)."""
    x = np.full((3, d), 3, dtype=np.int64)
    return np.concatenate([secure_sum(x, modulus, threshold=2).server.masked[1]
                           for _ in range(runs)])


@pytest.mark.parametrize("modulus", [10, 16])
def test_the_servers_view_of_a_masked_input_is_uniform(modulus):
    """χ² on 8000 residues (400 rounds × 20 coordinates; FPR ≤ 1e-6)."""
    views = _masked_views(modulus, 400, 20)
    support = np.arange(modulus)
    assert chi2_pvalue(views, support, np.ones(modulus)) > FPR


def test_uniformity_test_catches_unapplied_masks_and_fixed_seeds(monkeypatch):
    """Both broken views repeat across rounds: unapplied masks give the constant input;
    fixed seeds give the same 21 residues 400 times each, which no split of 21 values over
    10 cells makes uniform (χ² ≥ 171 on 10 cells whatever the residues): caught surely."""
    support = np.arange(10)
    with monkeypatch.context() as patch:  # masks not applied: y = x
        patch.setattr(secagg, "expand", lambda seed, length, modulus: np.zeros(length,
                                                                              dtype=np.int64))
        assert chi2_pvalue(_masked_views(10, 400, 21), support, np.ones(10)) < FPR
    fixed = bytes(range(32))
    with monkeypatch.context() as patch:  # every key and seed the same in every round
        patch.setattr(secagg, "_fresh_seed", lambda: fixed)
        patch.setattr(secagg, "_fresh_key",
                      lambda: secagg.X25519PrivateKey.from_private_bytes(fixed))
        patch.setattr(secagg.rng, "random_bytes", lambda n: bytes(n))  # the session id too
        assert chi2_pvalue(_masked_views(10, 400, 21), support, np.ones(10)) < FPR


def test_expand_is_deterministic_in_range_and_differs_between_seeds():
    a = secagg.expand(b"a" * 32, 1000, 10)
    assert np.array_equal(a, secagg.expand(b"a" * 32, 1000, 10))
    assert a.min() >= 0 and a.max() < 10
    assert not np.array_equal(a, secagg.expand(b"b" * 32, 1000, 10))
    big = secagg.expand(b"a" * 32, 1000, (1 << 62) - 57)
    assert big.min() >= 0 and big.max() < (1 << 62) - 57


# -- the distributed discrete Gaussian through the protocol ------------------------------------

def _sum_pmf(support: np.ndarray, sigma: float, k: int) -> np.ndarray:
    """The law of a sum of k independent N_ℤ(0, σ²) on ``support`` (exact convolution on a
    wide grid, then read off)."""
    grid = np.arange(-200, 201)
    one = discrete_gaussian_pmf(grid, sigma)
    one /= one.sum()
    law = one
    for _ in range(k - 1):
        law = np.convolve(law, one)
    centre = (law.size - 1) // 2
    return law[centre + support]


def test_the_end_to_end_sum_has_the_law_of_the_survivors_noise():
    """Zero vectors of 4 clients (d′ = 2048): the decoded integer sum is a sum of the
    surviving clients' N_ℤ(0, 3²); with one client dropped before its input, of three.
    Each checked against the other's law (a lost or an extra noise is caught)."""
    mech = ldp.DistributedDiscreteGaussian(2048, clip=1, scale=Fraction(3, 10),
                                           gamma=Fraction(1, 10), modulus=1 << 20)
    support = np.arange(-40, 41)
    sums = {}
    for dropped in ((), (2,)):
        draws = []
        for _ in range(5):
            ints = mech.encode(np.zeros((4, 2048)))
            total = secure_sum(ints, mech.m, 3, drop_before_input=dropped).total
            draws.append(np.where(total >= mech.m // 2, total - mech.m, total))
        sums[len(dropped)] = np.concatenate(draws)
    assert chi2_pvalue(sums[0], support, _sum_pmf(support, 3.0, 4)) > FPR
    assert chi2_pvalue(sums[1], support, _sum_pmf(support, 3.0, 3)) > FPR
    assert chi2_pvalue(sums[0], support, _sum_pmf(support, 3.0, 3)) < FPR
    assert chi2_pvalue(sums[1], support, _sum_pmf(support, 3.0, 4)) < FPR


def test_release_charges_rho_at_the_threshold_before_running():
    mech = ldp.DistributedDiscreteGaussian(4, clip=1, scale=Fraction(1, 2),
                                           gamma=Fraction(1, 16), modulus=1 << 24)
    acc = FilterAccountant(dp.ZCDP(10))
    data = np.tile([0.5, 0.0, 0.0, 0.0], (9, 1))
    out = mech.release(data, acc, threshold=6, drop_before_input=(1,))
    assert out.shape == (4,)
    assert acc.spent == mech.rho(9, least=6)
    assert mech.rho(9, least=6).rho > mech.rho(9).rho
    before = acc.spent
    with pytest.raises(ProtocolAbortError):
        mech.release(data, acc, threshold=6, drop_before_input=(1, 2, 3, 4))
    with pytest.raises(DomainError):
        mech.release(data, acc, drop_before_unmask=(12,))
    assert acc.spent == before  # refused before the debit
