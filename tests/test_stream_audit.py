"""The audit cases of dpkit.stream (tree and square-root factorisation) with their broken
variants: node noise halved, a shared node counted once (dpkit.stream.audit).

False-positive rates: a correct counter fails only if the histogram test's majority of 9 votes
fails (< 1e-11) or the ε lower bound, computed at confidence 1 − 1e-6, exceeds the claim
(≤ 1e-6). A broken counter must be flagged; the measured margins are in dpkit.stream.audit."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from dpkit.audit import run_audit
from dpkit.mechanisms.registry import registered
from dpkit.stream import base
from dpkit.stream.audit import factorization_cases, tree_cases

CONFIDENCE = 1 - 1e-6
CASES = {c.name: c for c in [*tree_cases(), *factorization_cases()]}
SAMPLES = {name: 50_000 for name in CASES}


@pytest.fixture
def noiseless(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(base, "draw", lambda noise, size: np.zeros(size, dtype=np.int64))
    yield


def test_cases_are_registered() -> None:
    assert {"BinaryTree", "SqrtFactorization"} <= set(registered())


def test_statistics_are_the_pairs_likelihood_ratio_statistics(noiseless: None) -> None:
    """Without noise the statistic separates the pair exactly: 0 nodes ≥ 1 against all 3
    (tree); ⟨r, y⟩/‖r‖² = 0 against 1 (factorisation)."""
    for case in CASES.values():
        lo, hi = (0.0, 3.0) if "tree" in case.name else (0.0, 1.0)
        assert np.allclose(case.sample(case.x, 4), lo)
        assert np.allclose(case.sample(case.x_prime, 4), hi)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_correct_counter_passes(name: str) -> None:
    result = run_audit(CASES[name], SAMPLES[name], confidence=CONFIDENCE)
    assert result.histogram_passed
    assert result.lower_bound <= result.claimed_epsilon


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_broken_counter_is_flagged(name: str) -> None:
    result = run_audit(CASES[name], SAMPLES[name], broken=True, confidence=CONFIDENCE)
    assert (not result.histogram_passed) or result.lower_bound > result.claimed_epsilon
