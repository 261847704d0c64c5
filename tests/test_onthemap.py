"""The OnTheMap synthesizer (release.synthetic.onthemap): the Pólya urn's exact law, the
α ↔ (ε, δ) map against brute force on tiny domains, plan-time validation, the charge and
the audit case with its broken variant.

False-positive rate: the χ² test rejects a correct sampler with probability ≤ 1e-6
(its threshold is the χ² quantile at 1 − 1e-6); the audit runs at confidence 1 − 1e-6 with
the histogram test's 9-vote majority (< 1e-11)."""

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy import stats

import dpkit as dp
from dpkit.audit import run_audit
from dpkit.core.accountant import FilterAccountant
from dpkit.core.measures import ApproxDP, ProbabilisticDP, convert
from dpkit.errors import (
    BaselineWarning,
    BudgetExceededError,
    ColumnError,
    DomainError,
    MeasureError,
)
from dpkit.release.synthetic import onthemap as otm

FPR = 1e-6


# -- the law ------------------------------------------------------------------------------
def _compositions(m, k):
    for cut in itertools.combinations(range(m + k - 1), k - 1):
        edges = (-1, *cut, m + k - 1)
        yield tuple(edges[i + 1] - edges[i] - 1 for i in range(k))


def _urn_law(counts, alpha, m, prior=True):
    """The exact law of otm._urn, by feeding it every sequence of uniform integers."""
    a = Fraction(alpha)
    weights = [a.denominator * c + (a.numerator if prior else 0) for c in counts]
    law = {}

    def walk(prefix, prob):
        seen = []

        def below(w):
            seen.append(w)
            return prefix[len(seen) - 1] if len(seen) <= len(prefix) else 0

        if len(prefix) == m:
            out = tuple(otm._urn(weights, a.denominator, m, below))
            law[out] = law.get(out, 0) + prob
            return
        otm._urn(weights, a.denominator, len(prefix) + 1, below)
        total = seen[len(prefix)]
        for u in range(total):
            walk(prefix + [u], prob / total)

    walk([], Fraction(1))
    return law


@pytest.mark.parametrize("counts,alpha,m", [((1, 0), 1, 3), ((2, 0, 1), Fraction(1, 2), 3),
                                             ((0, 0), Fraction(3, 2), 2)])
def test_urn_law_is_the_dirichlet_multinomial(counts, alpha, m):
    law = _urn_law(counts, alpha, m)
    for s in _compositions(m, len(counts)):
        assert law.get(s, 0) == otm.dirichlet_multinomial_pmf(s, counts, alpha)


def test_urn_without_prior_is_not_the_law():
    # broken variant: the prior ignored (weights q·nᵢ) — the enumeration tells it apart
    law = _urn_law((1, 0), 1, 3, prior=False)
    assert law.get((0, 3), 0) == 0 != otm.dirichlet_multinomial_pmf((0, 3), (1, 0), 1)


def _chi2_rejects(draw, counts, alpha, m, n=4000):
    cells = list(_compositions(m, len(counts)))
    expected = np.array([float(otm.dirichlet_multinomial_pmf(s, counts, alpha)) * n
                         for s in cells])
    index = {s: i for i, s in enumerate(cells)}
    observed = np.zeros(len(cells))
    for _ in range(n):
        observed[index[tuple(int(v) for v in draw())]] += 1
    stat = float(((observed - expected) ** 2 / expected).sum())
    return stat > stats.chi2.ppf(1 - FPR, len(cells) - 1)


def test_sampler_passes_chi_square_and_broken_prior_fails():
    counts, alpha, m = [2, 0, 1], Fraction(1, 2), 3
    assert not _chi2_rejects(lambda: otm.polya_urn(counts, alpha, m), counts, alpha, m)
    # broken: the prior ignored (α → tiny): an empty cell is almost never drawn
    assert _chi2_rejects(lambda: otm.polya_urn(counts, Fraction(1, 10**6), m), counts,
                         alpha, m)


# -- α ↔ (ε, δ) -----------------------------------------------------------------------------
def _histograms(k, max_n):
    yield from itertools.product(range(max_n + 1), repeat=k)


def _brute_worst(m, alpha, k, max_n=4):
    """sup over histograms with nᵢ ≤ max_n of: the largest |log ratio| over add/remove
    neighbours, and the disclosure probability at e^ε."""
    law = {n: {s: otm.dirichlet_multinomial_pmf(s, n, alpha) for s in _compositions(m, k)}
           for n in _histograms(k, max_n + 1)}
    return law


def test_pure_epsilon_is_the_brute_force_sup():
    # add/remove neighbours stay below 1 + m/α (reached as N → ∞); moving one worker between
    # cells (two such steps) attains it exactly: n_i = 1 → 0, all m records at i
    m, alpha, k = 3, Fraction(1, 2), 2
    law = _brute_worst(m, alpha, k)
    small = [n for n in law if max(n) <= 4]
    add = max(max(law[n][s] / law[tuple(v + (j == i) for j, v in enumerate(n))][s],
                  law[tuple(v + (j == i) for j, v in enumerate(n))][s] / law[n][s])
              for n in small for i in range(k) for s in law[n])
    moved = max(law[n][s] / law[(n[0] - 1, n[1] + 1)][s] for n in small if n[0]
                for s in law[n])
    bound = math.exp(float(otm.pure_epsilon(m, alpha)))
    assert add < 1 + m / alpha <= bound * (1 + 1e-12)
    assert moved == 1 + m / alpha
    assert otm.pure_epsilon(m, alpha) >= Fraction(math.log(7) * (1 - 1e-12))


@pytest.mark.parametrize("m,alpha,k,eps", [(3, Fraction(3, 2), 2, Fraction(1)),
                                           (3, Fraction(3, 2), 3, Fraction(1)),
                                           (4, Fraction(2), 3, Fraction(1))])
def test_disclosure_delta_bounds_the_brute_force(m, alpha, k, eps):
    law = _brute_worst(m, alpha, k, max_n=3)
    bound = otm.disclosure_delta(m, alpha, k, eps)
    e = math.exp(float(eps))
    worst = 0.0
    for n, p in law.items():
        if max(n) > 3:
            continue
        neighbours = [tuple(v + (j == i) for j, v in enumerate(n)) for i in range(k)]
        neighbours += [tuple(v - (j == i) for j, v in enumerate(n)) for i in range(k) if n[i]]
        bad = sum(float(p[s]) for s in p
                  if any(not 1 / e <= float(p[s] / law[nb][s]) <= e for nb in neighbours))
        worst = max(worst, bad)
    assert worst <= float(bound) + 1e-12
    assert 0 < float(bound) < 1  # a claim with content


def test_disclosure_delta_vanishes_at_the_pure_alpha_and_is_one_when_A_is_small():
    m, k, eps = 4, 3, Fraction(1)
    pure = Fraction(m) / Fraction(math.e - 1).limit_denominator(10) * 2
    assert otm.disclosure_delta(m, pure, k, eps) == 0
    assert otm.disclosure_delta(m, Fraction(1, 10), k, eps) == 1  # kα < m/(e^ε − 1)


def test_choose_alpha_is_certified_and_minimal_on_its_grid():
    m, k, eps, delta = 20, 10, Fraction(1), Fraction(1, 10**4)
    a = otm.choose_alpha(m, k, eps, delta)
    assert otm.disclosure_delta(m, a, k, eps) <= delta
    assert otm.disclosure_delta(m, a - Fraction(1, 4096), k, eps) > delta
    assert a < Fraction(m) / Fraction(math.e - 1)  # below the pure-DP prior


# -- the measure --------------------------------------------------------------------------
def test_probabilistic_dp_converts_to_approx_dp():
    p = ProbabilisticDP(1, Fraction(1, 1000))
    assert convert(p, ApproxDP) == ApproxDP(1, Fraction(1, 1000))
    assert p + p == ProbabilisticDP(2, Fraction(2, 1000))
    assert p <= ApproxDP(1, Fraction(1, 100)) and not p <= ApproxDP(Fraction(1, 2), 1)


# -- the entry ------------------------------------------------------------------------------
def _table():
    return pl.DataFrame({"o": ["a", "a", "b", "c", "z"], "d": ["x", "y", "x", "x", "x"]})


def _run(**kw):
    args = dict(origin="o", destination="d", origins=["a", "b", "c"], destinations=["x", "y"],
                m=5, epsilon=1, delta=Fraction(1, 1000))
    args.update(kw)
    with warnings.catch_warnings():  # the floor's warning has its own tests below
        warnings.simplefilter("ignore", BaselineWarning)
        return otm.onthemap(_table(), **args)


def test_release_shape_and_charge():
    acc = FilterAccountant(dp.ApproxDP(2, Fraction(1, 100)))
    out = _run(accountant=acc)
    assert [int(c.sum()) for c in out.counts.values()] == [5, 5]
    assert out.loss.delta <= Fraction(1, 1000)
    assert acc.spent == ApproxDP(1, out.loss.delta)
    assert out.records().height == 10
    assert out.table(["a", "b", "c"]).shape == (2, 3)


def test_shrunk_domain_drops_outside_rows():
    doms = otm.shrink_domain({"x": {"a": 3, "b": 2, "c": 0}, "y": {"a": 1, "b": 0, "c": 0}},
                             keep=2)
    assert doms == {"x": ("a", "b"), "y": ("a", "b")}
    out = _run(domains=doms)
    assert out.domains == doms and all(c.size == 2 for c in out.counts.values())


@pytest.mark.parametrize("kw", [dict(epsilon=0), dict(delta=1), dict(m=0),
                                dict(origin="nope"), dict(destinations=["x", "x"]),
                                dict(domains={"x": ["q"], "y": ["a"]}),
                                dict(m=100_000, epsilon=Fraction(1, 100)),
                                dict(accountant="ledger")])
def test_plan_time_validation_spends_nothing(kw):
    acc = FilterAccountant(dp.ApproxDP(2, Fraction(1, 100)))
    kw = {"accountant": acc, **kw} if "accountant" not in kw else kw
    with pytest.raises(DomainError):
        _run(**kw)
    assert acc.spent == ApproxDP(0, 0)


def test_pure_budget_refuses_before_the_debit():
    acc = FilterAccountant(dp.PureDP(5))
    with pytest.raises(MeasureError):
        _run(accountant=acc)
    assert acc.spent == dp.PureDP(0)


# -- audit ----------------------------------------------------------------------------------
def test_audit_case_passes_and_broken_alpha_is_flagged():
    case = otm.audit_cases()[0]
    good = run_audit(case, 20_000, confidence=1 - FPR)
    assert good.histogram_passed and good.lower_bound <= good.claimed_epsilon
    bad = run_audit(case, 20_000, broken=True, confidence=1 - FPR)
    assert (not bad.histogram_passed) or bad.lower_bound > bad.claimed_epsilon


# -- the floor: the warning naming per-cell noisy counts ----------------------------------
def test_expected_errors_match_enumeration():
    # synthesizer: the exact E Σ|sᵢ − m/k| on the even table n = (2, 2) by enumerating the
    # law; identity: k·E|Z| for the two-sided geometric by summing its pmf
    m, k, alpha, eps = 4, 2, Fraction(3, 2), 1
    exact = sum(otm.dirichlet_multinomial_pmf(s, (2, 2), alpha) * sum(abs(v - 2) for v in s)
                for s in _compositions(m, k))
    q = math.exp(-eps)
    mean_abs = sum((1 - q) / (1 + q) * q ** abs(z) * abs(z) for z in range(-400, 401))
    synth, ident = otm.expected_errors(m, alpha, k, eps)
    assert synth == pytest.approx(float(exact), rel=1e-9)
    assert ident == pytest.approx(k * mean_abs, rel=1e-9)
    # broken variant: the prior dropped from the reference law changes the figure
    assert otm._sampling_error(m, 2.0, k) != pytest.approx(synth, rel=1e-3)


def test_warning_names_noisy_counts_from_declared_quantities_before_the_debit():
    big = pl.DataFrame({"o": ["a"] * 40 + ["b"] * 3, "d": ["x"] * 20 + ["y"] * 23})
    for table in (_table(), big):  # the data never decides: both tables warn alike
        acc = FilterAccountant(dp.ApproxDP(Fraction(1, 2), Fraction(1, 100)))
        with pytest.warns(BaselineWarning, match="per-cell noisy counts"), \
                pytest.raises(BudgetExceededError):  # warned at plan time, nothing spent
            otm.onthemap(table, origin="o", destination="d", origins=["a", "b", "c"],
                         destinations=["x", "y"], m=40, epsilon=2, delta=Fraction(1, 1000),
                         accountant=acc)
        assert acc.spent == ApproxDP(0, 0)


def test_no_warning_where_the_noisy_counts_are_worse():
    # m = 2 records over 10 origins at ε = 1/2: the counts' noise (10/sinh ½ ≈ 19 records)
    # exceeds anything 2 records can get wrong (≤ 4)
    origins = list("abcdefghij")
    with warnings.catch_warnings():
        warnings.simplefilter("error", BaselineWarning)
        out = otm.onthemap(pl.DataFrame({"o": ["a"], "d": ["x"]}), origin="o", destination="d",
                           origins=origins, destinations=["x"], m=2, epsilon=Fraction(1, 2),
                           delta=Fraction(1, 100))
    assert int(out.counts["x"].sum()) == 2


# -- through a Session: query.publish.onthemap ---------------------------------------------
def _workers() -> pl.DataFrame:
    """Worker 0 appears 30 times (a heavy unit); workers 1…20 once each; one row outside the
    declared origins."""
    ids = [0] * 30 + list(range(1, 21)) + [99]
    origin = ["a"] * 30 + ["b", "c"] * 10 + ["zz"]
    dest = ["x"] * 30 + ["x", "y"] * 10 + ["x"]
    return pl.DataFrame({"worker": ids, "home": origin, "work": dest})


def _publish(s, **kw):
    args = dict(origins=["a", "b", "c"], destinations=["x", "y"], m=5, epsilon=1,
                delta=Fraction(1, 1000))
    args.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BaselineWarning)
        return s.query().publish.onthemap("home", "work", **args)


def _spy_draw(monkeypatch) -> dict:
    seen: dict = {}
    real = otm.OnTheMapPlan.draw

    def spy(self, origin, destination):
        seen["rows"] = len(origin)
        return real(self, origin, destination)

    monkeypatch.setattr(otm.OnTheMapPlan, "draw", spy)
    return seen


def test_session_bounds_each_worker_to_one_row_and_debits_once(tmp_path, monkeypatch):
    from dpkit.ledger import Ledger

    seen = _spy_draw(monkeypatch)
    s = dp.Session(_workers(), dp.PrivacyUnit.by("worker", 1), dp.ApproxDP(2, Fraction(1, 100)),
                   ledger=Ledger(tmp_path / "l.sqlite"), dataset="od")
    out = _publish(s)
    assert seen["rows"] == 22  # worker 0 kept once: 1 + 20 + worker 99 (dropped at the draw)
    assert [int(c.sum()) for c in out.counts.values()] == [5, 5]
    rows = s.ledger.releases("od")
    assert len(rows) == 1 and rows[0]["status"] == "released"
    assert rows[0]["loss"] == ApproxDP(1, out.loss.delta) == s.spent
    assert "publish.onthemap" in rows[0]["query"] and s.last_release.values is out


def test_session_check_catches_unbounded_rows(tmp_path, monkeypatch):
    # broken variant: the bounding skipped (the raw rows drawn from) — the count check fails
    from dpkit.frame import engine

    seen = _spy_draw(monkeypatch)
    monkeypatch.setattr(engine, "bound_contributions", lambda lf, unit, cols, keys: lf)
    s = dp.Session(_workers(), dp.PrivacyUnit.by("worker", 1), dp.ApproxDP(2, Fraction(1, 100)))
    _publish(s)
    assert seen["rows"] != 22


@pytest.mark.parametrize("how", ["unit", "column", "m", "declaration", "pure"])
def test_session_refusals_come_before_the_debit(how):
    unit = dp.PrivacyUnit.by("worker", 3 if how == "unit" else 1)
    budget = dp.PureDP(5) if how == "pure" else dp.ApproxDP(2, Fraction(1, 100))
    s = dp.Session(_workers(), unit, budget)
    kw = dict(origins=["a", "b", "c"], destinations=["x", "y"], m=5, epsilon=1,
              delta=Fraction(1, 1000))
    if how == "declaration":
        kw["destinations"] = ["x", "x"]
    if how == "m":
        kw["m"] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BaselineWarning)
        with pytest.raises((DomainError, ColumnError, MeasureError)):
            s.query().publish.onthemap("nope" if how == "column" else "home", "work", **kw)
    assert s.spent in (ApproxDP(0, 0), dp.PureDP(0))
