"""The Markov quilt mechanism (dpkit.apps.correlated): the max-influence and σ_max against
brute-force enumeration (exact Fractions), the ε-Pufferfish guarantee checked on the exact
output laws (with a broken variant and naive per-day DP that must fail it), plan-time
validation, the release through an accountant and the audit case.

False-positive rates: the exact checks are deterministic; the audit runs at confidence
1 − 1e-6 and its histogram test's majority vote fails a correct mechanism with probability
< 1e-11 (tests/test_audit.py)."""

import itertools
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

import dpkit as dp
from dpkit.apps import correlated as c
from dpkit.core import numbers
from dpkit.core.accountant import FilterAccountant
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend

F = Fraction

CHAIN_A = ((F(3, 5), F(2, 5)), ((F(7, 10), F(3, 10)), (F(1, 4), F(3, 4))))
CHAIN_B = ((F(1, 3), F(2, 3)), ((F(9, 10), F(1, 10)), (F(2, 5), F(3, 5))))
WEAK = ((F(1, 2), F(1, 2)), ((F(11, 20), F(9, 20)), (F(2, 5), F(3, 5))))
# (Θ, T, ε): the first three set σ_max by a non-trivial quilt, the last by the trivial one
CASES = [([CHAIN_A, CHAIN_B], 5, F(4)), ([CHAIN_A], 6, F(2)), ([WEAK], 6, F(1)),
         ([CHAIN_A, CHAIN_B], 5, F(1))]


def joint(chain, length):
    """Every sequence of a 2-state chain with its exact probability."""
    q, p = chain
    for xs in itertools.product(range(2), repeat=length):
        pr = q[xs[0]]
        for s, t in zip(xs, xs[1:], strict=False):
            pr *= p[s][t]
        yield xs, pr


def brute_ratio(chain, length, i, a, b):
    """max over s, s', x_Q of P(X_Q = x_Q | X_i = s)/P(X_Q = x_Q | X_i = s'), by summing."""
    quilt = ([i - a] if a else []) + ([i + b] if b else [])
    cond = {}
    for xs, pr in joint(chain, length):
        key = (xs[i], tuple(xs[j] for j in quilt))
        cond[key] = cond.get(key, F(0)) + pr
    marg = {s: sum(v for (t, _), v in cond.items() if t == s) for s in range(2)}
    best = F(1)
    for xq in itertools.product(range(2), repeat=len(quilt)):
        for s, t in itertools.permutations(range(2), 2):
            best = max(best, (cond[(s, xq)] / marg[s]) / (cond[(t, xq)] / marg[t]))
    return best


def chain_of(pair):
    return c.markov_class([pair], 2).chains[0]


@pytest.mark.parametrize("length", [2, 4, 6])
@pytest.mark.parametrize("pair", [CHAIN_A, CHAIN_B])
def test_max_influence_equals_brute_force(pair, length):
    exact = c._Exact(chain_of(pair), length, length)
    for i in range(length):
        for a in range(i + 1):
            for b in range(length - i):
                assert exact.ratio(i, a, b) == brute_ratio(pair, length, i, a, b)


def brute_sigma(pairs, length, eps, lipschitz=1):
    """σ_max over every quilt by brute force, the same conservative log as the module."""
    worst = F(0)
    for pair in pairs:
        for i in range(length):
            best = F(lipschitz * length) / eps
            for a in range(i + 1):
                for b in range(length - i):
                    e = numbers.log_up(brute_ratio(pair, length, i, a, b)) if a or b else 0
                    if e < eps:
                        lo = i - a + 1 if a else 0
                        hi = i + b - 1 if b else length - 1
                        best = min(best, F(lipschitz * (hi - lo + 1)) / (eps - e))
            worst = max(worst, best)
    return worst


@pytest.mark.parametrize("pairs, length, eps", CASES)
def test_sigma_max_equals_brute_force(pairs, length, eps):
    got = c.quilt_scale(c.markov_class(pairs, 2), length, eps, max_width=length)
    assert got.scale == numbers.dyadic_up(brute_sigma(pairs, length, eps), 32)
    assert F(1) / eps <= got.scale <= F(length) / eps
    assert (got.scale < F(length) / eps) == ((pairs, length, eps) != CASES[-1])


def test_approx_bounds_the_exact_influence():
    q = (F(1, 5), F(3, 10), F(1, 2))
    p = ((F(1, 2), F(1, 4), F(1, 4)), (F(1, 5), F(3, 5), F(1, 5)), (F(1, 10), F(1, 5), F(7, 10)))
    chain = c.markov_class([(q, p)], 3).chains[0]
    exact, approx = c._Exact(chain, 30, 12), c._Approx(chain, 30, 12)
    for i, a, b in itertools.product(range(12, 18), range(13), range(13)):
        bound = approx.ratio(i, a, b)
        if bound is not None:
            assert exact.ratio(i, a, b) <= bound
    model = c.markov_class([(q, p)], 3)
    assert c.quilt_scale(model, 30, 1, method="approx").scale >= \
        c.quilt_scale(model, 30, 1).scale


# -- the guarantee, on exact output laws -----------------------------------------------------
getcontext().prec = 60


def count_law(pair, length, i, value):
    law = [F(0)] * (length + 1)
    for xs, pr in joint(pair, length):
        if xs[i] == value:
            law[sum(xs)] += pr
    total = sum(law)
    return [x / total for x in law]


def worst_log_ratio(pairs, length, scale):
    """max over θ, i, (a, b), w of log P(F + Z = w | X_i = a)/P(F + Z = w | X_i = b), Z the
    discrete Laplace of ``scale`` (pmf ∝ x^|z|, x = e^{−1/scale}); beyond [−1, T + 1] the
    ratio is constant, so those w suffice."""
    x = (-1 / Decimal(scale.numerator) * Decimal(scale.denominator)).exp()
    worst = Decimal(0)
    for pair in pairs:
        for i in range(length):
            laws = [count_law(pair, length, i, v) for v in (0, 1)]
            for w in range(-1, length + 2):
                dens = [sum(Decimal(p.numerator) / Decimal(p.denominator) * x ** abs(w - f)
                            for f, p in enumerate(law)) for law in laws]
                worst = max(worst, abs((dens[0] / dens[1]).ln()))
    return worst


def eps_decimal(eps):
    return Decimal(eps.numerator) / eps.denominator


def planned_scale(sigma, eps):
    return frontend.exact_scale(frontend.noise_row(eps * sigma, dp.PureDP(eps)))


STICKY = ((F(1, 2), F(1, 2)), ((F(19, 20), F(1, 20)), (F(1, 20), F(19, 20))))


@pytest.mark.parametrize("pairs, length, eps", [*CASES, ([STICKY], 5, F(1))])
def test_pufferfish_guarantee_holds_exactly(pairs, length, eps):
    sigma = c.quilt_scale(c.markov_class(pairs, 2), length, eps).scale
    assert worst_log_ratio(pairs, length, planned_scale(sigma, eps)) <= eps_decimal(eps)


@pytest.mark.parametrize("pairs, length, eps", [CASES[0], ([STICKY], 5, F(1))])
def test_halved_scale_fails_the_guarantee(pairs, length, eps):
    """Where the quilt bound is nearly tight, half the scale breaks it (elsewhere MQM's
    bound is loose: half may still be private, so this is not asserted for every case)."""
    sigma = c.quilt_scale(c.markov_class(pairs, 2), length, eps).scale
    assert worst_log_ratio(pairs, length, planned_scale(sigma / 2, eps)) > eps_decimal(eps)


def test_naive_per_day_scale_fails_the_guarantee():
    eps, length = F(1), 5
    # per-day DP (scale 1/ε) does not protect a day its neighbours predict
    assert worst_log_ratio([STICKY], length, planned_scale(1 / eps, eps)) > Decimal(2)


# -- plan time ------------------------------------------------------------------------------
@pytest.mark.parametrize("chains, states", [
    ([((F(1, 2), F(1, 2)), ((F(1, 2), F(1, 3)), (F(1, 2), F(1, 2))))], 2),  # row sum ≠ 1
    ([((F(1, 2), F(1, 2)), ((1, 0), (F(1, 2), F(1, 2))))], 2),  # a zero entry
    ([((F(1, 2), F(1, 3)), ((F(1, 2), F(1, 2)), (F(1, 2), F(1, 2))))], 2),  # q ≠ law
    ([((F(1, 2), F(1, 2)), ((F(1, 2), F(1, 2)),))], 2),  # missing row
    ([CHAIN_A], 9),  # too many states
    ([((F(1, 2), F(1, 2)), ((F(1, 3), F(2, 3)), (F(1, 2**21), 1 - F(1, 2**21))))], 2),
    ([], 2),
])
def test_markov_class_refuses_bad_models(chains, states):
    with pytest.raises(DomainError):
        c.markov_class(chains, states)


@pytest.mark.parametrize("series, kwargs", [
    ([0, 1, 2], {}),  # undeclared state
    ([0.0, 1.0], {}),  # not integers
    ([[0, 1]], {}),
    ([0, 1], {"statistic": "mean"}),
    ([0, 1], {"method": "wasserstein"}),
    ([0, 1], {"max_width": 65}),
    ([0, 1], {"state": 2}),
    ([0, 1], {"epsilon": 0}),
    ([0] * 4097, {}),
])
def test_release_refuses_before_the_debit(series, kwargs):
    acc = FilterAccountant(dp.PureDP(10))
    args = {"epsilon": 1, **kwargs}
    with pytest.raises(DomainError):
        c.markov_quilt_release(series, c.markov_class([CHAIN_A], 2), accountant=acc, **args)
    assert acc.spent == dp.PureDP(0)


def test_release_is_charged_once_with_its_plan():
    acc = FilterAccountant(dp.PureDP(2))
    model = c.markov_class([CHAIN_A, CHAIN_B], 2)
    out = c.markov_quilt_release(np.array([0, 1, 1, 0, 1] * 8), model, epsilon=1,
                                 accountant=acc)
    assert acc.spent == dp.PureDP(1)
    assert out.values.shape == (2,) and out.values.dtype == np.int64
    assert out.release.loss == dp.PureDP(1)
    (row,) = out.release.noise
    assert acc.last.noise == out.release.noise  # the plan written with the debit is the draw
    assert row.scale >= out.scale.scale >= 2  # histogram: L = 2, σ ≥ L/ε
    assert out.guarantee.epsilon == 1 and "Pufferfish" in out.release.description
    count = c.markov_quilt_release([0, 1] * 20, model, epsilon=1, statistic="count", state=1)
    assert count.values.shape == (1,)


def test_audit_case_passes_and_its_broken_variant_is_flagged():
    from dpkit.audit import CASES, run_audit
    case = CASES["markov_quilt_release"]
    good = run_audit(case, 50_000, confidence=1 - 1e-6)
    assert good.histogram_passed and good.lower_bound <= good.claimed_epsilon
    bad = run_audit(case, 50_000, broken=True, confidence=1 - 1e-6)
    assert (not bad.histogram_passed) or bad.lower_bound > bad.claimed_epsilon


def test_long_series_rounding_only_enlarges_the_influence():
    exact = c._Exact(chain_of(CHAIN_A), 300, 4)
    i = 299
    assert exact.pi[i][0].bit_length() > c.EXACT_BITS  # the rounded path
    for a, b in itertools.product(range(1, 5), range(0, 1)):
        want = max(exact.left[a - 1][s][t] * F(exact.pi[i][t], exact.pi[i][s])
                   for s in range(2) for t in range(2))
        got = exact.ratio(i, a, b)
        assert want <= got <= want * (1 + F(1, 2**50))


# -- MQMApprox's eigengap bound (reversible chains) ----------------------------------------------
def _reversible_chain(weights):
    """A reversible chain from symmetric positive weights: P = W / row sums, π ∝ row sums."""
    k = len(weights)
    rows = [sum(weights[x]) for x in range(k)]
    p = tuple(tuple(F(weights[x][y], rows[x]) for y in range(k)) for x in range(k))
    q = tuple(F(1, k) for _ in range(k))
    return q, p


SYMMETRIC = [[[6, 1], [1, 2]], [[5, 2, 1], [2, 4, 1], [1, 1, 3]],
             [[9, 1, 1, 1], [1, 7, 2, 1], [1, 2, 8, 1], [1, 1, 1, 6]]]


@pytest.mark.parametrize("a, b", [(F(3, 10), F(1, 4)), (F(1, 20), F(1, 10)), (F(9, 10), F(4, 5))])
def test_spectral_bound_of_two_state_chains(a, b):
    """Every 2-state chain is reversible with λ₂ = 1 − a − b exactly: the certified bound is
    ≥ |λ₂| and within 10% of it (Gelfand's formula at j = 64)."""
    p = ((1 - a, a), (b, 1 - b))
    pi = c._stationary(p)
    assert c._reversible(p, pi)
    lam = c.spectral_bound(p, pi)
    assert abs(1 - a - b) <= lam <= abs(1 - a - b) * F(11, 10)


@pytest.mark.parametrize("weights", SYMMETRIC)
def test_eigengap_mixing_bound_against_brute_force(weights):
    """d_t ≥ max_{x,y} |P^t(x, y) − π(y)| and e_t ≥ max_s |π_t(s) − π(s)|, P^t exact, t ≤ 30;
    λ_up ≥ the second eigenvalue modulus (numpy, as a check of the certificate only)."""
    q, p = _reversible_chain(weights)
    model = c._Approx(c.MarkovChain(q, p), 10, 4)
    assert model.lam is not None
    pi = c._stationary(p)
    moduli = sorted(abs(np.linalg.eigvals(np.array(p, dtype=float))))
    assert float(model.lam) >= moduli[-2] - 1e-12
    k = len(p)
    power = [[F(int(x == y)) for y in range(k)] for x in range(k)]
    law = list(q)
    for t in range(1, 31):
        power = c._fraction_matmul(power, [list(r) for r in p])
        law = [sum(law[x] * p[x][y] for x in range(k)) for y in range(k)]
        worst = max(abs(power[x][y] - pi[y]) for x in range(k) for y in range(k))
        assert worst <= model._mixing(t, F(1))
        assert max(abs(law[s] - pi[s]) for s in range(k)) <= model._mixing(t, model.tv)


@pytest.mark.parametrize("weights", SYMMETRIC[1:])
def test_eigengap_bound_covers_the_exact_influence_and_tightens(weights):
    """For every node and quilt, MQMApprox's bound (now with the eigengap) is ≥ MQMExact's
    influence, so σ_approx ≥ σ_exact; and it is no larger than Dobrushin's alone."""
    q, p = _reversible_chain(weights)
    chain = c.MarkovChain(q, p)
    length, width = 12, 4
    exact, approx = c._Exact(chain, length, width), c._Approx(chain, length, width)
    dobrushin = c._Approx(chain, length, width)
    dobrushin.lam = None
    for i in range(length):
        for a in range(min(width, i) + 1):
            for b in range(min(width, length - 1 - i) + 1):
                if not (a or b):
                    continue
                bound = approx.ratio(i, a, b)
                if bound is not None:
                    assert bound >= exact.ratio(i, a, b)
                    old = dobrushin.ratio(i, a, b)
                    assert old is None or bound <= old
    model = c.markov_class([(q, [list(r) for r in p])], len(p))
    eps = F(2)
    assert (c.quilt_scale(model, length, eps, method="approx", max_width=width).scale
            >= c.quilt_scale(model, length, eps, max_width=width).scale)


def test_non_reversible_chain_keeps_dobrushin():
    q, p = CHAIN_A
    p3 = ((F(1, 2), F(3, 10), F(1, 5)), (F(1, 10), F(1, 2), F(2, 5)), (F(3, 10), F(1, 10),
                                                                          F(3, 5)))
    assert not c._reversible(p3, c._stationary(p3))
    model = c._Approx(c.MarkovChain((F(1, 3), F(1, 3), F(1, 3)), p3), 10, 4)
    assert model.lam is None and model._mixing(3, F(1)) == model.tau ** 3


def test_eigengap_tightens_mqmapprox_on_a_reversible_chain(monkeypatch):
    """A reversible chain with λ* ≈ 0.526 < τ = 199/252 ≈ 0.790: MQMApprox's σ with the
    eigengap term is several times below Dobrushin's alone, and still ≥ MQMExact's."""
    q, p = _reversible_chain([[10, 21, 3, 2], [21, 5, 28, 2], [3, 28, 19, 25], [2, 2, 25, 27]])
    model = c.markov_class([(q, [list(r) for r in p])], 4)
    reversible, tau, lam = c.mixing_rates(model.chains[0])
    assert reversible and tau == F(199, 252) and F(526, 1000) < lam < F(53, 100)
    length, eps = 80, F(1)
    with_gap = c.quilt_scale(model, length, eps, lipschitz=2, method="approx").scale
    exact = c.quilt_scale(model, length, eps, lipschitz=2).scale
    init = c._Approx.__init__

    def dobrushin_only(self, *args):
        init(self, *args)
        self.lam = None
    monkeypatch.setattr(c._Approx, "__init__", dobrushin_only)
    without = c.quilt_scale(model, length, eps, lipschitz=2, method="approx").scale
    assert exact <= with_gap < without / 2
