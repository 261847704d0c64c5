"""The generic private learner: the exponential mechanism over a finite hypothesis class
(Kasiviswanathan, Lee, Nissim, Raskhodnikova & Smith, "What can we learn privately?", SIAM J.
Comput. 40(3), 2011 (FOCS 2008), §3.1, Thm 3.4; survey: Xiong, Zhu & Wang 2014 §3.2.4,
eq. 13).

The map. On a labelled sample S = ((x₁, y₁) … (x_n, y_n)), y ∈ {0, 1}, and a declared finite
class H, the learner outputs h ∈ H with

    Pr[h] = exp(−ε·mistakes_S(h)/2) / Σ_{g∈H} exp(−ε·mistakes_S(g)/2),
    mistakes_S(h) = |{i : h(xᵢ) ≠ yᵢ}|,

the exponential mechanism (McSherry & Talwar 2007) with score u(S, h) = −mistakes_S(h),
drawn exactly through :func:`dpkit.mechanisms.frontend.select` at sensitivity Δu = 1.

Privacy. Adding, removing or changing one row moves every score by at most 1, so the output
is ε-DP for add/remove-one and substitute-one neighbours alike (Dwork & Roth 2014 Thm 3.10;
KLNRS Lemma 3.3). (Under add/remove the scores all move one way, and ε/2 would hold; the
factor 2 is kept because it is what covers substitution.)

Utility (KLNRS Thm 3.4: n = O((ln|H| + ln(1/β))·max{1/(εα), 1/α²})). The theorem states
the order; the constants here are those of its proof, made explicit. With OPT = min_{h∈H}
err_D(h), the learner's h satisfies err_D(h) ≤ OPT + α with probability ≥ 1 − β over n
i.i.d. rows of D and its own coins whenever

    n ≥ max{ 8·(ln|H| + ln(4/β))/α²,  4·(ln|H| + ln(2/β))/(εα) }      (:func:`sample_complexity`)

— (i) Hoeffding and a union bound over H: Pr[∃h: |err_S(h) − err_D(h)| > α/4]
≤ 2|H|·exp(−nα²/8) ≤ β/2; (ii) the exponential mechanism's utility (Dwork & Roth Thm
3.11 with t = ln(2/β)): Pr[mistakes_S(h) > min_g mistakes_S(g) + (2/ε)(ln|H| + ln(2/β))]
≤ β/2, and that slack is ≤ nα/2; so err_D(h) ≤ err_S(h) + α/4 ≤ err_S(h*) + 3α/4 ≤ OPT + α.
Inverted for a known n (:func:`error_bound`): α = max{√(8(ln|H| + ln(4/β))/n),
4(ln|H| + ln(2/β))/(εn)}.

Classes (all declared before any row is read; |H| ≤ 2^22 at plan time, so the score vector
is bounded by declared numbers). For a class defined on the reals its members here are the
ones the declared grid distinguishes, so |H| is the class restricted to the grid:

- :class:`Thresholds` (grid g₁ < … < g_m of one feature): h_t(x) = [x ≥ t], t ∈ grid ∪
  {+∞}; |H| = m + 1.
- :class:`Intervals`: h_{a,b}(x) = [g_a ≤ x ≤ g_b], a ≤ b, and the empty interval;
  |H| = m(m + 1)/2 + 1.
- :class:`Conjunctions` over d binary attributes (a value ≥ ½ is true): each attribute
  enters positively, negated or not at all; |H| = 3^d, d ≤ 12.
- :class:`Stumps` (a grid per feature): h_{j,t,s}(x) = [x_j ≥ t] (s = 1) or [x_j < t]
  (s = 0); |H| = 2·Σ_j m_j.

Each class counts the mistakes of all its hypotheses at once (numpy, O(n + |H|) time and
memory; intervals O(n + m²)): a total data side, any finite row gives a score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_epsilon
from dpkit.learn._validation import ArrayLike, fit_labelled, predict_features
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["PrivateLearner", "HypothesisClass", "Thresholds", "Intervals", "Conjunctions",
           "Stumps", "LearningBound", "sample_complexity", "error_bound", "choice_law",
           "draw_hypothesis", "MAX_HYPOTHESES", "MAX_ATTRIBUTES"]

MAX_HYPOTHESES = 1 << 22  # the score vector's length, bounded at plan time
MAX_ATTRIBUTES = 12  # conjunctions: 3^12 = 531441 hypotheses
CHOICE = "hypothesis"


def _grid(values: ArrayLike, name: str) -> np.ndarray:
    """A declared grid: finite, strictly increasing floats (DomainError otherwise)."""
    g = np.asarray(values, dtype=np.float64).reshape(-1)
    if g.size == 0 or not np.all(np.isfinite(g)) or np.any(np.diff(g) <= 0):
        raise DomainError(f"{name}: the grid must be finite, non-empty and strictly increasing")
    return g


def _feature(feature: int) -> int:
    if int(feature) < 0:
        raise DomainError("feature must be a column index ≥ 0")
    return int(feature)


def _counts(index: np.ndarray, label: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows per bin, positives and negatives apart."""
    pos = np.bincount(index, weights=label, minlength=bins).astype(np.int64)
    return pos, np.bincount(index, minlength=bins).astype(np.int64) - pos


def _threshold_mistakes(x: np.ndarray, label: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Mistakes of [x ≥ g_i] for i = 0 … m − 1, then of +∞ (all 0): shape (m + 1,).
    With k = |{g ≤ x}|, [x ≥ g_i] = [i < k]; mistakes_i = #{pos, k ≤ i} + #{neg, k > i}."""
    m = grid.size
    pos, neg = _counts(np.searchsorted(grid, x, side="right"), label, m + 1)
    pos_low = np.cumsum(pos)  # positives with k ≤ i
    neg_high = neg.sum() - np.cumsum(neg)  # negatives with k > i
    return np.asarray(pos_low + neg_high, dtype=np.int64)


class HypothesisClass:
    """A finite, declared class of binary classifiers (module docstring).

    Subclasses define ``size`` (|H|), ``mistakes(X, y)`` (all |H| mistake counts at once, an
    int64 array of shape (|H|,)) and ``predict(index, X)`` (hypothesis ``index`` on X, 0/1).
    """

    size: int
    n_features: int | None = None  # None: any number (the class reads declared columns)

    def check(self) -> None:
        """Raise DomainError when |H| exceeds :data:`MAX_HYPOTHESES` (plan time)."""
        if not 1 <= self.size <= MAX_HYPOTHESES:
            raise DomainError(f"|H| = {self.size} exceeds the declared limit 2^22")

    def mistakes(self, x: np.ndarray, label: np.ndarray) -> np.ndarray:
        """Mistakes of every hypothesis on rows ``x`` (n, d) with labels ``label`` (n,) in
        {0, 1}: int64 array of shape (|H|,). Not private (the learner's data side)."""
        raise NotImplementedError

    def predict(self, index: int, x: np.ndarray) -> np.ndarray:
        """Hypothesis ``index`` on rows ``x``: int64 array (n,) of 0/1."""
        raise NotImplementedError

    def describe(self, index: int) -> str:
        """A readable name of hypothesis ``index``."""
        return f"h{index}"


class Thresholds(HypothesisClass):
    """h_t(x) = [x_feature ≥ t], t in the declared grid or +∞ (always 0): |H| = m + 1.

    Parameters
    ----------
    grid : array of shape (m,)
        Finite, strictly increasing thresholds (declared, never read off the data).
    feature : int
        The column of X the thresholds read (default 0).
    """

    def __init__(self, grid: ArrayLike, feature: int = 0) -> None:
        self.grid = _grid(grid, "Thresholds")
        self.feature = _feature(feature)
        self.size = self.grid.size + 1

    def mistakes(self, x: np.ndarray, label: np.ndarray) -> np.ndarray:
        """See :meth:`HypothesisClass.mistakes`."""
        return _threshold_mistakes(x[:, self.feature], label, self.grid)

    def predict(self, index: int, x: np.ndarray) -> np.ndarray:
        """See :meth:`HypothesisClass.predict`."""
        t = self.grid[index] if index < self.grid.size else np.inf
        return (x[:, self.feature] >= t).astype(np.int64)

    def describe(self, index: int) -> str:
        """``x[j] ≥ t``."""
        t = self.grid[index] if index < self.grid.size else math.inf
        return f"x[{self.feature}] >= {t:g}"


class Intervals(HypothesisClass):
    """h_{a,b}(x) = [g_a ≤ x_feature ≤ g_b], a ≤ b, then the empty interval (always 0):
    |H| = m(m + 1)/2 + 1. Hypothesis order: (a, b) row by row, a ascending."""

    def __init__(self, grid: ArrayLike, feature: int = 0) -> None:
        self.grid = _grid(grid, "Intervals")
        self.feature = _feature(feature)
        m = self.grid.size
        self.size = m * (m + 1) // 2 + 1
        self._a, self._b = np.triu_indices(m)

    def mistakes(self, x: np.ndarray, label: np.ndarray) -> np.ndarray:
        """#pos − Σ_{inside}(pos − neg): with L = |{g ≤ x}| and R = |{g < x}|, x is inside
        [g_a, g_b] iff a < L and R ≤ b; a 2-D histogram over (R, L) and cumulative sums
        give every interval at once."""
        m, v = self.grid.size, x[:, self.feature]
        left = np.searchsorted(self.grid, v, side="right")  # L
        right = np.searchsorted(self.grid, v, side="left")  # R ≤ L
        gain = np.bincount(right * (m + 1) + left, weights=2 * label - 1,
                           minlength=(m + 1) ** 2).reshape(m + 1, m + 1)
        # inside[a, b] = Σ_{R ≤ b, L > a} gain[R, L]
        by_r = np.cumsum(gain, axis=0)  # rows R ≤ b
        tail = by_r[:, ::-1].cumsum(axis=1)[:, ::-1]  # columns L ≥ c
        inside = tail[self._b, self._a + 1]
        total = int(label.sum())
        return np.concatenate([total - np.rint(inside).astype(np.int64), [total]])

    def predict(self, index: int, x: np.ndarray) -> np.ndarray:
        """See :meth:`HypothesisClass.predict`."""
        if index == self.size - 1:
            return np.zeros(x.shape[0], dtype=np.int64)
        v = x[:, self.feature]
        a, b = self.grid[self._a[index]], self.grid[self._b[index]]
        return ((v >= a) & (v <= b)).astype(np.int64)

    def describe(self, index: int) -> str:
        """``a ≤ x[j] ≤ b``."""
        if index == self.size - 1:
            return "empty"
        return (f"{self.grid[self._a[index]]:g} <= x[{self.feature}] <= "
                f"{self.grid[self._b[index]]:g}")


class Conjunctions(HypothesisClass):
    """Conjunctions of literals over d binary attributes: each attribute absent (0), positive
    (1) or negated (2); hypothesis index Σ_j c_j·3^(d−1−j); |H| = 3^d (index 0: the empty
    conjunction, always 1). An attribute is true when its value is ≥ ½ (a documented rule:
    any finite value is read). d ≤ 12."""

    def __init__(self, d: int) -> None:
        d = int(d)
        if not 1 <= d <= MAX_ATTRIBUTES:
            raise DomainError(f"Conjunctions: d must be in 1 … {MAX_ATTRIBUTES}")
        self.d, self.size, self.n_features = d, 3 ** d, d

    def mistakes(self, x: np.ndarray, label: np.ndarray) -> np.ndarray:
        """#pos − Σ_{patterns satisfying c}(pos − neg): the histogram over the 2^d patterns
        turned into one over the 3^d conjunctions, one axis at a time (value 0, 1 →
        absent: both, positive: 1, negated: 0)."""
        bits = (x >= 0.5).astype(np.int64)
        pattern = bits @ (1 << np.arange(self.d - 1, -1, -1))
        gain = np.bincount(pattern, weights=2 * label - 1, minlength=1 << self.d)
        table = np.rint(gain).astype(np.int64).reshape((2,) * self.d)
        for axis in range(self.d):
            zero, one = np.take(table, 0, axis=axis), np.take(table, 1, axis=axis)
            table = np.stack([zero + one, one, zero], axis=axis)
        return int(label.sum()) - table.reshape(-1)

    def literals(self, index: int) -> list[int]:
        """The d codes of hypothesis ``index`` (0 absent, 1 positive, 2 negated)."""
        return [(index // 3 ** (self.d - 1 - j)) % 3 for j in range(self.d)]

    def predict(self, index: int, x: np.ndarray) -> np.ndarray:
        """See :meth:`HypothesisClass.predict`."""
        bits = x >= 0.5
        out = np.ones(x.shape[0], dtype=bool)
        for j, code in enumerate(self.literals(index)):
            if code:
                out &= bits[:, j] if code == 1 else ~bits[:, j]
        return out.astype(np.int64)

    def describe(self, index: int) -> str:
        """``x0 ∧ ¬x3``, or ``true``."""
        parts = [("" if c == 1 else "¬") + f"x{j}"
                 for j, c in enumerate(self.literals(index)) if c]
        return " ∧ ".join(parts) or "true"


class Stumps(HypothesisClass):
    """Decision stumps h_{j,t,s}: [x_j ≥ t] (s = 1) or [x_j < t] (s = 0), t in feature j's
    declared grid: |H| = 2·Σ_j m_j. Order: feature, then sign (s = 1 first), then t."""

    def __init__(self, grids: list[ArrayLike]) -> None:
        self.grids = [_grid(g, f"Stumps (feature {j})") for j, g in enumerate(grids)]
        if not self.grids:
            raise DomainError("Stumps: declare one grid per feature")
        self.n_features = len(self.grids)
        sizes = np.array([g.size for g in self.grids])
        self.offsets = np.concatenate([[0], np.cumsum(2 * sizes)])
        self.size = int(self.offsets[-1])

    def _locate(self, index: int) -> tuple[int, int, float]:
        j = int(np.searchsorted(self.offsets, index, side="right")) - 1
        local, m = index - int(self.offsets[j]), self.grids[j].size
        return j, int(local < m), float(self.grids[j][local % m])

    def mistakes(self, x: np.ndarray, label: np.ndarray) -> np.ndarray:
        """Per feature: the thresholds' mistakes (+∞ dropped), then their complements."""
        n, out = label.size, []
        for j, grid in enumerate(self.grids):
            up = _threshold_mistakes(x[:, j], label, grid)[:-1]
            out += [up, n - up]
        return np.concatenate(out).astype(np.int64)

    def predict(self, index: int, x: np.ndarray) -> np.ndarray:
        """See :meth:`HypothesisClass.predict`."""
        j, sign, t = self._locate(index)
        above = x[:, j] >= t
        return (above if sign else ~above).astype(np.int64)

    def describe(self, index: int) -> str:
        """``x[j] ≥ t`` or ``x[j] < t``."""
        j, sign, t = self._locate(index)
        return f"x[{j}] {'>=' if sign else '<'} {t:g}"


# -- the bound --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearningBound:
    """KLNRS Thm 3.4 with its proof's constants (module docstring), at declared numbers only
    (the sample's n is not released).

    Attributes
    ----------
    hypotheses : int
        |H|.
    epsilon, alpha, beta : Fraction
        The learner's ε; the excess error α and failure probability β asked for.
    n : int
        Rows that suffice: err_D(h) ≤ OPT + α with probability ≥ 1 − β.
    """

    hypotheses: int
    epsilon: Fraction
    alpha: Fraction
    beta: Fraction
    n: int


def _check_unit(value: Number, name: str) -> Fraction:
    # a float as written (0.05 → 1/20), not its binary expansion: these are reported numbers
    v = positive(Fraction(repr(value)) if isinstance(value, float) else value, name)
    if v >= 1:
        raise DomainError(f"{name} must be in (0, 1)")
    return v


def sample_complexity(hypotheses: int, epsilon: Number, alpha: Number, beta: Number) -> int:
    """n = ⌈max{8(ln|H| + ln(4/β))/α², 4(ln|H| + ln(2/β))/(εα)}⌉ (module docstring; KLNRS
    Thm 3.4). Floats, rounded up with a relative margin of 1e-9 (a report, not a loss).

    Raises
    ------
    DomainError
        |H| < 1, ε ≤ 0, α or β outside (0, 1).
    """
    if int(hypotheses) < 1:
        raise DomainError("|H| must be at least 1")
    eps = float(positive(epsilon, "epsilon"))
    a, b = float(_check_unit(alpha, "alpha")), float(_check_unit(beta, "beta"))
    size = math.log(int(hypotheses))
    n = max(8 * (size + math.log(4 / b)) / a ** 2, 4 * (size + math.log(2 / b)) / (eps * a))
    return math.ceil(n * (1 + 1e-9))


def error_bound(hypotheses: int, epsilon: Number, n: int, beta: Number) -> float:
    """α = max{√(8(ln|H| + ln(4/β))/n), 4(ln|H| + ln(2/β))/(εn)}: the excess error that
    :func:`sample_complexity`'s argument guarantees at a public n (may exceed 1: vacuous)."""
    eps, b = float(positive(epsilon, "epsilon")), float(_check_unit(beta, "beta"))
    if int(n) < 1:
        raise DomainError("n must be at least 1")
    size = math.log(int(hypotheses))
    return max(math.sqrt(8 * (size + math.log(4 / b)) / n),
               4 * (size + math.log(2 / b)) / (eps * n))


# -- the choice -------------------------------------------------------------------------------
def choice_law(mistakes: ArrayLike, epsilon: Number, sensitivity: Number = 1) -> np.ndarray:
    """Pr[h] ∝ exp(−ε·mistakes(h)/(2Δ)) in floats (tests and reports; the draw is exact)."""
    m = np.asarray(mistakes, dtype=np.float64)
    logits = -float(epsilon) * (m - m.min()) / (2 * float(sensitivity))
    w = np.exp(logits)
    return np.asarray(w / w.sum())


def draw_hypothesis(mistakes: np.ndarray, epsilon: Fraction, *, sensitivity: Number = 1,
                    size: int | None = None) -> int | np.ndarray:
    """The exponential mechanism on scores −mistakes at Δu = ``sensitivity`` (1: the
    learner's; ½: the audit's broken variant) through :func:`frontend.select`: one index,
    or ``size`` independent ones (each costs ε)."""
    scores = -np.asarray(mistakes, dtype=np.int64)
    return frontend.select(scores, sensitivity, epsilon, size=size, statistic=CHOICE).value


# -- the audit --------------------------------------------------------------------------------
AUDIT_EPSILON = Fraction(1)
AUDIT_CLASS = Thresholds([0, 1, 2, 3, 4])  # 6 hypotheses
AUDIT_PAIR = (np.array([0]), np.array([1]))  # one row at x = 0, its label changed


def audit_cases() -> list[AuditCase]:
    """Thresholds on a grid of 5 (|H| = 6) and a one-row sample at x = 0 whose label changes
    (substitute-one): the first threshold's mistakes drop by 1, every other's rise by 1, the
    pair that makes a halved Δu cost the most. Broken: Δu = ½ (Pr ∝ exp(−ε·mistakes)),
    which is 2ε-DP at worst and e^1.64 here."""
    eps = AUDIT_EPSILON

    def sampler(sensitivity: Fraction) -> Sampler:
        def sample(labels: np.ndarray, n: int) -> np.ndarray:
            y = np.asarray(labels, dtype=np.int64)
            m = AUDIT_CLASS.mistakes(np.zeros((y.size, 1)), y)
            return np.asarray(draw_hypothesis(m, eps, sensitivity=sensitivity, size=n))
        return sample

    good = sampler(Fraction(1))
    claim = Measurement(lambda labels: int(good(labels, 1)[0]), HammingDistance(), PureDP,
                        lambda d: PureDP(eps * d), "generic_private_learner",
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase("generic_private_learner", claim, good, sampler(Fraction(1, 2)),
                      *AUDIT_PAIR)]


@register(audit=lambda: audit_cases())  # the audit battery's case
class PrivateLearner(ClassifierMixin, BaseEstimator):
    """The generic private learner (KLNRS 2011 §3.1, Thm 3.4; module docstring).

    Parameters
    ----------
    hypothesis_class : HypothesisClass
        :class:`Thresholds`, :class:`Intervals`, :class:`Conjunctions` or :class:`Stumps`
        (declared grids; |H| ≤ 2^22).
    epsilon : float
        ε > 0 (nats) of the one choice.
    alpha, beta : float
        The excess error and failure probability at which :attr:`bound_` states the sample
        size (defaults 0.05, 0.05); they change nothing in the fit.
    classes : sequence of two labels
        Declared labels (default (0, 1)); the second is the positive class (h(x) = 1).
    accountant : None, PrivacyFilter, Session or Accountant
        Debited PureDP(ε) once, before any row is read.

    Attributes
    ----------
    hypothesis_ : int
        The index of the chosen hypothesis in the class.
    description_ : str
        Its readable form.
    bound_ : LearningBound
        |H|, ε, α, β and the n that suffices (:func:`sample_complexity`).
    classes_ : ndarray of shape (2,)
    release_ : Release
        The fit's release record (loss PureDP(ε), one selection row).

    Raises
    ------
    DomainError
        ε ≤ 0, α or β outside (0, 1), not two classes, a label outside them, a class that
        is not a HypothesisClass or exceeds 2^22 hypotheses, X with fewer columns than the
        class reads — all before the debit.

    Notes
    -----
    Guarantee: ε-DP for add/remove-one and substitute-one rows: Pr[h] ∝
    exp(−ε·mistakes_S(h)/2), Δu = 1 (McSherry & Talwar 2007; Dwork & Roth Thm 3.10;
    KLNRS Lemma 3.3). Utility: err_D(h) ≤ OPT + α with probability ≥ 1 − β once
    n ≥ ``bound_.n`` (KLNRS Thm 3.4, constants of its proof).
    """

    def __init__(self, hypothesis_class: HypothesisClass | None = None, epsilon: float = 1.0,
                 alpha: float = 0.05, beta: float = 0.05, classes: object = (0, 1),
                 accountant: AccountantLike = None) -> None:
        self.hypothesis_class = hypothesis_class
        self.epsilon = epsilon
        self.alpha = alpha
        self.beta = beta
        self.classes = classes
        self.accountant = accountant

    def _plan(self, d: int) -> tuple[HypothesisClass, Fraction, LearningBound]:
        """(H, ε, bound), every check before the debit."""
        h = self.hypothesis_class
        if not isinstance(h, HypothesisClass):
            raise DomainError("declare a hypothesis_class: Thresholds, Intervals, "
                              "Conjunctions or Stumps")
        h.check()
        needed = _columns(h)
        if d < needed:
            raise DomainError(f"the hypothesis class reads {needed} feature(s); X has {d}")
        eps = check_epsilon(self.epsilon)
        alpha, beta = _check_unit(self.alpha, "alpha"), _check_unit(self.beta, "beta")
        bound = LearningBound(h.size, eps, alpha, beta,
                              sample_complexity(h.size, eps, alpha, beta))
        return h, eps, bound

    def sample_complexity(self, alpha: Number, beta: Number) -> int:
        """The n that suffices for excess error α at failure probability β (declared
        numbers only; :func:`sample_complexity`)."""
        h, eps, _ = self._plan(_columns(self.hypothesis_class))
        return sample_complexity(h.size, eps, alpha, beta)

    def fit(self, X: ArrayLike, y: ArrayLike) -> PrivateLearner:
        """Choose a hypothesis privately.

        Parameters
        ----------
        X : array of shape (n_samples, n_features)
            Finite features (the columns the class reads).
        y : array of shape (n_samples,), values among the two ``classes``

        Returns
        -------
        self

        Raises
        ------
        DomainError
            See the class docstring; raised before the accountant is debited.
        """
        x, classes, label = fit_labelled(X, y, self.classes)
        if classes.size != 2:
            raise DomainError("the generic learner takes exactly two declared classes")
        h, eps, bound = self._plan(x.shape[1])
        row = frontend.selection_row(1, eps, CHOICE)

        def compute() -> PrivateLearner:
            index = int(draw_hypothesis(h.mistakes(x, label), eps))
            self.hypothesis_ = index
            self.description_ = h.describe(index)
            self.bound_, self.classes_ = bound, classes
            self.n_features_in_ = x.shape[1]
            return self

        return charge(self.accountant, PureDP(eps),
                      f"PrivateLearner(ε={eps}, {type(h).__name__}, |H|={h.size})",
                      compute, (row,))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The chosen hypothesis on X: labels among ``classes_`` (post-processing)."""
        x = predict_features(self, X)
        assert isinstance(self.hypothesis_class, HypothesisClass)
        return np.asarray(self.classes_[self.hypothesis_class.predict(self.hypothesis_, x)])


def _columns(h: object) -> int:
    """The number of columns a class reads (its feature index + 1, or its d)."""
    if isinstance(h, Thresholds | Intervals):
        return h.feature + 1
    if isinstance(h, HypothesisClass) and h.n_features is not None:
        return h.n_features
    return 1
