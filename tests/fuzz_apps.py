"""Fuzz targets of the ``dpkit.apps`` entry points that take analyst input (issue 30;
tests/test_fuzz_surfaces.py).

Each :class:`Target` draws neighbouring inputs under the application's own neighbouring
relation (a user's ratings, an edge or a node with its edges, a sequence, a bid, a record, a
player's type, a user's queries) with values planted from the shared sentinels (``SECRET_INT``
as an id, ``SECRET_FLOAT`` as a value, ``SECRET`` as a string) and the analyst's parameters
(mostly valid, some refused), and runs the entry point through an in-memory accountant.

:func:`run_app` records (b) an exception after the debit (``Accountant.run`` starting the
data side) and (c) a sentinel in any exception text or log record; with the recorder of the
calibrated-noise entry (:class:`NoiseSpy`, wrapping what ``make_noise`` / ``make_selection``
return in each application module, without changing it), :func:`compare_noise` checks (a) on
the first noise call of the release (the only one whose input depends on the data alone; later
calls may depend on earlier noise): ‖x − x′‖ ≤ Δ (L1, or L2 for a Gaussian), and for a
selection the range of the score moves ≤ 2Δ (what both the exponential mechanism's L∞
sensitivity and a monotonic one imply). Session-based applications (top_k_query, network)
also go through the session harness's recorder, so :func:`fuzz_harness.compare` checks them.

An outcome that differs between neighbours *before* any debit (a refusal that read the data)
is a note, not a violation: in library mode the caller owns the data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest
from fuzz_harness import Recorder, Release, Run, exception_text, leaks
from fuzz_strategies import BUDGETS, SECRET, SECRET_FLOAT, SECRET_INT
from hypothesis import strategies as st

import dpkit as dp
from dpkit.apps import (
    auction,
    equilibrium,
    graph,
    posterior,
    recommend,
    sequence,
    topk,
)
from dpkit.apps import network as net
from dpkit.core.accountant import FilterAccountant
from dpkit.errors import ReleaseFailedError

APP_MODULES = (recommend, graph, sequence, auction, posterior, equilibrium, topk)


# -- the noise recorder ------------------------------------------------------------------------
@dataclass
class NoiseCall:
    mechanism: str
    sensitivity: Fraction
    selection: bool
    value: np.ndarray


class _Spy:
    """A calibrated measurement that records its input on each call (everything else goes
    to the real one)."""

    def __init__(self, real: Any, log: list[NoiseCall], selection: bool) -> None:
        self._real, self._log, self._selection = real, log, selection

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        self._log.append(NoiseCall(str(self._real.mechanism), Fraction(self._real.sensitivity),
                                   self._selection, np.array(x, dtype=object, copy=True)))
        return self._real(x, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class NoiseSpy:
    """Wrap ``make_noise`` / ``make_selection`` as each application module imported them."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.calls: list[NoiseCall] = []
        for module in APP_MODULES:
            for name, selection in (("make_noise", False), ("make_selection", True)):
                real = getattr(module, name, None)
                if real is not None:
                    mp.setattr(module, name, self._wrap(real, selection))

    def _wrap(self, real: Callable[..., Any], selection: bool) -> Callable[..., Any]:
        log = self.calls

        def make(*args: Any, **kwargs: Any) -> Any:
            return _Spy(real(*args, **kwargs), log, selection)
        return make


def compare_noise(small: list[NoiseCall], large: list[NoiseCall]) -> list[str]:
    """(a) on the first noise call of each side (module docstring)."""
    if not small or not large:
        return []
    a, b = small[0], large[0]
    if a.value.shape != b.value.shape or a.sensitivity != b.sensitivity:
        return [] if a.value.shape != b.value.shape else [
            f"(a) the declared sensitivity depends on the data: {a.sensitivity} vs "
            f"{b.sensitivity}"]
    d = [Fraction(y) - Fraction(x) for x, y in zip(a.value.reshape(-1), b.value.reshape(-1),
                                                     strict=True)]
    if not d:
        return []
    sens = a.sensitivity
    if a.selection:
        moved = max(d) - min(d)
        ok, what = moved <= 2 * sens, f"score moves span {float(moved)} > 2Δ = {2 * sens}"
    elif "Gaussian" in a.mechanism:
        moved = sum(x * x for x in d)
        ok, what = moved <= sens * sens, f"L2² {float(moved)} > Δ² = {float(sens * sens)}"
    else:
        moved = sum(abs(x) for x in d)
        ok, what = moved <= sens, f"L1 {float(moved)} > Δ = {sens}"
    if ok:
        return []
    return [f"(a) {a.mechanism}: {what}; {a.value.tolist()[:8]} -> {b.value.tolist()[:8]}"]


# -- running one application on one input --------------------------------------------------------
@dataclass
class AppRun:
    run: Run = field(default_factory=Run)
    noise: list[NoiseCall] = field(default_factory=list)
    outcome: str = ""


def run_app(call: Callable[[Any, Any], Any], data: Any, measure: str) -> AppRun:
    """Run ``call(data, accountant)`` once (module docstring)."""
    out = AppRun()
    mp = pytest.MonkeyPatch()
    spy = NoiseSpy(mp)
    try:
        with Recorder() as rec:
            accountant = FilterAccountant(BUDGETS[measure])
            try:
                call(data, accountant)
                out.outcome = "released"
                ok = True
            except Exception as exc:
                ok = False
                text = exception_text(exc)
                found = leaks(text)
                if found:
                    out.run.problems.append(f"(c) an exception contains data values {found}: "
                                            f"{text[:600]}")
                if rec.since(0, "debit") or isinstance(exc, ReleaseFailedError):
                    out.run.problems.append(f"(b) raised after the debit: {text[:600]}")
                out.outcome = f"refused: {type(exc).__name__}"
            out.run.releases.append(Release(ok, rec.since(0, "plan"), rec.since(0, "compute")))
        for line in rec.logs.lines:
            if leaks(line):
                out.run.problems.append(f"(c) a log record contains data values: {line[:600]}")
    finally:
        mp.undo()
    out.noise = spy.calls
    return out


# -- the targets -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """An entry point: ``draw(data)`` → (small input, large input, parameters, measure);
    ``call(input, parameters, accountant)`` runs it; ``sensitivity``: whether (a) applies to
    its first noise call (False when its sensitivity is itself data-dependent, e.g. smooth
    sensitivity)."""

    name: str
    draw: Callable[[st.DataObject], tuple[Any, Any, dict[str, Any], str]]
    call: Callable[[Any, dict[str, Any], Any], Any]
    sensitivity: bool = True


IDS = [0, 1, 2, 3, 4, -1, None, SECRET_INT]
EPSILONS = [1, "1/2", 2, 0, -1, 1e-300]


def _eps(data: st.DataObject) -> Any:
    e = data.draw(st.sampled_from(EPSILONS), label="epsilon")
    return Fraction(e) if isinstance(e, str) else e


def _add_one(data: st.DataObject, rows: st.SearchStrategy[Any], make: Callable[[list], Any],
             label: str, *, substitute: bool = False, min_size: int = 0
             ) -> tuple[Any, Any]:
    """Inputs one record apart: ``large`` adds (or, with ``substitute``, replaces) one."""
    base = data.draw(st.lists(rows, min_size=max(min_size, int(substitute)), max_size=8),
                     label=label)
    extra = data.draw(rows, label=f"{label}: the neighbour's record")
    if substitute:
        i = data.draw(st.integers(0, len(base) - 1), label="substituted")
        return make(base), make([*base[:i], extra, *base[i + 1:]])
    return make(base), make([*base, extra])


# recommend: a user's ratings
_rating = st.tuples(st.sampled_from([0, 1, 2, 5, -1, None, SECRET_INT]),
                    st.sampled_from([1, 2, 5, 0.5, -1, float("nan"), float("inf"), None,
                                     SECRET_FLOAT, 1e308]))


def _ratings(users: list[tuple[int, list[tuple[Any, Any]]]]) -> pl.DataFrame:
    rows = [(u, i, r) for u, items in users for i, r in items]
    return pl.DataFrame(rows, schema={"user": pl.Int64, "item": pl.Int64, "rating": pl.Float64},
                        orient="row")


def _draw_recommend(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    user = st.lists(_rating, min_size=1, max_size=4)
    base = data.draw(st.lists(user, max_size=5), label="users")
    extra = data.draw(user, label="the added user")
    small = _ratings([(u, r) for u, r in enumerate(base)])
    large = _ratings([*[(u, r) for u, r in enumerate(base)], (SECRET_INT, extra)])
    measure = data.draw(st.sampled_from(["pure", "zcdp"]), label="measure")
    params = {"n_items": data.draw(st.sampled_from([3, 6, 1, 0]), label="n_items"),
              "bounds": data.draw(st.sampled_from([(0, 5), (1, 5), (-1, 1), (0, 1e308),
                                                   (5, 1), (0, SECRET_FLOAT)]), label="bounds"),
              ("epsilon" if measure == "pure" else "rho"): _eps(data),
              "neighbours": data.draw(st.sampled_from([30, 1, 2]), label="k"),
              "rank": data.draw(st.sampled_from([20, 1, 2]), label="rank")}
    return small, large, params, measure


# graph: an edge, or a node with its edges
_edge = st.tuples(st.sampled_from(IDS), st.sampled_from(IDS))


def _edges(rows: list[tuple[Any, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"src": pl.Int64, "dst": pl.Int64}, orient="row")


GRAPH_FUNCTIONS = ["edge_count", "degree_histogram", "triangle_count", "kstar_count",
                   "recommend_node"]


def _draw_graph(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    fn = data.draw(st.sampled_from(GRAPH_FUNCTIONS), label="function")
    unit = "node" if fn == "degree_histogram" and data.draw(st.booleans(), label="node?") \
        else "edge"
    base = data.draw(st.lists(_edge, max_size=8), label="edges")
    if unit == "edge":
        extra = [data.draw(_edge, label="the added edge")]
    else:
        new = data.draw(st.sampled_from([5, 6, SECRET_INT]), label="the added node")
        others = data.draw(st.lists(st.sampled_from(IDS), max_size=4), label="its edges")
        extra = [(new, o) for o in others]
    params: dict[str, Any] = {"fn": fn, "epsilon": _eps(data)}
    if fn != "degree_histogram" or unit == "node" or data.draw(st.booleans()):
        params["n_nodes"] = data.draw(st.sampled_from([5, 7, 1, 0, 10**9]), label="n_nodes")
    if fn in ("triangle_count", "kstar_count"):
        params["delta"] = data.draw(st.sampled_from([Fraction(1, 10**6), 0, 1]), label="delta")
    if fn == "kstar_count":
        params["k"] = data.draw(st.sampled_from([1, 2, 3, 0]), label="k")
    if fn == "recommend_node":
        params["target"] = data.draw(st.sampled_from([0, 1, 4, -1, 7]), label="target")
    if fn == "degree_histogram":
        params["unit"] = unit
        if unit == "edge":
            params["method"] = data.draw(st.sampled_from(["hay", "direct", "nope"]),
                                         label="method")
        else:
            params["max_degree"] = data.draw(st.sampled_from([None, 2, 4]), label="top")
    measure = "approx" if fn in ("triangle_count", "kstar_count") else "pure"
    return _edges(base), _edges(base + extra), params, measure


def _call_graph(edges: Any, params: dict[str, Any], accountant: Any) -> Any:
    p = dict(params)
    return getattr(graph, p.pop("fn"))(edges, accountant=accountant, **p)


# sequence: one sequence
_sequence = st.lists(st.sampled_from([0, 1, 2, 1, 0, -1, 3, 9, None, SECRET_INT]), max_size=5)


def _sequences(rows: list[list[Any]]) -> pl.DataFrame:
    return pl.DataFrame({"sequence": pl.Series("sequence", rows, dtype=pl.List(pl.Int64))})


def _draw_sequence(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    small, large = _add_one(data, _sequence, _sequences, "sequences")
    fn = data.draw(st.sampled_from(["prefix_tree", "ngram_model"]), label="function")
    params: dict[str, Any] = {"fn": fn, "alphabet": data.draw(st.sampled_from([3, 1, 0, 2]),
                                                              label="alphabet"),
                              "epsilon": _eps(data),
                              "threshold": data.draw(st.sampled_from([2, 0, -1, 1e308]),
                                                     label="threshold")}
    if fn == "prefix_tree":
        params["height"] = data.draw(st.sampled_from([1, 2, 3, 0]), label="height")
    else:
        params["order"] = data.draw(st.sampled_from([1, 2, 3, 0]), label="order")
        params["max_length"] = data.draw(st.sampled_from([1, 3, 5, 0]), label="max_length")
    return small, large, params, "pure"


def _call_named(module: Any) -> Callable[[Any, dict[str, Any], Any], Any]:
    def call(x: Any, params: dict[str, Any], accountant: Any) -> Any:
        p = dict(params)
        return getattr(module, p.pop("fn"))(x, accountant=accountant, **p)
    return call


# auction: one bid (added, or changed)
_bid = st.sampled_from([0, 0.5, 1, 0.25, 2, -1, float("nan"), float("inf"), SECRET_FLOAT])


def _draw_auction(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    small, large = _add_one(data, _bid, list, "bids", substitute=data.draw(st.booleans()))
    params = {"fn": "digital_goods_auction", "epsilon": _eps(data),
              "max_price": data.draw(st.sampled_from([1, 2, "1/3", 0, SECRET_FLOAT]),
                                     label="max_price"),
              "prices": data.draw(st.sampled_from([None, [0.25, 0.5, 1], [1], [0, 1]]),
                                  label="prices")}
    if isinstance(params["max_price"], str):
        params["max_price"] = Fraction(params["max_price"])
    return small, large, params, "pure"


# posterior: one record changed
def _draw_posterior(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    categorical = data.draw(st.booleans(), label="categorical?")
    record = (st.sampled_from([0, 1, 2, 1, -1, SECRET_INT]) if categorical
              else st.sampled_from([0, 1, 1, 0.5, float("nan"), 2, SECRET_FLOAT]))
    small, large = _add_one(data, record, np.array, "records", substitute=True, min_size=1)
    if categorical:
        params = {"fn": "one_posterior_sample_categorical", "epsilon": _eps(data),
                  "categories": data.draw(st.sampled_from([2, 3, 1, 0]), label="K")}
    else:
        params = {"fn": "one_posterior_sample", "epsilon": _eps(data),
                  "size": data.draw(st.sampled_from([1024, 2, 16, 0]), label="size")}
    return small, large, params, "pure"


# equilibrium: one player's type changed
def _draw_equilibrium(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    record = st.sampled_from([0, 1, 0, 1, 2, -1, SECRET_INT])
    small, large = _add_one(data, record, lambda r: np.array(r, dtype=np.int64), "types",
                            substitute=True, min_size=1)
    game = data.draw(st.sampled_from([
        ([0, 1], [1, 0], [[0, 1], [1]]), ([0, 0], [1, 1], [[0, 1], [0, 1]]),
        ([1], [0], [[0], [0]])]), label="game")
    return small, large, {"game": game, "epsilon": _eps(data),
                          "beta": data.draw(st.sampled_from([1e-6, 0.5, 0, 2]), label="beta")
                          }, "pure"


def _call_equilibrium(types: Any, params: dict[str, Any], accountant: Any) -> Any:
    game = equilibrium.congestion_game(*params["game"])
    return equilibrium.private_equilibrium(types, game, epsilon=params["epsilon"],
                                           beta=params["beta"], accountant=accountant)


# top-k: one user's queries (a frame, or a Session)
_query_row = st.tuples(st.sampled_from(["a", "b", "c", "a", None, SECRET]),
                       st.sampled_from([0, 1, 3, -1, None, SECRET_INT]))


def _draw_topk(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    def table(users: list[tuple[Any, list[tuple[Any, Any]]]]) -> pl.DataFrame:
        rows = [(u, q, c) for u, qs in users for q, c in qs]
        return pl.DataFrame(rows, schema={"user": pl.Int64, "item": pl.String,
                                          "clicks": pl.Int64}, orient="row")
    user = st.lists(_query_row, min_size=1, max_size=4)
    base = data.draw(st.lists(user, max_size=5), label="users")
    extra = data.draw(user, label="the added user")
    small = table(list(enumerate(base)))
    large = table([*enumerate(base), (SECRET_INT, extra)])
    method = data.draw(st.sampled_from(["truncated_geometric", "laplace", "gaussian",
                                        "limited_domain", "nope"]), label="method")
    clicks = data.draw(st.booleans(), label="clicks?")
    params: dict[str, Any] = {
        "fn": data.draw(st.sampled_from(["top_k_unknown_domain", "top_k_query"]), label="fn"),
        "k": data.draw(st.sampled_from([1, 2, 0, 1001]), label="k"),
        "d": data.draw(st.sampled_from([1, 2, None, 0]), label="d"),
        "epsilon": _eps(data), "delta": data.draw(st.sampled_from(
            [Fraction(1, 10**6), Fraction(1, 2), 0]), label="delta"),
        "method": method, "clicks": "clicks" if clicks else None,
        "click_bound": data.draw(st.sampled_from([1, 5, 0, None]), label="c") if clicks
        else None}
    if method == "limited_domain":
        params["k_bar"] = data.draw(st.sampled_from([None, 1, 4]), label="k_bar")
    return small, large, params, "approx"


def _call_topk(frame: pl.DataFrame, params: dict[str, Any], accountant: Any) -> Any:
    p = dict(params)
    if p.pop("fn") == "top_k_unknown_domain":
        return topk.top_k_unknown_domain(frame, user="user", item="item",
                                         accountant=accountant, **p)
    d = p["d"] if p["d"] is not None else 3
    session = dp.Session(frame, dp.PrivacyUnit.by("user", d, max_groups=d,
                                                  max_rows_per_group=1),
                         dp.ApproxDP(10**9, Fraction(1, 2)))
    half = Fraction(p["epsilon"]) / 2 if isinstance(p["epsilon"], int | Fraction) else 1
    if p["method"] == "limited_domain":
        selection: Any = dp.TopKSelection(p["k"], half, p["delta"], p.get("k_bar"))
    else:
        selection = dp.PartitionSelection(half, p["delta"], p["method"])
    return topk.top_k_query(session, "item", p["k"], selection=selection, epsilon=half,
                            clicks=p["clicks"], click_bound=p["click_bound"])


# network: a source host's flows, through a Session
_flow = st.fixed_dictionaries({
    "dst": st.sampled_from([1, 2, 3, None, SECRET_INT]),
    "dport": st.sampled_from([80, 443, 22, 0, -1, 70000, None]),
    "packets": st.sampled_from([1, 2, 0, -1, None, SECRET_INT]),
    "bytes": st.sampled_from([40, 1500, 0, -1, None, SECRET_INT]),
    "payload": st.sampled_from(["p1", "p2", None, SECRET])})
FLOWS = {"src": pl.Int64, "dst": pl.Int64, "dport": pl.Int64, "packets": pl.Int64,
         "bytes": pl.Int64, "payload": pl.String}


def _draw_network(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    def table(hosts: list[tuple[Any, list[dict[str, Any]]]]) -> pl.DataFrame:
        rows = [{**f, "src": h} for h, fs in hosts for f in fs]
        return pl.DataFrame(rows, schema=FLOWS) if rows else pl.DataFrame(schema=FLOWS)
    host = st.lists(_flow, min_size=1, max_size=4)
    base = data.draw(st.lists(host, max_size=5), label="hosts")
    extra = data.draw(host, label="the added host")
    small, large = table(list(enumerate(base))), table([*enumerate(base), (SECRET_INT, extra)])
    fn = data.draw(st.sampled_from(["packet_size_distribution", "port_distribution",
                                    "connections_per_host", "frequent_payloads"]), label="fn")
    params: dict[str, Any] = {"fn": fn, "epsilon": _eps(data),
                              "max_rows": data.draw(st.sampled_from([1, 2, 3]), label="M")}
    if fn == "packet_size_distribution":
        params["bins"] = data.draw(st.sampled_from([[0, 100, 1500], [0, 1], [1e308, 0]]))
    elif fn == "port_distribution":
        params["ports"] = data.draw(st.sampled_from([[80, 443], [22], [], [70000], [-1]]))
    else:
        params["selection"] = dp.PartitionSelection(1, Fraction(1, 10**6))
    return small, large, params, "approx"


def _call_network(frame: pl.DataFrame, params: dict[str, Any], accountant: Any) -> Any:
    p = dict(params)
    fn, m = p.pop("fn"), p.pop("max_rows")
    session = dp.Session(frame, dp.PrivacyUnit.by("src", m, max_groups=m,
                                                  max_rows_per_group=m),
                         dp.ApproxDP(10**9, Fraction(1, 2)))
    return getattr(net, fn)(session, **p)


TARGETS = [
    Target("recommend", _draw_recommend, lambda x, p, a: recommend.fit_recommender(
        x, accountant=a, **p)),
    Target("graph", _draw_graph, _call_graph),
    Target("sequence", _draw_sequence, _call_named(sequence)),
    Target("auction", _draw_auction, _call_named(auction)),
    Target("posterior", _draw_posterior, _call_named(posterior)),
    Target("equilibrium", _draw_equilibrium, _call_equilibrium),
    Target("topk", _draw_topk, _call_topk),
    Target("network", _draw_network, _call_network),
]
SMOOTH = ("triangle_count", "kstar_count")  # data-dependent (smooth) sensitivity: no (a)


# -- the reusable holdout (kept apart: its interface is being redesigned) ---------------------
def _leaky_row(r: Any) -> Any:
    if float(r) == SECRET_FLOAT:  # an exception that quotes the holdout value
        raise ValueError(f"row holds {float(r)!r}")
    return r


HOLDOUT_QUERIES: dict[str, Any] = {  # row functions (query_rows) and expressions (query)
    "mean": lambda r: r,
    "two": lambda r: np.array([r, 1 - r]),
    "square": lambda r: r * r,
    "positive": lambda r: r if r > 0 else np.zeros(0),  # its shape depends on the value
    "leaky": _leaky_row,
    "expr_mean": pl.col("x"),
    "expr_two": [pl.col("x"), (1 - pl.col("x")).alias("y")],
    "expr_positive": (pl.col("x") > 0).alias("p"),
}


def draw_holdout(data: st.DataObject) -> tuple[Any, Any, dict[str, Any], str]:
    value = st.sampled_from([0.0, 1.0, 0.5, 0.25, float("nan"), -1.0, SECRET_FLOAT])
    small, large = _add_one(data, value, lambda r: np.array(r, dtype=np.float64), "holdout",
                            substitute=True, min_size=1)
    # the training set is the analyst's: a row function that fails or changes shape there
    # is refused to her (DomainError), so only the holdout takes hostile values
    train = np.array(data.draw(st.lists(st.sampled_from([0.25, 0.5, 1.0]), min_size=1,
                                        max_size=6), label="train"))
    return small, large, {
        "train": train, "epsilon": _eps(data),
        "threshold": data.draw(st.sampled_from([0.1, 0, 1e-300, -1]), label="T"),
        "max_over": data.draw(st.sampled_from([1, 3, 0]), label="c"),
        "queries": data.draw(st.lists(st.sampled_from(sorted(HOLDOUT_QUERIES)), min_size=1,
                                      max_size=4), label="queries")}, "pure"


def call_holdout(holdout: Any, params: dict[str, Any], accountant: Any) -> Any:
    """Build a ReusableHoldout over ``holdout`` and ask the queries (its public API only)."""
    from dpkit.apps.holdout import ReusableHoldout

    frames = any(name.startswith("expr_") for name in params["queries"])
    train = pl.DataFrame({"x": params["train"]}) if frames else params["train"]
    data = pl.DataFrame({"x": holdout}) if frames else holdout
    h = ReusableHoldout(train, data, epsilon=params["epsilon"],
                        threshold=params["threshold"], max_over=params["max_over"],
                        accountant=accountant)
    answers = []
    for name in params["queries"]:
        if h.exhausted:
            break
        query = HOLDOUT_QUERIES[name]
        if name.startswith("expr_"):
            answers.append(h.query(query))
        elif not frames:  # a row function reads an array row (a frame gives it a dict)
            answers.append(h.query_rows(query))
    return answers


HOLDOUT = Target("holdout", draw_holdout, call_holdout, sensitivity=False)
