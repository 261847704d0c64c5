"""``Session``: private data behind a privacy budget (interface mode; PINQ, McSherry 2009).

The analyst never sees rows. Each release is planned first (:meth:`Query.plan` gives a
:class:`~dpkit.frame.query.Plan`: sensitivities and noise scales from the core, the loss,
the noise rows), then :meth:`Session.release` checks its loss against the session budget and
debits it — in the ledger too, atomically, when there is one — *before* the engine reads the
data or any noise is drawn; only then does the engine compute the exact statistics and the
core add noise. It returns the release's record (:class:`~dpkit.core.record.Release`);
:meth:`Query.release` is the friendly form that returns its frame.
"""

from __future__ import annotations

import copy
import io
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import polars as pl

from dpkit.core.accountant import Accountant, FilterAccountant, ParallelAccountant
from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, convert
from dpkit.core.numbers import Number
from dpkit.core.record import Accuracy, Release
from dpkit.errors import DomainError
from dpkit.frame import aggregates, engine
from dpkit.frame.bounded_cache import BoundedCache
from dpkit.frame.compiler import PlannedStatistic
from dpkit.frame.language import ProtocolError, on_change
from dpkit.frame.privacy_unit import PrivacyUnit
from dpkit.frame.query import Plan, PlanParts, Query
from dpkit.frame.schema import Schema
from dpkit.mechanisms.frontend import charge_record
from dpkit.mechanisms.limited_domain import TopKSelection, make_limited_domain_top_k
from dpkit.mechanisms.partition_selection import PartitionSelection, make_partition_selection

if TYPE_CHECKING:
    from dpkit.frame.tuning import BoundsRecommendation
    from dpkit.ledger import Ledger

__all__ = ["Session", "PlanMemo"]


class PlanMemo:
    """The plan-time checks (dry runs on zero rows) that passed, remembered by everything
    they read, so that a server answering the same query again skips them.

    A key is the query's canonical JSON form (:meth:`Query.shape_json`: the public keys
    as their SHA-256), the schema text of the session's tables, the declared schema
    (:class:`~dpkit.frame.schema.Schema`), the backend, whether the plan reads a file, the
    privacy unit and the measure, and for a release's dry run its budget arguments (which fix the
    statistics): the outcome of a dry run on zero rows is a function of these alone, so a
    remembered key passes exactly when the dry run would. Only successes are remembered
    (a query that fails runs its dry run again, and fails again); queries without a JSON
    form are never remembered. Holds at most ``size`` keys (least recently used dropped).
    Thread-safe: a server's requests share one per dataset and worker.

    Under keys of the same kind it also keeps values (:meth:`value`), each a function of its
    key alone: a query's calibration (:meth:`Session.remember_plan`, key ``"plan"``: what
    :meth:`Query.plan` computes from the query, the schemas, the unit with its bounds, the
    measure and the budget arguments) and the Polars form of a release's aggregates
    (:func:`dpkit.frame.engine.native_aggregates`, under the release's dry-run key, looked up
    only after that dry run passed). At most ``size`` values, least recently used dropped.
    dpkit's own code is not in a key: whatever replaces it at run time (a test's broken
    variant) calls :meth:`clear` first.

    Parameters
    ----------
    size : int
        How many keys to keep (default 1024).
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._schemas: dict[int, tuple[pl.DataFrame, list[str], list[Any], Any]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._keys)

    def schema(self, table: Any, lazy: Any) -> Any:
        """``lazy.collect_schema()`` (``lazy``: the session's lazy frame over ``table``),
        remembered for an in-memory Polars ``table`` while its column names and types are
        unchanged (a few tables at most)."""
        if not isinstance(table, pl.DataFrame):
            return lazy.collect_schema()
        columns, dtypes = table.columns, table.dtypes
        with self._lock:
            hit = self._schemas.get(id(table))
        if hit is not None and hit[0] is table and hit[1] == columns and hit[2] == dtypes:
            return hit[3]
        schema = lazy.collect_schema()
        with self._lock:
            if len(self._schemas) >= 16:
                self._schemas.clear()
            self._schemas[id(table)] = (table, columns, dtypes, schema)
        return schema

    def clear(self) -> None:
        """Forget every remembered key and schema."""
        with self._lock:
            self._keys.clear()
            self._values.clear()
            self._schemas.clear()

    def run_once(self, key: Hashable | None, check: Callable[[], Any]) -> None:
        """Run ``check`` unless ``key`` is remembered; remember ``key`` if it passes
        (``key`` None: always run, remember nothing). ``check``'s errors propagate."""
        if key is not None:
            with self._lock:
                if key in self._keys:
                    self._keys.move_to_end(key)
                    return
        check()
        if key is not None:
            with self._lock:
                self._keys[key] = None
                while len(self._keys) > self.size:
                    self._keys.popitem(last=False)

    def value(self, key: Hashable | None, build: Callable[[], Any]) -> Any:
        """``build()``, remembered under ``key`` (None: built every time, never remembered).
        For what is a function of the key alone (the Polars form of a plan's aggregates):
        a hit returns what ``build`` would. ``build``'s errors propagate and are not
        remembered."""
        if key is None:
            return build()
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        built = build()
        with self._lock:
            self._values[key] = built
            while len(self._values) > self.size:
                self._values.popitem(last=False)
        return built


# The release dry runs that passed, shared by the sessions given no ``plan_memo``: a fresh
# session answering a query already checked on the same schema skips its dry run (the key
# holds all the dry run reads, so a hit passes exactly when the dry run would). Forgotten
# when the query language changes (a re-registered tag may lower differently).
SHARED_DRY_RUNS = PlanMemo(size=256)
on_change(SHARED_DRY_RUNS.clear)


class Session:
    """Private data, its privacy unit and a budget.

    Parameters
    ----------
    data : table or mapping of name → table
        The private table — a Polars frame, a DuckDB relation, a Spark DataFrame, or a
        CSV/Parquet path (scanned lazily) — or several named tables sharing the privacy
        unit column (``session.query("name")``; join them with ``Query.join``).
    privacy_unit : PrivacyUnit
        ``PrivacyUnit.rows()`` (default) or ``PrivacyUnit.by(column, max_rows)``.
    budget : PureDP, ApproxDP or ZCDP
        The total privacy loss this session may spend; its type is the session's measure.
        With a ledger, this is the dataset's lifetime cap (fixed when the dataset is first
        registered).
    ledger : str, Path or Ledger, optional
        SQLite epsilon registry; the session resumes the dataset's recorded spend.
    dataset : str, optional
        The dataset's name in the ledger (required with a ledger).
    analyst : str, optional
        Who spends (a ledger analyst with a grant on the dataset; their cap applies too).
    bounded_cache : BoundedCache, optional
        A cache of bounded tables shared with other sessions over the same in-memory tables
        and privacy unit (a server shares one per dataset across requests; see
        :mod:`dpkit.frame.bounded_cache`). Default: the session's own.
    plan_memo : PlanMemo, optional
        Plan-time dry runs that passed, shared with other sessions (a server shares one per
        dataset and worker; see :class:`PlanMemo`). Default: the session's own, except
        that release dry runs that passed are remembered process-wide
        (``SHARED_DRY_RUNS``: a fresh session does not repeat a passed dry run).
    schema : Schema or mapping of name → Schema, optional
        The curator's declared metadata (:class:`~dpkit.frame.schema.Schema`; one Schema
        is the first table's): ``group_by(c)`` without ``keys=`` takes the categories of a
        ``dp.Categorical`` column c, an aggregation without ``bounds=`` the bounds of its
        ``dp.Numeric`` column, and the schema's privacy unit is the session's. Checked
        against the tables' column names and types only (no value is read).

    Attributes
    ----------
    spent, remaining : PrivacyLoss
        Exact, in the session's measure (including earlier sessions' spend via the ledger).
    last_release : Release or None
        The record of the latest release (:class:`~dpkit.core.record.Release`).

    Raises
    ------
    SchemaError
        If the schema declares a column a table lacks, or ``dp.Numeric`` on a column that
        does not hold numbers.
    DomainError
        For a budget that is not a positive privacy loss (``PureDP(0)``, ``ZCDP(0)`` and
        ``ApproxDP(0, δ)`` are refused), a ledger without a dataset name, or a
        ``bounded_cache`` bound to other tables or another privacy unit.
    LedgerError
        If the ledger has the dataset with a different measure or cap.
    """

    def __init__(self, data: Any, privacy_unit: PrivacyUnit | None = None,
                 budget: PrivacyLoss | None = None, *, ledger: str | Path | Ledger | None = None,
                 dataset: str | None = None, analyst: str | None = None,
                 bounded_cache: BoundedCache | None = None,
                 plan_memo: PlanMemo | None = None,
                 schema: Schema | Mapping[str, Schema] | None = None) -> None:
        if not isinstance(budget, PureDP | ApproxDP | ZCDP):
            raise DomainError("budget must be dp.PureDP(ε), dp.ApproxDP(ε, δ) or dp.ZCDP(ρ)")
        if (budget.rho if isinstance(budget, ZCDP) else budget.epsilon) <= 0:
            raise DomainError(f"a session budget must be positive, got {budget}: a budget of "
                              "zero releases nothing")
        tables = dict(data) if isinstance(data, Mapping) else {"data": data}
        self._declared = _declared_schemas(schema, list(tables))
        privacy_unit = _unit_of(privacy_unit, self._declared)
        self.privacy_unit = privacy_unit or PrivacyUnit.rows()
        if not isinstance(self.privacy_unit, PrivacyUnit):
            raise DomainError("privacy_unit must be dp.PrivacyUnit.rows() or .by(column, n)")
        if not tables or not all(isinstance(k, str) for k in tables):
            raise DomainError("data must be a table or a non-empty {name: table} mapping")
        self._tables = {name: engine.to_lazy(t) for name, t in tables.items()}
        # in-memory Polars tables cannot change under the session: their bounded tables
        # can be reused across releases (see dpkit.frame.bounded_cache)
        self._in_memory = {name for name, t in tables.items() if isinstance(t, pl.DataFrame)}
        self._bounded = BoundedCache() if bounded_cache is None else bounded_cache
        self._cache_tables = [t for name, t in tables.items() if name in self._in_memory]
        self._bounded.bind(self._cache_tables, str(self.privacy_unit))
        self.default_table = next(iter(self._tables))
        self.plan_memo = PlanMemo() if plan_memo is None else plan_memo
        self._dry_runs = SHARED_DRY_RUNS if plan_memo is None else plan_memo
        schemas = {name: self.plan_memo.schema(tables[name], t)
                   for name, t in self._tables.items()}
        for name, declared in self._declared.items():  # names and types only
            declared.check_columns(schemas[name])
        if self.privacy_unit.column is not None:
            for table_schema in schemas.values():
                engine.check_columns(table_schema, [self.privacy_unit.column])
        elif len(self._tables) > 1:
            raise DomainError("several private tables need a privacy unit column shared by "
                              "all of them: PrivacyUnit.by(column, ...)")
        schema_text = ";".join(
            ",".join(f"{k}:{v}" for k, v in sc.items()) if len(schemas) == 1 else
            f"{name}(" + ",".join(f"{k}:{v}" for k, v in sc.items()) + ")"
            for name, sc in schemas.items())
        self._schemas = schemas
        self._schema_text = schema_text
        # what else a plan-time check may read: the declared metadata (with a memo shared
        # across sessions, two sessions may declare differently over the same schema)
        self._declared_text = repr(sorted(self._declared.items()))
        self.measure: type[PrivacyLoss] = type(budget)
        self._budget = budget
        self._partitions: dict[int, ParallelAccountant] = {}
        self.dataset = dataset
        self.analyst = analyst
        self.ledger: Ledger | None = None
        self.accountant: Accountant = FilterAccountant(budget)
        if ledger is not None:
            if not dataset:
                raise DomainError("a ledger needs dataset='name'")
            from dpkit.ledger import Ledger, LedgerAccountant  # SQLAlchemy loads on use

            self.ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
            self.ledger.register(dataset, budget, str(self.privacy_unit), schema_text)
            self.accountant = LedgerAccountant(self.ledger, dataset, analyst)

    # -- budget ------------------------------------------------------------------------
    @property
    def budget(self) -> PrivacyLoss:
        return self._budget

    @property
    def spent(self) -> PrivacyLoss:
        return self.accountant.spent

    @property
    def remaining(self) -> PrivacyLoss:
        return self.budget - self.spent

    @property
    def last_release(self) -> Release[Any] | None:
        """The :class:`~dpkit.core.record.Release` of the latest release through this
        session's accountant (a query, ``query.publish``, a ``dpkit.learn`` fit, a part of a
        partition): values, loss, noise rows, accuracy, release id, replayed flag, digest.
        None before the first release, and after a release refused before its debit."""
        return self.accountant.last

    @property
    def _frame(self) -> Any:
        return self._tables[self.default_table]

    def table(self, name: str | None = None) -> Any:
        """The lazy private table ``name`` (default: the first); for the engine only."""
        key = name or self.default_table
        if key not in self._tables:
            raise DomainError(f"no private table {key!r}; tables: {', '.join(self._tables)}")
        return self._tables[key]

    def schema(self, name: str | None = None) -> Any:
        """The schema (column → dtype) of private table ``name`` (default: the first), as
        read once when the session opened; reads no row."""
        self.table(name)
        return self._schemas[name or self.default_table]

    def declared(self, name: str | None = None) -> Schema | None:
        """The curator's declared :class:`~dpkit.frame.schema.Schema` of private table
        ``name`` (default: the first), or None when none was declared."""
        self.table(name)
        return self._declared.get(name or self.default_table)

    def query(self, table: str | None = None) -> Query:
        """Start a new lazy query on ``table`` (default: the first private table)."""
        self.table(table)
        return Query(self, table=table)

    def total_loss(self, planned: Sequence[PlannedStatistic],
                   selection: PartitionSelection | TopKSelection | None = None) -> PrivacyLoss:
        """The privacy loss of a release of ``planned`` statistics, in the session's measure.

        Basic composition of the statistics' losses; an (ε, δ) release with Gaussian noise
        composes them in zCDP and converts the total once; a partition selection's (ε, δ) is
        added by basic composition. Computes only (debits nothing).

        Parameters
        ----------
        planned : sequence of PlannedStatistic
            The statistics of :meth:`Query.plan`.
        selection : PartitionSelection, optional
            The query's partition selection, if any.

        Returns
        -------
        PrivacyLoss
            Exact (Fraction) loss in the session's measure.
        """
        if self.measure is ApproxDP and planned and planned[0].delta > 0:
            rho = sum((convert(p.loss, ZCDP) for p in planned), ZCDP.zero())
            total: PrivacyLoss = rho.to_approx(planned[0].delta)
        else:
            total = sum((convert(p.loss, self.measure) for p in planned), self.measure.zero())
        return total + selection.loss() if selection is not None else total


    def new_partition(self) -> int:
        """A new partition's id (:meth:`Query.partition`): its parts are charged the maximum
        over parts (:class:`~dpkit.core.accountant.ParallelAccountant`)."""
        self._partitions[len(self._partitions)] = ParallelAccountant(self.accountant)
        return len(self._partitions) - 1

    def _accountant_for(self, query: Query) -> Accountant:
        """The session's accountant, or a partition part's (charged the max over parts)."""
        if query.part is None:
            return self.accountant
        ident, key = query.part
        return self._partitions[ident].for_part(key)

    def bounded(self, query: Query, lf: Any, key_columns: Sequence[str]) -> Any:
        """``lf`` (the query's rows) bounded to the privacy unit for a release grouped by
        ``key_columns``; reused from an earlier release of this session with the same
        table, steps, columns and grouping when the table is an in-memory Polars frame and
        the query has no private join (:mod:`dpkit.frame.bounded_cache`)."""
        return self._bound(query, lf, key_columns, self._bounded_key(query, key_columns))

    def _bound(self, query: Query, lf: Any, key_columns: Sequence[str],
               found: tuple[tuple, list[Any]] | None) -> Any:
        """:meth:`bounded` with its cache key (``found``: None for an uncached table)
        already computed."""
        def compute() -> Any:
            return engine.bound_contributions(lf, self.privacy_unit, query.columns(),
                                              key_columns)
        if found is None:
            return compute()
        return self._bounded.get_or_compute(*found, compute)

    def _bounded_key(self, query: Query, key_columns: Sequence[str]
                     ) -> tuple[tuple, list[Any]] | None:
        """The bounded-table cache key of the query (and the objects it refers to), or None
        when its bounded table is not cached (a scan, or a private join)."""
        table = query.table or self.default_table
        if table not in self._in_memory or query.has_private_join() \
                or query.sampling is not None:
            return None  # a sampled table is drawn afresh for each release, never reused
        return BoundedCache.key(table, query.steps, query.columns(), key_columns)

    # -- release -----------------------------------------------------------------------
    def plan_key(self, what: str, query: Query, *extra: Any) -> Hashable | None:
        """The :class:`PlanMemo` key of a plan-time check ``what`` of ``query`` on this
        session's tables (with ``extra``: what else the check reads), or None for a query
        without a JSON form (never remembered). The public keys enter as their SHA-256
        (:meth:`Query.shape_json`)."""
        try:
            text = json.dumps(query.shape_json(), sort_keys=True, separators=(",", ":"))
        except (ProtocolError, TypeError, ValueError, pl.exceptions.PolarsError):
            return None  # no JSON form, or keys that do not serialise: never remembered
        return (what, text, self._schema_text, self._declared_text, str(self.privacy_unit),
                self.measure.__name__, *extra)

    def remember_plan(self, query: Query, arguments: tuple[Any, ...],
                      build: Callable[[], PlanParts]) -> PlanParts:
        """What :meth:`Query.plan` calibrates for ``query`` and its budget ``arguments``
        (statistics, loss, noise rows, description, requested budget): ``build()``,
        remembered in the plan memo under :meth:`plan_key` — the query's shape, the tables'
        schemas, the declared schema, the privacy unit with its bounds, the measure and the
        arguments, everything the calibration reads — so a hit returns what ``build`` would.
        A query without a JSON form is calibrated every time; ``build``'s errors propagate
        and are never remembered."""
        return cast("PlanParts", self._dry_runs.value(
            self.plan_key("plan", query, repr(arguments)), build))

    def release(self, plan: Plan, *, confidence: float = 0.95,
                idempotency_key: str | None = None) -> Release[pl.DataFrame]:
        """Run a planned release: debit its loss, then read the data and draw the noise.

        Parameters
        ----------
        plan : Plan
            ``query.plan(...)`` of a query on this session.
        confidence : float
            Coverage of each reported interval (default 0.95), per cell.
        idempotency_key : str, optional
            With a ledger: a retry with the same key returns the recorded answer.

        Returns
        -------
        Release
            The record: ``values`` the released frame (as :meth:`Query.release`), ``loss``
            what was debited (None for a replay), the plan's noise rows, the accuracy at
            β = 1 − confidence, the release id and the digest. Also kept as
            :attr:`last_release`.

        Raises
        ------
        BudgetExceededError
            If the loss exceeds what remains (nothing is read, released or recorded).
        DomainError
            For a plan of another session or a confidence outside (0, 1), before the debit.
        ReleaseFailedError
            If the data side fails after the debit (the loss stands; no data in its text).
        """
        query, lf, planned = plan.query, plan.lazy, list(plan.statistics)
        if query.session is not self:
            raise DomainError("a plan is released by the session of its query")
        if not 0 < confidence < 1:
            raise DomainError("confidence must be in (0, 1)")
        beta = 1 - confidence
        # every failure that does not depend on the data happens here, before the debit;
        # remembered by everything it reads (the plan arguments fix the statistics)
        scan = engine.is_scan(lf)
        key = self.plan_key("release", query, repr(plan.arguments), scan,
                            lf.implementation.name)
        # the plan's aggregates in Polars' own form, translated once per key (a function of
        # the plan and the schema, which the key holds), before the debit; dry-run too,
        # since the release collects them
        stats = [p.stat for p in planned]

        def translated() -> Any:
            return self._dry_runs.value(key, lambda: engine.native_aggregates(
                lf, stats, self.privacy_unit.column))

        self._dry_runs.run_once(key, lambda: engine.dry_run(
            query.lazy(empty=True), query.keys, stats, self.privacy_unit.column,
            query.group_columns, scan, native=translated))
        native = translated()

        def exact(bounded: Any, keys: Any) -> dict[str, np.ndarray]:
            return engine.compute(bounded, keys, stats, self.privacy_unit.column, scan,
                                  native=native)

        def compute() -> pl.DataFrame:
            nonlocal query
            # a sample is drawn afresh for each release (its key is drawn by lazy())
            fresh = query.has_private_join() or query.sampling is not None
            frame = query.lazy(bound_joins=True) if fresh else lf
            key_columns = list(query.group_columns)
            cached = self._bounded_key(query, key_columns)
            if cached is not None and key is not None and query.selection is None:
                # a plan already answered on this bounded table: its exact values again
                # (dpkit.frame.bounded_cache, "Exact answers"); fresh noise below
                raw = self._bounded.answer(cached[0], key, lambda: exact(
                    self._bound(query, frame, key_columns, cached), query.keys))
            else:
                bounded = self._bound(query, frame, key_columns, cached)  # after the debit
                keys = query.keys
                if query.selection is not None:
                    keys = self._select_partitions(bounded, query.selection, key_columns,
                                                   scan)
                    query = replace(query, keys=keys)
                raw = exact(bounded, keys)
            noisy = {p.stat.key: p.measurement(raw) for p in planned}
            return _assemble(query, planned, noisy, beta)

        return charge_record(
            self._accountant_for(query), plan.loss, plan.description, compute, plan.noise,
            idempotency_key=idempotency_key, accuracy=_accuracy(planned, beta),
            store=lambda r: r.write_json(), replay=lambda text: pl.read_json(io.StringIO(text)),
            loss_note=plan.loss_note, unit_bounded=True)[1]

    def _select_partitions(self, bounded: Any, selection: PartitionSelection | TopKSelection,
                           key_columns: list[str], streaming: bool) -> pl.DataFrame:
        """The keys that pass private partition selection, or the private top-k keys (best
        first), on the bounded rows."""
        counts = engine.partition_counts(bounded, key_columns, self.privacy_unit.column,
                                         streaming)
        bounds = self.privacy_unit.bounds
        groups = min(bounds.max_groups, bounds.max_rows)
        if isinstance(selection, TopKSelection):  # best first, ties by the keys' order
            ordered = counts.sort(key_columns, nulls_last=True)
            picks = make_limited_domain_top_k(selection, groups)(
                ordered["__dpkit_units"].to_numpy())
            return ordered[picks].select(key_columns)
        mask = make_partition_selection(selection, groups)(counts["__dpkit_units"].to_numpy())
        return counts.filter(pl.Series(mask)).select(key_columns)

    # -- contribution bounds (dpkit.frame.tuning) ----------------------------------------
    def with_bounds(self, max_rows: int | None = None, *, max_groups: int | None = None,
                    max_rows_per_group: int | None = None) -> Session:
        """This session with tighter contribution bounds, on the same accountant and ledger.

        Parameters
        ----------
        max_rows, max_groups, max_rows_per_group : int, optional
            New M, G, R, each at most the declared one (an omitted one keeps its value,
            capped by the others as in :meth:`PrivacyUnit.by`).

        Returns
        -------
        Session
            A view: same tables, budget, accountant and ledger; its own bounded-table cache.

        Raises
        ------
        DomainError
            Under row-level privacy, or for a bound that is not a positive integer or
            exceeds the declared one.

        Notes
        -----
        Every release is ε-DP (ρ-zCDP) for adding or removing one unit whatever the bounds
        (they set the sensitivity), so a view charging the same accountant keeps the
        session's guarantee; the declared bounds stay the caps.
        """
        unit, old = self.privacy_unit, self.privacy_unit.bounds
        if unit.column is None:
            raise DomainError("row-level privacy has no contribution bounds to tighten")
        new = PrivacyUnit.by(unit.column, max_rows or old.max_rows,
                             max_groups=max_groups or old.max_groups,
                             max_rows_per_group=max_rows_per_group or old.max_rows_per_group)
        for name in ("max_rows", "max_groups", "max_rows_per_group"):
            if getattr(new.bounds, name) > getattr(old, name):
                raise DomainError(f"{name}={getattr(new.bounds, name)} exceeds the declared "
                                  f"{getattr(old, name)}: declare a larger bound in the "
                                  "session's privacy unit")
        view = copy.copy(self)
        view.privacy_unit = new
        view._bounded = BoundedCache()
        view._bounded.bind(self._cache_tables, str(new))
        return view

    def recommend_bounds(self, *, group_by: Sequence[str] = (), statistic: str = "count",
                         column: str | None = None,
                         bounds: tuple[Number, Number] | None = None,
                         keys: Any = None, table: str | None = None,
                         share: Number | None = None, epsilon: Number | None = None,
                         rho: Number | None = None, cap: int | None = None,
                         bins: int | None = None,
                         levels: Sequence[Number] = (Fraction(1, 100), Fraction(99, 100))
                         ) -> BoundsRecommendation:
        """Choose contribution bounds (and ``column``'s bounds) privately, spending a stated
        share of the budget: :func:`dpkit.frame.tuning.recommend_bounds` on
        ``self.query(table).group_by(*group_by, keys=keys)`` (see it for the parameters,
        the guarantee — basic composition of unit-sensitivity histograms (contributions,
        and one value per unit), ε_t = share·ε — and the errors; Amin et al.,
        ICML 2019; PipelineDP's ``calculate_private_contribution_bounds``).

        Returns
        -------
        BoundsRecommendation
            Chosen bounds, the candidates' estimated errors, the exact loss charged and the
            remaining budget; ``.apply(query)`` runs a query with them.
        """
        from dpkit.frame.tuning import recommend_bounds

        query = self.query(table)
        if group_by:
            query = query.group_by(*group_by, keys=keys)
        return recommend_bounds(query, statistic=statistic, column=column, bounds=bounds,
                                share=share, epsilon=epsilon, rho=rho, cap=cap,
                                bins=bins, levels=levels)

    def _repr_html_(self) -> str:
        """Notebooks' rich display: budget, spent, remaining and the releases so far
        (:func:`dpkit.frame.display.session_html`)."""
        from dpkit.frame.display import session_html

        return session_html(self)

    def __repr__(self) -> str:
        return (f"Session(unit={self.privacy_unit}, budget={self.budget}, spent={self.spent}, "
                f"ledger={self.ledger.path if self.ledger else None})")

    # -- SQL (dpkit.frame.sql) ----------------------------------------------------------
    def sql(self, text: str, *, epsilon: Number | None = None, rho: Number | None = None,
            delta: Number | None = None, confidence: float = 0.95,
            split: Sequence[Number] | None = None, dialect: str = "duckdb",
            public: Mapping[str, Any] | None = None,
            selection: PartitionSelection | TopKSelection | None = None,
            idempotency_key: str | None = None) -> pl.DataFrame:
        """Release a SQL ``SELECT`` with differential privacy (:mod:`dpkit.frame.sql`).

        The statement is translated by allow-list into a :class:`Query` and released the
        one road (plan-time checks, dry run, one debit, one record); ``HAVING``, ``ORDER
        BY`` and ``LIMIT`` then post-process the noisy result.

        Parameters
        ----------
        text : str
            One ``SELECT`` statement (at most ``dpkit.frame.sql.MAX_SQL_BYTES`` bytes).
        epsilon, rho, delta, confidence, split, idempotency_key
            As :meth:`Query.release` (``split``: weights of the ``SELECT`` list's aggregates,
            in order).
        dialect : str
            ``"duckdb"`` (default), ``"postgres"``, ``"spark"`` or ``"bigquery"``.
        public : mapping of str to table, optional
            Public tables the statement may ``JOIN``.
        selection : PartitionSelection or TopKSelection, optional
            Private key selection for a ``GROUP BY`` column without declared categories.

        Returns
        -------
        polars.DataFrame
            The frame of :meth:`Query.release` (estimates with ``_ci_low``/``_ci_high``),
            its columns named and ordered as the ``SELECT`` list.

        Raises
        ------
        SQLError
            For text outside the supported forms, with line, column and fragment; before
            anything is read or spent.
        BudgetExceededError, DomainError, BoundsError, ColumnError, MeasureError
            As :meth:`Query.release`.

        Notes
        -----
        The guarantee is the translated query's: its loss (:meth:`sql_plan`'s ``loss``) in
        the session's measure; the post-processing costs nothing (Dwork & Roth Prop. 2.1).
        """
        from dpkit.frame.sql import to_query

        return to_query(self, text, dialect=dialect, public=public, selection=selection
                        ).release(epsilon, rho=rho, delta=delta, split=split,
                                  confidence=confidence, idempotency_key=idempotency_key)

    def sql_plan(self, text: str, *, epsilon: Number | None = None, rho: Number | None = None,
                 delta: Number | None = None, split: Sequence[Number] | None = None,
                 dialect: str = "duckdb", public: Mapping[str, Any] | None = None,
                 selection: PartitionSelection | TopKSelection | None = None) -> Plan:
        """The :class:`Plan` of :meth:`sql` (reads no data, spends nothing); its
        description ends with the post-processing. Raises as :meth:`sql` before the
        debit."""
        from dpkit.frame.sql import to_query

        return to_query(self, text, dialect=dialect, public=public, selection=selection
                        ).plan(epsilon, rho=rho, delta=delta, split=split)

    def sql_explain(self, text: str, *, epsilon: Number | None = None,
                    rho: Number | None = None, delta: Number | None = None,
                    split: Sequence[Number] | None = None, confidence: float = 0.95,
                    dialect: str = "duckdb", public: Mapping[str, Any] | None = None,
                    selection: PartitionSelection | TopKSelection | None = None) -> str:
        """:meth:`Query.explain` of :meth:`sql`'s query, plus its post-processing (free)."""
        from dpkit.frame.sql import to_query

        return to_query(self, text, dialect=dialect, public=public, selection=selection
                        ).explain(epsilon, rho=rho, delta=delta, split=split,
                                  confidence=confidence)


def _accuracy(planned: Sequence[PlannedStatistic], beta: float) -> Accuracy:
    """The release record's accuracy: each statistic's half-width at β in its units (ranks
    for a quantile), from the plan alone, computed when first read."""
    return Accuracy.deferred(beta, {p.stat.key: partial(_half_width, p, beta, float(p.unit))
                                    for p in planned})


def _half_width(p: PlannedStatistic, beta: float, unit: float) -> float:
    return p.accuracy(beta) * unit


def _assemble(query: Query, planned: list[PlannedStatistic], noisy: dict[str, np.ndarray],
              beta: float) -> pl.DataFrame:
    columns: dict[str, Any] = {}
    keys = query.keys
    hist = next((a for a in query.aggs if isinstance(a, aggregates.Histogram)), None)
    for i, agg in enumerate(query.aggs):
        mine = [p for p in planned if p.aggregation == i]
        widths = {p.stat.key: _width(p, agg, beta) for p in mine}
        values = {k: (v.reshape(-1) if hist is not None else v) for k, v in noisy.items()}
        columns.update(agg.finish(values, widths, [p.stat for p in mine], beta))
    series = {k: pl.Series(k, np.asarray(v)) for k, v in columns.items()}
    if hist is not None:
        labels = hist.labels()
        repeat = len(keys) if keys is not None else 1
        out = pl.DataFrame({"bin": labels * repeat})
        if keys is not None:
            expanded = keys.select(pl.all().repeat_by(len(labels)).explode())
            out = pl.concat([expanded, out], how="horizontal")
        return out.with_columns(**series)
    if keys is None:
        return pl.DataFrame(list(series.values()))
    if set(series).isdisjoint(keys.columns):  # (eager: no query plan to run)
        return keys.hstack(list(series.values()))
    return keys.with_columns(**series)


def _width(p: PlannedStatistic, agg: aggregates.Aggregation, beta: float) -> float:
    # an interval combining k noise bounds takes each at β/k (a mean's two, a variance's
    # three: before, the variance's were each at β, covering with probability 1 − 3β only)
    return p.accuracy(beta / agg.beta_parts())


def _declared_schemas(schema: Schema | Mapping[str, Schema] | None,
                      tables: list[str]) -> dict[str, Schema]:
    """``Session(schema=...)`` as {table: Schema}: one Schema is the first table's."""
    if schema is None:
        return {}
    if isinstance(schema, Schema):
        return {tables[0]: schema}
    if not isinstance(schema, Mapping) or not all(
            isinstance(v, Schema) for v in schema.values()):
        raise DomainError("schema must be a dp.Schema or a {table: dp.Schema} mapping")
    unknown = sorted(set(schema) - set(tables))
    if unknown:
        raise DomainError(f"schema names no private table: {', '.join(map(str, unknown))}; "
                          f"tables: {', '.join(tables)}")
    return dict(schema)


def _unit_of(privacy_unit: PrivacyUnit | None,
             declared: dict[str, Schema]) -> PrivacyUnit | None:
    """The session's privacy unit: the argument, or the one the schemas declare; they
    must agree (one privacy unit per session)."""
    units = {s.privacy_unit for s in declared.values() if s.privacy_unit is not None}
    if len(units) > 1:
        raise DomainError("the schemas declare different privacy units; a session has one")
    if units and privacy_unit is not None and units != {privacy_unit}:
        raise DomainError(f"privacy_unit={privacy_unit} differs from the schema's "
                          f"{next(iter(units))}; declare it in one place")
    return privacy_unit if privacy_unit is not None else next(iter(units), None)

