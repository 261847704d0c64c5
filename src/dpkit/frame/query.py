"""The immutable, lazy query builder of interface mode (PINQ-style: McSherry 2009)."""

from __future__ import annotations

import hashlib
import itertools
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Protocol, TypeGuard

import narwhals as nw
import polars as pl

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, convert, rounding_note
from dpkit.core.numbers import ExactNumbers, Number, as_typed, exact_text, readable
from dpkit.core.record import NoiseRow, Release
from dpkit.core.subsampling import amplify, check_rate
from dpkit.errors import BoundsError, ColumnError, DomainError, MeasureError
from dpkit.frame import aggregates, engine, language
from dpkit.frame.compiler import PlannedStatistic, Target, plan_statistics, resolve_target
from dpkit.frame.keys import canonical_keys
from dpkit.frame.language import MAX_BINS, Expr, Param, ProtocolError
from dpkit.frame.privacy_unit import PrivacyUnit
from dpkit.frame.schema import (
    Categorical,
    ColumnSpec,
    Numeric,
    Schema,
    SchemaError,
    missing_bounds,
    missing_categories,
)
from dpkit.mechanisms.limited_domain import TopKSelection
from dpkit.mechanisms.partition_selection import PartitionSelection

__all__ = ["Query", "KeySet", "Plan", "SessionLike"]

Step = tuple[str, tuple[Any, ...], dict[str, Any]]  # an engine step: (method, args, kwargs)
Call = tuple[str, dict[str, Any] | None]  # a step as called: tag, parameters (None: no JSON)
_COLUMN = Param("column", "column")
_NEW_NAME = Param("name", "new_column", None)


def _same_kind(tag: str) -> Callable[[Query, dict[str, Any]], None]:
    """The JSON-input check of map and fill_null: values of the column's kind."""
    def check(query: Query, params: dict[str, Any]) -> None:
        column = params["column"]
        kind = language.expr_kind({"col": column}, query.schema())
        values = params["mapping"] if tag == "map" else [params["value"]]
        if any(language.value_kind(v) != kind for v in values):
            rule = "map those" if tag == "map" else "the fill value must be one too"
            raise ProtocolError(f"{tag}: {column!r} holds {kind} values; {rule}")
    return check


class SessionLike(Protocol):
    """What a :class:`Query` needs of its session, all public: a
    :class:`~dpkit.frame.Session` (``frame.query`` never imports ``frame.session``, so the
    two modules form no circle)."""

    privacy_unit: PrivacyUnit
    measure: type[PrivacyLoss]
    default_table: str

    def table(self, name: str | None = None) -> Any: ...

    def schema(self, name: str | None = None) -> Any: ...

    def declared(self, name: str | None = None) -> Schema | None: ...

    def new_partition(self) -> int: ...

    def total_loss(self, planned: Sequence[PlannedStatistic],
                   selection: PartitionSelection | TopKSelection | None = None
                   ) -> PrivacyLoss: ...

    def release(self, plan: Plan, *, confidence: float = 0.95,
                idempotency_key: str | None = None) -> Release[pl.DataFrame]: ...

    def remember_plan(self, query: Query, arguments: tuple[Any, ...],
                      build: Callable[[], PlanParts]) -> PlanParts: ...


# what Query.plan computes from the query's shape, schema and budget arguments alone
PlanParts = tuple[tuple[PlannedStatistic, ...], PrivacyLoss, tuple[NoiseRow, ...], str,
                  PrivacyLoss]


@dataclass(frozen=True)
class Plan:
    """A checked, calibrated release of a query, before anything is read or spent
    (:meth:`Query.plan`); :meth:`Session.release(plan) <dpkit.frame.Session.release>` runs
    it and returns its :class:`~dpkit.core.record.Release`.

    Unpacks as the pair ``lf, planned = query.plan(...)`` (and ``plan[1]``), its form
    before it had a name.

    Attributes
    ----------
    query : Query
        The query as released: aggregations without ``bounds=`` carry those of ``clamp``.
    lazy : lazy frame
        The transformed private table (a plan: nothing read).
    statistics : tuple of PlannedStatistic
        Each noisy statistic: sensitivity, mechanism, scale (in the statistic's grid unit),
        its loss.
    loss : PrivacyLoss
        What the release will debit, exact, in the session's measure
        (:meth:`Session.total_loss <dpkit.frame.Session.total_loss>`).
    noise : tuple of NoiseRow
        The release record's noise rows (scales and sensitivities in the statistics' units;
        the partition selection's mechanism), as the ledger writes them at the debit.
    description : str
        The canonical text of the release (the ledger's ``query``).
    arguments : tuple
        The budget arguments (ε, ρ, δ, split) that fixed the statistics.
    requested : PrivacyLoss or None
        The budget asked for (ε, ρ or (ε, δ), plus a partition selection's), exact: a
        decimal the user typed is that decimal (ρ = 0.1 is 1/10).
    """

    query: Query
    lazy: Any
    statistics: tuple[PlannedStatistic, ...]
    loss: PrivacyLoss
    noise: tuple[NoiseRow, ...]
    description: str
    arguments: tuple[Any, ...]
    requested: PrivacyLoss | None = None

    def __repr__(self) -> str:
        """What a person checks before releasing: the description, the loss (decimals; the
        exact rational beside a rounded one), the noise rows and the loss note."""
        rows = "; ".join(str(r) for r in self.noise)
        note = f", loss_note={self.loss_note!r}" if self.loss_note else ""
        return f"Plan({self.description!r}, loss={self.loss!r}, noise=[{rows}]{note})"

    @property
    def loss_note(self) -> str | None:
        """Why :attr:`loss` differs from :attr:`requested`, in words, or None when the
        release is charged exactly what was asked (:func:`~dpkit.core.measures.rounding_note`).

        A calibrated scale is rounded *up* to a value its exact sampler draws (a discrete
        Gaussian's σ to a short dyadic, a grid mechanism's scale to its 2^k grid; DESIGN.md
        §3.2), and a larger scale spends a little less than asked; an (ε, δ) request is met
        through zCDP (the largest ρ whose conversion meets it), which can land below ε.
        """
        if self.requested is None:
            return None
        scales = "; ".join(f"{r.statistic or r.name}: {r.name} scale {readable(r.scale)}"
                           for r in self.noise if r.scale is not None)
        why = ("each noise scale was rounded up to a value its exact sampler draws"
               f"{f' ({scales})' if scales else ''}, which spends a little less than asked")
        if isinstance(self.requested, ApproxDP) and self.requested.delta > 0:
            why += ("; (ε, δ) is met through zCDP: the largest ρ whose conversion meets it, "
                    "composed, then converted back at δ")
        if isinstance(self.loss, ZCDP) and isinstance(self.requested, PureDP):
            why = "each statistic's ε is charged as ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4)"
        if self.query.sampling is not None:
            why = (f"the query runs on a Poisson sample of rate {readable(self.query.sampling)}"
                   ": ε is amplified to ln(1 + p(e^ε − 1)) and δ to pδ (Balle, Barthe & "
                   "Gaboardi 2018, Thm 8)")
        return rounding_note(self.requested, self.loss, why)

    def _pair(self) -> tuple[Any, list[PlannedStatistic]]:
        return self.lazy, list(self.statistics)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._pair())

    def __getitem__(self, index: int) -> Any:
        return self._pair()[index]

    def __len__(self) -> int:
        return 2


#: Why ``sample(n=…)`` is refused, with the fix (Query.sample, Notes; SQL's TABLESAMPLE ROWS).
WITHOUT_REPLACEMENT = (
    "sampling n units without replacement amplifies only for substitute-one neighbours on a "
    "public population of N units (Balle, Barthe & Gaboardi 2018, Thm 9); a session's "
    "neighbours are add/remove-one unit, where N is private. Use Poisson sampling, "
    "sample(p=n/N) (SQL: TABLESAMPLE BERNOULLI (100·n/N PERCENT)), charged "
    "ln(1 + p(e^ε − 1)) for add/remove neighbours")


def noise_rows(planned: Sequence[PlannedStatistic],
               selection: PartitionSelection | TopKSelection | None
               ) -> tuple[NoiseRow, ...]:
    """The release record's noise rows of a plan: each statistic's mechanism, scale and
    sensitivity in the statistic's units, then the partition selection's mechanism."""
    rows = [NoiseRow(p.mechanism, p.scale * p.unit if p.unit != 1 else p.scale,
                     p.sensitivity * p.unit if p.unit != 1 else p.sensitivity, p.stat.key)
            for p in planned]
    if selection is not None:
        rows.append(NoiseRow(f"{selection.label} ({selection.method})", None, None, "keys"))
    return tuple(rows)


@dataclass(frozen=True)
class Query:
    """A lazy DP query on a :class:`~dpkit.frame.Session`'s data.

    Every method returns a new query; nothing reads the data or spends budget until
    :meth:`release`. Transformations (:meth:`filter`, :meth:`with_columns`, :meth:`select`)
    take Polars expressions (or narwhals expressions, which run on any backend), or
    expressions of the JSON grammar (:func:`dpkit.frame.language.col`). Each step kind and
    aggregation is registered in :mod:`dpkit.frame.language`, which gives the query its JSON
    form (:meth:`to_json`, :meth:`from_json`); ``dpkit.Client`` is this class on a remote
    session.
    """

    session: SessionLike
    steps: tuple[Step, ...] = ()
    calls: tuple[Call, ...] = ()  # the steps as called (their JSON form), see to_json
    keys: pl.DataFrame | None = None
    keys_digest: str = ""  # of the canonical keys, for describe()
    aggs: tuple[aggregates.Aggregation, ...] = ()
    group_columns: tuple[str, ...] = ()
    selection: PartitionSelection | TopKSelection | None = None
    declared: tuple[tuple[str, tuple[Any, Any]], ...] = ()  # bounds set by clamp()
    part: tuple[int, Any] | None = None  # (partition id, key) of a partition() sub-query
    table: str | None = None  # which private table (None: the session's first)
    # columns written by a row-wise step: no longer the declared columns (None: any may be)
    rewritten: frozenset[str] | None = frozenset()
    sampling: Fraction | None = None  # the Poisson rate of a sample() step (amplification)

    # -- transformations -------------------------------------------------------------
    def _record(self, tag: str, params: dict[str, Any] | None) -> Query:
        """Append a step as called (``params``: its registered parameters; None for a step
        with no JSON form, which adds its engine step itself) and lower it."""
        if self.aggs:
            raise DomainError(f"{tag} must come before agg()")
        query = replace(self, calls=(*self.calls, (tag, params)))
        if params is not None and tag in _WRITES:
            query = query._writes(_WRITES[tag](params))
        return query._lower(tag, params)

    def _writes(self, columns: Iterable[str] | None) -> Query:
        """Note the columns a row-wise step wrote (None: it may have written any)."""
        if columns is None or self.rewritten is None:
            return replace(self, rewritten=None)
        return replace(self, rewritten=self.rewritten | frozenset(columns))

    def _declaration(self, column: str) -> ColumnSpec | None:
        """The session's declaration of ``column``, unless a step of this query wrote it
        (then it is a computed column the declaration does not describe)."""
        if self.rewritten is None or column in self.rewritten:
            return None
        schema = self.session.declared(self.table)
        return None if schema is None else schema.spec(column)

    def _undeclared(self, text: str, column: str) -> str:
        """A missing-declaration error's text, saying why a declared column does not count."""
        if self.rewritten is not None and column not in self.rewritten:
            return text
        return (f"{text}; {column!r} is written by a step of this query, so the table's "
                f"declaration does not describe it")

    def _lower(self, tag: str, params: dict[str, Any] | None) -> Query:
        """The engine steps of a step (:data:`language.STEPS` holds each kind's lowering)."""
        return self if params is None else language.STEPS[tag].build(self, **params)

    def _step(self, op: str, *args: Any, **kwargs: Any) -> Query:
        return replace(self, steps=(*self.steps, (op, args, kwargs)))

    def _grammar(self, expr: Any, schema: Any) -> Any:
        return language.compile_expr(expr, schema) if isinstance(expr, Expr) else expr

    def filter(self, *predicates: Any) -> Query:
        """Keep rows matching all predicates (1-stable: a unit's rows only disappear).

        A predicate is a Polars or narwhals expression, or an expression of the JSON grammar
        (:func:`dpkit.frame.language.col` / ``lit``), which then has a JSON form."""
        if not predicates:
            raise DomainError("filter needs at least one predicate")
        query = self
        for predicate in predicates:
            query = query._record("filter", {"expr": predicate})
        return query

    @language.step("filter", Param("expr", "expr"))
    def _filter(self, expr: Any) -> Query:
        schema = self.schema() if isinstance(expr, Expr) else None
        if schema is not None and language.expr_kind(expr, schema) != "boolean":
            raise ProtocolError("filter: the expression must be a condition (true/false)")
        return self._step("filter", self._grammar(expr, schema))

    def with_columns(self, *exprs: Any, **named: Any) -> Query:
        """Add or replace columns computed row by row (1-stable); grammar expressions by
        keyword have a JSON form."""
        if exprs:
            return self._record("with_columns", None)._step(
                "with_columns", *exprs, **named)._writes(_written(exprs, named))
        return self._record("with_columns", {"columns": named})

    @language.step("with_columns", Param("columns", "exprs", size=(1, 32)))
    def _with_columns(self, columns: dict[str, Any]) -> Query:
        schema = self.schema() if any(isinstance(e, Expr) for e in columns.values()) else None
        return self._step("with_columns",
                          **{k: self._grammar(e, schema) for k, e in columns.items()})

    def select(self, *exprs: Any, **named: Any) -> Query:
        """Keep or compute columns row by row (1-stable). Keep the privacy unit's column."""
        return self._record("select", None)._step("select", *exprs, **named)._writes(
            _written(exprs, named))

    def clamp(self, column: str, lower: Number, upper: Number) -> Query:
        """Clamp ``column`` to [lower, upper] and declare those bounds for later aggregations
        of it (``sum``/``mean``/``quantile`` without ``bounds=`` use them). Row-wise."""
        return self._record("clamp", {"column": column, "lower": lower, "upper": upper})

    @language.step("clamp", _COLUMN, Param("lower", "number"), Param("upper", "number"))
    def _clamp(self, column: str, lower: Number, upper: Number) -> Query:
        lo, hi = aggregates._bounds((lower, upper), "clamp", column)
        kind = aggregates._require_numeric(self._schema()[1], column, "clamp")
        if kind == "int" and lo.denominator == hi.denominator == 1 and max(
                abs(lo), abs(hi)) < 1 << 63:  # integers stay integers (widened to Int64)
            clipped = nw.col(column).cast(nw.Int64).clip(int(lo), int(hi))
        else:  # in Float64, where no bound fails to convert
            clipped = nw.col(column).cast(nw.Float64).clip(float(lo), float(hi))
        q = self._step("with_columns", **{column: clipped})
        declared = tuple((c, b) for c, b in self.declared if c != column)
        return replace(q, declared=(*declared, (column, (lower, upper))))

    def bin(self, column: str, edges: Sequence[Number] | None = None, *,
            width: Number | None = None, name: str | None = None) -> Query:
        """Replace ``column`` (or add ``name``) by the lower edge of its bin. Row-wise.

        ``edges`` e₀ < … < e_m give bins [eᵢ, eᵢ₊₁) (the last one closed); values outside and
        nulls become null. ``width`` w gives bins [k·w, (k+1)·w) over all reals.
        """
        return self._record("bin", {"column": column, "edges": edges, "width": width,
                                    "name": name})

    @language.step("bin", _COLUMN, Param("edges", "numbers", None, size=(0, MAX_BINS + 1)),
                   Param("width", "number", None), _NEW_NAME)
    def _bin(self, column: str, edges: Sequence[Number] | None, width: Number | None,
             name: str | None) -> Query:
        out = name or column
        x = nw.col(column)
        if (edges is None) == (width is None):
            raise DomainError("bin needs exactly one of edges= or width=")
        if width is not None:
            w = float(aggregates.positive_number(width, "width"))
            # times the reciprocal, not / w: Polars' division by a constant rounds by the
            # column's length (exact on 1-2 rows), which would make the step not row-wise
            return self._step("with_columns",
                              **{out: (x.cast(nw.Float64) * (1.0 / w)).floor() * w})
        e = aggregates.check_edges(edges)
        if len(e) == 2:
            lower = nw.lit(e[0], nw.Float64)
        else:  # bin index i = #{inner edges ≤ x}, then its lower edge by a literal mapping
            index = nw.sum_horizontal(*[(x >= v).cast(nw.Int64) for v in e[1:-1]])
            lower = index.replace_strict(list(range(len(e) - 1)), e[:-1], default=e[0],
                                         return_dtype=nw.Float64)  # (never the default)
        inside = (x >= e[0]) & (x <= e[-1])
        return self._step("with_columns", **{out: nw.when(inside).then(lower)})

    def map(self, column: str, mapping: Mapping[Any, Any], *, default: Any = None,
            name: str | None = None) -> Query:
        """Map the categories of ``column`` through ``mapping`` (others become ``default``,
        null by default). Row-wise."""
        return self._record("map", {"column": column, "mapping": mapping, "default": default,
                                    "name": name})

    @language.step("map", _COLUMN, Param("mapping", "pairs", size=(1, 10_000)),
                   Param("default", "scalar", None), _NEW_NAME, check=_same_kind("map"))
    def _map(self, column: str, mapping: Mapping[Any, Any], default: Any, name: str | None
             ) -> Query:
        if not isinstance(mapping, Mapping) or not mapping:
            raise DomainError("map needs a non-empty mapping {old: new}")
        old, new = list(mapping.keys()), list(mapping.values())
        expr = nw.col(column).replace_strict(old, new, default=default)
        return self._step("with_columns", **{name or column: expr})

    def fill_null(self, column: str, value: Any) -> Query:
        """Replace nulls (and NaN in float columns) of ``column`` by ``value``. Row-wise."""
        return self._record("fill_null", {"column": column, "value": value})

    @language.step("fill_null", _COLUMN, Param("value", "scalar"),
                   check=_same_kind("fill_null"))
    def _fill_null(self, column: str, value: Any) -> Query:
        return self._step("with_columns", **{column: nw.col(column).fill_null(value)})

    def drop_nulls(self, *columns: str) -> Query:
        """Drop rows with a null in any of ``columns`` (all columns if none). 1-stable."""
        return self._record("drop_nulls", {"columns": columns})

    @language.step("drop_nulls", Param("columns", "columns", (), size=(0, 256)))
    def _drop_nulls(self, columns: Sequence[str]) -> Query:
        cond = None
        for c in columns:
            term = ~nw.col(c).is_null()
            cond = term if cond is None else cond & term
        if cond is None:
            return self._step("drop_nulls")
        return self._step("filter", cond)

    def sample(self, p: Number | None = None, *, n: int | None = None) -> Query:
        """Keep each privacy unit (all its rows) independently with probability ``p``
        (Poisson sampling); the release is charged the amplified loss.

        Privacy map (add/remove-one unit; Balle, Barthe & Gaboardi, NeurIPS 2018, Thm 8):
        a release that is ε-DP on the sample is ln(1 + p(e^ε − 1))-DP, and (ε, δ)-DP becomes
        (ln(1 + p(e^ε − 1)), pδ)-DP (:func:`dpkit.core.subsampling.amplify`, ε rounded up).
        The draw is a keyed hash of the unit id (the row for row-level units) under a fresh
        CSPRNG key per release (:func:`dpkit.frame.backend.sample_units`): a unit is kept
        when its 64-bit hash is below ⌊p · 2⁶⁴⌋, a probability ≤ p.

        Parameters
        ----------
        p : number
            The rate in (0, 1], exact as typed (0.01 is 1/100); declared, never inferred.
        n : int, optional
            Sampling of n units *without replacement*: refused, see Notes (here, in the
            client, which is this class, and in SQL's ``TABLESAMPLE (n ROWS)`` with the
            same message; the JSON step has no ``n`` field, so a document with one is
            refused as malformed).

        Returns
        -------
        Query
            The query on the sample (row-wise steps may follow; one sample per query).

        Raises
        ------
        DomainError
            p outside (0, 1], neither or both of p and n, any ``n=`` (Notes), a second
            sample step, or a step after agg().
        MeasureError
            At plan time, in a zCDP session (zCDP has no closed-form amplification).

        Notes
        -----
        Sampling *n units without replacement* amplifies ε to ln(1 + (n/N)(e^ε − 1)) only
        for substitute-one neighbours on a population of N units that is public (the same
        paper, Thm 9; :func:`dpkit.core.subsampling.amplify_without_replacement`). A
        session's neighbours are add/remove-one unit (:class:`~dpkit.frame.PrivacyUnit`),
        its ledger composes losses of that relation, and there N is private: with N ≤ n the
        "sample" is the whole table, and with N = n a neighbour's sample differs by a
        substitution (≈ 2ε), so no amplified bound holds for every table. ``sample(n=…)``
        is therefore refused before anything is read, naming the fix: ``sample(p=n/N)``,
        whose expected size is n when N is the population size the analyst has in mind.
        """
        if n is not None:  # refused before anything is recorded (Notes)
            raise DomainError(WITHOUT_REPLACEMENT)
        if p is None:
            raise DomainError("sample() takes the Poisson rate p in (0, 1]")
        return self._record("sample", {"p": p})

    @language.step("sample", Param("p", "number"))
    def _sample(self, p: Number) -> Query:
        rate = check_rate(p)
        if self.sampling is not None:
            raise DomainError("a query takes one sample() step")
        return replace(self._step("sample", rate), sampling=rate)

    def join(self, public: Any, on: str | Sequence[str], *, how: str = "left") -> Query:
        """Join a public table, or another private table of the session.

        Public (a Polars frame or anything it accepts): its keys ``on`` must be unique, so
        every private row matches at most one public row (1-stable); ``how`` is "left" or
        "inner".

        Private (another :class:`Query` of the same session, before aggregation): ``on``
        must include the privacy unit column, so joined rows of a unit come from that unit's
        rows only. Each side is first bounded to M = ``max_rows`` random rows per unit (a
        unit then has at most M² joined rows: the two contribution bounds multiply), and the
        joined table is bounded again to the unit's (M, G, R) like any table before
        aggregation, so every sensitivity is the usual one. Inner join only.
        """
        query = self._record("join", None)  # a step without a JSON form
        if isinstance(public, Query):
            return query._join_private(public, on)
        if how not in ("left", "inner"):
            raise DomainError("join with a public table supports how='left' or 'inner'")
        table = public if isinstance(public, pl.DataFrame) else pl.DataFrame(public)
        keys = [on] if isinstance(on, str) else list(on)
        missing = [k for k in keys if k not in table.columns]
        if missing:
            raise ColumnError(f"join keys {missing} are not in the public table")
        if table.select(keys).is_duplicated().any():
            raise DomainError("join keys are not unique in the public table: a private row "
                              "would be copied, which multiplies its influence")
        # keys distinct as given may collide in the private column's type: convert first
        converted = canonical_keys(table.select(keys), query._schema()[1], "join keys")
        if not converted.equals(table.select(keys)):  # else keep the object (cache key)
            table = table.with_columns(converted)
        return query._step("join", table, on=keys, how=how)

    def _join_private(self, other: Query, on: str | Sequence[str]) -> Query:
        unit = self.session.privacy_unit.column
        keys = [on] if isinstance(on, str) else list(on)
        if other.session is not self.session:
            raise DomainError("a private join needs two queries of the same session")
        if other.aggs or other.part is not None or other.group_columns:
            raise DomainError("join a private query before group_by/agg/partition")
        if unit is None or unit not in keys:
            raise DomainError("a join of two private tables must be on the privacy unit "
                              "column (on=[unit, ...]); otherwise one unit's rows would "
                              "multiply other units' rows")
        return self._step("join_private", other, on=keys)

    def partition(self, column: str, keys: Sequence[Any]) -> dict[Any, Query]:
        """Split the data by the public ``keys`` of ``column`` into sub-queries whose budgets
        compose in parallel (PINQ's Partition; McSherry 2009, Thm 4).

        Each sub-query keeps the rows with ``column == key``. The session is charged the
        *maximum* over the parts of what each part has spent (in ε, (ε, δ) componentwise, or
        ρ), debited as it grows. This needs every privacy unit to fall in one part: under
        row-level privacy a row lies in one part; under ``PrivacyUnit.by(c, ...)`` only a
        partition on the unit column ``c`` itself qualifies (otherwise use ``group_by``
        with ``max_groups``).

        Raises
        ------
        DomainError
            If the keys are empty or repeated, the query already aggregates, or units could
            span parts.
        """
        if self.aggs:
            raise DomainError("partition must come before agg()")
        if isinstance(keys, str | bytes) or not isinstance(keys, Sequence | pl.Series):
            raise DomainError("partition needs a sequence of public keys")
        values = list(keys)
        schema = self._schema()[1]
        if column not in schema:
            raise ColumnError(f"unknown partition column {column!r}")
        # distinct as given is not enough: they must be distinct in the column's type
        frame = pl.DataFrame([pl.Series(column, values, strict=False)]) if values else (
            pl.DataFrame())
        converted = canonical_keys(frame, schema, "partition keys")[column].to_list()
        unit = self.session.privacy_unit.column
        if unit is not None and column != unit:
            raise DomainError(
                f"a unit's rows may lie in several parts of {column!r}, so parallel "
                f"composition does not apply under PrivacyUnit.by({unit!r}); partition on "
                f"{unit!r}, or use group_by with max_groups")
        ident = self.session.new_partition()
        dtype = schema[column]
        return {key: replace(self._step("filter", nw.col(column) == nw.lit(value, dtype)),
                             part=(ident, key))
                for key, value in zip(values, converted, strict=True)}

    def group_by(self, *columns: str, keys: Any = None,
                 selection: PartitionSelection | TopKSelection | None = None) -> Query:
        """Group by ``columns`` over public keys, or over keys chosen by private partition
        selection.

        Parameters
        ----------
        *columns : str
            Grouping columns.
        keys : KeySet, sequence, mapping or polars.DataFrame, optional
            Public keys: a :class:`KeySet`; for one column, a sequence of its values; for
            several, a sequence of tuples, a mapping ``{column: values}`` (cross product) or
            a DataFrame with those columns. Every key appears in the result (with noise)
            whether or not it occurs in the data; rows whose key is not listed are dropped.
            Default (neither ``keys`` nor ``selection``): the categories declared for each
            column in the session's schema (``dp.Categorical``; several columns: the product
            of their categories), written into the query as explicit keys. A column written
            by an earlier step of the query has no declaration.
        selection : PartitionSelection or TopKSelection, optional
            Instead of ``keys``: release the keys that pass private partition selection
            (:mod:`dpkit.mechanisms.partition_selection`), or at most k of the most common
            keys, best first (:class:`~dpkit.mechanisms.limited_domain.TopKSelection`,
            Durfee & Rogers 2019), spending its (ε, δ) on top of the aggregations' budget.
            Needs an (ε, δ) session. With top-k, a unit is in at most min(G, k) released
            groups, so the statistics' sensitivities use min(G, k) for G.

        Raises
        ------
        SchemaError
            Without ``keys`` and ``selection``, if a column has no declared categories (the
            message names the declaration to add).
        DomainError
            If both ``keys`` and ``selection`` are given, or keys are malformed.
        """
        if not columns:
            raise DomainError("group_by needs at least one column")
        if selection is not None:
            if keys is not None:
                raise DomainError("pass keys= (public) or selection= (private), not both")
            if not isinstance(selection, PartitionSelection | TopKSelection):
                raise DomainError("selection must be dp.PartitionSelection(epsilon, delta) "
                                  "or dp.TopKSelection(k, epsilon, delta)")
            selection.loss()  # validate now
            return replace(self, keys=None, group_columns=tuple(columns), selection=selection)
        if keys is None:
            keys = self._declared_keys(list(columns))
        frame = self._keys_in_schema(_keyset(list(columns), keys))
        return replace(self, keys=frame, keys_digest=_keys_digest(frame),
                       group_columns=tuple(columns), selection=None)

    def _keys_in_schema(self, frame: pl.DataFrame) -> pl.DataFrame:
        return _canonical_keys(frame, self._schema()[1])

    def _declared_keys(self, columns: list[str]) -> Any:
        """The declared categories of ``columns`` as keys (several: their product)."""
        found: dict[str, list[Any]] = {}
        for column in columns:
            spec = self._declaration(column)
            if not isinstance(spec, Categorical):
                raise SchemaError(self._undeclared(missing_categories(column, spec), column))
            found[column] = list(spec.categories)
        return found[columns[0]] if len(columns) == 1 else found

    # -- aggregations ----------------------------------------------------------------
    def agg(self, *aggs: aggregates.Aggregation) -> Query:
        """Aggregations to release together; the budget is split among them (see release).

        An aggregation that takes bounds but was given none uses, in this order, the bounds
        of a :meth:`clamp` of its column, then its column's ``dp.Numeric`` bounds in the
        session's schema (written into the aggregation now, so :meth:`to_json` and
        :meth:`describe` carry them); a column written by an earlier step has no
        declaration. Without either, :meth:`plan` raises ``BoundsError`` naming the
        declaration to add."""
        if any(isinstance(a, Mapping) for a in aggs):
            raise DomainError(_agg_dict_message(next(a for a in aggs if isinstance(a, Mapping))))
        if not aggs or not all(isinstance(a, aggregates.Aggregation) for a in aggs):
            raise DomainError("agg() takes dp.count(), dp.sum(...), dp.mean(...), ...")
        all_aggs = (*self.aggs, *map(self._schema_bounds, aggs))
        if any(isinstance(a, aggregates.Histogram) for a in all_aggs) and len(all_aggs) > 1:
            raise DomainError("a histogram must be released on its own agg()")
        names = [a.output_name() for a in all_aggs]
        if len(set(names)) != len(names):
            raise DomainError(f"duplicate output names {names}; pass name=")
        return replace(self, aggs=all_aggs)

    def count(self) -> Query:
        """Shorthand for ``agg(dp.count())``."""
        return self.agg(aggregates.count())

    def sum(self, column: str, bounds: tuple[Number, Number] | None = None, **kw: Any) -> Query:
        """Shorthand for ``agg(dp.sum(column, bounds))``."""
        return self.agg(aggregates.sum(column, bounds, **kw))

    def mean(self, column: str, bounds: tuple[Number, Number] | None = None, **kw: Any
             ) -> Query:
        """Shorthand for ``agg(dp.mean(column, bounds))``."""
        return self.agg(aggregates.mean(column, bounds, **kw))

    def histogram(self, column: str, bins: Sequence[Number] | None = None, **kw: Any) -> Query:
        """Shorthand for ``agg(dp.histogram(column, bins))``."""
        return self.agg(aggregates.histogram(column, bins, **kw))

    def quantile(self, column: str, q: Number, bounds: tuple[Number, Number] | None = None,
                 **kw: Any) -> Query:
        """Shorthand for ``agg(dp.quantile(column, q, bounds))``."""
        return self.agg(aggregates.quantile(column, q, bounds, **kw))

    # -- JSON form -----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The query's JSON form: ``{"steps", "group_by", "aggs"}``, the server's request
        without its budget (:mod:`dpkit.frame.language`). :meth:`from_json` gives back a
        query with the same :meth:`describe` and plan.

        Raises
        ------
        ProtocolError
            For what has no JSON form: Polars or narwhals expressions (use the grammar's
            ``col``/``lit``), ``select``, ``join``, positional ``with_columns``, a partition's
            sub-query, a named table, or values that are not JSON scalars.
        """
        return self._json(shape=False)

    def shape_json(self) -> dict[str, Any]:
        """:meth:`to_json` with the public keys as the SHA-256 of their serialisation
        (``{"columns", "keys_sha256"}``; names, types, nulls and values, exactly): the key
        of plan-time memos (:class:`dpkit.frame.session.PlanMemo`), without converting
        every key to JSON on each release.

        Raises
        ------
        ProtocolError
            As :meth:`to_json`, for a query without a JSON form (except its keys).
        """
        return self._json(shape=True)

    def _json(self, shape: bool) -> dict[str, Any]:
        if self.part is not None or self.table is not None:
            raise ProtocolError("a partition's sub-query or a named table has no JSON form")
        doc: dict[str, Any] = {"steps": [language.encode_step(t, p) for t, p in self.calls]}
        if self.selection is not None:
            doc["group_by"] = {"columns": list(self.group_columns),
                               "selection": selection_json(self.selection)}
        elif self.keys is not None and shape:
            doc["group_by"] = {"columns": list(self.group_columns),
                               "keys_sha256": _frame_sha256(self.keys)}
        elif self.keys is not None:
            rows = ([language.json_scalar(v) for v in row] for row in self.keys.rows())
            doc["group_by"] = {"columns": list(self.group_columns), "keys": [
                row[0] if self.keys.width == 1 else row for row in rows]}
        doc["aggs"] = [language.encode_agg(a) for a in self.aggs]
        return doc

    @classmethod
    def from_json(cls, session: SessionLike, doc: Mapping[str, Any]) -> Query:
        """The query of a JSON form (see :meth:`to_json`) on ``session``'s first table.

        Every part is checked against the registry's allow-list first (ProtocolError); then
        the builder methods check the query as they do in Python.

        Raises
        ------
        ProtocolError
            For a malformed form: unknown fields, steps or aggregations, wrong types, values
            over a limit. A ``group_by`` without ``keys`` or ``selection`` takes the declared
            categories, as :meth:`group_by` does (SchemaError without them).
        DomainError, BoundsError, ColumnError
            As the corresponding builder methods.
        """
        unknown = set(doc) - {"steps", "group_by", "aggs"} if isinstance(doc, Mapping) else {0}
        steps, aggs = (doc.get(k, []) for k in ("steps", "aggs")) if not unknown else ((), ())
        if unknown or not isinstance(steps, list) or not isinstance(aggs, list):
            raise ProtocolError("a query's JSON form is {steps: [...], group_by, aggs: [...]}")
        query = cls(session)
        for item in steps:
            tag, params = language.decode_step(item)
            check = language.STEPS[tag].check
            if check is not None:
                check(query, params)
            query = query._record(tag, params)
        if doc.get("group_by") is not None:
            query = query._group_from_json(doc["group_by"])
        return query.agg(*map(language.decode_agg, aggs)) if aggs else query

    def _group_from_json(self, group: Any) -> Query:
        if not isinstance(group, Mapping) or set(group) - {"columns", "keys", "selection"}:
            raise ProtocolError("group_by is {columns: [...], keys: ... | selection: {...}}")
        columns = language.decode(Param("columns", "columns", size=(1, 8)),
                                  group.get("columns"), "group_by")
        keys, selection = group.get("keys"), group.get("selection")
        if keys is not None and selection is not None:
            raise ProtocolError("group_by takes public keys or a private selection, not both")
        if selection is not None:
            return self.group_by(*columns, selection=_selection_from_json(selection))
        if keys is None:  # the declared categories (group_by's default), or its error
            return self.group_by(*columns)
        if isinstance(keys, list) and len(columns) > 1:
            keys = [tuple(k) if isinstance(k, list) else k for k in keys]
        return self.group_by(*columns, keys=keys)

    # -- planning and release ------------------------------------------------------------
    def schema(self) -> Any:
        """The schema of the transformed table (column → narwhals dtype); reads no data."""
        return self._schema()[1]

    def _schema(self) -> Any:
        lf = self.lazy()
        if not self.steps:  # the table's own schema, read once by the session
            return lf, self.session.schema(self.table)
        return lf, lf.collect_schema()

    def lazy(self, bound_joins: bool = False, *, empty: bool = False) -> Any:
        """The transformed private table as a lazy plan (for the engine). Reads nothing
        unless ``bound_joins``: a private join then bounds both sides (at release only).
        ``empty``: the steps applied to zero rows of the tables, for dry runs (the slice
        comes first, so no optimiser can skip a step)."""
        table = self.session.table(self.table)
        if empty:
            return engine.apply_steps(table.head(0), self.steps, check=False,
                                      unit=self.session.privacy_unit, empty=True)
        return engine.apply_steps(table, self.steps, unit=self.session.privacy_unit,
                                  bound_joins=bound_joins)

    def has_private_join(self) -> bool:
        return any(op == "join_private" for op, _, _ in self.steps)

    def plan(self, epsilon: Number | None = None, *, rho: Number | None = None,
             delta: Number | None = None, split: Sequence[Number] | None = None) -> Plan:
        """Validate the query and calibrate its noise (no data read, nothing spent).

        Parameters
        ----------
        epsilon, rho, delta, split
            The budget, as in :meth:`release`.

        Returns
        -------
        Plan
            The statistics, loss, noise rows and description of the release;
            ``session.release(plan)`` runs it. Unpacks as ``lf, planned``.

        Raises
        ------
        BoundsError, ColumnError, DomainError, MeasureError
            For a query or budget that cannot be released.
        """
        lf, planner = self._planner(split)  # the query's checks run on every plan
        query = replace(self, aggs=self._with_declared_bounds())
        arguments = (epsilon, rho, delta, None if split is None else tuple(split))

        def parts() -> PlanParts:
            planned = tuple(planner(resolve_target(self.session.measure, epsilon, rho, delta)))
            return (planned, self._amplified(self.session.total_loss(planned, self.selection)),
                    noise_rows(planned, self.selection), query.describe(),
                    self._requested(epsilon, rho, delta))

        # calibrated once per query shape, schema, unit, measure and arguments (the session
        # remembers what passed; a failure raises again on every plan)
        planned, loss, noise, description, requested = self.session.remember_plan(
            self, arguments, parts)
        return Plan(query, lf, planned, loss, noise, description, arguments, requested)

    def _amplified(self, loss: PrivacyLoss) -> PrivacyLoss:
        """The loss charged: amplified by the query's sample() rate, if any (Thm 8 of Balle,
        Barthe & Gaboardi 2018; see :meth:`sample`)."""
        if self.sampling is None:
            return loss
        if not isinstance(loss, PureDP | ApproxDP):
            raise MeasureError("sample() amplifies ε-DP and (ε, δ)-DP losses: use a session "
                               "with an ε or (ε, δ) budget (zCDP has no closed form)")
        return amplify(loss, self.sampling)

    def _requested(self, epsilon: Number | None, rho: Number | None, delta: Number | None
                   ) -> PrivacyLoss:
        """The budget the user asked for, exact (the plan's checks have passed)."""
        asked: PrivacyLoss
        if rho is not None:
            asked = ZCDP(rho)
        elif delta is not None:
            asked = ApproxDP(epsilon or 0, delta)
        else:
            asked = PureDP(epsilon or 0)
        if self.selection is None:
            return asked
        return convert(asked, ApproxDP) + self.selection.loss()

    def _planner(self, split: Sequence[Number] | None
                 ) -> tuple[Any, Callable[[Target], list[PlannedStatistic]]]:
        """Check the query once; return the plan as a function of the release target."""
        if not self.aggs:
            raise DomainError("nothing to release: add an aggregation with agg()")
        lf, schema = self._schema()
        needed = self.columns()
        if self.keys is not None:  # the steps may have changed the columns' types since
            if any(str(self.keys.schema[c]) != str(schema[c]) for c in self.keys.columns
                   if c in schema):
                canonical_keys(self.keys, schema)  # a later step changed a key column's type
            engine.check_columns(schema, self.keys.columns)
        if self.selection is not None and self.session.measure is not ApproxDP:
            raise MeasureError("private partition selection spends (ε, δ): use a session "
                               "with an ApproxDP budget, or public keys=")
        unit = self.session.privacy_unit
        if unit.column is not None:
            needed.append(unit.column)
        engine.check_columns(schema, needed)
        bounds = unit.bounds if self.group_columns else unit.bounds.single_group()
        if self.selection is not None:  # top-k: a unit is in ≤ min(G, k) released keys
            bounds = bounds.within_groups(self.selection.contribution_groups(bounds.max_groups))
        aggs = self._with_declared_bounds()
        self._check_bounds(aggs)
        return lf, lambda target: plan_statistics(aggs, schema, bounds, target, split)

    def calibrate(self, alpha: Number, *, confidence: float = 0.95,
                  delta: Number | None = None, split: Sequence[Number] | None = None
                  ) -> ExactNumbers:
        """The smallest budget whose noise meets an accuracy target (reads no data).

        Every noisy statistic's half-width at ``confidence`` must be at most ``alpha``, each
        in its own unit: rows for counts, the column's unit for sums, ranks for quantiles
        (a mean's sum and count are each held to ``alpha``). Found by bisection on the
        session measure's budget parameter — ε (pure and (ε, δ) sessions, with ``delta``
        fixed if given) or ρ (zCDP) — to a relative 2^-20.

        Returns
        -------
        ExactNumbers
            ``{"epsilon": ε}`` (plus ``"delta"`` if given) or ``{"rho": ρ}``, ready for
            :meth:`release`: a mapping whose items are the exact Fractions (as before issue
            33, so ``release(**budget)`` spends exactly this budget) and whose repr shows
            decimals with the exact value beside, ``ExactNumbers(epsilon≈0.146003,
            exact=2449531/16777216)``; ``.floats`` gives the decimals as floats.

        Raises
        ------
        DomainError
            If ``alpha`` ≤ 0, or no budget up to 2^40 meets it.
        """
        target_alpha = float(aggregates.positive_number(alpha, "alpha"))
        if not 0 < confidence < 1:
            raise DomainError("confidence must be in (0, 1)")
        beta = 1 - confidence
        _, planner = self._planner(split)
        name = "rho" if self.session.measure is ZCDP else "epsilon"

        def meets(budget: Fraction) -> bool:
            kwargs: dict[str, Any] = {name: budget}
            target = resolve_target(self.session.measure, kwargs.get("epsilon"),
                                    kwargs.get("rho"), delta)
            return all(p.accuracy(beta) * float(p.unit) <= target_alpha
                       for p in planner(target))

        extra = {"delta": as_typed(delta)} if delta is not None else {}
        hi = Fraction(1)
        while not meets(hi):
            hi *= 4
            if hi > 1 << 40:
                raise DomainError(f"no budget up to 2^40 reaches alpha = {alpha!r}")
        lo = hi / 4
        while meets(lo):  # meets(hi) holds and meets(lo) fails after this loop
            if lo < Fraction(1, 1 << 40):
                return ExactNumbers({name: lo, **extra})
            hi, lo = lo, lo / 4
        while hi - lo > hi / (1 << 20):
            mid = (lo + hi) / 2
            hi, lo = (mid, lo) if meets(mid) else (hi, mid)
        return ExactNumbers({name: hi, **extra})

    def _schema_bounds(self, agg: aggregates.Aggregation) -> aggregates.Aggregation:
        """``agg`` with its column's declared bounds if it takes bounds and has none (a
        clamp's bounds, applied at plan time, come first)."""
        if not _takes_bounds(agg) or agg.bounds is not None or agg.column in dict(
                self.declared):
            return agg
        spec = self._declaration(agg.column)
        return replace(agg, bounds=spec.bounds) if isinstance(spec, Numeric) else agg

    def _check_bounds(self, aggs: Sequence[aggregates.Aggregation]) -> None:
        """Plan time: every aggregation that takes bounds has them, or the error names the
        declaration to add."""
        for a in aggs:
            if _takes_bounds(a) and a.bounds is None:
                what = f"dp.{'std' if getattr(a, 'std', False) else type(a).__name__.lower()}"
                spec = self._declaration(a.column)
                raise BoundsError(self._undeclared(missing_bounds(a.column, what, spec),
                                                   a.column))

    def _with_declared_bounds(self) -> tuple[aggregates.Aggregation, ...]:
        """Aggregations without ``bounds=`` take those declared by :meth:`clamp` (safe even
        if the column changed since: every aggregation clamps to its bounds itself)."""
        declared = dict(self.declared)
        return tuple(
            replace(a, bounds=declared[a.column])
            if isinstance(a, aggregates.ColumnAggregation) and a.bounds is None
            and a.column in declared and not isinstance(a, aggregates.Histogram) else a
            for a in self.aggs)

    def explain(self, epsilon: Number | None = None, *, rho: Number | None = None,
                delta: Number | None = None, split: Sequence[Number] | None = None,
                confidence: float = 0.95, n: Number | None = None) -> str:
        """The plan: each statistic's sensitivity, mechanism, scale, expected error and loss,
        and each mean's, variance's and std's own expected half-width.

        Free: reads no data and spends nothing.

        Parameters
        ----------
        epsilon, rho, delta, split, confidence
            As in :meth:`release`.
        n : number, optional
            A stated row count (per group), e.g. a public one, at which a mean's, variance's
            or std's half-width is given. ``explain`` reads no data, so n is never the
            data's; without it the half-width is given at n = 1,000 and n = 100,000. The
            release's own interval uses the noisy count (post-processing).

        Returns
        -------
        str
            One line per statistic, one per mean / variance / std (its half-width at
            ``confidence``, from the formula of its ``expected_half_width``), the selection's
            line, and the total loss. Under an (ε, δ) budget with ``delta`` the Gaussian
            statistics' losses are ρ (zCDP): they compose in ρ and the total converts ρ to
            (ε, δ) at that δ (each line says so).

        Raises
        ------
        DomainError
            For a bad budget, confidence or ``n`` ≤ 0 (and the errors of :meth:`plan`).
        """
        if not 0 < confidence < 1:
            raise DomainError("confidence must be in (0, 1)")
        stated = None if n is None else float(aggregates.positive_number(n, "n"))
        plan = self.plan(epsilon, rho=rho, delta=delta, split=split)
        planned, beta = plan.statistics, 1 - confidence
        lines = [f"privacy unit: {self.session.privacy_unit}; measure: "
                 f"{self.session.measure.__name__}"]
        for i, agg in enumerate(plan.query.aggs):  # with the bounds clamp declared
            mine = [p for p in planned if p.aggregation == i]
            lines += [self._explain_line(agg, p, beta, confidence) for p in mine]
            own = _own_half_widths(agg, mine, beta, stated)
            if own:
                lines.append(f"{agg.output_name()}: ± half-width {own} at {confidence:.0%}"
                             + ("" if stated is not None else
                                " (a stated n, not the data's: pass explain(n=…))"))
        if self.selection is not None:
            lines.append(f"{self.selection.label} on "
                         f"{', '.join(self.group_columns)}: {self.selection.method}, "
                         f"loss {self.selection.loss()}")
        lines.append(f"total: {plan.loss}")
        return "\n".join(lines)

    def _explain_line(self, agg: aggregates.Aggregation, p: PlannedStatistic, beta: float,
                      confidence: float) -> str:
        what = "rank error" if p.mechanism in ("exponential", "tree quantile") else (
            "± half-width")
        loss = f"loss {p.loss}"
        if self.session.measure is ApproxDP and p.delta > 0:  # composed in zCDP (total_loss)
            loss += (" (zCDP; the total converts Σρ to (ε, δ))" if isinstance(p.loss, ZCDP)
                     else " (counted as ρ = ε²/2 in the total's Σρ)")
        return (f"{agg.output_name()} [{p.stat.key}]: sensitivity "
                f"{float(p.sensitivity * p.unit):g}, {p.mechanism} scale "
                f"{float(p.scale * p.unit):.6g}, {what} {p.accuracy(beta) * float(p.unit):.4g} "
                f"at {confidence:.0%}, {loss}")

    def release(self, epsilon: Number | None = None, *, rho: Number | None = None,
                delta: Number | None = None, split: Sequence[Number] | None = None,
                confidence: float = 0.95, alpha: Number | None = None,
                idempotency_key: str | None = None) -> pl.DataFrame:
        """Release the aggregations with differential privacy.

        Parameters
        ----------
        epsilon : number, optional
            ε (nats) to spend, with Laplace noise (pure and (ε, δ) sessions; in a zCDP session
            it is charged as ρ = Σ εᵢ²/2) — or, with ``delta``, Gaussian noise calibrated to
            (ε, δ) through zCDP (ApproxDP sessions).
        rho : number, optional
            ρ to spend with Gaussian noise (zCDP sessions).
        delta : number, optional
            δ to spend (ApproxDP sessions).
        split : sequence of numbers, optional
            Relative budget weights of the aggregations (default: even).
        confidence : float
            Coverage of each reported interval (default 0.95), per cell.
        alpha : number, optional
            Instead of ``epsilon``/``rho``: an accuracy target; the smallest budget meeting
            it at ``confidence`` is found by :meth:`calibrate` and spent.
        idempotency_key : str, optional
            With a ledger: a retried release with the same key returns the recorded answer
            instead of drawing fresh noise (and spends nothing more).

        Returns
        -------
        polars.DataFrame
            One row per public key (or per key × bin for a histogram; one row without
            group-by): key columns, then per aggregation ``<name>``, ``<name>_ci_low``,
            ``<name>_ci_high`` (and ``<name>_rank_error`` for quantiles, whose interval is
            their declared bounds; counts' intervals are cut at 0). The release's
            record (loss, noise rows, release id, digest) is what
            ``session.release(query.plan(...))`` returns, the form to use for it; this is
            its ``values``.

        Raises
        ------
        BudgetExceededError
            If the loss exceeds what remains (nothing is released or recorded).
        BoundsError, ColumnError, DomainError, MeasureError
            For bad queries, before any data is read or budget spent.
        """
        if not 0 < confidence < 1:
            raise DomainError("confidence must be in (0, 1)")
        if alpha is not None:
            if epsilon is not None or rho is not None:
                raise DomainError("pass alpha= or a budget (epsilon=/rho=), not both")
            budget = self.calibrate(alpha, confidence=confidence, delta=delta, split=split)
            epsilon, rho = budget.get("epsilon"), budget.get("rho")
        plan = self.plan(epsilon, rho=rho, delta=delta, split=split)
        record = self.session.release(plan, confidence=confidence,
                                      idempotency_key=idempotency_key)
        return record.values

    def release_histogram(self, column: str, bins: Sequence[Number], method: str = "hb", *,
                          epsilon: Number, **options: Any) -> Any:
        """Deprecated: use ``query.publish.histogram(column, bins, method, epsilon=…)``
        (:mod:`dpkit.release`'s namespace), which this calls."""
        warnings.warn("Query.release_histogram is deprecated; use "
                      "query.publish.histogram(...)", DeprecationWarning, stacklevel=2)
        publish = getattr(self, _PUBLISH)
        return publish.histogram(column, bins, method, epsilon=epsilon, **options)

    def pmw(self, spec: Mapping[str, Any], *, epsilon: Number, alpha: Number,
            **options: Any) -> Any:
        """Deprecated: use ``query.publish.pmw(spec, epsilon=…, alpha=…)``
        (:mod:`dpkit.release`'s namespace), which this calls."""
        warnings.warn("Query.pmw is deprecated; use query.publish.pmw(...)",
                      DeprecationWarning, stacklevel=2)
        return getattr(self, _PUBLISH).pmw(spec, epsilon=epsilon, alpha=alpha, **options)

    def _repr_html_(self) -> str:
        """Notebooks' rich display: the query's text and its explain as a table, planned at
        a reference budget (free: :func:`dpkit.frame.display.query_html`)."""
        from dpkit.frame.display import query_html

        return query_html(self)

    def __getattr__(self, name: str) -> Any:
        """Only for names missing from a query: a pandas spelling (``groupby``, ``apply``,
        ``loc``, ``head``, …) raises an ``AttributeError`` that gives the dpkit spelling."""
        fix = PANDAS_SPELLINGS.get(name)
        if fix is None:
            raise AttributeError(f"'Query' object has no attribute {name!r}")
        raise AttributeError(f"Query has no {name!r} (a pandas spelling): {fix}")

    def columns(self) -> list[str]:
        """Columns the aggregations and group keys read (the privacy unit's aside)."""
        return [c for a in self.aggs for c in a.columns()] + list(self.group_columns)

    def describe(self) -> str:
        """Canonical text of the query (stored in the ledger)."""
        parts = [f"{op}({', '.join(_describe_arg(a) for a in args)}"
                 f"{', ' if args and kwargs else ''}"
                 f"{', '.join(f'{k}={_describe_arg(v)}' for k, v in kwargs.items())})"
                 for op, args, kwargs in self.steps]
        if self.keys is not None:  # the digest binds idempotency keys to the key values
            parts.append(f"group_by({', '.join(self.keys.columns)}; {len(self.keys)} keys "
                         f"{self.keys_digest or _digest(self.keys)})")
        elif self.selection is not None:
            s = self.selection
            top = (f"k={s.k}, k_bar={s.k_bar}, " if isinstance(s, TopKSelection) else "")
            parts.append(f"group_by({', '.join(self.group_columns)}; selection={s.method}, "
                         f"{top}ε={s.epsilon}, δ={s.delta})")
        parts.append("agg(" + ", ".join(_describe_agg(a) for a in self.aggs) + ")")
        return ".".join(parts)


_PUBLISH = "publish"  # the namespace dpkit.release registers (frame.namespace)

_NO_ROWS = ("a DP query never shows rows: release aggregates (query.count(), "
            "query.agg(dp.mean(\"age\", bounds=(0, 100)))), or synthetic rows with "
            "query.publish.synthetic(...)")
# pandas names a newcomer types, with the dpkit spelling (Query.__getattr__)
PANDAS_SPELLINGS: dict[str, str] = {
    "groupby": "use group_by(\"col\") (keys= or a dp.Categorical column give its keys)",
    "apply": "arbitrary Python functions cannot be bounded: use with_columns(pl.col(…)…), "
             "map(column, {old: new}) or bin(column, edges)",
    "transform": "use with_columns(pl.col(…)…)",
    "assign": "use with_columns(name=pl.col(…)…)",
    "query": "use filter(pl.col(\"age\") > 30)",
    "where": "use filter(pl.col(\"age\") > 30)",
    "loc": "a query has no rows to index: use filter(pl.col(\"age\") > 30) and select(…)",
    "iloc": _NO_ROWS, "head": _NO_ROWS, "tail": _NO_ROWS, "sample": _NO_ROWS,
    "collect": "use release(epsilon=…): it returns a polars DataFrame of noisy aggregates",
    "to_pandas": "use release(epsilon=…).to_pandas()",
    "dropna": "use drop_nulls(\"col\")",
    "fillna": "use fill_null(\"col\", value)",
    "rename": "use with_columns(new=pl.col(\"old\"))",
    "value_counts": "use group_by(\"col\").agg(dp.count()) or histogram(\"col\", bins)",
    "nunique": "use agg(dp.count_distinct(\"col\"))",
    "aggregate": "use agg(dp.mean(\"col\", bounds=(lo, hi)), …)",
    "pivot_table": "use group_by(\"a\", \"b\").agg(…)",
    "size": "use count()",
}

# the columns each JSON step writes (a declaration no longer describes them); fill_null
# writes only nulls, which no declaration describes, so it keeps them; filters write none
_WRITES: dict[str, Callable[[dict[str, Any]], Iterable[str]]] = {
    "with_columns": lambda p: p["columns"], "clamp": lambda p: [p["column"]],
    "bin": lambda p: [p["name"] or p["column"]], "map": lambda p: [p["name"] or p["column"]]}


def _agg_dict_message(spec: Mapping[Any, Any]) -> str:
    """agg({"age": "mean"}) (pandas) → the dpkit spelling of each pair; the names are shown
    as typed (``repr``), never run."""
    known = {"mean", "sum", "count", "median", "min", "max", "std", "variance", "quantile",
             "count_distinct", "nunique"}
    parts = []
    for column, how in list(spec.items())[:8]:
        for h in how if isinstance(how, list | tuple) else [how]:
            name = str(h) if str(h) in known else "mean"
            name = "count_distinct" if name == "nunique" else name
            if name == "count":
                parts.append("dp.count()")
            elif name == "count_distinct":
                parts.append(f"dp.count_distinct({column!r})")
            elif name == "quantile":
                parts.append(f"dp.quantile({column!r}, q, bounds=(lo, hi))")
            else:
                parts.append(f"dp.{name}({column!r}, bounds=(lo, hi))")
    return ("agg() takes dpkit aggregations, not a pandas dict: write agg("
            + ", ".join(parts) + ") with the column's declared bounds (dpkit never reads "
            "them off the data)")


def _written(exprs: Sequence[Any], named: Mapping[str, Any]) -> list[str] | None:
    """The columns a positional with_columns/select writes: a Polars expression's output
    name unless it is a bare column (kept as it is); None when they cannot be known (a
    narwhals expression, a regex or wildcard selection)."""
    names = list(named)
    for expr in exprs:
        if isinstance(expr, str):
            continue  # a column kept by name
        if not isinstance(expr, pl.Expr):
            return None
        try:
            name = expr.meta.output_name()
        except pl.exceptions.PolarsError:
            return None
        if not expr.meta.is_column():
            names.append(name)
    return names


def _takes_bounds(agg: aggregates.Aggregation) -> TypeGuard[aggregates.ColumnAggregation]:
    """Sum, mean, variance/std and quantiles take clamping bounds (a histogram has bins)."""
    return isinstance(agg, aggregates.ColumnAggregation) and not isinstance(
        agg, aggregates.Histogram)


def _describe_arg(value: Any) -> str:
    if isinstance(value, Query):
        return f"query({value.table or 'default'}: {value.describe()})"
    if isinstance(value, pl.DataFrame):
        return f"public_table({', '.join(value.columns)}; {value.height} rows {_digest(value)})"
    text = language.compiled_text(value)  # a grammar expression: year >= 1985
    return text if text is not None else _describe_value(value)


def _describe_value(value: Any) -> str:
    """A step's or aggregation's parameter for people: numbers as short decimals (q=0.5,
    not Fraction(1, 2); ``exact_text`` keeps them exact), sequences element-wise."""
    if isinstance(value, Fraction):
        return exact_text(value)
    if isinstance(value, tuple | list):
        inner = ", ".join(_describe_value(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return str(value)


def _digest(frame: pl.DataFrame) -> str:
    """A short content digest of a public table (keys, join tables) for the ledger's text."""
    body = frame.write_csv().encode() + str(frame.schema).encode()
    return "sha256:" + hashlib.sha256(body).hexdigest()[:16]


# canonical key frames remembered by what their conversion reads, with their digests
# (and the full SHA-256 the plan memo reads, Query.shape_json)
_KEYS_MEMO: OrderedDict[Hashable, tuple[pl.DataFrame, str, str]] = OrderedDict()
# id of a remembered frame → (frame, digest, SHA-256)
_DIGESTS: dict[int, tuple[pl.DataFrame, str, str]] = {}
_KEYS_MEMO_SIZE = 256  # key lists remembered
_KEYS_MEMO_CELLS = 4096  # larger key frames are converted every time
_KEYS_LOCK = threading.Lock()


def _canonical_keys(frame: pl.DataFrame, schema: Any) -> pl.DataFrame:
    """:func:`canonical_keys` of ``frame``, remembered for small key frames by the given
    values, their types and the key columns' types — all that the conversion reads. Only
    successes are remembered (a refused key list is converted, and refused, again). The
    result is shared: never modify it in place."""
    if frame.height * frame.width > _KEYS_MEMO_CELLS or not all(c in schema
                                                                for c in frame.columns):
        return canonical_keys(frame, schema)
    key = (tuple((c, str(t), str(schema[c])) for c, t in frame.schema.items()),
           tuple(frame.rows()))
    with _KEYS_LOCK:
        hit = _KEYS_MEMO.get(key)
        if hit is not None:
            _KEYS_MEMO.move_to_end(key)
            return hit[0]
    out = canonical_keys(frame, schema)
    value = (out, _digest(out), _sha256(out))
    with _KEYS_LOCK:
        _KEYS_MEMO[key] = value
        _DIGESTS[id(out)] = value
        while len(_KEYS_MEMO) > _KEYS_MEMO_SIZE:
            old = _KEYS_MEMO.popitem(last=False)[1][0]
            _DIGESTS.pop(id(old), None)
    return out


def _sha256(frame: pl.DataFrame) -> str:
    return hashlib.sha256(frame.serialize()).hexdigest()


def _frame_sha256(frame: pl.DataFrame) -> str:
    """Full SHA-256 of ``frame``'s binary serialisation (``DataFrame.serialize``: schema,
    validity and values, which ``deserialize`` gives back exactly; so equal digests mean
    equal frames, short of a SHA-256 collision); remembered for the key frames
    :func:`_canonical_keys` remembers (shared, never modified in place)."""
    hit = _DIGESTS.get(id(frame))
    return hit[2] if hit is not None and hit[0] is frame else _sha256(frame)


def _keys_digest(frame: pl.DataFrame) -> str:
    """:func:`_digest` of a key frame (remembered for the frames :func:`_canonical_keys`
    remembers)."""
    hit = _DIGESTS.get(id(frame))
    return hit[1] if hit is not None and hit[0] is frame else _digest(frame)


def _agg_value(value: Any) -> str:
    numeric = isinstance(value, Fraction | tuple | list)
    return _describe_value(value) if numeric else repr(value)


def _describe_agg(agg: aggregates.Aggregation) -> str:
    fields = {k: v for k, v in vars(agg).items() if v is not None and k != "name"}
    inner = ", ".join(f"{k}={_agg_value(v)}" for k, v in fields.items())
    return f"{type(agg).__name__.lower()}({inner})"


class KeySet:
    """Public group keys: the values of one or more columns (declared, never read from the
    private data).

    ``KeySet({"sex": ["F", "M"], "age": range(5)})`` is the cross product of the listed
    values; ``KeySet(frame)`` takes the distinct rows of a public Polars table (e.g. a code
    list), ``KeySet.from_table(frame, ["region"])`` a subset of its columns; ``a * b`` is
    the cross product of two key sets.
    """

    def __init__(self, keys: Mapping[str, Sequence[Any]] | pl.DataFrame) -> None:
        if isinstance(keys, pl.DataFrame):
            self.frame = keys.unique(maintain_order=True)
        elif isinstance(keys, Mapping) and keys:
            rows = list(itertools.product(*(list(v) for v in keys.values())))
            self.frame = pl.DataFrame(rows, schema=list(keys), orient="row")
        else:
            raise DomainError("KeySet takes a {column: values} mapping or a Polars DataFrame")

    @classmethod
    def from_table(cls, table: pl.DataFrame, columns: Sequence[str]) -> KeySet:
        """The distinct combinations of ``columns`` in a public table."""
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise ColumnError(f"the public table lacks columns {missing}")
        return cls(table.select(list(columns)))

    def __mul__(self, other: KeySet) -> KeySet:
        if set(self.frame.columns) & set(other.frame.columns):
            raise DomainError("a cross product needs key sets on different columns")
        return KeySet(self.frame.join(other.frame, how="cross"))

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def columns(self) -> list[str]:
        return list(self.frame.columns)


def _keyset(columns: list[str], keys: Any) -> pl.DataFrame:
    try:
        return _key_frame(columns, keys)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError) as exc:
        raise DomainError(f"keys for {columns} must be values of one type per column "
                          f"({type(exc).__name__})") from None


def _key_frame(columns: list[str], keys: Any) -> pl.DataFrame:
    if isinstance(keys, KeySet):
        keys = keys.frame
    if keys is None:
        raise DomainError(
            "group_by needs public keys=...: dpkit never takes group keys from the data "
            "without a budgeted partition-selection step "
            "(docs/security.md#declared-never-inferred)"
        )
    if isinstance(keys, pl.DataFrame):
        missing = [c for c in columns if c not in keys.columns]
        if missing:
            raise DomainError(f"keys DataFrame lacks columns {missing}")
        frame = keys.select(columns)
    elif isinstance(keys, Mapping):
        if sorted(keys) != sorted(columns):
            raise DomainError(f"keys mapping must have exactly the columns {columns}")
        rows = list(itertools.product(*(list(keys[c]) for c in columns)))
        frame = pl.DataFrame(rows, schema=columns, orient="row")
    else:
        values = list(keys)
        if len(columns) == 1:  # mixed ints and floats become floats, then are checked
            frame = pl.DataFrame([pl.Series(columns[0], values, strict=False)])
        else:
            if not all(isinstance(v, tuple | list) and len(v) == len(columns) for v in values):
                raise DomainError(f"keys for {columns} must be tuples of {len(columns)} values")
            frame = pl.DataFrame([tuple(v) for v in values], schema=columns, orient="row")
    return frame  # checked and converted by canonical_keys



_SELECTION_FIELDS = {"epsilon", "delta", "method", "k", "k_bar"}


def selection_json(selection: PartitionSelection | TopKSelection) -> dict[str, Any]:
    """A selection's JSON form: {epsilon, delta, method} (and k, k_bar for top-k)."""
    doc = {"epsilon": language.json_number(selection.epsilon),
           "delta": language.json_number(selection.delta), "method": selection.method}
    if isinstance(selection, TopKSelection):
        doc["k"] = selection.k
        if selection.k_bar is not None:
            doc["k_bar"] = selection.k_bar
    return doc


def _selection_from_json(doc: Any) -> PartitionSelection | TopKSelection:
    """A selection's JSON form, by allow-list: {epsilon, delta, method} or, with method
    "limited_domain", also {k, k_bar}."""
    if not isinstance(doc, Mapping) or set(doc) - _SELECTION_FIELDS:
        raise ProtocolError("selection is {epsilon, delta, method} (and k, k_bar for "
                            "method limited_domain)")
    method = doc.get("method", "truncated_geometric")
    if not isinstance(method, str):
        raise ProtocolError("selection method must be a string")
    epsilon, delta = language.number(doc.get("epsilon")), language.number(doc.get("delta"))
    if method == TopKSelection.method:
        return TopKSelection(language.decode(Param("k", "int"), doc.get("k"), "selection"),
                             epsilon, delta, language.decode(Param("k_bar", "int", None),
                                                             doc.get("k_bar"), "selection"))
    if "k" in doc or "k_bar" in doc:
        raise ProtocolError("k and k_bar belong to method limited_domain")
    return PartitionSelection(epsilon, delta, method)


EXAMPLE_COUNTS = (1_000, 100_000)  # where explain gives a mean's half-width without a stated n


def _own_half_widths(agg: aggregates.Aggregation, mine: Sequence[PlannedStatistic],
                     beta: float, n: float | None) -> str:
    """``agg``'s own half-width at n (or at :data:`EXAMPLE_COUNTS`), from its statistics'
    half-widths at β / parts, as text ("" when it has none: a one-statistic output)."""
    widths = {p.stat.key: p.accuracy(beta / agg.beta_parts()) for p in mine}
    stats = [p.stat for p in mine]
    parts = []
    for count in (n,) if n is not None else EXAMPLE_COUNTS:
        a = agg.expected_half_width(widths, stats, count)
        if a is None:
            return ""
        parts.append(f"{a:.4g} at n = {count:,.0f}")
    return ", ".join(parts)
