"""Declared taxonomies for generalisation-based releases (DiffGen, :mod:`.diffgen`).

A categorical attribute is generalised along a declared taxonomy tree (:class:`Categorical`);
a numeric one is a declared range [lo, hi) on a declared grid of width ``step``, split at
grid points chosen privately (:class:`Numeric`). Both code a value as an integer in
[0, size): a leaf's position in the tree's depth-first order, or a grid cell. A generalised
value is then a half-open interval [a, b) of codes (every node of a taxonomy covers a run
of consecutive leaves), so one representation serves both kinds.

Everything here is data-free: taxonomies are checked when declared, before any budget is
spent, with errors that name the fix; a value outside the declared domain codes as −1 (the
release drops that row: a filter, 1-stable), never an error.

:data:`ADULT_TAXONOMY` is the example for UCI Adult (Becker & Kohavi 1996).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TypeAlias

import numpy as np
import polars as pl

from dpkit.core import rng
from dpkit.core.numbers import Number, to_fraction
from dpkit.errors import DomainError

__all__ = ["Categorical", "Numeric", "Taxonomy", "Tree", "check_taxonomies", "ADULT_TAXONOMY",
           "ADULT_TARGET", "ADULT_CLASSES", "MAX_CODES"]

Tree: TypeAlias = "Mapping[str, Tree] | Sequence[str]"
MAX_CODES = 1 << 16  # leaves or grid cells per attribute: bounds every score vector


class Categorical:
    """A categorical attribute's taxonomy tree, declared by the curator.

    Parameters
    ----------
    tree : mapping
        One root: ``{"Any": {"Married": ["Married-civ-spouse", …], "Not-married": […]}}``.
        An internal node maps its children's names to their subtrees; a list holds leaves.
        The leaves are the attribute's values; every node name is unique.

    Attributes
    ----------
    leaves : tuple of str
        The values, in depth-first order (a value's code is its position).
    nodes : dict str → (a, b)
        Each node's run of leaf codes [a, b).
    children : dict (a, b) → tuple of (a, b)
        Each internal node's children, in order.

    Raises
    ------
    DomainError
        Not exactly one root, a repeated node name, an empty list or mapping, a non-string
        name, or more than ``MAX_CODES`` leaves.
    """

    def __init__(self, tree: Mapping[str, Tree]) -> None:
        if not isinstance(tree, Mapping) or len(tree) != 1:
            raise DomainError("a taxonomy is a mapping with exactly one root, e.g. "
                              "{'Any': {...}}")
        self.leaves: tuple[str, ...] = ()
        self.nodes: dict[str, tuple[int, int]] = {}
        self.children: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
        self.names: dict[tuple[int, int], str] = {}
        leaves: list[str] = []
        (root, subtree), = tree.items()
        self._walk(root, subtree, leaves)
        self.leaves = tuple(leaves)
        if len(self.leaves) > MAX_CODES:
            raise DomainError(f"{len(self.leaves)} leaves exceed {MAX_CODES}: group values")

    def _walk(self, name: object, subtree: object, leaves: list[str]) -> tuple[int, int]:
        """Number the leaves under ``name`` depth-first; record the node's span."""
        start = len(leaves)
        if isinstance(subtree, Mapping):
            items = list(subtree.items())
        elif isinstance(subtree, Sequence) and not isinstance(subtree, str):
            items = [(leaf, None) for leaf in subtree]
        else:
            raise DomainError(f"the children of {name!r} must be a mapping or a list of "
                              "leaf names")
        if not items:
            raise DomainError(f"node {name!r} has no children: list its values or make it a "
                              "leaf")
        spans = []
        for child, sub in items:
            if sub is None:
                self._name(child, (len(leaves), len(leaves) + 1))
                leaves.append(str(child))
                spans.append((len(leaves) - 1, len(leaves)))
            else:
                spans.append(self._walk(child, sub, leaves))
        span = (start, len(leaves))
        if len(spans) > 1 or spans[0] != span:  # a single child equal to its parent: no split
            self.children[span] = tuple(spans)
        self._name(name, span)
        return span

    def _name(self, name: object, span: tuple[int, int]) -> None:
        if not isinstance(name, str):
            raise DomainError(f"taxonomy node names are strings; got {name!r}")
        if name in self.nodes:
            raise DomainError(f"node {name!r} appears twice in the taxonomy: give each node "
                              "a unique name")
        self.nodes[name] = span
        self.names.setdefault(span, name)  # a chain of single children shows its leaf's name

    @property
    def size(self) -> int:
        """The number of codes (leaves)."""
        return len(self.leaves)

    def split(self, span: tuple[int, int]) -> tuple[tuple[int, int], ...]:
        """The children of an internal node ((): a leaf)."""
        return self.children.get(span, ())

    def label(self, span: tuple[int, int]) -> str:
        """The node's name."""
        return self.names[span]

    def codes(self, values: pl.Series) -> np.ndarray:
        """Each value's leaf code (int64; −1 outside the declared leaves, null too)."""
        index = {leaf: i for i, leaf in enumerate(self.leaves)}
        mapped = values.cast(pl.String, strict=False).replace_strict(
            index, default=-1, return_dtype=pl.Int64)
        return mapped.fill_null(-1).to_numpy().astype(np.int64)

    def values(self, codes: np.ndarray) -> pl.Series:
        """The leaf names of ``codes``."""
        return pl.Series(np.asarray(self.leaves, dtype=object)[codes].tolist(), dtype=pl.String)


class Numeric:
    """A numeric attribute's declared range [lo, hi) on a grid of width ``step``.

    Split points are grid points lo + k·step, 0 < k < (hi − lo)/step, chosen privately; a
    value x codes as ⌊(x − lo)/step⌋.

    Parameters
    ----------
    lo, hi : number
        The range, lo < hi (in the column's units).
    step : number
        The grid width > 0; (hi − lo)/step must be an integer of at most ``MAX_CODES``.

    Raises
    ------
    DomainError
        lo ≥ hi, step ≤ 0, a range that is not a whole number of steps, or too many steps
        (the message gives a step that fits).
    """

    def __init__(self, lo: Number, hi: Number, step: Number = 1) -> None:
        self.lo, self.hi, self.step = to_fraction(lo), to_fraction(hi), to_fraction(step)
        if not self.lo < self.hi:
            raise DomainError(f"a numeric range needs lo < hi; got [{lo}, {hi})")
        if self.step <= 0:
            raise DomainError(f"step must be > 0; got {step}")
        cells = (self.hi - self.lo) / self.step
        if cells.denominator != 1:
            raise DomainError(f"[{lo}, {hi}) is not a whole number of steps of {step}: "
                              "choose hi = lo + k·step")
        if cells > MAX_CODES:
            wider = (self.hi - self.lo) / MAX_CODES
            raise DomainError(f"{cells} grid cells exceed {MAX_CODES}: use step ≥ {wider}")
        self.cells = int(cells)

    @property
    def size(self) -> int:
        """The number of codes (grid cells)."""
        return self.cells

    def split(self, span: tuple[int, int]) -> tuple[tuple[int, int], ...]:
        """Numeric intervals have no fixed children: their split point is chosen."""
        return ()

    def point(self, k: int) -> Fraction:
        """The value of grid point k."""
        return self.lo + k * self.step

    def label(self, span: tuple[int, int]) -> str:
        """"[lo, hi)" of the interval, in the column's units."""
        a, b = (self.point(k) for k in span)
        return f"[{_text(a)}, {_text(b)})"

    def codes(self, values: pl.Series) -> np.ndarray:
        """Each value's grid cell (int64; −1 outside [lo, hi), null and NaN too)."""
        x = values.cast(pl.Float64, strict=False).fill_nan(None).to_numpy()
        with np.errstate(invalid="ignore"):
            inside = np.isfinite(x) & (x >= float(self.lo)) & (x < float(self.hi))
            k = np.floor((np.where(inside, x, float(self.lo)) - float(self.lo))
                         / float(self.step))
        return np.where(inside, np.clip(k, 0, self.cells - 1), -1).astype(np.int64)

    def values(self, codes: np.ndarray) -> pl.Series:
        """A value per code: the grid point lo + code·step (an integer column when lo and
        step are integers)."""
        if self.lo.denominator == 1 and self.step.denominator == 1:
            return pl.Series(int(self.lo) + int(self.step) * codes.astype(np.int64))
        return pl.Series(float(self.lo) + float(self.step) * codes.astype(np.float64))


Taxonomy: TypeAlias = Categorical | Numeric


def _text(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


def check_taxonomies(taxonomies: Mapping[str, Taxonomy], target: str,
                     classes: Sequence[str]) -> tuple[str, ...]:
    """Check the declaration of a generalised release (plan time, no data) and return the
    class values.

    Raises
    ------
    DomainError
        No attribute, an attribute that is not a :class:`Categorical` or :class:`Numeric`,
        the class column among the attributes, fewer than two or repeated classes.
    """
    if not isinstance(taxonomies, Mapping) or not taxonomies:
        raise DomainError("declare at least one attribute: {column: Categorical(...) or "
                          "Numeric(lo, hi, step)}")
    for column, tax in taxonomies.items():
        if not isinstance(tax, (Categorical, Numeric)):
            raise DomainError(f"{column!r}: declare a Categorical(tree) or Numeric(lo, hi, "
                              f"step), not {type(tax).__name__}")
    if target in taxonomies:
        raise DomainError(f"the class column {target!r} is not generalised: remove it from "
                          "the taxonomies")
    values = tuple(str(c) for c in classes)
    if len(values) < 2 or len(set(values)) != len(values):
        raise DomainError("declare at least two distinct class values")
    return values


def uniform_codes(spans: np.ndarray) -> np.ndarray:
    """A uniform code in each [a, b) of ``spans`` (shape (n, 2)), from the one CSPRNG."""
    if spans.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    width = (spans[:, 1] - spans[:, 0]).astype(np.int64)
    return spans[:, 0] + rng.uniform_below(width).astype(np.int64)


# -- the example: UCI Adult -----------------------------------------------------------------
# The paper's trees (Mohammed et al. 2011, after Fung, Wang & Yu 2005) are not reproduced in
# the paper's text; these are reasonable ones of the same shape (2–4 levels), grouping the
# values by the census' own categories.
ADULT_TARGET = "income"
ADULT_CLASSES = ("<=50K", ">50K")
ADULT_TAXONOMY: dict[str, Taxonomy] = {
    "age": Numeric(17, 91),
    "fnlwgt": Numeric(0, 1_500_000, 10_000),
    "education-num": Numeric(1, 17),
    "capital-gain": Numeric(0, 100_000, 100),
    "capital-loss": Numeric(0, 4_500, 10),
    "hours-per-week": Numeric(1, 100),
    "workclass": Categorical({"Any-workclass": {
        "Government": ["Federal-gov", "State-gov", "Local-gov"],
        "Self-employed": ["Self-emp-inc", "Self-emp-not-inc"],
        "Private-sector": ["Private"],
        "Unpaid": ["Without-pay", "Never-worked"]}}),
    "education": Categorical({"Any-education": {
        "Without-post-secondary": {
            "Elementary": ["Preschool", "1st-4th", "5th-6th", "7th-8th"],
            "Secondary": {"Junior-secondary": ["9th", "10th"],
                          "Senior-secondary": ["11th", "12th", "HS-grad"]}},
        "Post-secondary": {
            "College": ["Some-college", "Assoc-voc", "Assoc-acdm"],
            "University": {"Undergraduate": ["Bachelors"],
                           "Graduate": ["Masters", "Prof-school", "Doctorate"]}}}}),
    "marital-status": Categorical({"Any-marital-status": {
        "Married": ["Married-civ-spouse", "Married-AF-spouse", "Married-spouse-absent"],
        "Not-married": {"Never-married-group": ["Never-married"],
                        "Was-married": ["Divorced", "Separated", "Widowed"]}}}),
    "occupation": Categorical({"Any-occupation": {
        "White-collar": {"Managerial": ["Exec-managerial", "Prof-specialty"],
                         "Clerical-sales": ["Adm-clerical", "Sales", "Tech-support"]},
        "Blue-collar": {"Skilled": ["Craft-repair", "Machine-op-inspct"],
                        "Manual": ["Handlers-cleaners", "Transport-moving",
                                   "Farming-fishing"]},
        "Service": ["Other-service", "Protective-serv", "Priv-house-serv",
                    "Armed-Forces"]}}),
    "relationship": Categorical({"Any-relationship": {
        "Spouse": ["Husband", "Wife"],
        "Other-family": ["Own-child", "Other-relative"],
        "Not-family": ["Not-in-family", "Unmarried"]}}),
    "race": Categorical({"Any-race": {
        "White-race": ["White"],
        "Non-white": ["Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]}}),
    "sex": Categorical({"Any-sex": ["Male", "Female"]}),
    "native-country": Categorical({"Any-country": {
        "United-States-group": ["United-States"],
        "Outside-US": {
            "Americas": ["Canada", "Outlying-US(Guam-USVI-etc)", "Mexico", "Cuba",
                         "Dominican-Republic", "Haiti", "Jamaica", "Puerto-Rico",
                         "Trinadad&Tobago", "El-Salvador", "Guatemala", "Honduras",
                         "Nicaragua", "Columbia", "Ecuador", "Peru"],
            "Europe": ["England", "France", "Germany", "Greece", "Holand-Netherlands",
                       "Hungary", "Ireland", "Italy", "Poland", "Portugal", "Scotland",
                       "Yugoslavia"],
            "Asia": ["Cambodia", "China", "Hong", "India", "Iran", "Japan", "Laos",
                     "Philippines", "South", "Taiwan", "Thailand", "Vietnam"]}}}),
}
