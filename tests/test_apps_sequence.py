"""dpkit.apps.sequence: the noisy prefix tree (Chen, Fung, Desai & Sossou, KDD 2012).

Each level's count vector moves by at most 1 in L1 when one sequence is removed (brute force
over every sequence of small random sets, with the candidate nodes held fixed as the
sequential composition argument does); a broken variant (n-gram occurrence counts, where
one sequence adds to many nodes) is caught; consistency; the debit; bad input; an audit of
one released count with a broken variant.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from dpkit.apps import sequence as sq
from dpkit.audit import audit_release
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, ColumnError, DomainError

K, H = 2, 3


def random_sets(count: int, seed: int = 0):
    gen = np.random.default_rng(seed)  # test data only
    for _ in range(count):
        n = int(gen.integers(1, 7))
        yield [gen.integers(-1, K + 1, size=int(gen.integers(0, 5))).tolist()
               for _ in range(n)]  # -1 and K are outside the universe


def frame(seqs) -> pl.DataFrame:
    return pl.DataFrame({"sequence": seqs}, schema={"sequence": pl.List(pl.Int64)})


class Recorder:
    """A stand-in for the noise: records each level's true counts and returns a large
    fixed count so every candidate survives (the candidates are then the same for both
    inputs, as they are when conditioned on the earlier releases)."""

    def __init__(self) -> None:
        self.levels: list[np.ndarray] = []

    def __call__(self, true: np.ndarray) -> np.ndarray:
        self.levels.append(np.asarray(true).copy())
        return np.full(true.shape, 10**6, dtype=np.int64)


def level_vectors(seqs) -> list[np.ndarray]:
    rec = Recorder()
    mat, lengths = sq.prefix_matrix(frame(seqs), "sequence", K, H)
    sq._build(mat, lengths, K, H, rec, 0.0)
    return rec.levels


def ngram_vectors(seqs) -> list[np.ndarray]:
    """Broken: occurrences of every length-i substring (one sequence adds to many)."""
    out = []
    for i in range(1, H + 1):
        counts: dict[tuple, int] = {}
        for s in seqs:
            s = [x for x in s if 0 <= x < K]
            for j in range(len(s) - i + 1):
                counts[tuple(s[j:j + i])] = counts.get(tuple(s[j:j + i]), 0) + 1
        keys = [tuple(int(c) for c in np.base_repr(m, K).zfill(i)) for m in range(K ** i)]
        out.append(np.array([counts.get(key, 0) for key in keys]))
    return out


@pytest.mark.parametrize("vectors,bound_holds", [(level_vectors, True),
                                                 (ngram_vectors, False)])
def test_level_sensitivity_by_brute_force(vectors, bound_holds):
    worst = 0
    for seqs in random_sets(40):
        full = vectors(seqs)
        for j in range(len(seqs)):
            fewer = vectors(seqs[:j] + seqs[j + 1:])
            for a, b in zip(full, fewer, strict=True):
                worst = max(worst, int(np.abs(a - b).sum()))
    assert (worst <= 1) == bound_holds
    assert worst >= 1


def test_debit_consistency_and_synthesis():
    seqs = [[0, 1, 1], [0], [], [1, 0, 0, 1], [0, 1]] * 30
    f = PrivacyFilter(PureDP(5))
    tree = sq.prefix_tree(frame(seqs), alphabet=K, height=H, epsilon=Fraction(3, 2),
                          threshold=0, accountant=f)
    assert f.spent == PureDP(Fraction(3, 2))
    b = tree.base
    for code, level, count in zip(tree.codes, tree.levels, tree.counts, strict=True):
        if level < H and code % b != K + 1:
            children = tree.count_codes(code * b + np.arange(1, K + 2))
            assert children.sum() == pytest.approx(count) or count == 0
    syn = tree.synthesize()
    assert abs(syn.height - len(seqs)) <= 20 and syn["sequence"].list.len().max() <= H
    assert tree.count([[0]])[0] >= 0


def test_messy_input_never_raises_after_the_debit():
    f = PrivacyFilter(PureDP(10))
    for seqs in ([], [[]], [[None, 5, -2]], [[0] * 100]):
        tree = sq.prefix_tree(frame(seqs), alphabet=K, height=H, epsilon=1, accountant=f)
        assert (tree.synthesize()["sequence"].list.len() <= H).all()
    assert f.spent == PureDP(4)


def test_bad_input_raises_before_any_debit():
    df = frame([[0, 1]])
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(BudgetExceededError):
        sq.prefix_tree(df, alphabet=K, height=H, epsilon=2, accountant=f)
    bad = [dict(alphabet=0), dict(height=0), dict(epsilon=0), dict(threshold=-1),
           dict(alphabet=1000, height=20), dict(alphabet=1.5)]
    for extra in bad:
        with pytest.raises(DomainError):
            sq.prefix_tree(df, **(dict(alphabet=K, height=H, epsilon=1, accountant=f) | extra))
    with pytest.raises(ColumnError):
        sq.prefix_tree(df.rename({"sequence": "s"}), alphabet=K, height=H, epsilon=1,
                       accountant=f)
    with pytest.raises(DomainError):
        sq.prefix_tree(pl.DataFrame({"sequence": ["ab"]}), alphabet=K, height=H, epsilon=1,
                       accountant=f)
    assert f.spent == PureDP(0)


# Audit: the released (noisy, before pruning) count of the level-1 node "0" on neighbouring
# sets, one sequence [0] added. False-positive rate 1e-6 (dpkit.audit.audit_release); the
# broken variant claims ε = 1 and runs at 8ε.
X = frame([[1], [0, 1]])
X_PRIME = frame([[1], [0, 1], [0]])


def release(epsilon: float):
    def run(df: pl.DataFrame) -> float:
        tree = sq.prefix_tree(df, alphabet=K, height=1, epsilon=epsilon, threshold=0)
        return float(tree.noisy[tree.codes == 1][0])
    return run


@pytest.mark.slow
def test_audit_level_count_and_broken_variant():
    ok = audit_release(release(1.0), X, X_PRIME, 1.0, samples=600, histogram_share=0)
    assert ok.passed, ok.lower_bound
    broken = audit_release(release(8.0), X, X_PRIME, 1.0, samples=600, histogram_share=0)
    assert not broken.passed, broken.lower_bound


ELL = 3


def gram_vectors(seqs, ell=ELL, order=3):
    rec = Recorder()
    mat, lengths = sq.prefix_matrix(frame(seqs), "sequence", K, ell)
    sq._grams(sq._framed(mat, lengths, K), K, order, rec, 0.0)
    return rec.levels


@pytest.mark.parametrize("ell,bound_holds", [(ELL, True), (12, False)])
def test_ngram_level_sensitivity(ell, bound_holds):
    """Each level's gram counts move by ≤ ℓ + 2 (ℓ = 3); broken: the sequences are not cut
    to ℓ (ℓ = 12 used for the counts) while ℓ + 2 = 5 is still claimed."""
    worst = 0
    gen = np.random.default_rng(5)
    for _ in range(30):
        seqs = [gen.integers(0, K, size=int(gen.integers(0, 12))).tolist()
                for _ in range(int(gen.integers(1, 5)))]
        full = gram_vectors(seqs, ell)
        for j in range(len(seqs)):
            fewer = gram_vectors(seqs[:j] + seqs[j + 1:], ell)
            for a, b in zip(full, fewer, strict=True):
                worst = max(worst, int(np.abs(a - b).sum()))
    assert (worst <= ELL + 2) == bound_holds


def test_ngram_model_debit_and_prefix_counts():
    seqs = [[0, 1, 1], [0], [], [1, 0, 0, 1], [0, 1]] * 40
    f = PrivacyFilter(PureDP(5))
    model = sq.ngram_model(frame(seqs), alphabet=K, order=3, max_length=4,
                           epsilon=Fraction(5, 2), accountant=f)
    assert f.spent == PureDP(Fraction(5, 2))
    tree = model.prefix_tree(4)
    est = tree.count([[0], [1], [0, 1]])
    assert np.all(est >= 0) and (tree.synthesize()["sequence"].list.len() <= 4).all()
    with pytest.raises(DomainError):
        sq.ngram_model(frame(seqs), alphabet=K, order=0, max_length=4, epsilon=1,
                       accountant=f)
    with pytest.raises(DomainError):
        sq.ngram_model(frame(seqs), alphabet=K, order=3, max_length=0, epsilon=1,
                       accountant=f)
    assert f.spent == PureDP(Fraction(5, 2))
