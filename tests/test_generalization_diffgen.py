"""DiffGen (dpkit.release.generalization): taxonomy validation, the budget split, the
exponential mechanism's exact law on small neighbouring tables, the session entry.

False-positive rates: the brute-force tests are exact (no sampling). The one statistical
test (a release's first choice against the law) fails a correct implementation with
probability ≤ 1e-6 (Hoeffding per candidate, union bound); its broken variant (the
selection drawn at 4·ε′) moves a probability by more than twice the tolerance, so it is
caught always in effect.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.core.compose import PrivacyFilter
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms import frontend
from dpkit.release.generalization import (
    ADULT_CLASSES,
    ADULT_TARGET,
    ADULT_TAXONOMY,
    Categorical,
    Numeric,
    diffgen,
    plan_diffgen,
)
from dpkit.release.generalization.diffgen import first_step_scores, largest_table

TAXES = {"e": Categorical({"all": {"lo": ["a", "b"], "hi": ["c"]}}), "n": Numeric(0, 4)}
CLASSES = ("no", "yes")
TABLE = pl.DataFrame({"e": ["a", "b", "c", "a", "c", "b"], "n": [0, 1, 3, 2, 3, 0],
                      "y": ["no", "no", "yes", "yes", "yes", "no"]})
DOMAIN = [(e, n, y) for e in "abc" for n in range(4) for y in CLASSES]


def neighbours(table: pl.DataFrame):
    """Every table at add/remove distance 1 inside the declared domain."""
    for e, n, y in DOMAIN:
        yield pl.concat([table, pl.DataFrame({"e": [e], "n": [n], "y": [y]})])
    for i in range(table.height):
        yield pl.concat([table.head(i), table.slice(i + 1)])


def law(plan, table, sharper: int = 1) -> np.ndarray:
    """P(candidate) ∝ exp(ε′·u/(2Δu)) of the first step (the paper's line 6)."""
    _, u = first_step_scores(plan, table)
    z = np.asarray(u, dtype=np.float64) * float(plan.step_epsilon / (2 * plan.sensitivity))
    z = sharper * z
    w = np.exp(z - z.max())
    return w / w.sum()


# -- taxonomies -----------------------------------------------------------------------------
@pytest.mark.parametrize("tree, fix", [
    ({"a": ["x"], "b": ["y"]}, "exactly one root"),
    ({"all": {"x": ["u", "v"], "y": ["u"]}}, "unique name"),
    ({"all": {"x": []}}, "list its values"),
    ({"all": "x"}, "mapping or a list"),
    ({"all": [1, 2]}, "strings"),
])
def test_categorical_errors_name_the_fix(tree, fix):
    with pytest.raises(DomainError, match=fix):
        Categorical(tree)


@pytest.mark.parametrize("args, fix", [
    ((5, 5), "lo < hi"), ((0, 10, 0), "step must be > 0"),
    ((0, 10, 3), "hi = lo \\+ k·step"), ((0, 10**6), "use step ≥"),
])
def test_numeric_errors_name_the_fix(args, fix):
    with pytest.raises(DomainError, match=fix):
        Numeric(*args)


@pytest.mark.parametrize("kwargs, fix", [
    ({"taxonomies": {}}, "at least one attribute"),
    ({"taxonomies": {"e": ["a", "b"]}}, "declare a Categorical"),
    ({"target": "e"}, "remove it from the taxonomies"),
    ({"classes": ["no"]}, "two distinct class values"),
    ({"steps": 99}, "lower steps or refine"),
    ({"score": "gini"}, "score must be"),
    ({"variant": "zhu"}, "variant must be"),
    ({"max_cells": 10, "steps": 3}, "raise max_cells"),
])
def test_plan_errors_before_any_debit(kwargs, fix):
    args = {"taxonomies": TAXES, "target": "y", "classes": CLASSES, "epsilon": 1, "steps": 1,
            **kwargs}
    filt = PrivacyFilter(dp.PureDP(1))
    with pytest.raises(DomainError, match=fix):
        diffgen(TABLE, accountant=filt, **args)
    assert filt.spent == dp.PureDP(0)


def test_codes_drop_values_outside_the_domain():
    assert TAXES["e"].codes(pl.Series(["a", "z", None, "c"])).tolist() == [0, -1, -1, 2]
    assert TAXES["n"].codes(pl.Series([0.0, 3.9, 4.0, -1, None, float("nan")])).tolist() \
        == [0, 3, -1, -1, -1, -1]


def test_worst_case_leaves_bound_every_release():
    """The plan's bound on the table's size (from the taxonomies alone) holds on Adult."""
    adult = dp.datasets.load_adult("train").head(2000)
    plan = plan_diffgen(ADULT_TAXONOMY, ADULT_TARGET, ADULT_CLASSES, epsilon=1, steps=4)
    bound = 2 * largest_table(list(ADULT_TAXONOMY.values()), 4)
    out = diffgen(adult, ADULT_TAXONOMY, ADULT_TARGET, ADULT_CLASSES, epsilon=1, steps=4)
    assert out.table.height <= bound
    assert plan.step_epsilon == Fraction(1, 2 * (6 + 8))


# -- the budget -----------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["diffgen", "weighted"])
def test_budget_is_charged_once_and_sums_to_epsilon(variant, monkeypatch):
    eps, h = Fraction(3, 4), 3
    draws: list[tuple[str, Fraction]] = []
    select, noisy = frontend.select, frontend.noisy

    def spy_select(scores, sensitivity, budget, **kw):
        draws.append((kw.get("statistic"), Fraction(budget)))
        return select(scores, sensitivity, budget, **kw)

    def spy_noisy(values, sensitivity, budget, **kw):
        draws.append((kw.get("statistic"), Fraction(budget)))
        return noisy(values, sensitivity, budget, **kw)

    monkeypatch.setattr(frontend, "select", spy_select)
    monkeypatch.setattr(frontend, "noisy", spy_noisy)
    session = dp.Session(TABLE, dp.PrivacyUnit.rows(), dp.PureDP(1))
    out = session.query().publish.diffgen(TAXES, "y", CLASSES, epsilon=eps, steps=h,
                                          variant=variant, score="max")
    assert session.last_release.loss == dp.PureDP(eps)
    plan = out.plan
    numeric = 1  # "n" has room to split
    per = eps / 2 / (numeric + 2 * h) if variant == "diffgen" else eps / 2 / h
    assert plan.step_epsilon == per
    picks = [b for s, b in draws if s == "specialisation"]
    points = [b for s, b in draws if s == "split point"]
    counts = [b for s, b in draws if s == "leaf counts"]
    assert picks == [per] * h and counts == [eps / 2]
    if variant == "diffgen":  # the root's point, then ≤ 2 per step on disjoint records
        assert all(b == per for b in points) and 1 <= len(points) <= 1 + 2 * h
        assert (numeric + 2 * h) * per + eps / 2 == eps
    else:
        assert points == [] and h * per + eps / 2 == eps


def test_unit_bound_runs_at_epsilon_over_m():
    table = TABLE.with_columns(pl.Series("pid", [1, 1, 2, 2, 3, 3]))
    session = dp.Session(table, dp.PrivacyUnit.by("pid", 2), dp.PureDP(1))
    out = session.query().publish.diffgen(TAXES, "y", CLASSES, epsilon=Fraction(1, 2),
                                          steps=1)
    assert out.plan.epsilon == Fraction(1, 4)
    assert session.last_release.loss == dp.PureDP(Fraction(1, 2))
    assert "run at ε/2" in session.last_release.description


# -- the exact law --------------------------------------------------------------------------
@pytest.mark.parametrize("score", ["infogain", "max"])
@pytest.mark.parametrize("variant", ["diffgen", "weighted"])
def test_first_step_law_is_epsilon_prime_dp_by_brute_force(score, variant):
    """On every neighbour of TABLE in the domain, P(v)/P′(v) ≤ e^{ε′} for every candidate v,
    P ∝ exp(ε′u/(2Δu)) at the plan's temperature. The broken law understates Δu (by 4 for
    Max — by 2 would still hold: Max only grows when a record is added, so its scores move
    one way and Δu/ε′ is enough; by 16 for InfoGain, whose range bound is loose on six
    rows) and breaks it."""
    plan = plan_diffgen(TAXES, "y", CLASSES, epsilon=2, steps=1, score=score,
                        variant=variant)
    row = plan.noise[0]
    assert frontend.exact_scale(row) == 2 * plan.sensitivity / plan.step_epsilon
    p = law(plan, TABLE)
    worst = max(np.abs(np.log(p) - np.log(law(plan, t))).max() for t in neighbours(TABLE))
    assert worst <= float(plan.step_epsilon) + 1e-9
    k = 4 if score == "max" else 16
    broken = max(np.abs(np.log(law(plan, TABLE, k)) - np.log(law(plan, t, k))).max()
                 for t in neighbours(TABLE))
    assert broken > float(plan.step_epsilon)


def test_infogain_sensitivity_is_log2_classes():
    plan = plan_diffgen(TAXES, "y", ["a", "b", "c"], epsilon=1, steps=1, score="infogain")
    assert 1.58496 < float(plan.sensitivity) < 1.585 and plan.sensitivity >= Fraction(
        math.log2(3))


def chosen(out) -> tuple[str, tuple[str, ...]]:
    """The specialised attribute and its values after one step, read off the release."""
    for column in TAXES:
        values = tuple(sorted(set(out.table[column].to_list())))
        if len(values) > 1:
            return column, values
    raise AssertionError("no specialisation")


def first_choices(runs: int, factor: int, monkeypatch) -> dict:
    select = frontend.select
    if factor != 1:  # the broken variant: the pick drawn at factor·ε′
        monkeypatch.setattr(frontend, "select", lambda s, d, b, **kw: select(
            s, d, b * factor, **kw))
    seen: dict = {}
    for _ in range(runs):
        key = chosen(diffgen(TABLE, TAXES, "y", CLASSES, epsilon=4, steps=1, score="max",
                             variant="weighted"))
        seen[key] = seen.get(key, 0) + 1
    monkeypatch.setattr(frontend, "select", select)
    return seen


def matches_law(seen: dict, runs: int) -> bool:
    plan = plan_diffgen(TAXES, "y", CLASSES, epsilon=4, steps=1, score="max",
                        variant="weighted")
    labels, _ = first_step_scores(plan, TABLE)
    p = law(plan, TABLE)
    expected: dict = {}
    for (column, _, kids), q in zip(labels, p, strict=True):
        key = (column, tuple(sorted(kids)))
        expected[key] = expected.get(key, 0.0) + q
    tol = math.sqrt(math.log(2 * len(expected) / 1e-6) / (2 * runs))  # Hoeffding, union
    return all(abs(seen.get(k, 0) / runs - q) <= tol for k, q in expected.items()) and \
        set(seen) <= set(expected)


def test_release_first_choice_follows_the_law(monkeypatch):
    runs = 800  # tolerance 0.10; the broken law moves P(e) by 0.20 (sd 0.017)
    assert matches_law(first_choices(runs, 1, monkeypatch), runs)
    assert not matches_law(first_choices(runs, 4, monkeypatch), runs)


# -- the release ----------------------------------------------------------------------------
def test_table_and_sample_shapes():
    out = diffgen(TABLE.vstack(pl.DataFrame({"e": ["z"], "n": [9], "y": ["no"]})), TAXES,
                  "y", CLASSES, epsilon=1, steps=2)
    cuts = [len(set(out.table[c].to_list())) for c in TAXES]
    assert out.table.height == int(np.prod(cuts)) * 2
    assert out.table.columns == ["e", "n", "y", "count"]
    syn = out.sample(50)
    assert syn.shape == (50, 3)
    assert set(syn["e"].to_list()) <= {"a", "b", "c"}
    assert syn["n"].min() >= 0 and syn["n"].max() < 4
    assert set(syn["y"].to_list()) <= set(CLASSES)
    assert out.sample(0).height == 0
    with pytest.raises(DomainError):
        out.sample(-1)


def test_unaccounted_run_still_has_a_record_and_a_filter_is_charged():
    filt = PrivacyFilter(dp.PureDP(1))
    diffgen(TABLE, TAXES, "y", CLASSES, epsilon=Fraction(1, 3), steps=1, accountant=filt)
    with pytest.raises(BudgetExceededError):
        diffgen(TABLE, TAXES, "y", CLASSES, epsilon=1, steps=1, accountant=filt)
