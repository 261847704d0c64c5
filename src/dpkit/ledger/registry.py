"""The epsilon registry (Dwork & Roth §13.1): a persistent record of every privacy loss.

Storage through SQLAlchemy: a SQLite file by default, PostgreSQL by URL
(``postgresql+psycopg://user@host/db``). Entities: datasets (measure, lifetime cap, privacy
unit, schema, burn-rate policy), analysts (hashed API tokens) with per-dataset grants (caps
inside the dataset's), studies, releases (who, when, canonical query, exact loss, noise
scales, result hash, optionally the stored result) and their outcomes.

Guarantees
----------
- Check-and-debit is one transaction that first takes the ledger's write lock (SQLite
  ``BEGIN IMMEDIATE``; PostgreSQL ``SELECT … FOR UPDATE`` on the chain head), so concurrent
  processes and machines serialise and no interleaving overruns a cap. The debit is written
  *before* any noise is drawn; a release that fails later is marked ``failed`` and its loss
  still counts. A crash between debit and response never refunds.
- An idempotency key makes a retried request get the recorded answer (the stored result)
  instead of fresh noise; a key whose first attempt never recorded an answer (it failed, or
  crashed more than ``STALE_SECONDS`` ago) debits again, since nothing was released.
- The log is append-only and hash-chained (:mod:`dpkit.ledger.chain`); :meth:`verify`
  recomputes the chain and the running totals.
- Losses compose in the dataset's measure exactly (Fractions; basic composition).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, select

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, convert
from dpkit.errors import BudgetExceededError, IdempotentReplay, LedgerError
from dpkit.ledger import chain
from dpkit.ledger.schema import (
    SCHEMA_VERSION,
    analysts,
    datasets,
    grants,
    meta,
    migrate,
    outcomes,
    releases,
    studies,
)

__all__ = ["Ledger", "IdempotentReplay", "SCHEMA_VERSION", "STALE_SECONDS"]

_MEASURES: dict[str, type[PrivacyLoss]] = {"PureDP": PureDP, "ApproxDP": ApproxDP, "ZCDP": ZCDP}
STALE_SECONDS = 300  # a debited attempt with no outcome after this long counts as crashed


def _dump(loss: PrivacyLoss) -> str:
    return json.dumps(loss.as_dict(), sort_keys=True)


def _load(measure: str, textual: str) -> PrivacyLoss:
    fields = {k: Fraction(v) for k, v in json.loads(textual).items()}
    return _MEASURES[measure](**fields)


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(t: datetime) -> str:
    return t.isoformat(timespec="microseconds")


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

    Raises
    ------
    LedgerError
        If the schema on disk is newer than this dpkit.
    """

    def __init__(self, location: str | Path, *, encryption_key: bytes | None = None) -> None:
        self.engine, self.url = _engine(location)
        self.path = location
        self._fernet: Any = None
        if encryption_key is not None:
            from cryptography.fernet import Fernet

            self._fernet = Fernet(encryption_key)
        try:
            with self._transaction() as conn:
                found = migrate(conn)
                if conn.execute(select(meta.c.value).where(meta.c.key == "chain_head")
                                ).first() is None:
                    conn.execute(meta.insert(), [{"key": "chain_head", "value": chain.GENESIS},
                                                 {"key": "chain_seq", "value": "0"}])
                if found == 1:
                    self._rebuild_after_migration(conn)
        except RuntimeError as exc:
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

    def _rebuild_after_migration(self, conn: Connection) -> None:
        """Chain a version-1 ledger's releases (oldest first, each followed by its outcome)
        and fill the running totals."""
        head, seq = chain.GENESIS, 0
        for row in conn.execute(select(releases).order_by(releases.c.id)).mappings().all():
            seq += 1
            body = chain.release_body({**row, "seq": seq})
            digest = chain.link_hash(head, body)
            conn.execute(releases.update().where(releases.c.id == row["id"])
                         .values(seq=seq, prev_hash=head, hash=digest))
            head = digest
            if row["status"] in ("released", "failed"):
                seq += 1
                outcome = {"release_id": row["id"], "time": row["time"],
                           "status": row["status"], "result_sha256": row["result_sha256"],
                           "seq": seq}
                digest = chain.link_hash(head, chain.outcome_body(outcome))
                conn.execute(outcomes.insert().values(prev_hash=head, hash=digest, **outcome))
                head = digest
        self._advance(conn, head, seq)
        for name, measure in conn.execute(select(datasets.c.name, datasets.c.measure)).all():
            conn.execute(datasets.update().where(datasets.c.name == name)
                         .values(spent=_dump(self._sum(conn, name, measure))))

    def _sum(self, conn: Connection, dataset: str, measure: str,
             analyst: str | None = None, since: datetime | None = None) -> PrivacyLoss:
        query = select(releases.c.measure, releases.c.loss, releases.c.time).where(
            releases.c.dataset == dataset)
        if analyst is not None:
            query = query.where(releases.c.analyst == analyst)
        total = _MEASURES[measure].zero()
        for m, loss, when in conn.execute(query):
            if since is None or datetime.fromisoformat(when) >= since:
                total = total + _load(m, loss)
        return total

    def _dataset(self, conn: Connection, name: str) -> Any:
        row = conn.execute(select(datasets).where(datasets.c.name == name)).mappings().first()
        if row is None:
            raise LedgerError(f"unknown dataset {name!r}")
        return row

    # -- datasets, analysts, studies, policies ----------------------------------------------
    def register(self, dataset: str, cap: PrivacyLoss, privacy_unit: str = "rows",
                 schema: str = "") -> PrivacyLoss:
        """Register ``dataset`` with a lifetime ``cap`` (or check an existing registration).

        Raises
        ------
        LedgerError
            If the dataset exists with another measure or cap.
        """
        measure = type(cap).__name__
        with self._transaction() as conn:
            row = conn.execute(select(datasets.c.measure, datasets.c.cap)
                               .where(datasets.c.name == dataset)).first()
            if row is None:
                conn.execute(datasets.insert().values(
                    name=dataset, measure=measure, cap=_dump(cap), privacy_unit=privacy_unit,
                    schema=schema, created=_stamp(_now()), spent=_dump(type(cap).zero())))
                return cap
        stored = _load(row[0], row[1])
        if row[0] != measure or stored != cap:
            raise LedgerError(
                f"dataset {dataset!r} is registered with lifetime cap {stored} "
                f"({row[0]}); open it with that budget or use another dataset name")
        return stored

    def set_policy(self, dataset: str, per_day: PrivacyLoss | None) -> None:
        """Burn-rate policy: at most ``per_day`` of loss in any rolling 24 hours (None: off)."""
        with self._transaction() as conn:
            row = self._dataset(conn, dataset)
            if per_day is not None and type(per_day).__name__ != row["measure"]:
                raise LedgerError(f"the policy must be in the dataset's measure {row['measure']}")
            conn.execute(datasets.update().where(datasets.c.name == dataset).values(
                per_day=None if per_day is None else _dump(per_day)))

    def add_analyst(self, name: str, token: str | None = None) -> str:
        """Create an analyst; returns their API token (only its SHA-256 is stored)."""
        token = token or secrets.token_urlsafe(32)
        with self._transaction() as conn:
            if conn.execute(select(analysts.c.name).where(analysts.c.name == name)).first():
                raise LedgerError(f"analyst {name!r} exists")
            conn.execute(analysts.insert().values(name=name, token_sha256=token_digest(token),
                                                  created=_stamp(_now())))
        return token

    def analyst_for_token(self, token: str) -> str | None:
        """The analyst whose token this is (compared by hash), or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(analysts.c.name).where(
                analysts.c.token_sha256 == token_digest(token))).first()
        return None if row is None else str(row[0])

    def grant(self, analyst: str, dataset: str, cap: PrivacyLoss | None = None) -> None:
        """Let ``analyst`` spend on ``dataset``, at most ``cap`` (inside the dataset's cap)."""
        with self._transaction() as conn:
            row = self._dataset(conn, dataset)
            if cap is not None and type(cap).__name__ != row["measure"]:
                raise LedgerError(f"the grant must be in the dataset's measure {row['measure']}")
            values = {"cap": None if cap is None else _dump(cap)}
            existing = conn.execute(select(grants.c.analyst).where(
                (grants.c.analyst == analyst) & (grants.c.dataset == dataset))).first()
            if existing:
                match = (grants.c.analyst == analyst) & (grants.c.dataset == dataset)
                conn.execute(grants.update().where(match).values(**values))
            else:
                conn.execute(grants.insert().values(
                    analyst=analyst, dataset=dataset, spent=_dump(
                        _MEASURES[row["measure"]].zero()), **values))

    def add_study(self, name: str, dataset: str, description: str = "") -> None:
        """Record a study (project) that releases can be filed under."""
        with self._transaction() as conn:
            self._dataset(conn, dataset)
            conn.execute(studies.insert().values(name=name, dataset=dataset,
                                                 description=description,
                                                 created=_stamp(_now())))

    # -- spending -----------------------------------------------------------------------
    def cap(self, dataset: str) -> PrivacyLoss:
        with self.engine.connect() as conn:
            row = self._dataset(conn, dataset)
        return _load(row["measure"], row["cap"])

    def spent(self, dataset: str, analyst: str | None = None) -> PrivacyLoss:
        """Total recorded loss (every debit, released or failed), exact; per analyst if
        given."""
        with self.engine.connect() as conn:
            row = self._dataset(conn, dataset)
            if analyst is None:
                return _load(row["measure"], row["spent"])
            return self._sum(conn, dataset, row["measure"], analyst=analyst)

    def debit(self, dataset: str, loss: PrivacyLoss, query: str, *,
              analyst: str | None = None, study: str | None = None,
              idempotency_key: str | None = None, noise: str | None = None) -> int:
        """Check ``loss`` against every cap and record it, atomically; returns the release id.

        Caps checked: the dataset's lifetime cap, the analyst's grant (if ``analyst``), and
        the burn-rate policy (loss in the last 24 h).

        Raises
        ------
        BudgetExceededError
            If a cap would be exceeded (nothing is written).
        IdempotentReplay
            If ``idempotency_key`` already has a recorded answer (nothing is debited).
        LedgerError
            For an unknown dataset, an analyst without a grant, or a key whose first
            attempt is still in progress.
        """
        now = _now()
        with self._transaction() as conn:
            head, seq = self._lock_head(conn)
            row = self._dataset(conn, dataset)
            measure = row["measure"]
            if type(loss).__name__ != measure:
                loss = convert(loss, _MEASURES[measure])
            if idempotency_key is not None:
                self._check_key(conn, dataset, analyst, idempotency_key, now)
            cap, spent = _load(measure, row["cap"]), _load(measure, row["spent"])
            if not (spent + loss) <= cap:
                raise BudgetExceededError(
                    f"ledger {self.url}: dataset {dataset!r} has spent {spent} of its lifetime "
                    f"cap {cap}; this release ({loss}) would exceed it. Nothing was released.")
            if analyst is not None:
                self._check_grant(conn, analyst, dataset, measure, loss)
            if row["per_day"] is not None:
                limit = _load(measure, row["per_day"])
                recent = self._sum(conn, dataset, measure, since=now - timedelta(days=1))
                if not (recent + loss) <= limit:
                    raise BudgetExceededError(
                        f"dataset {dataset!r}: {recent} spent in the last 24 h; this release "
                        f"({loss}) would exceed the burn-rate limit {limit} per day")
            fields = {"dataset": dataset, "analyst": analyst, "study": study,
                      "time": _stamp(now), "query": query, "measure": measure,
                      "loss": _dump(loss), "noise": noise, "idempotency_key": idempotency_key,
                      "seq": seq + 1}
            new_id = conn.execute(releases.insert().values(
                status="debited", **fields)).inserted_primary_key[0]  # type: ignore[index]
            digest = chain.link_hash(head, chain.release_body({**fields, "id": new_id}))
            conn.execute(releases.update().where(releases.c.id == new_id)
                         .values(prev_hash=head, hash=digest))
            conn.execute(datasets.update().where(datasets.c.name == dataset)
                         .values(spent=_dump(spent + loss)))
            self._advance(conn, digest, seq + 1)
            return int(new_id)

    def _check_key(self, conn: Connection, dataset: str, analyst: str | None, key: str,
                   now: datetime) -> None:
        prior = conn.execute(
            select(releases.c.id, releases.c.status, releases.c.result, releases.c.time)
            .where((releases.c.dataset == dataset) & (releases.c.idempotency_key == key)
                   & (releases.c.analyst.is_(None) if analyst is None
                      else releases.c.analyst == analyst))
            .order_by(releases.c.id.desc())).first()
        if prior is None or prior.status == "failed":
            return
        if prior.status == "released":
            raise IdempotentReplay(int(prior.id), self._open(prior.result))
        age = now - datetime.fromisoformat(prior.time)
        if age < timedelta(seconds=STALE_SECONDS):
            raise LedgerError(f"idempotency key {key!r}: the first attempt (release "
                              f"{prior.id}) is still in progress; retry later")

    def _check_grant(self, conn: Connection, analyst: str, dataset: str, measure: str,
                     loss: PrivacyLoss) -> None:
        row = conn.execute(select(grants).where((grants.c.analyst == analyst)
                                                & (grants.c.dataset == dataset))
                           ).mappings().first()
        if row is None:
            raise LedgerError(f"analyst {analyst!r} has no grant on dataset {dataset!r}")
        spent = _load(measure, row["spent"])
        if row["cap"] is not None and not (spent + loss) <= _load(measure, row["cap"]):
            raise BudgetExceededError(
                f"analyst {analyst!r} has spent {spent} of their cap "
                f"{_load(measure, row['cap'])} on {dataset!r}; this release ({loss}) would "
                "exceed it")
        conn.execute(grants.update().where((grants.c.analyst == analyst)
                                           & (grants.c.dataset == dataset))
                     .values(spent=_dump(spent + loss)))

    def mark(self, release_id: int, status: str, result_sha256: str | None,
             result: str | None = None) -> None:
        """Record the outcome of a debited release (``released`` or ``failed``), appending a
        chained outcome link; ``result`` (the released values as text) is stored for
        idempotent replays, encrypted when the ledger has a key."""
        if status not in ("released", "failed"):
            raise LedgerError(f"unknown status {status!r}")
        with self._transaction() as conn:
            head, seq = self._lock_head(conn)
            now = _stamp(_now())
            body = {"release_id": release_id, "time": now, "status": status,
                    "result_sha256": result_sha256, "seq": seq + 1}
            digest = chain.link_hash(head, chain.outcome_body(body))
            conn.execute(outcomes.insert().values(prev_hash=head, hash=digest, **body))
            conn.execute(releases.update().where(releases.c.id == release_id).values(
                status=status, result_sha256=result_sha256, result=self._seal(result)))
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
        """Every dataset with its cap, spend and policy."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(datasets).order_by(datasets.c.created)).mappings().all()
        return [{"name": r["name"], "measure": r["measure"], "cap": _load(r["measure"], r["cap"]),
                 "privacy_unit": r["privacy_unit"], "created": r["created"],
                 "spent": _load(r["measure"], r["spent"]),
                 "per_day": None if r["per_day"] is None else _load(r["measure"], r["per_day"])}
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
                 "loss": _load(r["measure"], r["loss"]), "noise": r["noise"],
                 "status": r["status"], "result_sha256": r["result_sha256"],
                 "idempotency_key": r["idempotency_key"], "hash": r["hash"]} for r in rows]

    def head(self) -> str:
        """The chain head (keep a copy elsewhere to detect a rewritten chain)."""
        with self.engine.connect() as conn:
            return str(conn.execute(select(meta.c.value).where(meta.c.key == "chain_head")
                                    ).scalar_one())

    def verify(self, head: str | None = None) -> list[str]:
        """Recompute the hash chain and the running totals; return the problems (empty when
        the ledger is intact). ``head``: a previously saved chain head that must still be on
        the chain."""
        with self.engine.connect() as conn:
            rel = conn.execute(select(releases)).mappings().all()
            out = conn.execute(select(outcomes)).mappings().all()
            links = sorted(
                [(chain.release_body(dict(r)), r["prev_hash"], r["hash"]) for r in rel]
                + [(chain.outcome_body(dict(o)), o["prev_hash"], o["hash"]) for o in out],
                key=lambda link: link[0]["seq"] or 0)
            problems = chain.verify_links(links)
            stored_head = conn.execute(select(meta.c.value).where(
                meta.c.key == "chain_head")).scalar_one()
            if links and links[-1][2] != stored_head:
                problems.append("the stored chain head is not the last link (truncated log)")
            if head is not None and head not in {link[2] for link in links}:
                problems.append("the saved head is not on the chain (rewritten history)")
            latest: dict[int, Any] = {}
            for o in sorted(out, key=lambda o: o["seq"]):
                latest[o["release_id"]] = o
            for r in rel:
                last = latest.get(r["id"])
                status = last["status"] if last else "debited"
                if r["status"] != status or (last and r["result_sha256"] != last["result_sha256"]):
                    problems.append(f"release {r['id']}: status/result differ from its "
                                    "chained outcome")
            for d in conn.execute(select(datasets)).mappings().all():
                if _load(d["measure"], d["spent"]) != self._sum(conn, d["name"], d["measure"]):
                    problems.append(f"dataset {d['name']!r}: running total differs from the "
                                    "sum of its releases")
        return problems

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

