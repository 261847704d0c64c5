"""Rollback protection of a restored continual release (issue 20): the ledger keeps a step
high-water mark per stream, so a stale token, or two restores of one token, can never draw
fresh noise for a step already released (dpkit.stream.frames, Ledger.advance_stream)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from dpkit.core.measures import PureDP
from dpkit.errors import LedgerError, StreamRollbackError
from dpkit.ledger import Ledger, LedgerAccountant
from dpkit.stream import ContinualRelease


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger(str(tmp_path / "l.db"))
    led.register("d", PureDP(4))
    return led


def _open(ledger: Ledger) -> ContinualRelease:
    return ContinualRelease(32, accountant=LedgerAccountant(ledger, "d"), mechanism="tree",
                            epsilon=1)


def test_a_stale_token_is_refused(tmp_path: Path, ledger: Ledger) -> None:
    key = Fernet.generate_key()
    s = _open(ledger)
    for x in (1, 2, 3):
        s.feed(x)
    s.save(tmp_path / "old", key)
    released = [s.feed(x).value for x in (4, 5)]
    s.save(tmp_path / "new", key)
    acct = LedgerAccountant(ledger, "d")
    with pytest.raises(StreamRollbackError):
        ContinualRelease.restore(tmp_path / "old", key, acct)
    assert ledger.stream_step(s.release_id) == (5, None)
    again = ContinualRelease.restore(tmp_path / "new", key, acct)
    assert again.t == 5 and len(released) == 2
    assert ledger.verify() == []


def test_two_restores_of_one_token_release_a_step_once(tmp_path: Path,
                                                        ledger: Ledger) -> None:
    key = Fernet.generate_key()
    s = _open(ledger)
    s.feed(7)
    s.save(tmp_path / "tok", key)
    acct = LedgerAccountant(ledger, "d")
    a = ContinualRelease.restore(tmp_path / "tok", key, acct)
    b = ContinualRelease.restore(tmp_path / "tok", key, acct)  # both at the mark: accepted
    state = copy.deepcopy(b.state)
    assert a.feed(1).t == 2
    with pytest.raises(StreamRollbackError):  # b would draw step 2's noise again
        b.feed(1)
    assert b.state == state and b.t == 1  # nothing advanced, nothing released
    with pytest.raises(StreamRollbackError):
        s.feed(1)  # the original object is stale too
    assert a.feed(2).t == 3
    assert ledger.stream_step(s.release_id)[0] == 3
    assert ledger.verify() == []


def test_the_broken_variant_without_the_mark_would_redraw(tmp_path: Path,
                                                          ledger: Ledger) -> None:
    """What the mark prevents: the same token fed twice without it gives two independent
    noisy releases of step 2 (their difference is the noise difference), so the check above
    is what stops averaging."""
    key = Fernet.generate_key()
    s = _open(ledger)
    s.feed(7)
    s.save(tmp_path / "tok", key)
    acct = LedgerAccountant(ledger, "d")
    values = set()
    for _ in range(6):
        c = ContinualRelease.restore(tmp_path / "tok", key, acct)
        c._ledger = None  # the broken variant: no compare-and-set in the ledger
        values.add(c.feed(0).releases[None].raw)
    assert len(values) > 1  # fresh noise each time (P(all equal) < 0.3^5 at scale 5)


def test_feed_with_save_binds_the_state(tmp_path: Path, ledger: Ledger) -> None:
    key = Fernet.generate_key()
    s = _open(ledger)
    s.feed(1, save=(tmp_path / "a", key))
    s.save(tmp_path / "copy", key)  # the same state saved again: the same MAC
    acct = LedgerAccountant(ledger, "d")
    assert ContinualRelease.restore(tmp_path / "copy", key, acct).t == 1
    # a second writer from the same start writes its own state for step 1 first, then loses
    # the compare-and-set: its file names a state the ledger does not, and is refused
    other = ContinualRelease.restore(tmp_path / "a", key, acct)
    other.state["t"] = 0  # pretend it started from step 0 (same stream, stale)
    with pytest.raises(StreamRollbackError):
        other.feed(5, save=(tmp_path / "b", key))
    with pytest.raises(StreamRollbackError):
        ContinualRelease.restore(tmp_path / "b", key, acct)


def test_the_ledger_refuses_a_mark_out_of_order(ledger: Ledger) -> None:
    s = _open(ledger)
    s.feed(1)
    with pytest.raises(StreamRollbackError):
        ledger.advance_stream(s.release_id, 3)
    with pytest.raises(StreamRollbackError):
        ledger.advance_stream(s.release_id, 1)
    with pytest.raises(LedgerError):
        ledger.advance_stream(999, 1)
    ledger.advance_stream(s.release_id, 2)
    assert ledger.stream_step(s.release_id) == (2, None)
    assert ledger.verify() == []
    assert ledger.verify(since_checkpoint=True) == []
    assert ledger.checkpoint() == []
    s._ledger = ledger
    s.state["t"] = 2  # in step with the ledger
    s.feed(1)
    assert ledger.verify(since_checkpoint=True) == []


def test_readers_during_steps_never_see_tampering(tmp_path: Path, ledger: Ledger) -> None:
    """Found when issue 30's branches met: a reader of the step mark read the mark row and
    the stream's newest link in two statements (two snapshots), so a step committed between
    them looked like an edited record (LedgerIntegrityError, a 500 for a racing /next).
    The row and the newest link's seq are now read in one statement and the link by its seq.
    Deterministic when correct; on the two-snapshot reader it failed in every run tried."""
    import threading

    s = _open(ledger)
    errors: list[str] = []
    done = threading.Event()

    def read() -> None:
        other = Ledger(str(tmp_path / "l.db"))  # another connection, as another worker
        while not done.is_set():
            try:
                other.stream_step(s.release_id)
            except Exception as exc:
                errors.append(repr(exc))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for r in readers:
        r.start()
    try:
        for _ in range(32):
            s.feed(1)
    finally:
        done.set()
        for r in readers:
            r.join()
    assert errors == [] and ledger.stream_step(s.release_id)[0] == 32
