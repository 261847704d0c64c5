"""The epsilon registry (Dwork & Roth §13.1): a persistent record of every privacy loss.

Storage through SQLAlchemy: a SQLite file by default, PostgreSQL by URL
(``postgresql+psycopg://user@host/db``). Entities: datasets (measure, lifetime cap, privacy
unit, schema, burn-rate policy), analysts (hashed API tokens) with per-dataset grants (caps
inside the dataset's), studies, releases (who, when, canonical query, exact loss, noise
rows, result hash, optionally the stored result) and their outcomes. The noise rows and the
result hash are written as :mod:`dpkit.core.record` encodes them (the same for every front
end: see :class:`~dpkit.ledger.LedgerAccountant`).

Guarantees
----------
- Check-and-debit is one transaction that first takes the ledger's write lock (SQLite
  ``BEGIN IMMEDIATE``; PostgreSQL ``SELECT … FOR UPDATE`` on the chain head), so concurrent
  processes and machines serialise and no interleaving overruns a cap. The debit is written
  *before* any noise is drawn; a release that fails later is marked ``failed`` and its loss
  still counts. A crash between debit and response never refunds.
- Every change is a link of one keyed hash chain (:mod:`dpkit.ledger.chain`): administrative
  changes (datasets and caps, policies, analysts and tokens, grants, studies), debits (with
  the running totals after them) and outcomes (with the hash of the stored answer). The
  rows the ledger reads to decide a spend or an answer carry a MAC and the ``seq`` of their
  last link; a debit, a replay and a token lookup refuse a row whose MAC fails or that is
  not the latest state in the chain (:class:`~dpkit.errors.LedgerIntegrityError`), with
  index lookups only. :meth:`Ledger.verify` replays the whole chain and checks every row.
- An idempotency key is bound to the hash of its request (dataset, analyst, canonical query,
  loss, noise plan): a retried request gets the recorded answer (after checking it against
  its chained hash) instead of fresh noise; the key with another request is refused
  (:class:`~dpkit.errors.IdempotencyConflictError`). A key whose first attempt never
  recorded an answer (it failed, or crashed more than ``STALE_SECONDS`` ago) debits again,
  since nothing was released.
- Losses compose in the dataset's measure exactly (Fractions; basic composition).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, select

from dpkit.core.measures import PrivacyLoss, convert
from dpkit.errors import (
    BudgetExceededError,
    IdempotencyConflictError,
    IdempotentReplay,
    LedgerError,
    LedgerIntegrityError,
)
from dpkit.ledger import chain, integrity, store
from dpkit.ledger.codec import MEASURES, dump, load, now, stamp
from dpkit.ledger.keys import resolve_key
from dpkit.ledger.rechain import rechain
from dpkit.ledger.schema import (
    SCHEMA_VERSION,
    datasets,
    meta,
    migrate,
    outcomes,
    releases,
)

__all__ = ["Ledger", "IdempotentReplay", "SCHEMA_VERSION", "STALE_SECONDS"]

STALE_SECONDS = 300  # a debited attempt with no outcome after this long counts as crashed
_WINDOW_SLACK = timedelta(hours=1)  # burn-rate walk: how far times may run against seq
_BATCH = 256


class _Answered(IdempotentReplay):  # noqa: N818 - a replay, not a failure
    """An :class:`IdempotentReplay` that also carries the digest chained with the answer
    (``result_sha256``), so that a replay's release record names the original's digest."""

    def __init__(self, release_id: int, result: str | None, result_sha256: str | None) -> None:
        super().__init__(release_id, result)
        self.result_sha256 = result_sha256


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _engine(location: str | Path) -> tuple[Engine, str]:
    url = str(location)
    if "://" not in url:
        path = Path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{path}"
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 120})

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute("PRAGMA busy_timeout=120000")
            dbapi_conn.execute("PRAGMA foreign_keys=ON")

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, before any read
    else:
        engine = create_engine(url, pool_pre_ping=True)
    return engine, url


class Ledger:
    """A persistent, atomic, hash-chained record of privacy losses per dataset.

    Parameters
    ----------
    location : str or Path
        A SQLite file path (created with its folders if absent) or a SQLAlchemy URL
        (``sqlite:///…``, ``postgresql+psycopg://…``).
    encryption_key : bytes, optional
        A Fernet key (``cryptography.fernet.Fernet.generate_key()``); stored results are then
        encrypted at rest.
    mac_key : bytes or str, optional
        The key of the chain and of the row MACs. Default: ``$DPKIT_LEDGER_MAC_KEY``, else a
        key file (``<ledger file>.key``, created with a new ledger); see
        :mod:`dpkit.ledger.keys`.

    Raises
    ------
    LedgerError
        If the schema on disk is newer than this dpkit, the MAC key is missing or is not
        this ledger's, or a version-2 ledger to migrate does not verify.
    """

    def __init__(self, location: str | Path, *, encryption_key: bytes | None = None,
                 mac_key: bytes | str | None = None) -> None:
        self.engine, self.url = _engine(location)
        self.path = location
        self._fernet: Any = None
        if encryption_key is not None:
            from cryptography.fernet import Fernet

            self._fernet = Fernet(encryption_key)
        try:
            with self._transaction() as conn:
                self._key, self.key_source = resolve_key(self.url, mac_key, conn)
                found = migrate(conn)
                for name, value in (("chain_head", chain.GENESIS), ("chain_seq", "0"),
                                    ("mac_key_id", chain.key_id(self._key))):
                    if conn.execute(select(meta.c.value).where(meta.c.key == name)
                                    ).first() is None:
                        conn.execute(meta.insert().values(key=name, value=value))
                if found in (1, 2):
                    rechain(conn, self._key, found)
        except LedgerError:
            self.engine.dispose()
            raise
        except RuntimeError as exc:
            self.engine.dispose()
            raise LedgerError(str(exc)) from None

    # -- plumbing ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    def _lock_head(self, conn: Connection) -> tuple[str, int]:
        """Take the ledger's write lock (the chain head's row; SQLite already holds its
        database lock) and read the head; every writer passes here first, so one lock
        serialises them and no two can deadlock."""
        head = conn.execute(select(meta.c.value).where(meta.c.key == "chain_head")
                            .with_for_update()).scalar_one()
        seq = conn.execute(select(meta.c.value).where(meta.c.key == "chain_seq")).scalar_one()
        return str(head), int(seq)

    def _advance(self, conn: Connection, head: str, seq: int) -> None:
        conn.execute(meta.update().where(meta.c.key == "chain_head").values(value=head))
        conn.execute(meta.update().where(meta.c.key == "chain_seq").values(value=str(seq)))

    def _append(self, conn: Connection, kind: str, table: str, key: tuple[str, ...],
                body: dict[str, Any], time: str) -> int:
        """Append an event link (an administrative change of row ``table`` ``key``);
        returns its ``seq``. The caller holds the write lock."""
        head, seq = self._lock_head(conn)
        digest, _ = store.insert_event(conn, self._key, head, seq + 1, kind,
                                       chain.subject(table, *key), body, time)
        self._advance(conn, digest, seq + 1)
        return seq + 1

    def _tampered(self, what: str) -> LedgerIntegrityError:
        return LedgerIntegrityError(f"ledger {self.url}: {what}; refusing to use it (run "
                                    "`dpkit ledger verify`)")

    def _row(self, conn: Connection, table: str, key: tuple[str, ...]) -> dict[str, Any] | None:
        """The mutable row ``table`` ``key`` (None if the chain never created it), after
        checking its MAC and that it is the latest state in the chain.

        Raises
        ------
        LedgerIntegrityError
            If the row was edited, deleted, or rolled back outside the ledger.
        """
        row, latest = store.fetch(conn, table, key)
        name = f"{table} {key[0]!r}" if len(key) == 1 else f"{table} {key!r}"
        if row is None:
            if latest:
                raise self._tampered(f"{name} is in the chain but its row is missing "
                                     "(deleted outside the ledger)")
            return None
        if not store.row_ok(self._key, table, row):
            raise self._tampered(f"{name} was edited outside the ledger (its MAC does not "
                                 "match)")
        if row["seq"] != latest:
            raise self._tampered(f"{name} is not the latest state in the chain (rolled back, "
                                 "or a link was deleted, outside the ledger)")
        return row

    def _dataset(self, conn: Connection, name: str) -> dict[str, Any]:
        row = self._row(conn, "datasets", (name,))
        if row is None:
            raise LedgerError(f"unknown dataset {name!r}")
        return row

    def _sum(self, conn: Connection, dataset: str, measure: str, analyst: str) -> PrivacyLoss:
        """The recorded loss of ``analyst``'s releases on ``dataset`` (for display)."""
        query = select(releases.c.measure, releases.c.loss).where(
            (releases.c.dataset == dataset) & (releases.c.analyst == analyst))
        total = MEASURES[measure].zero()
        for m, loss in conn.execute(query):
            total = total + load(m, loss)
        return total

    def _recent(self, conn: Connection, dataset: str, measure: str, since: datetime
                ) -> PrivacyLoss:
        """The loss of the dataset's releases made at or after ``since``, for the burn-rate
        policy. Walks its releases newest first (index on (dataset, seq)) in batches,
        checking each link, and stops at the first made more than ``_WINDOW_SLACK`` before
        ``since`` (release times grow with ``seq`` up to lock waits and clock skew): the
        cost is the releases of the window, and an edited time or loss is refused rather
        than trusted.

        Raises
        ------
        LedgerIntegrityError
            If a release read was edited outside the ledger.
        """
        total, before = MEASURES[measure].zero(), None
        while True:
            query = (select(releases).where(releases.c.dataset == dataset)
                     .order_by(releases.c.seq.desc()).limit(_BATCH))
            if before is not None:
                query = query.where(releases.c.seq < before)
            batch = conn.execute(query).all()
            for row in batch:
                if not self._link_ok(row, chain.release_body(row._mapping)):
                    raise self._tampered(f"release {row.id} was edited outside the ledger")
                when = datetime.fromisoformat(row.time)
                if when < since - _WINDOW_SLACK:
                    return total
                if when >= since:
                    total = total + load(row.measure, row.loss)
            if len(batch) < _BATCH:
                return total
            before = batch[-1].seq

    def _link_ok(self, row: Any, body: dict[str, Any]) -> bool:
        return hmac.compare_digest(str(row.hash), chain.link_hash(self._key, row.prev_hash, body))

    # -- datasets, analysts, studies, policies ----------------------------------------------
    def register(self, dataset: str, cap: PrivacyLoss, privacy_unit: str = "rows",
                 schema: str = "") -> PrivacyLoss:
        """Register ``dataset`` with a lifetime ``cap`` (or check an existing registration).

        Raises
        ------
        LedgerError
            If the dataset exists with another measure or cap.
        LedgerIntegrityError
            If its row was changed outside the ledger.
        """
        measure = type(cap).__name__
        with self._transaction() as conn:
            self._lock_head(conn)
            row = self._row(conn, "datasets", (dataset,))
            if row is None:
                body = {"name": dataset, "measure": measure, "cap": dump(cap),
                        "privacy_unit": privacy_unit, "schema": schema,
                        "created": stamp(now())}
                seq = self._append(conn, "dataset", "datasets", (dataset,), body,
                                   body["created"])
                store.put_row(conn, self._key, "datasets", {
                    **body, "spent": dump(type(cap).zero()), "per_day": None, "seq": seq},
                    new=True)
                return cap
        stored = load(row["measure"], row["cap"])
        if row["measure"] != measure or stored != cap:
            raise LedgerError(
                f"dataset {dataset!r} is registered with lifetime cap {stored} "
                f"({row['measure']}); open it with that budget or use another dataset name")
        return stored

    def set_policy(self, dataset: str, per_day: PrivacyLoss | None) -> None:
        """Burn-rate policy: at most ``per_day`` of loss in any rolling 24 hours (None: off)."""
        with self._transaction() as conn:
            self._lock_head(conn)
            row = self._dataset(conn, dataset)
            if per_day is not None and type(per_day).__name__ != row["measure"]:
                raise LedgerError(f"the policy must be in the dataset's measure {row['measure']}")
            body = {"name": dataset, "per_day": None if per_day is None else dump(per_day)}
            seq = self._append(conn, "policy", "datasets", (dataset,), body, stamp(now()))
            store.put_row(conn, self._key, "datasets",
                          {**row, "per_day": body["per_day"], "seq": seq}, new=False)

    def add_analyst(self, name: str, token: str | None = None) -> str:
        """Create an analyst; returns their API token (only its SHA-256 is stored)."""
        token = token or secrets.token_urlsafe(32)
        with self._transaction() as conn:
            self._lock_head(conn)
            if self._row(conn, "analysts", (name,)) is not None:
                raise LedgerError(f"analyst {name!r} exists")
            body = {"name": name, "token_sha256": token_digest(token), "created": stamp(now())}
            seq = self._append(conn, "analyst", "analysts", (name,), body, body["created"])
            store.put_row(conn, self._key, "analysts", {**body, "seq": seq}, new=True)
        return token

    def rotate_token(self, name: str, token: str | None = None) -> str:
        """Give ``name`` a new API token (the old one stops working); returns it."""
        token = token or secrets.token_urlsafe(32)
        with self._transaction() as conn:
            self._lock_head(conn)
            row = self._row(conn, "analysts", (name,))
            if row is None:
                raise LedgerError(f"unknown analyst {name!r}")
            body = {"name": name, "token_sha256": token_digest(token)}
            seq = self._append(conn, "token", "analysts", (name,), body, stamp(now()))
            store.put_row(conn, self._key, "analysts",
                          {**row, "token_sha256": body["token_sha256"], "seq": seq}, new=False)
        return token

    def analyst_for_token(self, token: str) -> str | None:
        """The analyst whose token this is (compared by hash), or None — also when the
        analyst's row was changed outside the ledger (it authenticates nobody)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(store.ROW_TABLES["analysts"].c.name).where(
                store.ROW_TABLES["analysts"].c.token_sha256 == token_digest(token))).first()
            if row is None:
                return None
            try:
                self._row(conn, "analysts", (str(row[0]),))
            except LedgerIntegrityError:
                return None
        return str(row[0])

    def grant(self, analyst: str, dataset: str, cap: PrivacyLoss | None = None) -> None:
        """Let ``analyst`` spend on ``dataset``, at most ``cap`` (inside the dataset's cap)."""
        with self._transaction() as conn:
            self._lock_head(conn)
            ds = self._dataset(conn, dataset)
            if cap is not None and type(cap).__name__ != ds["measure"]:
                raise LedgerError(f"the grant must be in the dataset's measure {ds['measure']}")
            if self._row(conn, "analysts", (analyst,)) is None:
                raise LedgerError(f"unknown analyst {analyst!r}")
            key = (analyst, dataset)
            existing = self._row(conn, "grants", key)
            body = {"analyst": analyst, "dataset": dataset,
                    "cap": None if cap is None else dump(cap)}
            seq = self._append(conn, "grant", "grants", key, body, stamp(now()))
            row = existing or {"spent": dump(MEASURES[ds["measure"]].zero())}
            store.put_row(conn, self._key, "grants", {**row, **body, "seq": seq},
                          new=existing is None)

    def grant_of(self, analyst: str, dataset: str) -> dict[str, Any] | None:
        """The analyst's grant on the dataset, checked: ``{"cap": loss or None, "spent":
        loss}``, or None without a grant.

        Raises
        ------
        LedgerIntegrityError
            If the dataset's or the grant's row was changed outside the ledger.
        """
        with self.engine.connect() as conn:
            ds = self._dataset(conn, dataset)
            row = self._row(conn, "grants", (analyst, dataset))
        if row is None:
            return None
        return {"cap": None if row["cap"] is None else load(ds["measure"], row["cap"]),
                "spent": load(ds["measure"], row["spent"])}

    def add_study(self, name: str, dataset: str, description: str = "") -> None:
        """Record a study (project) that releases can be filed under."""
        with self._transaction() as conn:
            self._lock_head(conn)
            self._dataset(conn, dataset)
            if self._row(conn, "studies", (name,)) is not None:
                raise LedgerError(f"study {name!r} exists")
            body = {"name": name, "dataset": dataset, "description": description,
                    "created": stamp(now())}
            seq = self._append(conn, "study", "studies", (name,), body, body["created"])
            store.put_row(conn, self._key, "studies", {**body, "seq": seq}, new=True)

    # -- spending -----------------------------------------------------------------------
    def cap(self, dataset: str) -> PrivacyLoss:
        """The dataset's lifetime cap (checked against the chain)."""
        with self.engine.connect() as conn:
            row = self._dataset(conn, dataset)
        return load(row["measure"], row["cap"])

    def spent(self, dataset: str, analyst: str | None = None) -> PrivacyLoss:
        """Total recorded loss (every debit, released or failed), exact; per analyst if
        given."""
        with self.engine.connect() as conn:
            row = self._dataset(conn, dataset)
            if analyst is None:
                return load(row["measure"], row["spent"])
            return self._sum(conn, dataset, row["measure"], analyst=analyst)

    def debit(self, dataset: str, loss: PrivacyLoss, query: str, *,
              analyst: str | None = None, study: str | None = None,
              idempotency_key: str | None = None, noise: str | None = None) -> int:
        """Check ``loss`` against every cap and record it, atomically; returns the release id.

        Caps checked: the dataset's lifetime cap, the analyst's grant (if ``analyst``), and
        the burn-rate policy (loss in the last 24 h); each read from a row whose MAC and
        place in the chain are checked first.

        ``noise`` is the release's noise plan as text, chained with the debit and bound to
        the idempotency key; accountants write :func:`dpkit.core.record.noise_json` (older
        rows may hold free text or nothing).

        Raises
        ------
        BudgetExceededError
            If a cap would be exceeded (nothing is written).
        IdempotentReplay
            If ``idempotency_key`` already has a recorded answer for this same request
            (nothing is debited).
        IdempotencyConflictError
            If ``idempotency_key`` was first used with another request.
        LedgerIntegrityError
            If a row or link this debit depends on was changed outside the ledger.
        LedgerError
            For an unknown dataset, an analyst without a grant, or a key whose first
            attempt is still in progress.
        """
        with self._transaction() as conn:
            head, seq = self._lock_head(conn)
            moment = now()  # under the lock: release times grow with seq
            row = self._dataset(conn, dataset)
            measure = row["measure"]
            if type(loss).__name__ != measure:
                loss = convert(loss, MEASURES[measure])
            request = chain.request_digest(dataset, analyst, query, dump(loss), noise)
            if idempotency_key is not None:
                self._check_key(conn, dataset, analyst, idempotency_key, request, moment)
            cap, spent = load(measure, row["cap"]), load(measure, row["spent"])
            if not (spent + loss) <= cap:
                raise BudgetExceededError(
                    f"ledger {self.url}: dataset {dataset!r} has spent {spent} of its lifetime "
                    f"cap {cap}; this release ({loss}) would exceed it. Nothing was released.")
            grant = None if analyst is None else self._check_grant(conn, analyst, dataset,
                                                                   measure, loss)
            if row["per_day"] is not None:
                limit = load(measure, row["per_day"])
                recent = self._recent(conn, dataset, measure, moment - timedelta(days=1))
                if not (recent + loss) <= limit:
                    raise BudgetExceededError(
                        f"dataset {dataset!r}: {recent} spent in the last 24 h; this release "
                        f"({loss}) would exceed the burn-rate limit {limit} per day")
            fields = {"dataset": dataset, "analyst": analyst, "study": study,
                      "time": stamp(moment), "query": query, "measure": measure,
                      "loss": dump(loss), "noise": noise, "idempotency_key": idempotency_key,
                      "request_sha256": request, "dataset_spent": dump(spent + loss),
                      "grant_spent": None if grant is None else dump(grant["spent"]),
                      "seq": seq + 1}
            new_id = conn.execute(releases.insert().values(
                status="debited", **fields)).inserted_primary_key[0]  # type: ignore[index]
            digest = chain.link_hash(self._key, head,
                                     chain.release_body({**fields, "id": new_id}))
            conn.execute(releases.update().where(releases.c.id == new_id)
                         .values(prev_hash=head, hash=digest))
            store.put_row(conn, self._key, "datasets",
                          {**row, "spent": fields["dataset_spent"], "seq": seq + 1}, new=False)
            if grant is not None:
                store.put_row(conn, self._key, "grants",
                              {**grant["row"], "spent": fields["grant_spent"], "seq": seq + 1},
                              new=False)
            self._advance(conn, digest, seq + 1)
            return int(new_id)

    def _check_key(self, conn: Connection, dataset: str, analyst: str | None, key: str,
                   request: str, moment: datetime) -> None:
        """Replay, refuse or let through a request with an idempotency key: its first
        release must be intact and for the same request; a recorded answer is returned only
        if it matches the hash chained in its outcome."""
        prior = conn.execute(
            select(releases)
            .where((releases.c.dataset == dataset) & (releases.c.idempotency_key == key)
                   & (releases.c.analyst.is_(None) if analyst is None
                      else releases.c.analyst == analyst))
            .order_by(releases.c.id.desc())).first()
        if prior is None:
            return
        if not self._link_ok(prior, chain.release_body(prior._mapping)):
            raise self._tampered(f"release {prior.id} was edited outside the ledger")
        if prior.request_sha256 != request:
            raise IdempotencyConflictError(
                f"idempotency key {key!r} was first used for another request (release "
                f"{prior.id}: another query, loss or noise plan); use a new key for a new "
                "request. Nothing was debited.")
        last = conn.execute(select(outcomes).where(outcomes.c.release_id == prior.id)
                            .order_by(outcomes.c.seq.desc())).first()
        if last is not None and not self._link_ok(last, chain.outcome_body(last._mapping)):
            raise self._tampered(f"the outcome of release {prior.id} was edited outside the "
                                 "ledger")
        status = "debited" if last is None else last.status
        if prior.status != status:
            raise self._tampered(f"release {prior.id}: its status differs from its chained "
                                 "outcome")
        if status == "failed":
            return
        if status == "released":
            assert last is not None
            if integrity.stored_sha256(prior.result) != last.stored_sha256:
                raise self._tampered(f"release {prior.id}: its stored answer does not match "
                                     "the hash recorded in the chain; it is not replayed")
            raise _Answered(int(prior.id), self._open(prior.result), last.result_sha256)
        age = moment - datetime.fromisoformat(prior.time)
        if age < timedelta(seconds=STALE_SECONDS):
            raise LedgerError(f"idempotency key {key!r}: the first attempt (release "
                              f"{prior.id}) is still in progress; retry later")

    def _check_grant(self, conn: Connection, analyst: str, dataset: str, measure: str,
                     loss: PrivacyLoss) -> dict[str, Any]:
        """The analyst's checked grant with their spend after ``loss`` (``spent``) and the
        row (``row``); raises if the grant is missing or ``loss`` would exceed it."""
        row = self._row(conn, "grants", (analyst, dataset))
        if row is None:
            raise LedgerError(f"analyst {analyst!r} has no grant on dataset {dataset!r}")
        spent = load(measure, row["spent"])
        if row["cap"] is not None and not (spent + loss) <= load(measure, row["cap"]):
            raise BudgetExceededError(
                f"analyst {analyst!r} has spent {spent} of their cap "
                f"{load(measure, row['cap'])} on {dataset!r}; this release ({loss}) would "
                "exceed it")
        return {"row": row, "spent": spent + loss}

    def mark(self, release_id: int, status: str, result_sha256: str | None,
             result: str | None = None) -> None:
        """Record the outcome of a debited release (``released`` or ``failed``), appending a
        chained outcome link; ``result`` (the released values as text) is stored for
        idempotent replays, encrypted when the ledger has a key, and its stored form's
        SHA-256 is chained with the outcome."""
        if status not in ("released", "failed"):
            raise LedgerError(f"unknown status {status!r}")
        sealed = self._seal(result)
        with self._transaction() as conn:
            head, seq = self._lock_head(conn)
            body = {"release_id": release_id, "time": stamp(now()), "status": status,
                    "result_sha256": result_sha256,
                    "stored_sha256": integrity.stored_sha256(sealed), "seq": seq + 1}
            digest = chain.link_hash(self._key, head, chain.outcome_body(body))
            conn.execute(outcomes.insert().values(prev_hash=head, hash=digest, **body))
            conn.execute(releases.update().where(releases.c.id == release_id).values(
                status=status, result_sha256=result_sha256, result=sealed))
            self._advance(conn, digest, seq + 1)

    def _seal(self, result: str | None) -> str | None:
        if result is None or self._fernet is None:
            return result
        return "fernet:" + self._fernet.encrypt(result.encode()).decode()

    def _open(self, stored: str | None) -> str | None:
        if stored is None or not stored.startswith("fernet:"):
            return stored
        if self._fernet is None:
            raise LedgerError("the stored result is encrypted; open the ledger with its key")
        return str(self._fernet.decrypt(stored[len("fernet:"):].encode()).decode())

    # -- reading, verifying, exporting ------------------------------------------------------
    def datasets(self) -> list[dict[str, Any]]:
        """Every dataset with its cap, spend and policy, as stored (:meth:`verify` checks
        them)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(datasets).order_by(datasets.c.created)).mappings().all()
        return [{"name": r["name"], "measure": r["measure"], "cap": load(r["measure"], r["cap"]),
                 "privacy_unit": r["privacy_unit"], "created": r["created"],
                 "spent": load(r["measure"], r["spent"]),
                 "per_day": None if r["per_day"] is None else load(r["measure"], r["per_day"])}
                for r in rows]

    def releases(self, dataset: str | None = None, analyst: str | None = None
                 ) -> list[dict[str, Any]]:
        """Release rows (oldest first), optionally for one dataset and/or analyst."""
        query = select(releases).order_by(releases.c.id)
        if dataset is not None:
            query = query.where(releases.c.dataset == dataset)
        if analyst is not None:
            query = query.where(releases.c.analyst == analyst)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [{"id": r["id"], "dataset": r["dataset"], "analyst": r["analyst"],
                 "study": r["study"], "time": r["time"], "query": r["query"],
                 "loss": load(r["measure"], r["loss"]), "noise": r["noise"],
                 "status": r["status"], "result_sha256": r["result_sha256"],
                 "idempotency_key": r["idempotency_key"], "hash": r["hash"]} for r in rows]

    def head(self) -> str:
        """The chain head (keep a copy elsewhere to detect a rewritten chain)."""
        with self.engine.connect() as conn:
            return str(conn.execute(select(meta.c.value).where(meta.c.key == "chain_head")
                                    ).scalar_one())

    def verify(self, head: str | None = None) -> list[str]:
        """Check the whole ledger against its keyed chain (:mod:`dpkit.ledger.integrity`):
        every link, the head, and every dataset, policy, analyst, grant, study, release
        status, result hash and stored answer; return the problems, each naming what is
        wrong (empty when the ledger is intact). ``head``: a previously saved chain head
        that must still be on the chain."""
        with self.engine.connect() as conn:
            return integrity.verify(conn, self._key, head)

    def export(self) -> dict[str, Any]:
        """Everything but tokens and stored results, as JSON-ready data (losses as exact
        strings)."""
        def plain(loss: PrivacyLoss) -> dict[str, str]:
            return {k: str(v) for k, v in loss.as_dict().items()}

        return {
            "schema_version": SCHEMA_VERSION,
            "chain_head": self.head(),
            "datasets": [{**d, "cap": plain(d["cap"]), "spent": plain(d["spent"]),
                          "per_day": None if d["per_day"] is None else plain(d["per_day"])}
                         for d in self.datasets()],
            "releases": [{**r, "loss": plain(r["loss"])} for r in self.releases()],
        }

    def count(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(releases)).scalar_one())

    def dispose(self) -> None:
        """Close pooled connections (e.g. before forking worker processes)."""
        self.engine.dispose()
