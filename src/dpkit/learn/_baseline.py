"""Is a released model its trivial baseline? Decided from the released parameters, the
declared bounds and the planned noise only (post-processing: no row is read), and said with a
:class:`~dpkit.errors.TrivialResultWarning` instead of silence (issue 33).

Each model's docstring states its rule; the pieces are here:

- :func:`one_sign`: a linear decision function b + ⟨w, φ⟩ whose range over the declared
  domain does not cross 0 predicts one class for every possible input (the constant
  classifier, whose accuracy is at most the majority rate);
- :func:`within_noise`: weights whose norm is at most the (1 − β) quantile of the norm of the
  noise planned for them cannot be told from noise around w = 0 (a test of w = 0 at level
  β): the model is the intercept-only one plus noise;
- :func:`flat`: a regressor whose predictions over the declared feature box span less than a
  small fraction of the declared target range is a constant predictor at that scale.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import gamma

from dpkit.errors import TrivialResultWarning

__all__ = ["one_sign", "within_noise", "flat", "warn", "LEVEL", "FLAT_FRACTION"]

LEVEL = 0.05  # β of within_noise's test
FLAT_FRACTION = 0.01  # flat: prediction spread below 1% of the declared target range


def one_sign(intercept: float, low: float, high: float) -> bool:
    """True when b + ⟨w, φ⟩, with ⟨w, φ⟩ ∈ [low, high] over the declared domain, is > 0
    everywhere or ≤ 0 everywhere (``predict`` thresholds at > 0)."""
    return bool(intercept + low > 0 or intercept + high <= 0)


def within_noise(weights: np.ndarray, dim: int, scale: float, level: float = LEVEL) -> bool:
    """True when ‖weights‖₂ is at most the (1 − level) quantile of Gamma(dim, scale): the L2
    norm of the vector Laplace mechanism's noise in ``dim`` dimensions (density
    ∝ exp(−‖b‖/scale), radius Gamma(dim, scale)), which also bounds that of ``dim``
    independent Laplace(scale) coordinates (‖b‖₂ ≤ ‖b‖₁ ~ Gamma(dim, scale))."""
    return bool(np.linalg.norm(weights) <= gamma.ppf(1 - level, dim, scale=scale))


def flat(spread: float, target_range: float, fraction: float = FLAT_FRACTION) -> bool:
    """True when the predictions' spread over the declared box is below ``fraction`` of the
    declared target range."""
    return bool(spread < fraction * target_range)


def warn(model: str, reason: str) -> None:
    """Emit the :class:`~dpkit.errors.TrivialResultWarning` (at the caller of ``fit``)."""
    warnings.warn(f"{model}: the released model is indistinguishable from its trivial "
                  f"baseline ({reason}); raise ε, declare tighter bounds or use fewer "
                  "features", TrivialResultWarning, stacklevel=4)
