"""Issue 34: LogisticRegression(method="output")'s data-independent defaults
C = ε/((d + 1)·R·R′) and s = R/√d, and the old C = 1/√n_hint, s = 1 still reachable.

Deterministic: the noise row records the sensitivity Δ₂ = C·R′ the fit drew through, so the
defaults are read off it; no statistical assertion (false-positive rate 0).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpkit.learn import LogisticRegression
from dpkit.learn.logistic import default_c, default_intercept_scaling

_gen = np.random.default_rng(34)  # test input, not noise
X = _gen.uniform(0, 1, (2000, 4)) / 2
Y = (X.sum(1) > 1).astype(int)


def _sensitivity(**kw) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TrivialResultWarning: not what is tested here
        model = LogisticRegression(2.0, data_norm=1.0, classes=[0, 1], method="output",
                                   **kw).fit(X, Y)
    (row,) = model.release_.noise
    return float(row.sensitivity)


def test_default_c_and_intercept_scaling():
    s = default_intercept_scaling(1.0, 4)
    assert s == pytest.approx(0.5)
    c = default_c(2, 1.0, s, 5)
    assert c == pytest.approx(2 / (5 * math.sqrt(1.25)))
    assert _sensitivity() == pytest.approx(c * math.sqrt(1.25), rel=1e-5)


def test_old_default_is_reachable_and_n_hint_alone_is_deprecated():
    old = 0.01 * math.sqrt(2)  # C = 1/√10⁴, s = 1
    assert _sensitivity(C=0.01, intercept_scaling=1.0) == pytest.approx(old, rel=1e-5)
    with pytest.warns(DeprecationWarning, match="n_hint"):
        model = LogisticRegression(2.0, data_norm=1.0, classes=[0, 1], method="output",
                                   n_hint=10_000, intercept_scaling=1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            model.fit(X, Y)
    assert float(model.release_.noise[0].sensitivity) == pytest.approx(old, rel=1e-5)


def test_a_bad_n_hint_is_refused_before_the_debit():
    from dpkit.errors import DomainError
    with pytest.raises(DomainError, match="n_hint"):
        LogisticRegression(2.0, data_norm=1.0, classes=[0, 1], method="output",
                           n_hint=0).fit(X, Y)
