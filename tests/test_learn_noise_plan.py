"""Every public dpkit.learn fit plans its noise (issue 31): the rows go to ``charge`` with the
debit, so the ledger's row (written at the debit) and the release record carry them, the
record's loss is the one debit, and every draw the fit then makes through the kit is a row
of the plan (or falls under a planned row whose scale is set during the release).

The estimators and functions are discovered from ``dpkit.learn.__all__`` (a class with
``fit``, a function with an ``accountant`` parameter): a new one without a case in
``CASES`` fails ``test_every_public_fit_has_a_case``. Deterministic checks of structure:
no statistical test, nothing to flake.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest

pytest.importorskip("sklearn")

from kit_spies import spy_rows  # noqa: E402

import dpkit as dp  # noqa: E402
from dpkit import learn  # noqa: E402
from dpkit.core.measures import ApproxDP, PureDP  # noqa: E402
from dpkit.core.record import NoiseRow, Release  # noqa: E402
from dpkit.errors import DomainError  # noqa: E402
from dpkit.learn import tree as tree_module  # noqa: E402
from dpkit.mechanisms import frontend  # noqa: E402

GEN = np.random.default_rng(31)  # test input only
Y = GEN.integers(0, 2, 400)
X = np.clip(GEN.normal(0, 1, (400, 3)) + 1.5 * Y[:, None], -4, 6)
LABELS = np.where(Y == 1, "yes", "no")
BOUNDS = {"bounds": (-4, 6)}
TWO = {"classes": ["no", "yes"]}
TX = [[i for i in range(8) if GEN.random() < (0.8 if i < 3 else 0.15)] for _ in range(300)]

# name in dpkit.learn.__all__ -> fit(accountant) returning the fitted object
CASES: dict[str, Callable[[Any], Any]] = {
    "GaussianNB": lambda a: learn.GaussianNB(2, accountant=a, **BOUNDS, **TWO).fit(X, LABELS),
    "CategoricalNB": lambda a: learn.CategoricalNB(
        2, categories=[[0, 1], [0, 1]], accountant=a, **TWO).fit(
        (X[:, :2] > 0).astype(int), LABELS),
    "LogisticRegression": lambda a: learn.LogisticRegression(
        2, accountant=a, **BOUNDS, **TWO).fit(X, LABELS),
    "LinearRegression": lambda a: learn.LinearRegression(
        2, y_bounds=(-4, 6), accountant=a, **BOUNDS).fit(X[:, :2], X[:, 2]),
    "LinearSVC": lambda a: learn.LinearSVC(2, 1e-6, accountant=a, **BOUNDS, **TWO).fit(
        X, LABELS),
    "KMeans": lambda a: learn.KMeans(2, 2, accountant=a, **BOUNDS).fit(X),
    "PCA": lambda a: learn.PCA(1, 2, accountant=a, **BOUNDS).fit(X),
    "StandardScaler": lambda a: learn.StandardScaler(2, accountant=a, **BOUNDS).fit(X),
    "RandomForestClassifier": lambda a: learn.RandomForestClassifier(
        2, 2, epsilon=2, accountant=a, **BOUNDS, **TWO).fit(X, LABELS),
    "SmoothRandomForestClassifier": lambda a: learn.SmoothRandomForestClassifier(
        epsilon=2, accountant=a, **BOUNDS, **TWO).fit(X, LABELS),
    "PrivateLearner": lambda a: learn.PrivateLearner(
        learn.hypothesis.Stumps([[-1, 0, 1, 2]] * 3), 2, classes=["no", "yes"],
        accountant=a).fit(X, LABELS),
    "DecisionTreeClassifier": lambda a: learn.DecisionTreeClassifier(
        2, 2, accountant=a, **BOUNDS, **TWO).fit(X, LABELS),
    "frequent_itemsets": lambda a: learn.frequent_itemsets(TX, range(8), 4, 2, accountant=a),
    "top_k_itemsets": lambda a: learn.top_k_itemsets(TX, range(8), 4, 2, max_size=2,
                                                     accountant=a),
    "private_bounds": lambda a: learn.private_bounds(X, 2, accountant=a),
}

# more paths through the same public names (methods with their own plans)
VARIANTS: dict[str, Callable[[Any], Any]] = {
    "LogisticRegression(amp)": lambda a: learn.LogisticRegression(
        2, data_norm=5, method="amp", delta=1e-6, accountant=a, **TWO).fit(X, LABELS),
    "LinearRegression(amp)": lambda a: learn.LinearRegression(
        2, y_bounds=(-4, 6), method="amp", delta=1e-6, accountant=a, **BOUNDS).fit(
        X[:, :2], X[:, 2]),
    "LogisticRegression(output)": lambda a: learn.LogisticRegression(
        2, data_norm=5, method="output", accountant=a, **TWO).fit(X, LABELS),
    "KMeans(sample_and_aggregate, halving)": lambda a: learn.KMeans(
        2, 2, method="sample_and_aggregate", schedule="halving", n_blocks=10,
        init="sphere_packing", accountant=a, **BOUNDS).fit(X),
    "KMeans(sample_and_aggregate, centre of attention)": lambda a: learn.KMeans(
        2, 2, method="sample_and_aggregate", delta=1e-6, n_blocks=10, init="grid",
        grid_bins=2, accountant=a, **BOUNDS).fit(X),
    "KMeans(coreset)": lambda a: learn.KMeans(2, 2, method="coreset", levels=2,
                                              accountant=a, **BOUNDS).fit(X),
    "DecisionTreeClassifier(sulq_id3)": lambda a: learn.DecisionTreeClassifier(
        2, 2, method="sulq_id3", accountant=a, **BOUNDS, **TWO).fit(X, LABELS),
    "privbasis": lambda a: learn.frequent_itemsets(TX, range(8), 4, 2, method="privbasis",
                                                   accountant=a),
    "top_k_itemsets(laplace, pruned)": lambda a: learn.top_k_itemsets(
        TX, range(8), 4, 2, max_size=2, method="laplace", prune=True, accountant=a),
}


def _charges(obj: object) -> bool:
    """A public fit: an estimator class, or a function that takes an accountant."""
    if inspect.isclass(obj):
        return callable(getattr(obj, "fit", None))
    return callable(obj) and "accountant" in inspect.signature(obj).parameters


PUBLIC = sorted(n for n in learn.__all__ if _charges(getattr(learn, n)))


def test_every_public_fit_has_a_case():
    assert set(PUBLIC) <= set(CASES), sorted(set(PUBLIC) - set(CASES))
    assert {"GaussianNB", "KMeans", "frequent_itemsets", "private_bounds"} <= set(PUBLIC)


def _session(tmp_path: Any) -> dp.Session:
    return dp.Session(pl.DataFrame({"a": [1]}), dp.PrivacyUnit.rows(),
                      ApproxDP(100, Fraction(1, 1000)), ledger=str(tmp_path / "l.sqlite"),
                      dataset="d")


def plan_problems(release: Release[Any], ledger_row: dict[str, Any],
                  drawn: list[NoiseRow]) -> list[str]:
    """What is wrong with a fit's noise plan (empty when nothing is)."""
    problems = []
    if not release.noise:
        problems.append("release_.noise is empty")
    if json.loads(ledger_row["noise"] or "[]") != [r.as_dict() for r in release.noise]:
        problems.append("the ledger row (written at the debit) lacks the plan")
    if ledger_row["loss"] != release.loss:
        problems.append(f"debited {ledger_row['loss']}, recorded {release.loss}")
    open_ended = {r.statistic for r in release.noise if r.scale is None}
    for row in drawn:
        if row not in release.noise and row.statistic not in open_ended:
            problems.append(f"drawn outside the plan: {row}")
    return problems


def _fit(case: Callable[[Any], Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
         ) -> list[str]:
    session = _session(tmp_path)
    before = session.accountant.spent
    drawn = spy_rows(monkeypatch, ("noisy", "select"))
    fitted = case(session)
    release = session.last_release
    assert release is not None and release.release_id is not None
    if hasattr(fitted, "get_params"):
        assert fitted.release_ is release
    row = session.ledger.release(release.release_id)
    assert row is not None
    spent = session.accountant.spent
    assert (spent.epsilon - before.epsilon, spent.delta - before.delta) == (
        release.loss.epsilon, release.loss.delta)  # the one debit is the record's loss
    return plan_problems(release, row, drawn)


@pytest.mark.parametrize("name", PUBLIC + sorted(VARIANTS))
def test_the_fit_plans_its_noise_and_draws_through_it(name, tmp_path, monkeypatch):
    case = CASES.get(name) or VARIANTS[name]
    assert _fit(case, tmp_path, monkeypatch) == []


def test_a_fit_charged_without_its_plan_is_caught(tmp_path, monkeypatch):
    """Broken variant: the forest's charge loses its plan (as every fit but three did before
    issue 31): the ledger row has no rows and the record only the rows drawn."""
    real = tree_module.charge

    def unplanned(accountant: Any, loss: Any, description: str, compute: Any, *rest: Any,
                  **kw: Any) -> Any:
        return real(accountant, loss, description, compute, **kw)

    monkeypatch.setattr(tree_module, "charge", unplanned)
    problems = _fit(CASES["RandomForestClassifier"], tmp_path, monkeypatch)
    assert problems == ["the ledger row (written at the debit) lacks the plan"]


def test_a_draw_outside_the_plan_is_caught():
    planned = frontend.noise_row(1, 1, "counts", output="grid", count=4)
    release = Release(None, PureDP(1), (planned,), None, 1, False, None, "fit")
    row = {"noise": json.dumps([planned.as_dict()]), "loss": PureDP(1)}
    assert plan_problems(release, row, [planned]) == []
    other = frontend.noise_row(1, Fraction(1, 2), "counts", output="grid", count=4)
    assert plan_problems(release, row, [planned, other]) == [f"drawn outside the plan: {other}"]
    assert plan_problems(release, {**row, "loss": PureDP(2)}, [planned]) == [
        "debited ε = 2, recorded ε = 1"]


def _unit_session(tmp_path: Any) -> dp.Session:
    return dp.Session(pl.DataFrame({"id": [1], "a": [1]}), dp.PrivacyUnit.by("id", 5),
                      ApproxDP(100, Fraction(1, 1000)), ledger=str(tmp_path / "u.sqlite"),
                      dataset="d")


@pytest.mark.parametrize("name", PUBLIC + sorted(VARIANTS))
def test_a_fit_refuses_a_session_whose_unit_it_cannot_bound(name, tmp_path):
    """A fit sees rows, not people: a Session declaring PrivacyUnit.by("id", 5) would be
    charged one row's loss for a person who may own five rows (before the fix, the fit
    debited ε and released). Refused before the debit: nothing spent."""
    case = CASES.get(name) or VARIANTS[name]
    session = _unit_session(tmp_path)
    with pytest.raises(DomainError, match="privacy unit"):
        case(session)
    assert session.accountant.spent == ApproxDP(0, 0)
    assert session.last_release is None
