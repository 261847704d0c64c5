"""dpkit.learn.DecisionTreeClassifier: declarations, budget debited first and spent exactly
ε along every root-to-leaf path, split scores of sensitivity 1 (monotone), the exponential
mechanism's selection probabilities, the leaves' noise scale, and trees that learn.

Statistical tests reject a correct implementation with probability ≤ FALSE_POSITIVE_RATE
(1e-6) and are each paired with a broken variant they must catch."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from stats import FALSE_POSITIVE_RATE

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402

from dpkit.core.compose import PrivacyFilter  # noqa: E402
from dpkit.core.measures import PureDP  # noqa: E402
from dpkit.errors import BudgetExceededError, DomainError  # noqa: E402
from dpkit.learn import DecisionTreeClassifier  # noqa: E402
from dpkit.learn import decision_tree as DT  # noqa: E402, N812
from dpkit.learn._privacy import check_epsilon  # noqa: E402
from dpkit.mechanisms import frontend  # noqa: E402
from dpkit.mechanisms.exponential import make_exponential  # noqa: E402

METHODS = DT.METHODS


def _mixed(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Test input: 3 continuous features on [0, 1] and a categorical one with 3 codes;
    the label is x₁ ≥ 1/2 (a grid point for n_bins = 16; for diffp_id3, cells ≥ 8)."""
    gen = np.random.default_rng(seed)
    x = np.column_stack([gen.random((n, 3)), gen.integers(0, 3, n)])
    return x, np.where(x[:, 1] >= 0.5, "yes", "no")


def _model(method: str = "diffp_c45", epsilon=1.0, depth: int = 2, **kw):
    return DecisionTreeClassifier(epsilon, depth, method, bounds=(0, 1),
                                  classes=["no", "yes"], categorical={3: 3}, **kw)


def _path_budgets(model) -> list[Fraction]:
    """ε spent along the path to every leaf."""
    total = {0: model.nodes_[0].spent}
    out = []
    for i, node in enumerate(model.nodes_):
        for c in node.children:
            total[c] = total[i] + model.nodes_[c].spent
        if node.feature < 0:
            out.append(total[i])
    return out


# ---------------------------------------------------------------- declarations, budget
@pytest.mark.parametrize("method", METHODS)
def test_bad_declarations_raise_and_nothing_is_spent(method):
    x, y = _mixed(200)
    acct = PrivacyFilter(PureDP(1))
    bad = [
        DecisionTreeClassifier(0.5, 2, method, classes=["no", "yes"], accountant=acct),
        DecisionTreeClassifier(0.5, 2, method, bounds=(0, 1), accountant=acct),
        DecisionTreeClassifier(0, 2, method, bounds=(0, 1), classes=["no", "yes"],
                               accountant=acct),
        DecisionTreeClassifier(-1, 2, method, bounds=(0, 1), classes=["no", "yes"],
                               accountant=acct),
        DecisionTreeClassifier(0.5, 2, method, bounds=(0, 1), classes=["no"],
                               accountant=acct),  # "yes" is not declared
        DecisionTreeClassifier(0.5, 2, "cart", bounds=(0, 1), classes=["no", "yes"],
                               accountant=acct),
        DecisionTreeClassifier(0.5, -1, method, bounds=(0, 1), classes=["no", "yes"],
                               accountant=acct),
        DecisionTreeClassifier(0.5, 2, method, bounds=(0, 1), classes=["no", "yes"],
                               categorical={3: 2}, accountant=acct),  # code 2 present
        DecisionTreeClassifier(0.5, 2, method, bounds=(0, 1), classes=["no", "yes"],
                               categorical={7: 3}, accountant=acct),
        DecisionTreeClassifier(0.5, 2, method, bounds=(0, 1), classes=["no", "yes"],
                               categorical={3: 3}, n_bins=1, accountant=acct),
    ]
    for model in bad:
        with pytest.raises(DomainError):
            model.fit(x, y)
        assert not hasattr(model, "nodes_")
    with pytest.raises(DomainError):
        _model(method, accountant=acct).fit(np.where(x == x[0, 0], np.nan, x), y)
    assert acct.spent == PureDP(0)


@pytest.mark.parametrize("method", METHODS)
def test_debited_exactly_epsilon_before_any_noise_and_overrun_fits_nothing(method,
                                                                           monkeypatch):
    acct = PrivacyFilter(PureDP(1))
    seen = []
    real_laplace, real_exp = frontend.noisy, DT.split_selection

    def laplace_spy(*args, **kw):
        seen.append(acct.spent)
        return real_laplace(*args, **kw)

    def exp_spy(*args, **kw):
        seen.append(acct.spent)
        return real_exp(*args, **kw)

    monkeypatch.setattr(frontend, "noisy", laplace_spy)
    monkeypatch.setattr(DT, "split_selection", exp_spy)
    x, y = _mixed(500)
    model = _model(method, Fraction(3, 5), accountant=acct).fit(x, y)
    assert acct.spent == PureDP(Fraction(3, 5))
    assert seen and all(s == PureDP(Fraction(3, 5)) for s in seen)
    seen.clear()
    again = _model(method, Fraction(1, 2), accountant=acct)
    with pytest.raises(BudgetExceededError):
        again.fit(x, y)
    assert not seen and not hasattr(again, "nodes_")
    assert acct.spent == PureDP(Fraction(3, 5))
    assert model.epsilon_level_ == Fraction(3, 5) / (3 if method == "sulq_id3" else 6)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("epsilon", [0.05, 1.0, 30.0])
def test_every_root_to_leaf_path_spends_exactly_epsilon(method, epsilon, monkeypatch):
    x, y = _mixed(2000)
    for depth in (0, 1, 3):
        model = _model(method, epsilon, depth).fit(x, y)
        budgets = _path_budgets(model)
        assert budgets and all(b == check_epsilon(epsilon) for b in budgets)
    # broken variant: a stopped node's leaf forgets what its own level already spent. On
    # no data a node at depth < D continues only if its noisy size beats t·|C|·√2/ε′ =
    # 8.5/ε′ (diffp: w.p. ½e^{−8.5}; SuLQ: 8.5·a/ε_l against the mean table sum's noise of
    # standard deviation ≈ 3.6·a/ε_l: w.p. < 2e-2), and a fit without an early leaf needs
    # the root and ≥ 2 children to continue (< 1e-5); so all three fits miss w.p. < 1e-6.
    monkeypatch.setattr(DecisionTreeClassifier, "_remaining",
                        lambda self, d, own: check_epsilon(self.epsilon)
                        - (d if method == "sulq_id3" else 2 * d) * self.epsilon_level_)
    overspent = [max(_path_budgets(_model(method, epsilon, 3).fit(x[:0], y[:0])))
                 > check_epsilon(epsilon) for _ in range(3)]
    assert any(overspent)


# ---------------------------------------------------------------- split selection privacy
def _score_shift(score_fn, trials: int = 300) -> tuple[int, int]:
    """min and max over neighbouring pairs (D, D + one record) of q(D + r) − q(D), for every
    candidate split of random small datasets (test inputs)."""
    gen = np.random.default_rng(7)
    lo, hi = 0, 0
    for _ in range(trials):
        n, k = int(gen.integers(0, 30)), int(gen.integers(2, 4))
        x = np.column_stack([gen.random(n + 1), gen.integers(0, 3, n + 1)])
        y = gen.integers(0, k, n + 1)
        model = DecisionTreeClassifier(1, 2, bounds=(0, 1), classes=list(range(k)),
                                       categorical={1: 3})
        model.fit(x, y)  # sets up the model's public state; the fit itself is not used
        root = model.nodes_[0]
        candidates = model._candidates(DT.Node(0, root.lower, root.upper, frozenset()))
        codes = model._codes(x)
        with_r = np.concatenate(score_fn(model, codes, y, k, candidates))
        without = np.concatenate(score_fn(model, codes[:-1], y[:-1], k, candidates))
        lo, hi = min(lo, int((with_r - without).min())), max(hi, int((with_r - without).max()))
    return lo, hi


def test_split_scores_have_sensitivity_one_and_are_monotone():
    real = DecisionTreeClassifier._scores
    assert _score_shift(real) == (0, 1)  # adding a record: every score moves by 0 or +1

    def broken(self, x, y, k, candidates):  # counts the majority of the parent twice
        return [2 * s for s in real(self, x, y, k, candidates)]

    def info_gain(self, x, y, k, candidates):  # −(conditional entropy): not Δ = 1
        out = []
        for table, (_, edges) in zip(self._tables(x, y, k, candidates), candidates,
                                     strict=True):
            if edges is None:
                out.append(np.round(-DT._conditional_entropy(table[None].astype(float))))
            else:
                left = np.cumsum(table, axis=0)[:-1]
                pairs = np.stack([left, table.sum(axis=0) - left], axis=1).astype(float)
                out.append(np.round(-DT._conditional_entropy(pairs)))
        return out

    assert _score_shift(broken)[1] == 2
    assert _score_shift(info_gain)[0] < 0  # not monotone either


def test_selection_scale_gives_the_per_level_epsilon():
    for level in (Fraction(1, 12), Fraction(1, 120), Fraction(5, 3)):
        scale = frontend.selection_row(1, level, monotonic=True).scale
        assert make_exponential(scale, monotonic=True).privacy_map(1) == PureDP(level)


def _two_features(gap_rows: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """100 rows, 2 binary categorical features: f₀ agrees with y on 70 rows, f₁ on
    70 − 2·gap_rows, balanced over the classes, so the max scores are 70 and 66."""
    y = np.repeat([0, 1], 50)
    f0, f1 = y.copy(), y.copy()
    for c in (0, 1):
        rows = np.flatnonzero(y == c)
        f0[rows[:15]] = 1 - c
        f1[rows[:15 + gap_rows]] = 1 - c
    return np.column_stack([f0, f1]).astype(float), y


def _root_choices(fits: int) -> int:
    x, y = _two_features()
    model = DecisionTreeClassifier(2, 1, bounds=(0, 1), classes=[0, 1],
                                   categorical={0: 2, 1: 2})
    got = 0
    for _ in range(fits):
        model.fit(x, y)
        assert model.nodes_[0].feature >= 0  # n̂ = 100 + Lap(2) ≥ 11.3 but w.p. e^{−44}
        got += model.nodes_[0].feature == 0
    return got


def test_root_split_follows_the_exponential_mechanism(monkeypatch):
    # ε = 2, D = 1: ε′ = 1/2; scores 70 vs 66 → P(f₀) = e^{4·ε′} / (1 + e^{4·ε′}) = 0.8808
    p = float(np.exp(2) / (1 + np.exp(2)))
    fits = 600
    assert stats.binomtest(_root_choices(fits), fits, p).pvalue >= FALSE_POSITIVE_RATE
    # broken: the non-monotone temperature 2Δ/ε′ (P(f₀) = e/(1 + e) = 0.731) is caught
    monkeypatch.setattr(DT, "split_selection",
                        lambda scores, level: frontend.select(scores, 1, level).value)
    assert stats.binomtest(_root_choices(fits), fits, p).pvalue < FALSE_POSITIVE_RATE


def _leaf_noise(fits: int, epsilon: Fraction) -> np.ndarray:
    y = np.array([0] * 10 + [1] * 5)
    x = np.zeros((15, 1))
    model = DecisionTreeClassifier(epsilon, 0, bounds=(0, 1), classes=[0, 1])
    out = []
    for _ in range(fits):
        counts = model.fit(x, y).nodes_[0].counts
        assert counts is not None
        out.append(counts - [10, 5])
    return np.concatenate(out)


def test_leaf_counts_at_depth_d_get_the_whole_level(monkeypatch):
    # D = 0: the root is a leaf and its class counts get all of ε = 1/2 → discrete Laplace
    # of scale 2: P(|Z| ≤ 2) = 1 − 2e^{−3/2}/(1 + e^{−1/2}); the paper's ε′ = ε/2 (scale 4)
    # gives 0.469 and is caught.
    t = 2.0
    p = 1 - 2 * np.exp(-3 / t) / (1 + np.exp(-1 / t))
    noise = _leaf_noise(400, Fraction(1, 2))
    hits = int((np.abs(noise) <= 2).sum())
    assert stats.binomtest(hits, noise.size, p).pvalue >= FALSE_POSITIVE_RATE
    real = DT.DecisionTreeClassifier._leaf
    monkeypatch.setattr(DT.DecisionTreeClassifier, "_leaf",
                        lambda self, node, y, k, budget: real(self, node, y, k, budget / 2))
    noise = _leaf_noise(400, Fraction(1, 2))
    hits = int((np.abs(noise) <= 2).sum())
    assert stats.binomtest(hits, noise.size, p).pvalue < FALSE_POSITIVE_RATE


def _sulq_root_noise(fits: int) -> np.ndarray:
    """The noise SuLQ added to the root's count tables (ε = 2, D = 1: ε_l = 1)."""
    x, y = _mixed(300)
    noise = []
    real = frontend.noisy

    def spy(values, sensitivity, epsilon, **kw):
        out = real(values, sensitivity, epsilon, **kw)
        if np.size(values) > 2:  # the tables, not a leaf's class counts
            noise.append(out.value - values)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frontend, "noisy", spy)
        for _ in range(fits):
            _model("sulq_id3", 2, 1).fit(x, y)
    return np.concatenate(noise)


def test_sulq_tables_have_sensitivity_a_and_matching_noise(monkeypatch):
    # structure: one record adds 1 to one cell of each of the a = 4 tables
    x, y = _mixed(50)
    model = _model("sulq_id3", 2, 1).fit(x, y)
    candidates = model._candidates(DT.Node(0, model.lower_, model.upper_, frozenset()))
    codes = model._codes(x)
    flat = [np.concatenate([t.ravel() for t in model._tables(c, v, 2, candidates)])
            for c, v in ((codes, (y == "yes").astype(int)),
                         (codes[1:], (y[1:] == "yes").astype(int)))]
    assert len(candidates) == 4 and np.abs(flat[0] - flat[1]).sum() == 4
    # distribution: discrete Laplace of scale a/ε_l = 4 on every cell:
    # P(|Z| ≤ 4) = 1 − 2e^{−5/4}/(1 + e^{−1/4}) = 0.678; scale 1 (Δ forgotten) gives 0.990.
    t = 4.0
    p = 1 - 2 * np.exp(-5 / t) / (1 + np.exp(-1 / t))
    noise = _sulq_root_noise(6)
    hits = int((np.abs(noise) <= 4).sum())
    assert stats.binomtest(hits, noise.size, p).pvalue >= FALSE_POSITIVE_RATE
    real = frontend.noisy
    monkeypatch.setattr(frontend, "noisy", lambda v, s, e, **kw: real(v, 1, e, **kw))
    noise = _sulq_root_noise(6)
    hits = int((np.abs(noise) <= 4).sum())
    assert stats.binomtest(hits, noise.size, p).pvalue < FALSE_POSITIVE_RATE


# ---------------------------------------------------------------- learning
@pytest.mark.parametrize("method", METHODS)
def test_tree_finds_the_feature_that_determines_the_label(method):
    # At ε = 60, D = 1 (ε′ = 15 for diffp, ε_l = 30 for SuLQ): every candidate other than
    # x₁ < 1/2 scores at least n/16·(1/2) ≈ 90 below it, so the exponential mechanism picks
    # another with probability ≤ 60·e^{−15·90}; the noise on counts of ~1500 has scale ≤ 1/6.
    # A wrong split misclassifies ≥ 1/16 of fresh points in expectation, far below 0.97.
    x, y = _mixed(3000)
    xt, yt = _mixed(2000, seed=2)
    model = _model(method, 60, 1).fit(x, y)
    assert (model.predict(xt) == yt).mean() >= 0.97
    proba = model.predict_proba(xt[:5])
    assert proba.shape == (5, 2) and np.allclose(proba.sum(axis=1), 1)
    assert set(model.predict(xt)) <= {"no", "yes"}


def test_uniform_split_choice_is_caught_by_the_accuracy_test(monkeypatch):
    # broken: a split chosen (nearly) uniformly among the 46 candidates; one fit picks the
    # right one w.p. 1/46, so four fits all pass w.p. (1/46)⁴ < 1e-6.
    monkeypatch.setattr(DT, "split_selection", lambda scores, level: frontend.select(
        scores, 1, Fraction(1, 10**9), monotonic=True).value)
    x, y = _mixed(3000)
    xt, yt = _mixed(2000, seed=2)
    accs = [(_model("diffp_c45", 60, 1).fit(x, y).predict(xt) == yt).mean()
            for _ in range(4)]
    assert min(accs) < 0.97


def test_moderate_epsilon_learns_and_estimator_protocol():
    # ε = 1 on 20 000 rows, D = 3: the label is x₁ ≥ 1/2 XOR (code == 2), so a tree must
    # split on both. The root's best split (x₁ at 1/2) scores n/6 ≈ 3300 above any split of
    # another feature and ≥ n/32 above the neighbouring thresholds (ε′ = 1/8: odds
    # ≤ 46·e^{−78}); the second level's split on the code is then perfect by a margin of
    # thousands; noisy counts have scale ≤ 16 — failure probability far below 1e-6.
    gen = np.random.default_rng(5)
    x = np.column_stack([gen.random((20000, 3)), gen.integers(0, 3, 20000)])
    y = np.where((x[:, 1] >= 0.5) ^ (x[:, 3] == 2), "yes", "no")
    for method in METHODS:
        model = _model(method, 1.0, 3)
        assert clone(model).get_params() == model.get_params()
        acc = (model.fit(x, y).predict(x) == y).mean()
        assert acc >= 0.9, (method, acc)
    with pytest.raises(DomainError):  # code 3 was not declared
        model.predict(np.array([[0.1, 0.2, 0.3, 3.0]]))
    with pytest.raises(DomainError):
        model.predict(np.zeros((2, 3)))
