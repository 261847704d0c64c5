"""Amplification by subsampling (Query.sample) and DP-SGD accounting (dpkit.core.subsampling)."""

import itertools
from fractions import Fraction

import narwhals as nw
import numpy as np
import polars as pl
import pytest
from scipy import stats

import dpkit as dp
from dpkit.core import rng
from dpkit.core.accountant import FilterAccountant
from dpkit.core.measures import ZCDP, ApproxDP, PureDP
from dpkit.core.numbers import exp_down, exp_up, log_down, log_up
from dpkit.core.subsampling import (
    amplified_epsilon,
    amplify,
    amplify_without_replacement,
    dpsgd_epsilon,
    dpsgd_noise_multiplier,
    sampled_gaussian_rdp,
)
from dpkit.errors import DomainError, MeasureError
from dpkit.frame import PrivacyUnit, Query, Session
from dpkit.frame.backend import keep_threshold, sample_fixed_units, sample_units
from dpkit.frame.language import ProtocolError
from dpkit.mechanisms.frontend import charge

FPR = 1e-6


def test_amplified_epsilon_is_the_formula_rounded_up():
    for eps, p in [(Fraction(1), Fraction(1, 100)), (Fraction(1, 2), Fraction(1, 3)),
                   (Fraction(3), Fraction(9, 10))]:
        upper = amplified_epsilon(eps, p)
        lower = log_down(1 + p * (exp_down(eps) - 1))
        assert lower <= upper < lower + Fraction(1, 10 ** 20)
    assert amplified_epsilon(2, 1) == 2 and amplified_epsilon(0, Fraction(1, 2)) == 0
    assert amplify(ApproxDP(1, Fraction(1, 10 ** 6)), Fraction(1, 10)).delta == Fraction(1, 10 ** 7)
    with pytest.raises(MeasureError):
        amplify(ZCDP(1), Fraction(1, 2))
    with pytest.raises(DomainError):
        amplified_epsilon(1, 0)


def test_amplification_is_monotone():
    ps = [Fraction(k, 20) for k in range(1, 21)]
    values = [amplified_epsilon(1, p) for p in ps]
    assert values == sorted(values) and values[-1] == 1
    eps = [amplified_epsilon(e, Fraction(1, 10)) for e in range(1, 6)]
    assert eps == sorted(eps)
    sig = [dpsgd_epsilon(100, Fraction(1, 50), s, Fraction(1, 10 ** 5)) for s in (1, 2, 4)]
    assert sig == sorted(sig, reverse=True)


def test_sampled_gaussian_rdp_at_q_one_is_the_gaussian():
    curve = sampled_gaussian_rdp(1, 2, orders=(2, 8))
    assert curve.epsilons == (Fraction(2, 8), Fraction(8, 8))


def test_sampled_gaussian_matches_dp_accounting():
    rdp = pytest.importorskip("dp_accounting.rdp")
    import dp_accounting
    q, sigma, steps, delta = 0.01, 1.1, 10_000, 1e-5
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
        q, dp_accounting.GaussianDpEvent(sigma)), steps)
    orders = [2, 4, 8, 16, 32]
    ours = sampled_gaussian_rdp(Fraction(1, 100), Fraction(11, 10), tuple(orders))
    theirs = rdp.RdpAccountant(orders).compose(event)
    for a, e in zip(orders, ours.epsilons, strict=True):  # their ε(α) per step, float
        assert float(e) * steps == pytest.approx(theirs._rdp[orders.index(a)], rel=1e-9)
    assert float(dpsgd_epsilon(steps, Fraction(1, 100), Fraction(11, 10), Fraction(1, 10 ** 5))
                 ) <= rdp.RdpAccountant().compose(event).get_epsilon(delta) + 0.05


def test_pure_amplification_matches_dp_accounting_pld():
    pytest.importorskip("dp_accounting.pld")
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    event = dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.LaplaceDpEvent(1.0))
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    theirs = acc.compose(event).get_epsilon(1e-12)  # ≈ the pure ε (δ = 0 is its tail: inf)
    assert float(amplified_epsilon(1, Fraction(1, 10))) == pytest.approx(theirs, abs=1e-3)


def test_dpsgd_inverse():
    q, delta, steps = Fraction(1, 100), Fraction(1, 10 ** 5), 1000
    sigma = dpsgd_noise_multiplier(2, delta, steps, q)
    assert dpsgd_epsilon(steps, q, sigma, delta) <= 2
    assert dpsgd_epsilon(steps, q, sigma - Fraction(2, 1000), delta) > 2


def _kept_fraction(rate: Fraction, n: int, broken: bool = False) -> int:
    units = nw.from_native(pl.LazyFrame({"u": np.arange(n)}))
    out = sample_units(units, "u", 2 * rate if broken else rate)
    return len(nw.to_native(out).collect())


@pytest.mark.parametrize("broken", [False, True])
def test_poisson_sampling_law(broken):
    """Kept units ~ Binomial(n, p'), p' = ⌊p·2⁶⁴⌋/2⁶⁴: two-sided test at FPR 1e-6; the
    broken variant (keeps with 2p) must be rejected."""
    rate, n = Fraction(1, 10), 200_000
    p = keep_threshold(rate) / 2 ** 64
    kept = _kept_fraction(rate, n, broken)
    pvalue = stats.binomtest(kept, n, p).pvalue
    assert bool(pvalue < FPR) == broken, (kept, n, p)


def test_sampled_query_charges_the_amplified_loss():
    df = pl.DataFrame({"u": np.arange(1000), "x": np.ones(1000, dtype=np.int64)})
    session = Session(df, PrivacyUnit.by("u", 1), PureDP(10))
    query = session.query().sample(Fraction(1, 10)).agg(dp.count())
    plan = query.plan(epsilon=1)
    assert plan.loss == PureDP(amplified_epsilon(1, Fraction(1, 10)))
    session.release(plan)
    assert session.accountant.spent == plan.loss
    assert query.to_json()["steps"] == [{"step": "sample", "p": "1/10"}]
    with pytest.raises(DomainError):
        session.query().sample(0)
    with pytest.raises(DomainError):
        session.query().sample(Fraction(1, 2)).sample(Fraction(1, 2))
    zcdp = Session(df, PrivacyUnit.by("u", 1), ZCDP(1))
    with pytest.raises(MeasureError):
        zcdp.query().sample(Fraction(1, 2)).agg(dp.count()).plan(rho=Fraction(1, 10))


def test_brute_force_law_of_a_sampled_geometric_count():
    """Exact law on the smallest neighbours: D = {} and D' = {one unit}, a count on a Poisson
    sample of rate p with two-sided geometric noise P(k) ∝ (1/2)^|k| (ε = ln 2). The largest
    ratio of the two output laws over every output is exactly 1 + p = e^{ln(1 + p(e^ε − 1))},
    and the amplified ε computed from an upper bound on ln 2 covers it."""
    p, a = Fraction(1, 10), Fraction(1, 2)

    def geometric(k: int) -> Fraction:
        return (1 - a) / (1 + a) * a ** abs(k)

    ratios = []
    for k in range(-40, 41):
        without = geometric(k)
        with_unit = p * geometric(k - 1) + (1 - p) * geometric(k)
        ratios += [with_unit / without, without / with_unit]
    assert max(ratios) == 1 + p
    assert amplified_epsilon(log_up(Fraction(2)), p) >= log_down(1 + p)


@pytest.mark.parametrize("unit", ["u", None])
def test_poisson_sampling_law_on_duckdb(unit):
    """The same binomial test (FPR 1e-6) on DuckDB, by unit id and by row number."""
    duckdb = pytest.importorskip("duckdb")
    rate, n = Fraction(1, 10), 200_000
    frame = pl.DataFrame({"u": np.arange(n)})  # noqa: F841 (read by DuckDB's replacement scan)
    rel = duckdb.connect().sql("select * from frame")
    out = nw.to_native(sample_units(nw.from_native(rel), unit, rate))
    kept = out.aggregate("count(*)").fetchall()[0][0]
    assert out.columns == ["u"]
    assert stats.binomtest(kept, n, keep_threshold(rate) / 2 ** 64).pvalue >= FPR


# -- sampling without replacement (substitute-one neighbours, N public) ---------------------

def _subset_counts(draw, population: int, size: int, draws: int) -> np.ndarray:
    """How often each size-subset of range(population) was drawn, in lexicographic order."""
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(population), size))}
    counts = np.zeros(len(subsets), dtype=np.int64)
    for _ in range(draws):
        kept = tuple(sorted(draw()))
        counts[subsets[kept]] += 1  # a set of another size raises KeyError: a failure too
    return counts


def _fixed(population: int, size: int, broken: bool):
    units = nw.from_native(pl.LazyFrame({"u": np.arange(population)}))
    if not broken:
        return lambda: nw.to_native(sample_fixed_units(units, "u", size)).collect()["u"]

    def short_hash():  # broken: the ranking keeps 2 bits of the hash, ties by position
        words = [int(w) for w in rng.words(2)]
        keyed = (pl.col("u").hash(words[0]) ^ pl.lit(words[1], pl.UInt64)) & 3
        return nw.to_native(units).filter(keyed.rank("ordinal") <= size).collect()["u"]
    return short_hash


@pytest.mark.parametrize("broken", [False, True])
def test_without_replacement_law(broken):
    """Every 2-subset of 5 units is equally likely: χ² with 9 degrees of freedom against the
    uniform law, rejected at FPR 1e-6; the broken ranking (a 2-bit hash, ties by position,
    so low ids win) must be rejected."""
    population, size, draws = 5, 2, 6000
    counts = _subset_counts(_fixed(population, size, broken), population, size, draws)
    pvalue = stats.chisquare(counts).pvalue
    assert bool(pvalue < FPR) == broken, counts


def test_without_replacement_keeps_every_unit_when_fewer_exist():
    frame = pl.LazyFrame({"u": [1, 1, 2, None, None], "x": [1, 2, 3, 4, 5]})
    out = nw.to_native(sample_fixed_units(nw.from_native(frame), "u", 3)).collect()
    assert out.height == 5  # three units (1, 2 and the null unit), all kept
    two = nw.to_native(sample_fixed_units(nw.from_native(frame), "u", 2)).collect()
    assert two["u"].n_unique() == 2 and set(two["u"].value_counts()["count"]) <= {1, 2}
    rows = nw.to_native(sample_fixed_units(nw.from_native(frame), None, 4)).collect()
    assert rows.height == 4  # row-level units: four rows
    with pytest.raises(DomainError):
        sample_fixed_units(nw.from_native(frame), "u", 0)


def test_without_replacement_map_and_debit():
    """The map is Thm 9's formula with γ = n/N, in Fractions; the accountant debits it."""
    loss = amplify_without_replacement(PureDP(1), 10, 100)
    assert loss == PureDP(log_up(1 + Fraction(1, 10) * (exp_up(Fraction(1)) - 1)))
    approx = amplify_without_replacement(ApproxDP(1, Fraction(1, 10 ** 6)), 3, 30)
    assert approx == ApproxDP(amplified_epsilon(1, Fraction(1, 10)), Fraction(1, 10 ** 7))
    assert amplify_without_replacement(PureDP(2), 7, 7) == PureDP(2)
    accountant = FilterAccountant(PureDP(1))
    charge(accountant, loss, "a count on 10 of 100 units", lambda: [0])
    assert accountant.spent == loss
    with pytest.raises(MeasureError):
        amplify_without_replacement(ZCDP(1), 1, 2)
    with pytest.raises(DomainError):
        amplify_without_replacement(PureDP(1), 3, 2)
    with pytest.raises(DomainError):
        amplify_without_replacement(PureDP(1), 1.5, 2)


def test_brute_force_law_of_a_without_replacement_count():
    """Exact law, substitute-one neighbours on N = 5 units: every unit's bit 0 (x) or unit
    0's bit 1 (x′); the sum over n = 2 units drawn uniformly without replacement, with
    geometric noise P(k) ∝ (1/2)^|k| (ε = ln 2). Enumerating the 10 subsets, the largest
    ratio of the output laws is exactly 1 + (n/N)(e^ε − 1) = 1 + 2/5, which the map covers."""
    population, size, a = 5, 2, Fraction(1, 2)

    def geometric(k: int) -> Fraction:
        return (1 - a) / (1 + a) * a ** abs(k)

    subsets = list(itertools.combinations(range(population), size))
    ratios = []
    for k in range(-40, 41):
        without = geometric(k)
        with_unit = sum(geometric(k - (0 in s)) for s in subsets) / len(subsets)
        ratios += [with_unit / without, without / with_unit]
    assert max(ratios) == 1 + Fraction(size, population)
    bound = amplify_without_replacement(PureDP(log_up(Fraction(2))), size, population)
    assert bound.epsilon >= log_down(1 + Fraction(size, population))


def test_sample_n_is_refused_in_a_session_with_the_fix():
    """A session's neighbours are add/remove-one unit (N private): sample(n=…) is refused
    before the debit, naming sample(p=n/N) (SQL's TABLESAMPLE (n ROWS): tests/test_sql.py);
    the JSON step has no n field."""
    df = pl.DataFrame({"u": np.arange(100), "x": np.ones(100, dtype=np.int64)})
    session = Session(df, PrivacyUnit.by("u", 1), PureDP(1))
    with pytest.raises(DomainError, match=r"sample\(p=n/N\)"):
        session.query().sample(n=10)
    with pytest.raises(ProtocolError, match="unknown field"):  # no JSON form for n
        Query.from_json(session, {"steps": [{"step": "sample", "n": 10}],
                                  "aggs": [{"agg": "count"}]})
    with pytest.raises(DomainError, match="p in"):
        session.query().sample()
    assert session.accountant.spent == PureDP(0)


@pytest.mark.parametrize("p", [Fraction(1, 1000), Fraction(1, 10), Fraction(1, 2)])
@pytest.mark.parametrize("eps", [Fraction(1, 10), Fraction(2)])
def test_amplification_matches_dp_accounting_to_its_precision(p, eps):
    """dp-accounting's pessimistic PLD of PoissonSampledDpEvent(p, Laplace(1/ε)) at δ = 1e-12
    is above the closed form by less than two discretisation intervals (2e-4)."""
    pytest.importorskip("dp_accounting.pld")
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    event = dp_accounting.PoissonSampledDpEvent(float(p), dp_accounting.LaplaceDpEvent(
        1 / float(eps)))
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    theirs = acc.compose(event).get_epsilon(1e-12)
    ours = float(amplified_epsilon(eps, p))
    assert -1e-9 <= theirs - ours <= 2e-4
