"""The reusable holdout's Fig. 2 claim (Dwork et al., Science 2015), on dpkit's Thresholdout.

The experiment is ``bench/holdout_science.py`` (one code for the figure and this test): pure
noise, so every classifier's true accuracy is exactly 1/2; the analyst selects features with
the holdout's help and asks the holdout for the accuracy of the classifier on the top k.

The claim at the paper's n = 10,000 rows per set: the standard holdout reports > 0.05 above
fresh data at k = 500, Thresholdout stays within 0.03. The bias of both is in units of the
paper's σ = 1/√n (T = 4σ, answer noise Lap(σ)), so at the smaller n of this test the claim
is checked in those units: 0.05 = 5σ and 0.03 = 3σ at n = 10,000. Here n = 2,500 (σ = 0.02),
d = 10,000 and k = 500 as in the paper, so the two limits are 0.10 and 0.06.

Error rates (normal approximation of a mean over trials; per-trial figures measured with
``bench/holdout_science.py``'s code on 30 trials at these sizes, seeds other than the
test's draws, which are unseeded):

- Thresholdout: the per-trial gap (reported − fresh) has mean ≈ 0.01 and standard deviation
  ≈ 0.03 (Lap(σ) answer noise and the sampling of the holdout and fresh sets); over R = 8
  trials the mean's standard error is ≈ 0.011, and 0.06 lies ≥ 4.5 of them above the mean
  (and 0.06 + 0.01 below): P(false failure) ≤ 4·10⁻⁶ under the approximation — stated, not
  1e-6, to keep the slow test under a minute; raise R to 12 for < 10⁻⁸.
- standard holdout and the broken variant: the gap's mean is ≈ 0.25, standard deviation
  ≈ 0.02; over R = 2 trials 0.10 is > 10 standard errors below: P(false failure) < 10⁻²³.

The broken variant is Thresholdout with its noise removed and threshold 0 (``broken``: ε =
10¹², T = 0), i.e. the standard holdout through the library's class; the Thresholdout check
must reject it.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

N, D, K = 2500, 10_000, 500
SIGMA = 1 / math.sqrt(N)
THRESHOLDOUT_LIMIT = 3 * SIGMA  # 0.03 at the paper's n
STANDARD_LIMIT = 5 * SIGMA  # 0.05 at the paper's n


def _bench():
    path = Path(__file__).resolve().parent.parent / "bench" / "holdout_science.py"
    spec = importlib.util.spec_from_file_location("holdout_science", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["holdout_science"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _mean_gap(oracle, trials: int) -> float:
    """Mean over trials of (reported holdout accuracy − fresh accuracy) at k = K. The data
    are benchmark input (NumPy's generator, unseeded); the holdout's noise is dpkit's."""
    bench = _bench()
    gen = np.random.default_rng()
    runs = [bench.trial(gen, N, D, [K], oracle(bench)) for _ in range(trials)]
    return float(np.mean([r[0, 1] - r[0, 2] for r in runs]))


def _thresholdout(bench):
    return bench.thresholdout(bench.paper_params(N, D + 1))


def _broken(bench):
    return bench.broken(D + 1)


def _standard(bench):
    return bench.standard


@pytest.mark.slow
def test_thresholdout_reports_what_fresh_data_say():
    gap = _mean_gap(_thresholdout, trials=8)
    assert abs(gap) < THRESHOLDOUT_LIMIT, gap


@pytest.mark.slow
def test_standard_holdout_overfits():
    gap = _mean_gap(_standard, trials=2)
    assert gap > STANDARD_LIMIT, gap


@pytest.mark.slow
def test_the_check_catches_thresholdout_without_noise_or_threshold():
    """The broken variant (no noise, T = 0) is the standard holdout: it overfits, and the
    Thresholdout check above fails on it."""
    gap = _mean_gap(_broken, trials=2)
    assert gap > STANDARD_LIMIT, gap
    assert not abs(gap) < THRESHOLDOUT_LIMIT


def test_mapping_gives_the_papers_noise_scales():
    """ε = 2cΔ/σ: dpkit's answer noise Lap(2cΔ/ε) is Lap(σ) and its comparison noise
    Lap(8cΔ/ε) is Lap(4σ) (bench docstring), exactly, with T = 4/√n and σ = 1/√n."""
    from fractions import Fraction

    bench = _bench()
    params = bench.paper_params(10_000, 10_051)
    assert (params.threshold, params.sigma) == (0.04, 0.01)
    delta = Fraction(2 * bench.BOUND, 10_000)
    eps = params.epsilon(10_000)
    assert 2 * params.max_over * delta / eps == Fraction(params.sigma)
    assert 8 * params.max_over * delta / eps == 4 * Fraction(params.sigma)
