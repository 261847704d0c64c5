"""The ledger's tables (SQLAlchemy Core) and their versioned migrations.

Version 1 (dpkit 0.1) had ``meta``, ``datasets`` and ``releases``. Version 2 adds analysts,
their per-dataset grants (caps), studies, burn-rate policies, the running spend, idempotency
keys, stored results, noise scales and the hash chain (``seq``, ``prev_hash``, ``hash`` on
releases and on the append-only ``outcomes`` table). Version 3 keys the chain (HMAC) and
extends it to everything that decides a spend or an answer: the append-only ``events`` table
(administrative changes), the running totals and the request hash in each release link, the
hash of the stored answer in each outcome link, and a ``seq`` and a MAC on every mutable row
(:mod:`dpkit.ledger.chain`). Version 4 makes every check-and-debit O(1) in the size of the
ledger: the burn-rate window's running total on the dataset row (``window_minute``,
``window_spent``, signed with it) and the ``burn`` table of per-minute buckets
(:mod:`dpkit.ledger.window`), computed once from the releases when a version-3 ledger is
opened (:func:`dpkit.ledger.window.upgrade`), the ``checkpoints`` table (signed states for an
incremental ``verify``, :mod:`dpkit.ledger.checkpoint`), and indexes on the ``seq`` of releases and
outcomes (``verify`` streams the chain in order). Version 5 adds the ``streams`` table: a
continual release's step high-water mark as a MAC-signed row carrying the ``seq`` of its last
``stream`` link (it was the newest remaining link, which deleting links rolled back), built
once from the chain when a version-4 ledger is opened, after checking every link
(:func:`dpkit.ledger.integrity.upgrade_marks`). Version 6 adds no table: it adds the
``migrate`` event (:mod:`dpkit.ledger.entries`: a dataset's entry retired and a new one
opened under its name), which an older dpkit's ``verify`` would report as an unknown event;
the version number makes that dpkit refuse the ledger instead. Migrations run in one
transaction on open and are recorded in ``meta.schema_version``; the ledger then rebuilds the
chain (:mod:`dpkit.ledger.rechain`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Column,
    Connection,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    text,
)

__all__ = ["METADATA", "SCHEMA_VERSION", "migrate", "meta", "datasets", "analysts", "grants",
           "studies", "releases", "outcomes", "events", "burn", "checkpoints", "streams"]

SCHEMA_VERSION = 6
METADATA = MetaData()

meta = Table("meta", METADATA, Column("key", String(64), primary_key=True),
             Column("value", Text, nullable=False))

datasets = Table(
    "datasets", METADATA,
    Column("name", String(255), primary_key=True),
    Column("measure", String(16), nullable=False),
    Column("cap", Text, nullable=False),
    Column("privacy_unit", Text, nullable=False),
    Column("schema", Text, nullable=False),
    Column("created", String(32), nullable=False),
    Column("spent", Text),  # running total, exact JSON (checked by verify)
    Column("per_day", Text),  # burn-rate policy: at most this loss per rolling 24 h
    Column("seq", Integer),  # the last link that changed this row
    Column("mac", String(64)),  # chain.row_mac over the fields above
    Column("window_minute", Integer),  # burn-rate window: ledger minute of the last debit
    Column("window_spent", Text),  # the sum of its buckets in the window (window.py)
)

analysts = Table(
    "analysts", METADATA,
    Column("name", String(255), primary_key=True),
    Column("token_sha256", String(64), unique=True),
    Column("created", String(32), nullable=False),
    Column("seq", Integer),
    Column("mac", String(64)),
)

grants = Table(
    "grants", METADATA,
    Column("analyst", String(255), ForeignKey("analysts.name"), primary_key=True),
    Column("dataset", String(255), ForeignKey("datasets.name"), primary_key=True),
    Column("cap", Text),  # None: only the dataset's cap applies
    Column("spent", Text, nullable=False),
    Column("seq", Integer),
    Column("mac", String(64)),
)

studies = Table(
    "studies", METADATA,
    Column("name", String(255), primary_key=True),
    Column("dataset", String(255), ForeignKey("datasets.name"), nullable=False),
    Column("description", Text, nullable=False),
    Column("created", String(32), nullable=False),
    Column("seq", Integer),
    Column("mac", String(64)),
)

releases = Table(
    "releases", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset", String(255), ForeignKey("datasets.name"), nullable=False),
    Column("time", String(32), nullable=False),
    Column("query", Text, nullable=False),
    Column("measure", String(16), nullable=False),
    Column("loss", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("result_sha256", String(64)),
    Column("analyst", String(255)),
    Column("study", String(255)),
    Column("noise", Text),
    Column("idempotency_key", String(255)),
    Column("result", Text),
    Column("seq", Integer),
    Column("prev_hash", String(64)),
    Column("hash", String(64)),
    Column("request_sha256", String(64)),  # chain.request_digest: binds the idempotency key
    Column("dataset_spent", Text),  # the dataset's running total after this debit
    Column("grant_spent", Text),  # the analyst's running total on the dataset after it
)
Index("releases_idempotency", releases.c.dataset, releases.c.analyst,
      releases.c.idempotency_key)
Index("releases_dataset_seq", releases.c.dataset, releases.c.seq)
Index("releases_grant_seq", releases.c.dataset, releases.c.analyst, releases.c.seq)
Index("releases_seq", releases.c.seq)

outcomes = Table(
    "outcomes", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("release_id", Integer, ForeignKey("releases.id"), nullable=False),
    Column("time", String(32), nullable=False),
    Column("status", String(16), nullable=False),
    Column("result_sha256", String(64)),
    Column("seq", Integer, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    Column("stored_sha256", String(64)),  # SHA-256 of releases.result as stored (sealed)
)
Index("outcomes_release", outcomes.c.release_id, outcomes.c.seq)
Index("outcomes_seq", outcomes.c.seq)

events = Table(
    "events", METADATA,
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), nullable=False),
    Column("subject", Text, nullable=False),  # chain.subject: the row it changes
    Column("time", String(32), nullable=False),
    Column("body", Text, nullable=False),  # canonical JSON
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
)
Index("events_subject", events.c.subject, events.c.seq)

burn = Table(  # burn-rate buckets: the exact loss debited per dataset and ledger minute
    "burn", METADATA,
    Column("dataset", String(255), primary_key=True),
    Column("minute", Integer, primary_key=True, autoincrement=False),
    Column("spent", Text, nullable=False),  # raw componentwise sum (window.text)
    Column("mac", String(64), nullable=False),  # chain.bucket_mac
)

checkpoints = Table(  # signed states of the chain for an incremental verify (checkpoint.py)
    "checkpoints", METADATA,
    Column("seq", Integer, primary_key=True, autoincrement=False),  # its last link
    Column("time", String(32), nullable=False),
    Column("state", Text, nullable=False),  # canonical JSON
    Column("mac", String(64), nullable=False),  # chain.checkpoint_mac
)

streams = Table(  # a continual release's step high-water mark (version 5)
    "streams", METADATA,
    Column("release_id", Integer, primary_key=True, autoincrement=False),  # its paid release
    Column("step", Integer, nullable=False),  # the last step released
    Column("state", Text),  # the MAC of the state it was released from (None: not given)
    Column("seq", Integer, nullable=False),  # its last stream link (an event)
    Column("mac", String(64), nullable=False),  # chain.row_mac over the fields above
)

# columns added by version 3 to tables that may already exist
_V3_COLUMNS = {
    "datasets": (("seq", "INTEGER"), ("mac", "VARCHAR(64)")),
    "analysts": (("seq", "INTEGER"), ("mac", "VARCHAR(64)")),
    "grants": (("seq", "INTEGER"), ("mac", "VARCHAR(64)")),
    "studies": (("seq", "INTEGER"), ("mac", "VARCHAR(64)")),
    "releases": (("request_sha256", "VARCHAR(64)"), ("dataset_spent", "TEXT"),
                 ("grant_spent", "TEXT")),
    "outcomes": (("stored_sha256", "VARCHAR(64)"),),
}


def _version(conn: Connection) -> int:
    if not inspect(conn).has_table("meta"):
        return 0
    row = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).first()
    return int(row[0]) if row else 0


def _v1_to_v2(conn: Connection) -> None:
    """Add the version-2 columns to a dpkit 0.1 SQLite ledger; the chain over its existing
    releases is built by the ledger right after (see ``Ledger._rebuild_chain``)."""
    for column, kind in (("spent", "TEXT"), ("per_day", "TEXT")):
        conn.execute(text(f"ALTER TABLE datasets ADD COLUMN {column} {kind}"))
    for column, kind in (("analyst", "VARCHAR(255)"), ("study", "VARCHAR(255)"),
                         ("noise", "TEXT"), ("idempotency_key", "VARCHAR(255)"),
                         ("result", "TEXT"), ("seq", "INTEGER"),
                         ("prev_hash", "VARCHAR(64)"), ("hash", "VARCHAR(64)")):
        conn.execute(text(f"ALTER TABLE releases ADD COLUMN {column} {kind}"))


def _v2_to_v3(conn: Connection) -> None:
    """Add the version-3 columns to the tables that exist (a version-1 ledger has no
    analysts, grants, studies or outcomes yet: ``create_all`` makes them whole); the keyed
    chain over the existing rows is built by the ledger right after
    (:func:`dpkit.ledger.rechain.rechain`)."""
    inspector = inspect(conn)
    for table, columns in _V3_COLUMNS.items():
        if not inspector.has_table(table):
            continue
        present = {c["name"] for c in inspector.get_columns(table)}
        for column, kind in columns:
            if column not in present:
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))


def _v3_to_v4(conn: Connection) -> None:
    """Add the burn-rate window's columns to ``datasets`` (the ``burn`` table and the new
    indexes are created after); the ledger then computes the totals from the releases once
    (:func:`dpkit.ledger.window.upgrade`)."""
    present = {c["name"] for c in inspect(conn).get_columns("datasets")}
    for column, kind in (("window_minute", "INTEGER"), ("window_spent", "TEXT")):
        if column not in present:
            conn.execute(text(f"ALTER TABLE datasets ADD COLUMN {column} {kind}"))


def _v4_to_v5(conn: Connection) -> None:
    """Nothing to alter: the ``streams`` table is new (created after); the ledger then fills
    it from the chain (:func:`dpkit.ledger.integrity.upgrade_marks`)."""


def _v5_to_v6(conn: Connection) -> None:
    """Nothing to alter: version 6 adds the ``migrate`` event kind to the ``events`` table
    (:mod:`dpkit.ledger.entries`); a version-5 ledger's rows and links stay as they are."""


_MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3,
                                                        3: _v3_to_v4, 4: _v4_to_v5,
                                                        5: _v5_to_v6}


def migrate(conn: Connection) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; returns the version found on disk."""
    found = _version(conn)
    if found > SCHEMA_VERSION:
        raise RuntimeError(f"ledger schema {found} is newer than this dpkit ({SCHEMA_VERSION})")
    for version in range(max(found, 1), SCHEMA_VERSION):
        if found:
            _MIGRATIONS[version](conn)
    METADATA.create_all(conn)  # new tables (and everything, for a new ledger)
    # a prefix of releases_dataset_seq, so redundant: one page less written per debit
    conn.exec_driver_sql('DROP INDEX IF EXISTS "releases_dataset"')
    if found:
        for table in METADATA.sorted_tables:  # indexes new in this version, on old tables
            for index in table.indexes:
                index.create(conn, checkfirst=True)
    if found == 0:
        conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
    else:
        conn.execute(meta.update().where(meta.c.key == "schema_version")
                     .values(value=str(SCHEMA_VERSION)))
    return found
