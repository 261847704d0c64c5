"""Records from a Private-PGM graphical model by forward sampling on its junction tree
(post-processing of the model, so of the measurements behind it).

Private-PGM's own ``synthetic_data`` (mbi 1.1.0, method "round") stratifies each
attribute's draws by the records' *index* inside each group of equal parent values, so every
attribute ends up ordered like the records and hence like every other attribute: on Adult
with an MST model its records miss the model's own 2-way marginals off the tree by 0.13 in
mean total variation (up to 0.4). Here the ranks are taken in a fresh random order, each
attribute is drawn given its earlier neighbours in the *triangulated* graph (the
junction-tree cliques that hold it; exact for a decomposable model, Koller & Friedman 2009,
§10.2), and the draws come from dpkit's CSPRNG.

Randomised rounding as in Private-PGM: the first attribute's counts are rounded to the row
total, and inside each group of records sharing the parents' values the inverse-CDF uniforms
are stratified ((rank + U) / group size, rank in random order), so each group's counts
follow the model's conditional up to ±1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from dpkit.core.rng import uniforms

__all__ = ["quick_compile", "sample_model"]


def _round_counts(p: np.ndarray, total: int) -> np.ndarray:
    """Integer counts summing to ``total`` with E[count] = total·p (randomised rounding)."""
    want = total * p / p.sum()
    base = np.floor(want).astype(np.int64)
    extra = total - int(base.sum())
    if extra > 0:
        frac = want - base
        # systematic sampling of the remainders: unbiased, exactly ``extra`` cells
        cdf = np.cumsum(frac)
        cdf *= extra / cdf[-1]
        ticks = uniforms(1)[0] + np.arange(extra)
        np.add.at(base, np.minimum(np.searchsorted(cdf, ticks, side="right"), p.size - 1), 1)
    return base


def _rank_order(group: np.ndarray) -> np.ndarray:
    """Records sorted by group, in a fresh random order inside each group: ranking by record
    index (Private-PGM's choice) ties every column's stratum to the record's position, i.e.
    to the earlier columns' draws."""
    return np.argsort(group + uniforms(group.size))


def _conditional_draw(cdf: np.ndarray, group: np.ndarray) -> np.ndarray:
    """One value per record from ``cdf[group]`` (shape (G, K)), stratified in each group."""
    n = group.size
    order = _rank_order(group)
    counts = np.bincount(group, minlength=cdf.shape[0])
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - starts[group[order]]
    u = (rank + uniforms(n)) / counts[group]
    # one search in the groups' CDFs laid end to end, row g shifted by g (values in [0, 1])
    k = cdf.shape[1]
    shifted = (cdf + np.arange(cdf.shape[0])[:, None]).ravel()
    out = np.searchsorted(shifted, group + u, side="right") - group * k
    return np.minimum(out, k - 1)


@contextmanager
def quick_compile() -> Iterator[None]:
    """JAX compiles Private-PGM's mirror-descent step and message passing anew for every
    model structure (every AIM round). XLA's optimisation passes tripled that compile
    (Adult, 34 measurements: 7.1 s → 2.5 s without them) and did not speed up the
    100-iteration run, so they are off inside this block; the caller's setting is restored
    after."""
    import jax

    before = bool(jax.config.values.get("jax_disable_most_optimizations", False))
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


def sample_model(model: Any, rows: int) -> dict[str, np.ndarray]:
    """Draw ``rows`` records from a Private-PGM ``MarkovRandomField`` or a
    :class:`dpkit.release.synthetic.jtree.Model`.

    Parameters
    ----------
    model : mbi.MarkovRandomField or jtree.Model
    rows : int
        ≥ 0.

    Returns
    -------
    dict attribute → ndarray of int64 codes, shape (rows,)
    """
    from mbi import Domain as MDomain
    from mbi import junction_tree, marginal_oracles

    from dpkit.release.synthetic.jtree import Model

    if isinstance(model, Model):
        domain = MDomain(model.tree.domain.attributes, model.tree.domain.sizes)
        cliques = list(model.tree.nodes)
    else:
        domain, cliques = model.potentials.domain, list(model.cliques)
    jtree, elimination = junction_tree.make_junction_tree(domain, [set(c) for c in cliques])
    holders = {a: set().union(*[set(c) for c in jtree.nodes if a in c]) for a in domain.attrs}
    order: list[tuple[tuple[str, ...], str]] = []  # (parents, attribute), in sampling order
    for col in elimination[::-1]:
        order.append((tuple(c for _, c in order if c in holders[col]), col))
    if isinstance(model, Model):
        tables = model.marginals([p + (c,) for p, c in order])
    else:
        fitted = getattr(model, "marginals", None)
        if fitted is not None and all(fitted.supports(p + (c,)) for p, c in order):
            marginals = fitted  # the fit's own clique marginals: no second compiled pass
        else:
            with quick_compile():
                marginals = marginal_oracles.message_passing_stable(
                    model.potentials.expand(list(jtree.nodes)))
        tables = [marginals.project(p + (c,)).datavector(flatten=False) for p, c in order]
    data: dict[str, np.ndarray] = {}
    for (parents, col), table in zip(order, tables, strict=True):
        joint = np.maximum(np.asarray(table, dtype=np.float64), 0)
        if not parents:
            data[col] = np.repeat(np.arange(joint.size), _round_counts(joint + 1e-300, rows))
            data[col] = data[col][np.argsort(uniforms(rows))]
            continue
        k = joint.shape[-1]
        flat = joint.reshape(-1, k)
        mass = flat.sum(axis=1, keepdims=True)
        cond = np.where(mass > 0, flat / np.where(mass > 0, mass, 1), 1 / k)
        group = np.ravel_multi_index(tuple(data[p] for p in parents), joint.shape[:-1])
        data[col] = _conditional_draw(np.cumsum(cond, axis=1), group)
    return data
