"""The burn-rate window: per-minute buckets of loss and a running 24 h total, kept on write.

Each dataset row carries ``window_minute`` (the *ledger minute* of its last debit) and
``window_spent`` (the exact sum of its buckets from ``window_minute − 1440`` to
``window_minute``); the ``burn`` table holds one row per dataset and minute with the exact sum
of the losses debited in it, MAC-signed (:func:`dpkit.ledger.chain.bucket_mac`).

The ledger minute of a debit is ``M = max(previous M, ⌊t / 60 s⌋)`` for its time ``t``: it
never goes back, so a clock stepped backwards cannot move a loss out of the window early.
A debit at time ``t`` is checked against the buckets ``M − 1440 … M``: they hold every
release made at or after ``t − 24 h`` (a release at ``s ≥ t − 24 h`` sits in a bucket
``≥ ⌊s / 60 s⌋ ≥ ⌊t / 60 s⌋ − 1440``) plus at most the part of one minute before that. The
window is rounded *outward*, never inward: the check can only count more loss than the
exact rolling 24 h, never less. When ``M`` moves forward, the buckets that leave the window
(each once) are subtracted: amortised O(1) work per debit, whatever the ledger's size.

Totals are raw componentwise sums of exact Fractions (for (ε, δ): δ is *not* capped at 1
while summing, so subtracting an expired bucket is exact); :func:`as_loss` turns a sum into
a loss, capping δ at 1 as composition does. Used by the ledger (:mod:`dpkit.ledger.registry`)
and replayed by ``verify`` (:mod:`dpkit.ledger.integrity`), which re-derives every bucket and
window total from the chained releases and compares.
"""

from __future__ import annotations

import hmac
import json
import re
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any, cast

from sqlalchemy import Connection, select

from dpkit.core.measures import PrivacyLoss
from dpkit.errors import LedgerError
from dpkit.ledger import chain, codec, store
from dpkit.ledger.codec import MEASURES
from dpkit.ledger.schema import burn, datasets, releases

__all__ = ["SPAN", "Raw", "Tracker", "minute_of", "raw", "text", "add", "sub", "compose",
           "within", "as_loss", "text_of_pairs",
           "expiry", "upgrade", "write_buckets"]

SPAN = 24 * 60  # minutes: the window holds the buckets M − SPAN … M
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Raw = dict[str, Fraction]


def minute_of(moment: datetime | str) -> int:
    """The minute (since 1970-01-01 UTC, rounded down) of a time or an ISO 8601 stamp (UTC
    if it has no zone)."""
    when = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    if when.tzinfo is None:  # a stamp without a zone (older ledgers): UTC
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // timedelta(minutes=1)


def raw(textual: str) -> Raw:
    """The exact fields of a loss or a sum written by :func:`text` or ``codec.dump``."""
    return {k: Fraction(v) for k, v in json.loads(textual).items()}


_TEXT = json.JSONEncoder(sort_keys=True)  # what json.dumps(…, sort_keys=True) writes


def text(total: Raw) -> str:
    """A sum as exact JSON (the same form as ``codec.dump``)."""
    return _TEXT.encode({k: str(v) for k, v in total.items()})


def text_of_pairs(fields: dict[str, tuple[int, int]]) -> str:
    """:func:`text` of a sum given as reduced (numerator, denominator) pairs (the same
    characters as ``str(Fraction)`` writes)."""
    if not fields.keys() <= _FIELDS:  # not a loss's own fields: let the encoder quote them
        return _TEXT.encode({k: f"{n}/{d}" if d != 1 else str(n)
                             for k, (n, d) in fields.items()})
    return "{" + ", ".join(f'"{k}": "{n}/{d}"' if d != 1 else f'"{k}": "{n}"'
                           for k, (n, d) in sorted(fields.items())) + "}"


_FIELDS = frozenset({"epsilon", "delta", "rho"})  # plain names: no JSON escaping needed


def add(a: Raw, b: Raw) -> Raw:
    """Field-wise exact sum of two raw losses (missing fields are 0)."""
    return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in a.keys() | b.keys()}


def sub(a: Raw, b: Raw) -> Raw:
    """Field-wise exact difference ``a − b`` of two raw losses (missing fields are 0)."""
    return {k: a.get(k, Fraction(0)) - b.get(k, Fraction(0)) for k in a.keys() | b.keys()}


def compose(total: Raw, loss: Raw) -> Raw:
    """``total`` after ``loss`` in one measure, exactly as the measures compose it (basic
    composition; δ capped at 1), on the raw fields: what ``codec.dump(total + loss)``
    writes is ``text(compose(…))``."""
    summed = add(total, loss)
    if "delta" in summed:
        summed["delta"] = min(Fraction(1), summed["delta"])
    return summed


def within(total: Raw, cap: Raw) -> bool:
    """Whether ``total`` is within ``cap``, both in one measure: every field within (the
    order of :class:`~dpkit.core.measures.PrivacyLoss` within a measure)."""
    if total.keys() != cap.keys():
        raise ValueError("within() compares the fields of one measure")
    return all(total[k] <= cap[k] for k in total)


def as_loss(measure: str, total: Raw) -> PrivacyLoss:
    """The loss a sum stands for (δ capped at 1, as composition caps it)."""
    fields = dict(total)
    if "delta" in fields:
        fields["delta"] = min(Fraction(1), fields["delta"])
    return MEASURES[measure](**fields)


def expiry(previous: int | None, minute: int) -> tuple[int, tuple[int, int] | None, bool]:
    """Move the window from ledger minute ``previous`` (None: no debit yet) to a debit at
    clock minute ``minute``: returns the new ledger minute, the inclusive range of bucket
    minutes that leave the window (None: none), and whether every bucket left (the total
    restarts from zero)."""
    if previous is None:
        return minute, None, True
    current = max(previous, minute)
    if current == previous:
        return current, None, False
    if current - previous > SPAN:
        return current, None, True
    return current, (previous - SPAN, current - SPAN - 1), False


_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d)(?::\d\d(?:\.\d+)?)?(Z|[+-]\d\d:\d\d)?$")


class Tracker:
    """The windows and buckets that a sequence of debits implies, replayed in ``seq`` order
    by the same rule as the ledger applies on write (used by ``verify`` and by the
    version-3 migration). ``minute[d]``, ``total[d]``: dataset ``d``'s ledger minute and
    window total; ``buckets[(d, m)]``: the sum debited in minute ``m``.

    A debit only counts its loss's text in its bucket (``verify`` replays 10⁶ releases:
    no exact arithmetic per debit); the sums are taken when ``buckets`` or ``total`` is
    read. The window total is then the sum of the buckets ``M − SPAN … M``, which is what
    the ledger's running total (add each debit, subtract each bucket that leaves) equals.
    """

    def __init__(self) -> None:
        self.minute: dict[str, int] = {}
        self._total: dict[str, Raw] = {}
        self._buckets: dict[tuple[str, int], Raw] = {}
        self._pending: dict[tuple[str, int], dict[str, int]] = {}
        self._minutes: dict[tuple[str, str], int] = {}

    @property
    def buckets(self) -> dict[tuple[str, int], Raw]:
        self._settle()
        return self._buckets

    @buckets.setter
    def buckets(self, value: dict[tuple[str, int], Raw]) -> None:
        self._settle()
        self._buckets = value

    @property
    def total(self) -> dict[str, Raw]:
        self._settle()
        return self._total

    @total.setter
    def total(self, value: dict[str, Raw]) -> None:
        self._settle()
        self._total = value

    def _settle(self) -> None:
        """Add the counted losses to their buckets and re-sum the touched windows."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        for (dataset, minute), counts in pending.items():
            summed = self._buckets.get((dataset, minute), {})
            for loss, times in counts.items():
                summed = add(summed, {k: v * times for k, v in raw(loss).items()})
            self._buckets[(dataset, minute)] = summed
        for dataset in {d for d, _ in pending}:
            last, total = self.minute[dataset], cast(Raw, {})
            for m in range(last - SPAN, last + 1):
                found = self._buckets.get((dataset, m))
                if found is not None:
                    total = add(total, found)
            self._total[dataset] = total

    def _minute(self, moment: str) -> int:
        """:func:`minute_of` a stamp, remembered by its text up to the minute (and zone)."""
        found = _STAMP.match(moment)
        key = (found.group(1), found.group(2) or "") if found else (moment, "")
        minute = self._minutes.get(key)
        if minute is None:
            if len(self._minutes) > 4096:
                self._minutes.clear()
            minute = self._minutes[key] = minute_of(moment)
        return minute

    def debit(self, dataset: str, moment: str, loss: str) -> None:
        """Count the loss (as written: its text) in the bucket of the debit's ledger
        minute ``max(previous, ⌊moment⌋)``."""
        previous = self.minute.get(dataset)
        minute = self._minute(moment)
        if previous is not None and previous > minute:
            minute = previous
        self.minute[dataset] = minute
        counts = self._pending.setdefault((dataset, minute), {})
        counts[loss] = counts.get(loss, 0) + 1

    def row_fields(self, dataset: str, zero: str) -> dict[str, Any]:
        """``window_minute`` and ``window_spent`` of the dataset's row (``zero``: its
        measure's zero, for a dataset never debited)."""
        if dataset not in self.minute:
            return {"window_minute": None, "window_spent": zero}
        return {"window_minute": self.minute[dataset],
                "window_spent": text(self.total[dataset])}


def upgrade(conn: Connection, key: bytes) -> None:
    """Compute the burn-rate windows and buckets of a version-3 ledger from its releases,
    once (in ``seq`` order, checking each release's keyed link and each dataset row's
    version-3 MAC first, so that an edit made before the upgrade is not laundered into a
    signed total), and sign the dataset rows with them.

    Raises
    ------
    LedgerError
        If a release link or a dataset row does not verify (nothing is changed).
    """
    tracker, bad = Tracker(), []
    query = select(releases).order_by(releases.c.seq)
    for row in conn.execute(query, execution_options={"stream_results": True,
                                                      "yield_per": 4096}):
        fields = row._mapping
        if not hmac.compare_digest(str(row.hash), chain.link_hash(
                key, str(row.prev_hash), chain.release_body(fields))):
            bad.append(f"release {row.id} does not match its hash")
            continue
        tracker.debit(row.dataset, row.time, row.loss)
    for ds in conn.execute(select(datasets)).mappings().all():
        if not hmac.compare_digest(str(ds["mac"]), chain.row_mac(
                key, "datasets", ds, chain.V3_DATASET_FIELDS)):
            bad.append(f"datasets {ds['name']!r}: its MAC does not match")
            continue
        zero = codec.dump(MEASURES[ds["measure"]].zero())
        store.put_row(conn, key, "datasets", {**ds, **tracker.row_fields(ds["name"], zero)},
                      new=False)
    if bad:
        raise LedgerError("this version-3 ledger cannot be upgraded: it does not verify ("
                          f"{'; '.join(bad[:5])}{'; …' if len(bad) > 5 else ''}); restore it "
                          "from a copy, or open it with the dpkit that wrote it")
    write_buckets(conn, key, tracker)


def write_buckets(conn: Connection, key: bytes, tracker: Tracker) -> None:
    """Insert the tracker's buckets, signed (into an empty ``burn`` table)."""
    rows = [{"dataset": d, "minute": m, "spent": text(v),
             "mac": chain.bucket_mac(key, d, m, text(v))}
            for (d, m), v in tracker.buckets.items()]
    for i in range(0, len(rows), 1000):
        conn.execute(burn.insert(), rows[i:i + 1000])
