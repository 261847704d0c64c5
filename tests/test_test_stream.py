"""No release runs under the test stream (issue 16, finding 8).

Attack: ``release_histogram`` and ``synthesize(method="mwem")`` called the samplers directly,
so inside ``rng.deterministic_for_tests(seed)`` they returned seeded, reproducible output.
Defence: the one entry to random bits (``rng.random_bytes``) refuses the test stream; the
seeded stream is readable only through the test-only door ``rng.seeded_draws_for_tests``,
which no production module names. Each entry point below must raise inside the block and
succeed outside it.
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit import mechanisms as mech
from dpkit.core import rng, samplers
from dpkit.errors import InsecureRandomnessError
from dpkit.release import release_histogram
from dpkit.release.synthetic.domain import Domain
from dpkit.release.synthetic.pmw import PrivateMultiplicativeWeights
from dpkit.release.synthetic.synthesize import synthesize

SRC = Path(dp.__file__).parent
RNG_FILE = SRC / "core" / "rng.py"


def _table() -> pl.DataFrame:
    return pl.DataFrame({"id": list(range(40)), "a": [i % 3 for i in range(40)],
                         "b": [i % 2 for i in range(40)], "x": [float(i % 7) for i in range(40)]})


def _xy() -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[float(i % 5), float((3 * i) % 4)] for i in range(40)])
    return x, np.array([i % 2 for i in range(40)])


def _session() -> dp.Session:
    return dp.Session(_table(), budget=dp.PureDP(10))


def _learn(name: str) -> object:
    from dpkit import learn

    x, y = _xy()
    bounds = (0, 5)
    models = {
        "GaussianNB": lambda: learn.GaussianNB(1, bounds=bounds, classes=[0, 1]).fit(x, y),
        "LogisticRegression": lambda: learn.LogisticRegression(
            1, bounds=bounds, classes=[0, 1]).fit(x, y),
        "LinearRegression": lambda: learn.LinearRegression(
            1, bounds=bounds, y_bounds=(0, 1)).fit(x, y.astype(float)),
        "KMeans": lambda: learn.KMeans(2, 1, bounds=bounds, max_iter=2).fit(x),
        "DecisionTreeClassifier": lambda: learn.DecisionTreeClassifier(
            1, bounds=bounds, classes=[0, 1]).fit(x, y),
        "PCA": lambda: learn.PCA(1, 1, bounds=bounds).fit(x),
        "StandardScaler": lambda: learn.StandardScaler(1, bounds=bounds).fit(x),
        "private_bounds": lambda: learn.private_bounds(x, 1),
    }
    return models[name]()


def _itemsets(kind: str) -> object:
    from dpkit.learn.itemsets import top_k_itemsets
    from dpkit.learn.privbasis import privbasis

    tx = [[i % 3, (i + 1) % 4] for i in range(30)]
    if kind == "tf":
        return top_k_itemsets(tx, [0, 1, 2, 3], 2, 1, max_size=2)
    return privbasis(tx, [0, 1, 2, 3], 2, 1)


def _pmw() -> object:
    codes = np.array([[i % 4, i % 2] for i in range(50)])
    p = PrivateMultiplicativeWeights(codes, Domain.from_dict({"a": 4, "b": 2}), 1, 20,
                                     max_updates=2)
    return p.answer(np.ones(8))


ENTRY_POINTS = {
    **{f"release_histogram[{m}]": (lambda m=m: release_histogram(np.arange(16), 1, m))
       for m in ("identity", "hb", "privelet", "dawa", "noise_first", "structure_first",
                 "uniform", "mm")},
    "release_histogram[2d ug]": lambda: release_histogram(np.ones((8, 8), int), 1, "ug"),
    "synthesize[mwem]": lambda: synthesize(_table(), {"a": [0, 1, 2], "b": [0, 1]},
                                           method="mwem", epsilon=1, rounds=2),
    "synthesize[independent]": lambda: synthesize(_table(), {"a": [0, 1, 2], "b": [0, 1]},
                                                  method="independent", epsilon=1),
    "synthesize[mst]": lambda: synthesize(_table(), {"a": [0, 1, 2], "b": [0, 1]},
                                          method="mst", epsilon=1, iters=5),
    "pmw": _pmw,
    "session.count": lambda: _session().query().count().release(epsilon=1),
    "session.release_histogram": lambda: _session().query().release_histogram(
        "x", [0, 2, 4, 8], method="hb", epsilon=1),
    "session.pmw": lambda: _session().query().pmw({"a": [0, 1, 2]}, epsilon=1, alpha=10),
    "make_laplace": lambda: mech.make_laplace(1)(np.zeros(3)),
    "make_exponential": lambda: mech.make_exponential(1)(np.array([1.0, 2.0])),
    "sample_exponential": lambda: mech.sample_exponential([1, 2], Fraction(1)),
    "make_randomized_response": lambda: mech.make_randomized_response([0, 1], 1)(np.array([0])),
    "make_staircase": lambda: mech.make_staircase(1, 1)(np.zeros(2)),
    "SparseVector": lambda: mech.SparseVector(5, 1).ask(3),
    "sampler.discrete_laplace": lambda: samplers.discrete_laplace(2, 4),
    "sampler.discrete_gaussian": lambda: samplers.discrete_gaussian(2, 4),
    "sampler.geometric": lambda: samplers.geometric(2, 4),
    "sampler.bernoulli_exp": lambda: samplers.bernoulli_exp(np.array([1, 2]), 3),
    "sampler.bernoulli[p=0]": lambda: samplers.bernoulli(0, 4),
    **{f"learn.{name}": (lambda name=name: _learn(name))
       for name in ("GaussianNB", "LogisticRegression", "LinearRegression", "KMeans",
                    "DecisionTreeClassifier", "PCA", "StandardScaler", "private_bounds")},
    "learn.top_k_itemsets": lambda: _itemsets("tf"),
    "learn.privbasis": lambda: _itemsets("privbasis"),
}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_release_refuses_the_test_stream(name):
    call = ENTRY_POINTS[name]
    if name == "synthesize[mst]":
        pytest.importorskip("mbi")
    with rng.deterministic_for_tests(16), pytest.raises(InsecureRandomnessError):
        call()
    assert rng.is_secure()
    call()  # the same call outside the block succeeds


def test_seeded_door_still_refuses_measurements_and_sessions():
    with rng.seeded_draws_for_tests(3):
        a = samplers.discrete_laplace(5, 20)
        with pytest.raises(InsecureRandomnessError):
            mech.make_discrete_laplace(1)(np.zeros(2, dtype=int))
        with pytest.raises(InsecureRandomnessError):
            _session().query().count().release(epsilon=1)
    with rng.seeded_draws_for_tests(3):
        b = samplers.discrete_laplace(5, 20)
    assert (a == b).all()  # the door is reproducible (for tests of the samplers)


def _python_sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_no_production_module_names_a_test_stream():
    """The door and the deterministic block are named only in dpkit/core/rng.py."""
    pattern = re.compile(r"seeded_draws_for_tests|deterministic_for_tests|_TestStream")
    users = [str(p.relative_to(SRC)) for p in _python_sources()
             if p != RNG_FILE and pattern.search(p.read_text(encoding="utf-8"))]
    assert users == []


# where a randomness source other than dpkit.core.rng may appear, which one, and why
# (an allow-list: a module path, or a package prefix ending in "/")
_OTHER_RANDOMNESS = {
    "ledger/": ({"secrets"}, "API tokens and MAC keys: never seeded, never released"),
    "release/ranges/matrix.py": ({"np.random"}, "a caller's Generator may position the strategy "
                                 "search's deterministic starts (dpkit draws nothing from NumPy "
                                 "there)"),
    "release/ranges/dpbench.py": ({"np.random"}, "benchmark inputs"),
    "release/workload.py": ({"np.random"}, "public random workloads"),
    "audit/attacks.py": ({"np.random"}, "the simulated attacker's own choices (which subsets "
                         "to ask, whom to target), never a release's noise"),
}
_FOREIGN = ("random", "secrets", "numpy.random", "os.urandom", "np.random", "default_rng")


def _allowed(module: str) -> set[str]:
    return set().union(*(sources for where, (sources, _) in _OTHER_RANDOMNESS.items()
                         if module == where or (where.endswith("/") and
                                                module.startswith(where))))


def _foreign_randomness(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in _FOREIGN}
        elif isinstance(node, ast.ImportFrom) and node.module in _FOREIGN:
            found.add(node.module)
        elif isinstance(node, ast.Attribute):
            dotted = ast.unparse(node)
            found |= {f for f in _FOREIGN if dotted == f or dotted.startswith(f + ".")}
    return found


def test_randomness_comes_from_rng_outside_an_allow_list():
    """Every other module draws its bits through dpkit.core.rng (and so through the one
    entry that refuses the test stream); a new source needs an entry above, with a reason."""
    offenders = {}
    for path in _python_sources():
        module = path.relative_to(SRC).as_posix()
        extra = _foreign_randomness(path) - _allowed(module)
        if path != RNG_FILE and extra:
            offenders[module] = sorted(extra)
    assert offenders == {}


def test_refused_before_any_debit():
    """Accountants refuse the test stream before they debit (not at the first draw after)."""
    from dpkit.core.compose import PrivacyFilter, PrivacyOdometer
    from dpkit.learn import GaussianNB

    x, y = _xy()
    budget = PrivacyFilter(dp.PureDP(5))
    odometer = PrivacyOdometer(dp.PureDP)
    session = _session()
    with rng.deterministic_for_tests(1):
        with pytest.raises(InsecureRandomnessError):
            GaussianNB(1, bounds=(0, 5), classes=[0, 1], accountant=budget).fit(x, y)
        with pytest.raises(InsecureRandomnessError):
            GaussianNB(1, bounds=(0, 5), classes=[0, 1], accountant=session).fit(x, y)
        with pytest.raises(InsecureRandomnessError):
            budget.invoke(mech.make_laplace(1), 0.0)
        with pytest.raises(InsecureRandomnessError):
            odometer.invoke(mech.make_laplace(1), 0.0)
        with pytest.raises(InsecureRandomnessError):
            session.query().pmw({"a": [0, 1, 2]}, epsilon=1, alpha=10)
    assert budget.remaining == dp.PureDP(5) and session.spent == dp.PureDP(0)
    assert odometer.spent == dp.PureDP(0)
