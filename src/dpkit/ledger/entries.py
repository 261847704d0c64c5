"""A dataset's entry (measure, cap, privacy unit, schema) and its recorded migration.

A dataset's cap never changes in place. A curator who must change the measure, the cap, the
privacy unit or the schema of a served dataset records a ``migrate`` event
(:meth:`dpkit.ledger.Ledger.migrate`, ``dpkit ledger migrate``): one link of the keyed chain
that retires the entry in force and opens a new one under the same name. Its body names the
entry it retires (``before``), the new one, and the spend the new entry starts from.

The rule for the spend (it is never reset):

- **The spend is carried.** The new entry starts at the old entry's spend, as recorded; each
  grant keeps its spend. A cap below the carried spend is refused (retire the dataset
  instead).
- **A new measure only before the first release.** Losses of different measures compose only
  through a conversion that would have to be carried through every burn-rate bucket, so a
  migration that changes the measure is refused once the dataset has a release (use a new
  dataset name). Grant caps (each a ``grant`` link after the event) and the burn-rate
  policy are then converted to the new measure
  (:func:`dpkit.core.measures.convert`: ε ⇒ ε²/2-zCDP, Bun & Steinke 2016 Prop. 1.4, or (ε, 0));
  a cap that cannot be converted is refused, naming the grant.
- **A new privacy unit says so.** The spend is carried as recorded, and the record states
  that the releases before it were accounted at the old unit (``unit_changed`` and ``note``):
  a release at one unit says nothing exact about another (a person's rows were not bounded
  at the old unit), so no factor is applied and the report shows the note.

``verify`` (:mod:`dpkit.ledger.integrity`) replays the event: the ``before`` fields must be
the entry the chain holds at that point and the carried spend must be that entry's spend
(a migration that resets the spend is reported), so the old entry's releases stay auditable
over the whole chain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dpkit.core.measures import PrivacyLoss, convert
from dpkit.errors import LedgerError, MeasureError
from dpkit.ledger.codec import MEASURES, dump, load

__all__ = ["ENTRY_FIELDS", "entry_of", "differences", "migration_body", "replay_migration",
           "MIGRATE"]

MIGRATE = "migrate"  # the event kind (the schema upgrade's event is "migration")
ENTRY_FIELDS = ("measure", "cap", "privacy_unit", "schema")


def entry_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that define a dataset's entry, as the ledger stores them (cap as text)."""
    return {k: row[k] for k in ENTRY_FIELDS}


def differences(entry: Mapping[str, Any], cap: PrivacyLoss, privacy_unit: str
                ) -> list[tuple[str, str, str]]:
    """What differs between a registered entry (:meth:`Ledger.entry
    <dpkit.ledger.Ledger.entry>`: ``measure``, ``cap`` a loss, ``privacy_unit``) and a
    wanted one, canonically: (field, wanted, registered) for the measure (its class name),
    the exact cap (``1``, ``1.0`` and ``"2/2"`` are one cap) and the privacy unit's text
    (``str(PrivacyUnit)``, whatever order its fields were written in)."""
    found = []
    measure = type(cap).__name__
    if entry["measure"] != measure:
        found.append(("measure", measure, str(entry["measure"])))
    elif entry["cap"] != cap:
        found.append(("cap", str(cap), str(entry["cap"])))
    if entry["privacy_unit"] != privacy_unit:
        found.append(("privacy unit", privacy_unit, str(entry["privacy_unit"])))
    return found


def _converted(text: str | None, old: str, new: str, what: str) -> str | None:
    if text is None:
        return None
    try:
        return dump(convert(load(old, text), MEASURES[new]))
    except MeasureError:
        raise LedgerError(f"{what} ({load(old, text)}) cannot be converted to {new}; "
                          "use a new dataset name") from None


def migration_body(row: Mapping[str, Any], cap: PrivacyLoss, privacy_unit: str, schema: str,
                   grants: Sequence[Mapping[str, Any]], released: bool) -> dict[str, Any]:
    """The body of the ``migrate`` event that retires the entry ``row`` and opens the new
    one (see the module docstring for the rule).

    Raises
    ------
    LedgerError
        If nothing changes, the measure changes after a release, the new cap is below the
        carried spend, a retired dataset is migrated, or a grant cap or the burn-rate
        policy cannot be converted to the new measure.
    """
    old, new = str(row["measure"]), type(cap).__name__
    name = row["name"]
    if row["per_day"] is not None and load(old, row["per_day"]) == MEASURES[old].zero():
        raise LedgerError(f"dataset {name!r} is retired; it cannot be migrated")
    if old != new and released:
        raise LedgerError(f"dataset {name!r} has releases in {old}; its measure cannot change "
                          f"to {new} (their losses would not compose); use a new dataset "
                          "name")
    spent = row["spent"] if old == new else dump(MEASURES[new].zero())
    if not load(new, spent) <= cap:
        raise LedgerError(f"dataset {name!r} has spent {load(new, spent)}; a cap of {cap} is "
                          "below it (retire the dataset instead: `dpkit ledger retire`)")
    after = {"measure": new, "cap": dump(cap), "privacy_unit": privacy_unit, "schema": schema}
    if after == entry_of(row):
        raise LedgerError(f"dataset {name!r} is already registered so; nothing to migrate")
    unit_changed = privacy_unit != row["privacy_unit"]
    moved = {} if old == new else {
        str(g["analyst"]): {"cap": _converted(g["cap"], old, new,
                                              f"the grant of {g['analyst']!r}"),
                            "spent": dump(MEASURES[new].zero())} for g in grants}
    return {"name": name, **after, "spent": spent,
            "per_day": row["per_day"] if old == new else _converted(
                row["per_day"], old, new, "the burn-rate policy"),
            "before": {**entry_of(row), "spent": row["spent"]}, "grants": moved,
            "unit_changed": unit_changed,
            "note": _unit_note(str(row["privacy_unit"]), unit_changed, released)}


def _unit_note(old_unit: str, unit_changed: bool, released: bool) -> str:
    """What a migration's record says of the privacy unit."""
    if not unit_changed:
        return ""
    if not released:
        return f"privacy unit changed from {old_unit} before any release"
    return (f"releases before this link were accounted at privacy unit {old_unit}; their "
            "spend is carried as recorded")


def replay_migration(rows: dict[str, dict[tuple[str, ...], dict[str, Any]]], body: str,
                     seq: int, where: str) -> list[str]:
    """Apply a ``migrate`` event to the rows a chain implies (``rows[table][ident]``, as
    :class:`dpkit.ledger.integrity.State` holds them); returns its problems: a migration of
    an entry the chain does not hold, or one that does not carry the spend."""
    b = json.loads(body)
    ds = rows["datasets"].get((b.get("name"),))
    if ds is None:
        return [f"{where}: migrates a dataset the chain never registered"]
    problems = []
    if b.get("before") != {**entry_of(ds), "spent": ds["spent"]}:
        problems.append(f"{where}: the entry it retires is not the one the chain holds")
    carried = ds["spent"] if b.get("measure") == ds["measure"] else dump(
        MEASURES[b["measure"]].zero())
    if b.get("spent") != carried:
        problems.append(f"{where}: does not carry the spend ({carried}); a spend is never "
                        "reset")
    ds.update({k: b[k] for k in ENTRY_FIELDS}, spent=b["spent"], per_day=b["per_day"],
              seq=seq)
    return problems  # the grants it converts follow as grant links (their own rows' seq)
