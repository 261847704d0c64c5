"""Exact output laws of the sample-generalise-suppress data side
(``dpkit.release.generalization.kanon``), shared by the safe k-anonymisation and the
pre-sampled crowd-blending brute-force tests: every kept-mask of a small one-column table
with its probability, and the least δ between neighbouring tables' laws. Exact (Fractions):
nothing here is statistical."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import polars as pl

from dpkit.release.generalization import Taxonomy
from dpkit.release.generalization import kanon as kanon_module

SCHEMES = {"q": Taxonomy({"x": "*", "y": "*"}, level=0)}

Law = dict[tuple, Fraction]


def law(rows: tuple[str, ...], beta: Fraction, threshold: int) -> Law:
    """The exact output law of the data side on ``rows``: each row kept with probability
    β, values held by fewer than ``threshold`` kept rows suppressed."""
    table = kanon_module._generalise(pl.DataFrame({"q": list(rows)}), SCHEMES)
    out: Law = {}
    for mask in itertools.product([False, True], repeat=len(rows)):
        p = Fraction(1)
        for kept in mask:
            p *= beta if kept else 1 - beta
        if p == 0:
            continue
        groups = kanon_module._released(table, np.array(mask, dtype=bool), threshold)
        key = tuple(groups.iter_rows())
        out[key] = out.get(key, Fraction(0)) + p
    return out


def excess(p: Law, q: Law, e_eps: Fraction) -> Fraction:
    """max_S P[S] − e^ε Q[S] = Σ_o max(0, P(o) − e^ε Q(o)) (the least δ for this pair)."""
    return sum((max(Fraction(0), pr - e_eps * q.get(o, Fraction(0))) for o, pr in p.items()),
               Fraction(0))


def neighbours(max_rows: int = 5) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Every table of at most ``max_rows`` rows over {x, y} beside the same table plus one
    row (add/remove neighbours)."""
    for n in range(max_rows + 1):
        for xs in range(n + 1):
            rows = ("x",) * xs + ("y",) * (n - xs)
            for extra in ("x", "y"):
                yield rows, (*rows, extra)


def worst_excess(beta: Fraction, threshold: int, e_eps: Fraction, max_rows: int = 5
                 ) -> Fraction:
    """The least δ at e^ε over all neighbours of :func:`neighbours`, both ways."""
    worst = Fraction(0)
    for d, d_prime in neighbours(max_rows):
        p, q = law(d, beta, threshold), law(d_prime, beta, threshold)
        worst = max(worst, excess(p, q, e_eps), excess(q, p, e_eps))
    return worst
