"""Private-PGM's graphical model on a junction tree, in NumPy: exact marginals of any clique,
the model size of a hypothetical clique set, and the mirror-descent fit (McKenna, Sheldon &
Miklau, ICML 2019, Alg. 1) — all post-processing of the measurements.

Why NumPy and not Private-PGM's JAX programs: AIM refits its model every round, and every
round the model has a new structure, so the compiled message-passing programs were compiled
anew each round. On a 16-attribute binary table with 60 3-way cliques one compile took
60–100 s and an iteration ~10 ms; these small clique tables (≤ 2^13 cells) are faster in
plain NumPy (bench/aim_scale.py).

The model is the one Private-PGM fits: log p(x) = Σ_C θ_C(x_C) over the maximal cliques C of
a junction tree (Private-PGM's own: :func:`mbi.junction_tree.make_junction_tree` on the
measured cliques). A measurement of clique c contributes ½‖μ_c − y‖²/σ² to the loss (μ the
model's marginal counts on c); repeated measurements of one clique are pooled into their
precision-weighted mean (the same loss up to a constant, so the same iterates).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit.release.synthetic.domain import Domain

__all__ = ["JunctionTree", "Measurements", "Model", "fit", "model_size", "size_bound"]

Clique = tuple[str, ...]
_DENSE = 1 << 14  # projection matrices up to this many entries are stored dense
_MANY_AXES = 8  # nodes with more axes project by bincount, others by einsum (faster each)


# --------------------------------------------------------------------- model size (MB)
def model_size(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """The junction tree's size in MB of float64 cells, as
    :func:`mbi.junction_tree.hypothetical_model_size` computes it (same elimination order —
    a tree graph's DFS post-order, else mbi's greedy order, ties to the earliest attribute —
    so the same maximal cliques), on bitmasks instead of networkx graphs (~50× faster)."""
    attrs = domain.attributes
    index = {a: i for i, a in enumerate(attrs)}
    masks = {sum(1 << index[a] for a in c) for c in cliques}
    adj = [0] * len(attrs)
    for m in masks:
        for i in _bits(m):
            adj[i] |= m & ~(1 << i)
    edges = sum(bin(a).count("1") for a in adj) // 2
    if edges and edges == len(attrs) - 1 and _connected(adj):  # a tree: no fill edges
        return sum(_cells(domain, m) for m in {(1 << i) | (1 << j) for i in range(len(attrs))
                                                for j in _bits(adj[i])}) * 8 / 2 ** 20
    order = _greedy_order(domain, masks)
    fill, cliques_out = list(adj), []
    for v in order:  # eliminate: {v} ∪ its later neighbours is a clique of the triangulation
        nb = fill[v]
        cliques_out.append(nb | (1 << v))
        for u in _bits(nb):
            fill[u] |= nb & ~(1 << u)
            fill[u] &= ~(1 << v)
    maximal = [m for m in set(cliques_out) if not any(m != o and m & o == m for o in cliques_out)]
    return sum(_cells(domain, m) for m in maximal) * 8 / 2 ** 20


def size_bound(domain: Domain) -> float:
    """An upper bound (MB) on the size of any junction tree over ``domain``: each maximal
    clique of a triangulation is {v} ∪ v's later neighbours for a distinct v of the
    elimination order, so the cells sum to at most Σ_i Π_{j≥i} s_j, largest with the sizes
    ascending."""
    sizes = sorted(domain.sizes)
    total, suffix = 0, 1
    for s in reversed(sizes):
        suffix *= s
        total += suffix
    return total * 8 / 2 ** 20


def _bits(mask: int) -> list[int]:
    out, i = [], 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def _cells(domain: Domain, mask: int) -> int:
    return math.prod(domain.sizes[i] for i in _bits(mask))


def _connected(adj: list[int]) -> bool:
    seen, todo = 1, [0]
    while todo:
        v = todo.pop()
        new = adj[v] & ~seen
        seen |= new
        todo += _bits(new)
    return seen == (1 << len(adj)) - 1


def _greedy_order(domain: Domain, masks: set[int]) -> list[int]:
    """mbi's ``greedy_order``: repeatedly eliminate the attribute whose cliques' union has the
    fewest cells (the earliest attribute on ties), merging those cliques into one."""
    left, cliques, order = list(range(len(domain.attributes))), set(masks), []
    while left:
        best, best_cost = -1, -1
        for a in left:
            union = 0
            for m in cliques:
                if m >> a & 1:
                    union |= m
            cost = _cells(domain, union)
            if best < 0 or cost < best_cost:
                best, best_cost = a, cost
        order.append(best)
        left.remove(best)
        touching = {m for m in cliques if m >> best & 1}
        union = 0
        for m in touching:
            union |= m
        cliques -= touching
        cliques.add(union & ~(1 << best))
    return order


# ---------------------------------------------------------------------- measurements
@dataclass
class Measurements:
    """Pooled measurements: for each distinct clique its precision Σ1/σ_i² and the
    precision-weighted mean of its noisy marginals (flattened in the clique's order)."""

    cliques: list[Clique]
    means: list[np.ndarray]
    precisions: list[float]

    @classmethod
    def pool(cls, measured: Sequence[Any]) -> Measurements:
        """From objects with ``clique``, ``values`` (flat) and ``sigma`` (no weights)."""
        acc: dict[Clique, list[Any]] = {}
        for m in measured:
            if getattr(m, "weights", None) is not None:  # MST's compressed cells: not here
                raise ValueError("internal: weighted measurements are not pooled")
            w = 1.0 / max(float(m.scale), 1e-12) ** 2
            entry = acc.setdefault(tuple(m.clique), [0.0, 0.0])
            entry[0] = entry[0] + w * np.asarray(m.values, dtype=np.float64)
            entry[1] += w
        return cls(list(acc), [v[0] / v[1] for v in acc.values()], [v[1] for v in acc.values()])


# ------------------------------------------------------------------------ the tree
class JunctionTree:
    """Private-PGM's junction tree of ``cliques`` over ``domain`` (a forest when the cliques
    do not connect), with exact sum-product in log space.

    ``nodes`` are the maximal cliques in domain order; a table over node v has shape
    ``shapes[v]``. :meth:`calibrate` turns log-potentials (one table per node) into
    normalised node marginals; :meth:`marginal` gives any clique's marginal from them."""

    def __init__(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> None:
        from mbi import Domain as MDomain
        from mbi import junction_tree

        self.domain = domain
        graph, _ = junction_tree.make_junction_tree(MDomain(domain.attributes, domain.sizes),
                                                    [tuple(c) for c in cliques])
        position = {a: i for i, a in enumerate(domain.attributes)}
        self.nodes: list[Clique] = [tuple(sorted(n, key=position.__getitem__))
                                    for n in graph.nodes]
        self.shapes = [domain.shape(n) for n in self.nodes]
        key = {tuple(sorted(n, key=position.__getitem__)): i for i, n in enumerate(graph.nodes)}
        neighbours: list[list[int]] = [[] for _ in self.nodes]
        for u, v in graph.edges:
            i, j = key[tuple(sorted(u, key=position.__getitem__))], key[
                tuple(sorted(v, key=position.__getitem__))]
            neighbours[i].append(j)
            neighbours[j].append(i)
        self.parent = [-1] * len(self.nodes)
        self.order: list[int] = []
        self.root = [0] * len(self.nodes)
        for start in range(len(self.nodes)):  # breadth-first, one root per component
            if self.parent[start] != -1 or start in self.order:
                continue
            queue = [start]
            self.order.append(start)
            while queue:
                v = queue.pop(0)
                self.root[v] = start
                for u in neighbours[v]:
                    if u not in self.order:
                        self.parent[u] = v
                        self.order.append(u)
                        queue.append(u)
        self.sep = [tuple(a for a in self.nodes[v] if p >= 0 and a in self.nodes[p])
                    for v, p in enumerate(self.parent)]
        self._neighbours = neighbours
        self._holders = {a: [u for u, n in enumerate(self.nodes) if a in n]
                         for a in domain.attributes}
        self._host: dict[Clique, int] = {}
        self._plan: list[Any] | None = None

    def host(self, clique: Sequence[str]) -> int:
        """The first node containing ``clique``, or −1."""
        c = tuple(clique)
        if c not in self._host:
            self._host[c] = next((i for i, n in enumerate(self.nodes) if set(c) <= set(n)),
                                 -1)
        return self._host[c]

    def _shape_in(self, v: int, attrs: Sequence[str]) -> list[int]:
        return [s if a in attrs else 1 for a, s in zip(self.nodes[v], self.shapes[v],
                                                        strict=True)]

    def calibrate(self, theta: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Node marginals (probabilities; each component's sum to 1) from log-potentials
        ``theta`` (one table per node): Hugin's two passes, the upward messages in log space
        (a log-sum-exp shifted by the maximum of each separator cell, so no message
        underflows however far apart the nodes' potentials are: mirror descent can drive
        two nodes' potentials hundreds of nats apart, where products of exponentials are 0
        and Private-PGM's log-space passes are not), the downward pass dividing the
        parent's separator marginal by the upward message in log space; each node's
        belief is exponentiated once, shifted by its maximum. A separator cell of zero
        probability gives its node's cells probability 0."""
        if self._plan is None:
            self._plan = [(tuple(i for i, a in enumerate(self.nodes[v]) if a not in self.sep[v]),
                           self._shape_in(p, self.sep[v]),
                           tuple(i for i, a in enumerate(self.nodes[p]) if a not in self.sep[v]),
                           self._shape_in(v, self.sep[v])) if p >= 0 else None
                          for v, p in enumerate(self.parent)]
        log = list(theta)
        up: list[np.ndarray] = list(theta)  # the upward log-messages (roots: unused)
        for v in reversed(self.order):
            p, plan = self.parent[v], self._plan[v]
            if plan is None:
                continue
            t = log[v]
            top = t.max(axis=plan[0], keepdims=True)
            up[v] = (np.log(np.exp(t - top).sum(axis=plan[0], keepdims=True)) + top).reshape(
                plan[1])
            log[p] = log[p] + up[v]
        beliefs = list(log)
        for v in self.order:
            p, plan = self.parent[v], self._plan[v]
            t = log[v]
            if plan is not None:
                sep = beliefs[p].sum(axis=plan[2], keepdims=True) if plan[2] else beliefs[p]
                with np.errstate(divide="ignore"):
                    t = t + (np.log(sep) - up[v]).reshape(plan[3])
            b = np.exp(t - t.max())
            beliefs[v] = b / b.sum()
        return beliefs

    def marginals(self, probs: Sequence[np.ndarray], cliques: Sequence[Sequence[str]]
                  ) -> list[np.ndarray]:
        """The model's marginal probabilities on each clique (shape sizes(clique), in its
        order) from calibrated node marginals ``probs``: a clique inside a node is one
        weighted ``bincount`` of the node's cells; a clique across components is the outer
        product of its parts; otherwise variables are eliminated over the smallest subtree
        that covers it, each node entering as its conditional given the separator towards
        the subtree's top (Koller & Friedman 2009, §10.3.3). Exact."""
        cache: dict[Clique, np.ndarray] = {}
        conds: dict[tuple[int, int], np.ndarray] = {}
        return [self._query(probs, tuple(c), cache, conds) for c in cliques]

    def marginal(self, probs: Sequence[np.ndarray], clique: Sequence[str]) -> np.ndarray:
        """:meth:`marginals` of one clique."""
        return self.marginals(probs, [clique])[0]

    def _query(self, probs: Sequence[np.ndarray], c: Clique, cache: dict[Clique, np.ndarray],
               conds: dict[tuple[int, int], np.ndarray]) -> np.ndarray:
        if c in cache:
            return cache[c]
        if not c:
            return np.array(1.0)
        v = self.host(c)
        if v >= 0:
            out = self._project(probs[v], v, c)
        else:
            parts: dict[int, list[str]] = {}
            for a in c:
                parts.setdefault(self.root[self._holders[a][0]], []).append(a)
            if len(parts) > 1:
                labels = {a: i for i, a in enumerate(c)}
                args: list[Any] = []
                for sub in parts.values():
                    args += [self._query(probs, tuple(sub), cache, conds),
                             [labels[a] for a in sub]]
                out = np.einsum(*args, list(range(len(c))))
            else:
                out = self._eliminate(probs, c, conds)
        cache[c] = out
        return out

    def _project(self, table: np.ndarray, v: int, c: Clique) -> np.ndarray:
        shape = self.domain.shape(c)
        return np.bincount(cell_index(self.shapes[v], self.nodes[v], c), weights=table.ravel(),
                           minlength=math.prod(shape)).reshape(shape)

    def _path(self, a: int, b: int) -> list[int]:
        """Nodes on the tree path from a to b (both included)."""
        up_a, up_b = [a], [b]
        while self.parent[up_a[-1]] >= 0:
            up_a.append(self.parent[up_a[-1]])
        while self.parent[up_b[-1]] >= 0:
            up_b.append(self.parent[up_b[-1]])
        common = next(u for u in up_a if u in up_b)
        return up_a[: up_a.index(common) + 1] + up_b[: up_b.index(common)][::-1]

    def _eliminate(self, probs: Sequence[np.ndarray], attrs: Clique,
                   conds: dict[tuple[int, int], np.ndarray]) -> np.ndarray:
        """The marginal of ``attrs`` (one component): top = the node holding most of them;
        each other attribute joins through its holder nearest to top; the union of those
        paths is eliminated leaves first."""
        top = max(self._holders[attrs[0]] + [u for a in attrs[1:] for u in self._holders[a]],
                  key=lambda u: sum(a in self.nodes[u] for a in attrs))
        keep = {top}
        for a in attrs:
            if a not in self.nodes[top]:
                paths = sorted((len(p), p) for p in (self._path(top, u)
                                                      for u in self._holders[a]))
                keep.update(paths[0][1])
        labels: dict[str, int] = {}

        def lab(names: Sequence[str]) -> list[int]:
            return [labels.setdefault(x, len(labels)) for x in names]

        def message(u: int, towards: int) -> tuple[Clique, np.ndarray]:
            if (u, towards) not in conds:
                sep = tuple(x for x in self.nodes[u] if x in self.nodes[towards])
                axes = tuple(i for i, x in enumerate(self.nodes[u]) if x not in sep)
                margin = probs[u].sum(axis=axes, keepdims=True) if axes else probs[u]
                conds[(u, towards)] = probs[u] / np.maximum(margin, 1e-300)
            args: list[Any] = [conds[(u, towards)], lab(self.nodes[u])]
            names = list(self.nodes[u])
            for w in self._neighbours[u]:
                if w != towards and w in keep:
                    sub, table = message(w, u)
                    names += sub
                    args += [table, lab(sub)]
            out = tuple(x for x in dict.fromkeys(names)
                        if x in attrs or x in self.nodes[towards])
            return out, np.einsum(*args, lab(out))

        args: list[Any] = [probs[top], lab(self.nodes[top])]
        for w in self._neighbours[top]:
            if w in keep:
                sub, table = message(w, top)
                args += [table, lab(sub)]
        return np.einsum(*args, lab(attrs))


# ---------------------------------------------------------------------- mirror descent
@dataclass
class _Part:
    """One pooled clique inside its host node: its cells, how to project the node's table
    on it (``einsum`` labels, or each node cell's index for ``bincount`` when the node has
    many small axes, where that is faster) and how to broadcast it back (axis order and
    shape in the node)."""

    cells: int
    shape: tuple[int, ...]
    labels: list[int]
    index: np.ndarray | None
    order: list[int]
    broadcast: list[int]


class _Fit:
    """One structure's projections: each pooled clique's marginal from its host node (a
    dense 0/1 matrix product for small nodes) and each gradient broadcast back."""

    def __init__(self, tree: JunctionTree, meas: Measurements) -> None:
        self.tree = tree
        hosts = [tree.host(c) for c in meas.cliques]
        if min(hosts, default=0) < 0:
            raise ValueError("internal: a measured clique outside the junction tree")
        self.order = sorted(range(len(meas.cliques)), key=lambda i: hosts[i])
        self.blocks: list[tuple[int, list[_Part], np.ndarray | None]] = []
        for v in range(len(tree.nodes)):
            mine = [meas.cliques[i] for i in self.order if hosts[i] == v]
            if not mine:
                continue
            names, shape = tree.nodes[v], tree.shapes[v]
            parts = []
            for c in mine:
                inside = [a for a in names if a in c]
                parts.append(_Part(
                    math.prod(tree.domain.shape(c)), tree.domain.shape(c),
                    [names.index(a) for a in c],
                    cell_index(shape, names, c) if len(shape) > _MANY_AXES else None,
                    [c.index(a) for a in inside],
                    [s if a in c else 1 for a, s in zip(names, shape, strict=True)]))
            cells = math.prod(shape)
            rows = sum(p.cells for p in parts)
            dense = None
            if rows * cells <= _DENSE:  # small: one dense product has the least overhead
                dense, offset = np.zeros((rows, cells)), 0
                for p in parts:
                    index = cell_index(shape, names, tuple(names[i] for i in p.labels))
                    dense[offset + index, np.arange(cells)] = 1.0
                    offset += p.cells
            self.blocks.append((v, parts, dense))
        self.mean = np.concatenate([meas.means[i] for i in self.order]) if self.order else (
            np.zeros(0))
        self.precision = np.concatenate([np.full(meas.means[i].size, meas.precisions[i])
                                         for i in self.order]) if self.order else np.zeros(0)

    def evaluate(self, theta: Sequence[np.ndarray], total: float
                 ) -> tuple[list[np.ndarray], np.ndarray, float, np.ndarray]:
        probs = self.tree.calibrate(theta)
        out = []
        for v, parts, dense in self.blocks:
            table = probs[v]
            if dense is not None:
                out.append(dense @ table.ravel())
                continue
            for p in parts:
                if p.index is not None:
                    out.append(np.bincount(p.index, weights=table.ravel(), minlength=p.cells))
                else:
                    out.append(np.einsum(table, list(range(table.ndim)), p.labels).ravel())
        mu = np.concatenate(out) * total if out else np.zeros(0)
        diff = mu - self.mean
        grad = self.precision * diff
        return probs, mu, 0.5 * float(diff @ grad), grad

    def expand(self, grad: np.ndarray) -> list[np.ndarray]:
        out = [np.zeros(s) for s in self.tree.shapes]
        pos = 0
        for v, parts, dense in self.blocks:
            rows = sum(p.cells for p in parts)
            g = grad[pos: pos + rows]
            if dense is not None:
                out[v] = (g @ dense).reshape(self.tree.shapes[v])
            else:
                acc, offset = out[v], 0
                for p in parts:
                    piece = g[offset: offset + p.cells].reshape(p.shape)
                    acc += np.transpose(piece, p.order).reshape(p.broadcast)
                    offset += p.cells
            pos += rows
        return out


def cell_index(shape: Sequence[int], names: Clique, clique: Sequence[str]) -> np.ndarray:
    """For every cell of a table of ``shape`` over ``names`` (row-major), its cell in the
    marginal on ``clique`` (row-major in the clique's order)."""
    idx = np.zeros(tuple(shape), dtype=np.intp)
    for a in clique:
        i = names.index(a)
        axis = np.arange(shape[i], dtype=np.intp).reshape([-1 if j == i else 1
                                                           for j in range(len(shape))])
        idx *= shape[i]
        idx += axis
    return idx.ravel()


@dataclass
class Model:
    """A fitted model: the tree, the log-potential tables per node and per pooled clique
    (the same log-joint; the latter carries a warm start to the next structure), the node
    marginals (probabilities) and the total."""

    tree: JunctionTree
    theta: list[np.ndarray]
    potentials: dict[Clique, np.ndarray]
    probs: list[np.ndarray]
    total: float

    def marginal(self, clique: Sequence[str]) -> np.ndarray:
        """Marginal counts on ``clique`` (shape sizes(clique), in its order)."""
        return self.tree.marginal(self.probs, clique) * self.total

    def marginals(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """:meth:`marginal` of every clique."""
        return [m * self.total for m in self.tree.marginals(self.probs, cliques)]


def fit(domain: Domain, meas: Measurements, total: float, iters: int, lipschitz: float,
        start: Model | None = None) -> Model:
    """Entropic mirror descent with dpkit's Armijo line search (as
    :func:`dpkit.release.synthetic.mst.mirror_descent`: step ×1.01 after a sufficient
    decrease, ×0.5 and no move otherwise; first step 2/(L·total)) on Private-PGM's junction
    tree of the measured cliques, warm-started from ``start``'s potentials (cliques ``start``
    had and ``meas`` has not start at 0: AIM's measurements only grow). Post-processing."""
    tree = JunctionTree(domain, meas.cliques)
    work = _Fit(tree, meas)
    old = {} if start is None else start.potentials
    flat = np.concatenate([old.get(meas.cliques[i], np.zeros(meas.means[i].size))
                           for i in work.order]) if work.order else np.zeros(0)
    theta = work.expand(flat)
    total = max(total, 1.0)
    alpha = 2.0 / ((lipschitz or 1.0) * total)
    probs, mu, value, grad = work.evaluate(theta, total)
    step = work.expand(grad)
    for _ in range(int(iters)):
        trial = [t - alpha * g for t, g in zip(theta, step, strict=True)]
        probs2, mu2, value2, grad2 = work.evaluate(trial, total)
        if value - value2 >= 0.5 * alpha * float(grad @ (mu - mu2)):
            flat = flat - alpha * grad
            theta, probs, mu, value, grad = trial, probs2, mu2, value2, grad2
            step = work.expand(grad)
            alpha *= 1.01
        else:
            alpha *= 0.5
    potentials, pos = {}, 0
    for i in work.order:
        size = meas.means[i].size
        potentials[meas.cliques[i]] = flat[pos: pos + size]
        pos += size
    return Model(tree, theta, potentials, probs, total)
