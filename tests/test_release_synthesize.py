"""MST (dpkit.release.synthetic.mst) and synthetic tables (dpkit.release.synthetic.synthesize):
the zCDP budget,
the selection's sensitivity, a statistical check of the selection with a broken variant,
decompression, and the table-level API."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from kit_spies import replace_select, spy_noisy, spy_rows, spy_select  # noqa: E402

from dpkit.core.measures import ZCDP
from dpkit.errors import DomainError
from dpkit.release.synthetic import mst as M  # noqa: N812
from dpkit.release.synthetic.domain import Bins, Codec, Domain
from dpkit.release.synthetic.synthesize import evaluate, synthesize

pytest.importorskip("mbi")

DOM = Domain.from_dict({"a": 4, "b": 4, "c": 3, "d": 2})


def _codes(n=4000, seed=0):
    """b copies a (a strong pair); c and d independent noise."""
    rng = np.random.default_rng(seed)  # test input
    a = rng.integers(0, 4, n)
    return np.column_stack([a, a, rng.integers(0, 3, n), rng.integers(0, 2, n)]).astype(
        np.int64)


def _spy(monkeypatch):
    log = {"gauss": [], "scales": []}

    def gauss(values, sensitivity, budget):
        if isinstance(budget, ZCDP):
            log["gauss"].append((np.asarray(values).size, Fraction(sensitivity), budget.rho))

    def expo(scores, scale, k):
        log["scales"].append((len(scores), scale))

    spy_noisy(monkeypatch, gauss)
    spy_select(monkeypatch, expo)
    return log


def test_mst_spends_rho_exactly_in_three_thirds(monkeypatch):
    log = _spy(monkeypatch)
    rho = Fraction(1, 2)
    result = M.mst_measure(_codes(), DOM, rho)
    d = len(DOM.attributes)
    assert [g[1] for g in log["gauss"]] == [1] * (2 * d - 1)
    one_way = sum(g[2] for g in log["gauss"][:d])
    two_way = sum(g[2] for g in log["gauss"][d:])
    assert one_way == rho / 3 and two_way == rho / 3
    eps = [2 * M.SCORE_SENSITIVITY / s for _, s in log["scales"]]
    assert len(eps) == d - 1 and sum(e * e / 8 for e in eps) <= rho / 3
    assert len(result.selected) == d - 1 and len(result.measurements) == 2 * d - 1


def test_mst_reads_sigma_off_the_rows_it_drew_through(monkeypatch):
    """One road: every σ MST keeps (the 3σ threshold, the inference's weights) is the exact
    scale of the row its ``frontend.noisy`` draw returned, not a second calibration beside
    the entry (a ``noise_row`` call here fails the test: the old code made two)."""
    from dpkit.mechanisms import frontend

    def no_second_calibration(*args, **kw):
        raise AssertionError("MST recomputed a scale beside the draw")

    rows = spy_rows(monkeypatch)
    monkeypatch.setattr(frontend, "noise_row", no_second_calibration)
    result = M.mst_measure(_codes(), DOM, Fraction(1, 2))
    assert [m.scale for m in result.measurements] == [float(r.scale) for r in rows]
    d = len(DOM.attributes)
    assert {r.scale for r in rows[:d]} == {frontend.exact_scale(
        frontend.row_of(frontend.calibrate(1, ZCDP(Fraction(1, 2) / 3 / d))))}


def test_pair_scores_move_by_at_most_one_between_neighbours():
    codes = _codes(300)
    ones = {a: np.full(s, 1 / s) for a, s in zip(DOM.attributes, DOM.sizes, strict=True)}
    pairs = [("a", "b"), ("a", "c"), ("c", "d")]
    base = M.pair_scores(codes, DOM, ones, 300.0, pairs)
    rng = np.random.default_rng(1)  # test input
    for _ in range(30):
        drop = M.pair_scores(np.delete(codes, rng.integers(300), axis=0), DOM, ones, 300.0,
                             pairs)
        extra = np.array([[rng.integers(s) for s in DOM.sizes]])
        add = M.pair_scores(np.vstack([codes, extra]), DOM, ones, 300.0, pairs)
        for p in pairs:
            assert abs(drop[p] - base[p]) <= 1 and abs(add[p] - base[p]) <= 1


def test_selection_finds_the_strong_pair_and_broken_variant_is_caught(monkeypatch):
    """ρ = 2, n = 4,000: the (a, b) score exceeds every other candidate's by > 2,000 (a, b
    identical: their 2-way marginal is far from independent), and the first draw is among
    6 pairs at scale s: it misses with probability ≤ 5·e^{−2000/s} < 1e-6 (checked below).
    Broken: a selection that ignores the scores (always the last candidate)."""
    log = _spy(monkeypatch)
    result = M.mst_measure(_codes(), DOM, 2)
    scale = float(log["scales"][0][1])
    assert 5 * math.exp(-2000 / scale) < 1e-6
    assert ("a", "b") in result.selected
    replace_select(monkeypatch, lambda scores, scale: len(scores) - 1)
    assert ("a", "b") not in M.mst_measure(_codes(), DOM, 2).selected


def test_decompress_maps_merged_cells_to_merged_codes():
    kept = np.array([0, 3])
    codes = np.array([0, 1, 2, 2, 2, 1])
    out = M.decompress(codes, kept, 6)
    assert list(out[[0, 1, 5]]) == [0, 3, 3]
    assert set(out[[2, 3, 4]]) <= {1, 2, 4, 5}
    # weights ∝ the merged codes' noisy counts: a zero (or negative) count is never drawn
    many = np.full(2000, 2)
    drawn = M.decompress(many, kept, 6, np.array([0.0, 3.0, -5.0, 1.0]))
    assert set(drawn) <= {2, 5}
    # P(2) = 3/4 over 2000 draws: ≥ 0.65 fails with probability < 1e-12 (Hoeffding)
    assert 0.65 * 2000 <= (drawn == 2).sum() <= 0.85 * 2000


def _table(n=3000):
    codes = _codes(n)
    return pl.DataFrame({
        "colour": np.array(["red", "green", "blue", "grey"])[codes[:, 0]],
        "shade": np.array(["r", "g", "b", "k"])[codes[:, 1]],
        "size": (codes[:, 2] * 10 + 5).astype(np.int32),
        "flag": codes[:, 3].astype(bool),
    })


SPEC = {"colour": ["red", "green", "blue", "grey"], "shade": ["r", "g", "b", "k"],
        "size": Bins((0.0, 10.0, 20.0, 30.0)), "flag": [False, True]}


@pytest.mark.parametrize("method", ["mst", "mwem", "independent"])
def test_synthesize_keeps_columns_and_types(method):
    real = _table()
    syn = synthesize(real, SPEC, method=method, epsilon=2, rows=500,
                     **({"iters": 200} if method == "mst" else {}))
    assert syn.columns == list(SPEC) and syn.height == 500
    assert syn.schema == real.select(list(SPEC)).schema
    assert set(syn["size"].unique()) <= {5, 15, 25}
    scores = evaluate(real, syn, SPEC, workload=[("colour", "shade")])
    assert all(0 <= v <= 1 for v in scores.values())
    assert set(scores) == {"tv_1way", "tv_2way", "tv_3way", "workload_tv", "workload_max_tv"}


def test_mst_beats_the_independent_baseline_on_the_strong_pair():
    real = _table(6000)
    mst = synthesize(real, SPEC, method="mst", epsilon=4, iters=300)
    ind = synthesize(real, SPEC, method="independent", epsilon=4)
    pair = [("colour", "shade")]
    assert evaluate(real, mst, SPEC, workload=pair)["workload_tv"] < 0.1
    assert evaluate(real, ind, SPEC, workload=pair)["workload_tv"] > 0.5


def test_evaluate_of_the_real_table_is_zero():
    real = _table(500)
    assert evaluate(real, real, SPEC) == {"tv_1way": 0.0, "tv_2way": 0.0, "tv_3way": 0.0}


@pytest.mark.parametrize("kwargs", [{"method": "gan"}, {"epsilon": 0},
                                    {"method": "mst", "delta": 0}])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(DomainError):
        synthesize(_table(100), SPEC, **kwargs)


def test_undeclared_values_raise():
    with pytest.raises(DomainError):
        synthesize(_table(100), {**SPEC, "colour": ["red"]}, method="independent")


def test_aim_spends_exactly_rho_and_measures_the_strong_pair(monkeypatch):
    """ρ-zCDP: the measurements' ρ plus each selection's ε²/8 sum to at most ρ, and the
    loop stops only when the budget is used (within the last round's share). The selection
    must reach the (a, b) marginal that the independent start gets wrong (ρ = 4: its score
    exceeds the others' by far more than the scale)."""
    from dpkit.release.synthetic import aim as A  # noqa: N812

    log = {"gauss": [], "scales": []}
    spy_noisy(monkeypatch, lambda v, s, budget: log["gauss"].append(budget.rho))
    spy_select(monkeypatch, lambda u, s, k: log["scales"].append((max(u), s)))
    rho = Fraction(4)
    result = A.aim(_codes(), DOM, rho, rounds=8, iters=50, final_iters=100)
    weights = A.candidates(list(__import__("itertools").combinations(DOM.attributes, 2)))
    sel = [Fraction(2 * max(weights.values()) * (1 + A._ROUND_ALLOWANCE)) / s
           for _, s in log["scales"]]
    spent = sum(log["gauss"]) + sum(e * e / 8 for e in sel)
    assert spent <= rho
    assert rho - spent < Fraction(1, 10) * rho  # used (the ε rounding leaves a sliver)
    assert ("a", "b") in result.selected
    assert len(log["gauss"]) == len(result.measurements) == 4 + len(result.selected)


def test_aim_round_schedule_is_the_papers(monkeypatch):
    """Replays the accounting from what the mechanisms were called with: d one-way
    measurements at 0.9ρ/T; each round one selection at ρ_sel = ρ_meas/9 (scale
    2Δ(1 + allowance)/ε, ε = √(8ρ_sel) rounded down, Δ the largest weight) then one
    measurement at ρ_meas; ρ_meas stays or quadruples (annealing) except the last round,
    which takes 0.9 of what is left; the total is exactly ρ. Attack: a rewrite of the
    scoring/inference that also changed a round's budget, its selection scale or the
    annealing factor fails here."""
    import itertools

    from dpkit.mechanisms import make_selection
    from dpkit.release.synthetic import aim as A  # noqa: N812

    calls = []
    spy_noisy(monkeypatch, lambda v, s, budget: calls.append(("meas", budget.rho)))
    spy_select(monkeypatch, lambda u, sc, k: calls.append(("sel", sc)))
    rho, t = Fraction(1, 2), 12
    A.aim(_codes(), DOM, rho, rounds=t, iters=30, final_iters=30)
    d = len(DOM.attributes)
    assert calls[:d] == [("meas", Fraction(9, 10) * rho / t)] * d
    weights = A.candidates(list(itertools.combinations(DOM.attributes, 2)))
    delta = max(weights.values()) * (1 + A._ROUND_ALLOWANCE)  # DOM: every candidate fits
    rounds = calls[d:]
    assert [k for k, _ in rounds] == ["sel", "meas"] * (len(rounds) // 2)
    meas = Fraction(9, 10) * rho / t
    used = d * meas
    for i in range(0, len(rounds), 2):
        got = rounds[i + 1][1]
        last = i + 2 == len(rounds)
        if last:
            assert got == Fraction(9, 10) * (rho - used)
        else:
            assert got in (meas, 4 * meas)
        meas = got
        sel = got / 9
        assert rounds[i][1] == make_selection(delta, A._epsilon_for_rho(sel)).scale
        used += got + sel
    assert used == rho


def test_aim_candidates_and_weights():
    from dpkit.release.synthetic.aim import candidates

    w = candidates([("a", "b"), ("b", "c")])
    assert w == {("a",): 1, ("b",): 2, ("c",): 1, ("a", "b"): 3, ("b", "c"): 3}


def test_independent_baseline_at_rho_splits_rho_over_the_marginals(monkeypatch):
    import dpkit.release.synthetic.synthesize as S  # noqa: N812

    dom = Domain.from_dict({"a": 3, "b": 2, "c": 4})
    codes = np.zeros((50, 3), dtype=np.int64)
    calls = []
    spy_noisy(monkeypatch, lambda values, sensitivity, budget: calls.append(
        (Fraction(sensitivity), budget.rho)))
    out = S.independent_sample(codes, dom, rho=Fraction(3, 10))
    assert out.shape[1] == 3
    # each 1-way marginal: L2 sensitivity 1 at ρ/d, composing to exactly ρ (a broken split
    # that gave each marginal the whole ρ would sum to 3ρ)
    assert calls == [(Fraction(1), Fraction(1, 10))] * 3
    assert sum(r for _, r in calls) == Fraction(3, 10)
    for bad in ({}, {"epsilon": 1, "rho": 1}, {"rho": 0}):
        with pytest.raises(DomainError):
            S.independent_sample(codes, dom, **bad)


def test_mwem_workload_is_3way_where_every_3way_marginal_is_small():
    """The rule is a function of the declared domain only. Attack (issue 18): MWEM through
    synthesize() always used the 2-way workload, which on a 16-attribute binary survey
    barely beat the 1-way baseline on 3-way marginals."""
    from dpkit.release.synthetic.synthesize import MWEM_3WAY_CELLS, mwem_workload

    binary = Domain(tuple(f"y{i}" for i in range(16)), (2,) * 16)
    w = mwem_workload(binary)
    assert len(w.cliques) == 560 and {len(c) for c in w.cliques} == {3}
    # at the cap (4·4·4 = 64 cells): still 3-way; one more value: 2-way
    assert MWEM_3WAY_CELLS == 64
    assert {len(c) for c in mwem_workload(Domain.from_dict(
        {"a": 4, "b": 4, "c": 4, "d": 2})).cliques} == {3}
    big = mwem_workload(Domain.from_dict({"a": 4, "b": 4, "c": 5, "d": 2}))
    assert len(big.cliques) == 6 and {len(c) for c in big.cliques} == {2}
    # the three *largest* sizes decide, wherever they are declared
    assert {len(c) for c in mwem_workload(Domain.from_dict(
        {"a": 2, "b": 9, "c": 2, "d": 2, "e": 3})).cliques} == {3}  # 9·3·2 = 54
    assert {len(c) for c in mwem_workload(Domain.from_dict(
        {"a": 2, "b": 9, "c": 3, "d": 2, "e": 3})).cliques} == {2}  # 9·3·3 = 81
    assert {len(c) for c in mwem_workload(DOM, max_cells=1000).cliques} == {3}
    assert {len(c) for c in mwem_workload(DOM, max_cells=47).cliques} == {2}  # 4·4·3 = 48
    # fewer than three attributes: the one d-way marginal, whatever its size
    assert mwem_workload(Domain.from_dict({"a": 300, "b": 200})).cliques == (("a", "b"),)
    assert mwem_workload(Domain.from_dict({"a": 3})).cliques == (("a",),)
    for bad in (0, -5):
        with pytest.raises(DomainError):
            mwem_workload(DOM, max_cells=bad)


def test_synthesize_mwem_runs_on_the_rules_workload(monkeypatch):
    import dpkit.release.synthetic.mwem as MW  # noqa: N812

    seen = []
    real = MW.mwem

    def spy(codes, workload, epsilon, **kw):
        seen.append(workload.cliques)
        return real(codes, workload, epsilon, **kw)

    monkeypatch.setattr(MW, "mwem", spy)
    table = pl.DataFrame({c: np.arange(200) % 2 for c in "abcd"})
    spec = {c: [0, 1] for c in "abcd"}
    synthesize(table, spec, method="mwem", epsilon=1, rounds=2)
    assert seen[-1] == tuple(__import__("itertools").combinations("abcd", 3))
    synthesize(table, spec, method="mwem", epsilon=1, rounds=2, workload=[("a", "b")])
    assert seen[-1] == (("a", "b"),)


def _features(domain: Domain, eps: float) -> dict[str, float]:
    """The rule's public features, computed here independently of choose_method."""
    sizes = sorted(domain.sizes)
    return {"d": float(len(sizes)), "log2_cells": float(sum(math.log2(s) for s in sizes)),
            "log2_max_pair": math.log2(sizes[-1] * sizes[-2]), "epsilon": float(eps)}


def _around(rule):
    """(domain, ε) pairs just at-or-below and just above the rule's threshold."""
    feature, threshold = rule[0], rule[1]
    pool = [(Domain(tuple(f"y{i}" for i in range(d)), (2,) * d), e)
            for d in range(2, 80) for e in (0.1, 1)]
    pool += [(Domain(("a", "b", "c"), (s, s, 2)), e) for s in range(2, 400) for e in (0.1, 1)]
    pool += [(Domain(("a", "b", "c"), (3, 3, 2)), e) for e in (0.01, 0.05, 0.1, 0.5, 1, 2, 8)]
    below = [p for p in pool if _features(*p)[feature] <= threshold]
    above = [p for p in pool if _features(*p)[feature] > threshold]
    key = lambda p: abs(_features(*p)[feature] - threshold)  # noqa: E731
    return ([min(below, key=key)] if below else []) + ([min(above, key=key)] if above else [])


def test_choose_method_follows_the_shipped_rules():
    """Each branch of each rule, from the declared domain and ε only (no data, no budget).
    Attack (issue 18): synthesize() without a method always ran MST."""
    from dpkit.release.synthetic.synthesize import DEFAULT_RULE, PURE_RULE, choose_method

    for rule, have in ((DEFAULT_RULE, True), (PURE_RULE, False)):
        feature, threshold, low, high = rule
        cases = _around(rule)
        wanted = {low if _features(*c)[feature] <= threshold else high for c in cases}
        assert wanted == {low, high}  # both branches reached (a constant rule: one)
        for domain, eps in cases:
            want = low if _features(domain, eps)[feature] <= threshold else high
            assert choose_method(domain, eps, have_mbi=have) == want
            assert choose_method(domain, Fraction(eps), have_mbi=have) == want
    for have in (True, False):  # one attribute: no marginal to model but its own
        assert choose_method(Domain.from_dict({"a": 5}), 1, have_mbi=have) == "independent"
    for bad in (0, -1):
        with pytest.raises(DomainError):
            choose_method(DOM, bad)


def test_shipped_rules_are_the_ones_the_study_fits():
    """The rules are data: bench/aim_scale.py report refits them from
    bench/results/aim_scale_choice.json; the code must ship exactly that fit."""
    import importlib.util
    from pathlib import Path

    from dpkit.release.synthetic.synthesize import DEFAULT_RULE, PURE_RULE

    path = Path(__file__).resolve().parent.parent / "bench" / "aim_scale.py"
    if not (path.parent / "results" / "aim_scale_choice.json").exists():
        pytest.skip("the method-choice study's results are not here")
    spec = importlib.util.spec_from_file_location("aim_scale", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cells = [c for c in bench._cells_of_choice().values() if c["feat"]]
    assert bench.shipped_form(bench._fit_rule(cells), cells) == DEFAULT_RULE
    pure = bench._fit_rule(cells, ("mwem", "independent"))
    assert bench.shipped_form(pure, cells) == PURE_RULE


def _stop_at(monkeypatch, log):
    """Every method's entry point records its name and stops (no noise is drawn)."""
    import dpkit.release.synthetic.aim as A  # noqa: N812
    import dpkit.release.synthetic.mwem as MW  # noqa: N812
    import dpkit.release.synthetic.synthesize as S  # noqa: N812

    class StopError(Exception):
        pass

    def stop(name):
        def f(*args, **kw):
            log.append(name)
            raise StopError

        return f

    monkeypatch.setattr(M, "mst", stop("mst"))
    monkeypatch.setattr(A, "aim", stop("aim"))
    monkeypatch.setattr(MW, "mwem", stop("mwem"))
    monkeypatch.setattr(S, "independent_sample", stop("independent"))
    return StopError


@pytest.mark.parametrize("chosen", ["mst", "aim", "mwem", "independent"])
def test_auto_runs_the_chosen_method(monkeypatch, chosen):
    import dpkit.release.synthetic.synthesize as S  # noqa: N812

    log, asked = [], []
    stop = _stop_at(monkeypatch, log)
    monkeypatch.setattr(S, "choose_method", lambda domain, eps: asked.append(
        (domain.attributes, eps)) or chosen)
    with pytest.raises(stop):
        synthesize(_table(300), SPEC, method="auto", epsilon=Fraction(1, 2))
    assert log == [chosen] and asked == [(tuple(SPEC), Fraction(1, 2))]
    log.clear()
    with pytest.raises(stop):  # and "auto" is the default
        synthesize(_table(300), SPEC, epsilon=Fraction(1, 2))
    assert log == [chosen]


def test_auto_end_to_end_is_the_rules_method(monkeypatch):
    import dpkit.release.synthetic.synthesize as S  # noqa: N812

    ran = []
    real = S.choose_method
    monkeypatch.setattr(S, "choose_method", lambda domain, eps: ran.append(
        real(domain, eps)) or ran[-1])
    out = synthesize(_table(300), SPEC, epsilon=2, rows=50, iters=100)
    assert out.columns == list(SPEC) and out.height == 50
    assert ran == [real(Codec.declare(_table(300), SPEC).domain, 2)]


def test_unknown_method_raises_before_any_budget_is_spent(monkeypatch):
    """Validated first: no method runs, no noise is drawn, the rule is not even asked."""
    import dpkit.release.synthetic.synthesize as S  # noqa: N812

    log = []
    _stop_at(monkeypatch, log)
    monkeypatch.setattr(S, "choose_method", lambda *a: log.append("choose"))
    spy_noisy(monkeypatch, lambda *a: log.append("noisy"))
    for bad in ("Auto", "gan", "", "mwem2"):
        with pytest.raises(DomainError, match="unknown method"):
            synthesize(_table(100), SPEC, method=bad, epsilon=1)
    assert log == []
