import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.core import rng
from dpkit.errors import InsecureRandomnessError
from dpkit.mechanisms import make_discrete_laplace


def test_words_shapes_and_types():
    for bits, dtype in ((8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64)):
        w = rng.words(1000, bits)
        assert w.dtype == dtype and w.size == 1000
    big = rng.words(100_000)  # the AES-CTR path
    assert len(np.unique(big)) == big.size  # 64-bit collisions would be astronomically rare


@pytest.mark.parametrize("bound", [3, 7, 10, 1000, 2**33 + 5])
def test_uniform_below_is_uniform(bound):
    n = 200_000
    x = rng.uniform_below(bound, n)
    assert int(x.max()) < bound
    cells = min(bound, 50)
    binned = x
    if bound > 50:  # equal-width cells of the range; their exact masses
        edges = np.ceil(np.arange(cells + 1) * bound / cells)
        pmf = np.diff(edges) / bound
        binned = np.searchsorted(edges, x.astype(np.float64), side="right") - 1
    else:
        pmf = np.full(bound, 1 / bound)
    support = np.arange(cells)
    assert chi2_pvalue(np.asarray(binned), support, pmf) > FALSE_POSITIVE_RATE
    # broken variant: masking without rejection (the value 7 folded onto 6) is rejected
    if bound == 7:
        biased = np.minimum(rng.words(n, 8) & 7, 6)
        assert chi2_pvalue(biased.astype(np.int64), support, pmf) < FALSE_POSITIVE_RATE


def test_uniform_below_array_bounds():
    bounds = np.array([1, 2, 3, 2**40, 2**64 - 1], dtype=np.uint64)
    for _ in range(100):
        x = rng.uniform_below(bounds)
        assert (x < bounds).all() or (x[0] == 0 and (x[1:] < bounds[1:]).all())


def test_coins_balanced():
    c = rng.coins(100_001)
    assert c.size == 100_001
    support = np.array([0, 1])
    assert chi2_pvalue(c.astype(int), support, np.array([0.5, 0.5])) > FALSE_POSITIVE_RATE


def test_seeded_stream_is_reproducible_and_blocks_measurements():
    with rng.seeded_draws_for_tests(7):
        a = rng.words(10)
        assert not rng.is_secure()
        with pytest.raises(InsecureRandomnessError):
            make_discrete_laplace(1)(np.zeros(3, dtype=int))
    with rng.seeded_draws_for_tests(7):
        b = rng.words(10)
    assert (a == b).all()
    assert rng.is_secure()
    assert not (rng.words(10) == a).all()


def test_deterministic_block_refuses_every_draw():
    with rng.deterministic_for_tests(7):
        assert not rng.is_secure()
        for draw in (lambda: rng.words(1), lambda: rng.coins(3), lambda: rng.random_bytes(0),
                     lambda: rng.uniform_below(1, 4), lambda: rng.uniform_below_int(5),
                     lambda: rng.bernoulli_rational(1, 3, 2)):
            with pytest.raises(InsecureRandomnessError):
                draw()
    assert rng.words(1).size == 1


def test_uniform_below_int_big():
    bound = 10**30 + 3
    draws = [rng.uniform_below_int(bound) for _ in range(200)]
    assert all(0 <= d < bound for d in draws)
    assert max(draws) > bound // 2  # P(fail) = 2^-200


def test_forked_child_never_reuses_parent_bytes():
    import os

    rng.random_bytes(16)  # the parent now holds a partly used block
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(write, rng.random_bytes(32))
        os._exit(0)
    os.close(write)
    child = os.read(read, 32)
    os.waitpid(pid, 0)
    assert len(child) == 32 and child != rng.random_bytes(32)
