"""The one accountant: check and debit a privacy loss atomically, run, record the outcome.

Every front end (sessions, ``dpkit.release`` on a session, ``dpkit.learn``, the server, and
modules to come) charges through an :class:`Accountant`, so the rules of DESIGN.md §3.5
hold in one place:

1. the loss is checked against every cap and debited atomically *before* anything is
   computed (``BudgetExceededError`` debits nothing);
2. ``compute`` runs only after the debit; a failure marks the release ``failed`` and never
   refunds; the caller gets :class:`~dpkit.errors.ReleaseFailedError`, whose text names no
   data value (the original may quote the data);
3. an idempotency key already answered returns the recorded answer instead of fresh noise
   (:class:`~dpkit.errors.IdempotentReplay` from the store, turned into a replay here);
4. no release runs under a seeded test stream (:func:`dpkit.core.rng.require_secure`);
5. every run builds the one release record, a :class:`~dpkit.core.record.Release` (values,
   loss, the noise rows the front end planned, accuracy, release id, replayed flag, the
   digest of the values by :func:`~dpkit.core.record.digest_of`), kept in
   :attr:`Accountant.last`; the ledger receives the same noise rows at the debit and the same
   digest with the outcome, whichever front end released.

Implementations: :class:`FilterAccountant` (an in-memory :class:`PrivacyFilter`) and
``dpkit.ledger.LedgerAccountant`` (the persistent epsilon registry);
:class:`ParallelAccountant` hands out the accountants of a partition's parts (PINQ's
partition: the maximum over parts, McSherry 2009, Thm 4).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from dpkit.core import rng
from dpkit.core.compose import PrivacyFilter
from dpkit.core.composition import parallel_composition
from dpkit.core.measures import PrivacyLoss, convert
from dpkit.core.record import Accuracy, NoiseRow, Release, digest_of, read_only
from dpkit.errors import DomainError, IdempotentReplay, ReleaseFailedError

__all__ = ["Accountant", "FilterAccountant", "ParallelAccountant", "as_accountant"]

T = TypeVar("T")
HISTORY = 100  # records an accountant keeps in memory (Accountant.history)


class Accountant(ABC):
    """Check-and-debit, run, mark, never refund (module docstring).

    Subclasses implement :meth:`debit` (atomic check and debit; may raise
    ``BudgetExceededError`` or ``IdempotentReplay``), :meth:`mark` and the budget
    properties; :meth:`run` is the one road every release takes.

    Attributes
    ----------
    last : Release or None
        The record of the most recent :meth:`run`: None until a run debits or replays (a
        refused run leaves None); status "debited" while its ``compute`` runs, "failed"
        if it failed (its loss stands), "released" after.
    history : tuple of Release
        The records of the latest :data:`HISTORY` runs that debited or replayed, oldest
        first, each in its final state ("released" or "failed"): what a session's notebook
        display lists.
    """

    last: Release[Any] | None = None
    history: tuple[Release[Any], ...] = ()
    records: bool = False  # keeps outcomes (digests, stored answers): a ledger does

    @property
    @abstractmethod
    def budget(self) -> PrivacyLoss:
        """The cap in force (the dataset's lifetime cap for a ledger)."""

    @property
    @abstractmethod
    def spent(self) -> PrivacyLoss:
        """Everything debited so far, exact, in :attr:`measure`."""

    @property
    def measure(self) -> type[PrivacyLoss]:
        return type(self.budget)

    @property
    def remaining(self) -> PrivacyLoss:
        return self.budget - self.spent

    @abstractmethod
    def debit(self, loss: PrivacyLoss, description: str, *,
              idempotency_key: str | None = None, noise: Sequence[NoiseRow] = ()
              ) -> int | None:
        """Check ``loss`` against every cap and debit it atomically, recording the noise
        rows planned for it; the release id."""

    def mark(self, release_id: int | None, status: str, digest: str | None = None,
             stored: str | None = None) -> None:
        """Record a debited release's outcome (``released`` or ``failed``); an in-memory
        accountant keeps none."""
        return None

    def _note(self, release: Release[Any] | None) -> None:
        """Keep ``release`` as :attr:`last`, and in :attr:`history` once final."""
        self.last = release
        if release is not None and release.status != "debited":
            self.history = (*self.history, release)[-HISTORY:]

    def run(self, loss: PrivacyLoss, description: str, compute: Callable[[], T], *,
            noise: Sequence[NoiseRow] = (), accuracy: Accuracy | None = None,
            store: Callable[[T], str] | None = None,
            replay: Callable[[str], T] | None = None,
            idempotency_key: str | None = None) -> T:
        """Debit ``loss``, then run ``compute()``, record its outcome and keep its
        :class:`~dpkit.core.record.Release` in :attr:`last`.

        Parameters
        ----------
        loss : PrivacyLoss
            Converted to the accountant's measure (``MeasureError`` if it cannot be).
        description : str
            The canonical text of the release (stored in the ledger).
        compute : callable
            The data side and the noise; runs only after the debit.
        noise : sequence of NoiseRow
            The noise plan (mechanisms, scales, sensitivities), written to the ledger with
            the debit and kept in the release record.
        accuracy : Accuracy, optional
            The half-widths the plan promises at β (data-independent).
        store : callable, optional
            With an idempotency key, the result's stored text (for replays).
        replay : callable, optional
            Turns a stored text back into a result (an idempotent replay).
        idempotency_key : str, optional
            A retry with the same key (and the same request) returns the recorded answer.

        Returns
        -------
        object
            What ``compute`` returned (or the replayed answer); its record is :attr:`last`,
            its digest :func:`~dpkit.core.record.digest_of` of it (the ledger's
            ``result_sha256``). :meth:`run_record` returns the record itself.

        Raises
        ------
        BudgetExceededError
            Before anything runs; nothing is debited.
        IdempotentReplay
            If the key was answered but nothing can be replayed (no stored answer).
        ReleaseFailedError
            If ``compute``, the digest of its result or the record of its outcome fails
            after the debit (the loss stands): after the debit this is the only error.
        """
        return self._run(loss, description, compute, noise, accuracy, store, replay,
                         idempotency_key)[0]

    def run_record(self, loss: PrivacyLoss, description: str, compute: Callable[[], T], *,
                   noise: Sequence[NoiseRow] = (), accuracy: Accuracy | None = None,
                   store: Callable[[T], str] | None = None,
                   replay: Callable[[str], T] | None = None,
                   idempotency_key: str | None = None,
                   drawn: Sequence[NoiseRow] = (), loss_note: str | None = None
                   ) -> Release[T]:
        """:meth:`run`, returning the release's :class:`~dpkit.core.record.Release` (its
        values, loss — None for a replay —, noise rows, accuracy, release id, digest), so
        that a caller gets what it released without reading :attr:`last` back. Same
        parameters and errors as :meth:`run`, and ``drawn``: a sequence that ``compute``
        fills with the noise rows it draws (a fit calibrating its noise to values it
        released); without a ``noise`` plan, the record (and :attr:`last`) keeps those; and
        ``loss_note``, the record's words on how ``loss`` differs from the budget asked for
        (:attr:`Release.loss_note <dpkit.core.record.Release.loss_note>`)."""
        return self._run(loss, description, compute, noise, accuracy, store, replay,
                         idempotency_key, drawn, loss_note)[1]

    def _run(self, loss: PrivacyLoss, description: str, compute: Callable[[], T],
             noise: Sequence[NoiseRow], accuracy: Accuracy | None,
             store: Callable[[T], str] | None, replay: Callable[[str], T] | None,
             idempotency_key: str | None, drawn: Sequence[NoiseRow] = (),
             loss_note: str | None = None) -> tuple[T, Release[T]]:
        """The one road: (what ``compute`` returned, its record)."""
        self._note(None)
        rng.require_secure()  # a seeded test stream never reaches a debit or a release
        charged = convert(loss, self.measure)
        rows = tuple(noise)
        try:
            release_id = self.debit(charged, description, idempotency_key=idempotency_key,
                                    noise=rows)
        except IdempotentReplay as answered:
            if answered.result is None or replay is None:
                raise
            values = replay(answered.result)
            recorded = getattr(answered, "result_sha256", None)
            replayed: Release[T] = Release(read_only(values), None, rows, accuracy,
                                           answered.release_id, True,
                                           recorded or digest_of(values), description)
            self._note(replayed)
            return values, replayed
        pending: Release[Any] = Release(None, charged, rows, accuracy, release_id, False, None,
                                        description, "debited", loss_note)
        self._note(pending)
        try:
            result = compute()
            digest = digest_of(result)
        except BaseException as exc:
            raise self._failed(pending, exc, mark=True) from None
        try:
            if self.records:
                self.mark(release_id, "released", digest,
                          store(result) if store and idempotency_key is not None else None)
        except BaseException as exc:  # the outcome is not recorded: the key stays debited
            raise self._failed(pending, exc, mark=False) from None
        done: Release[T] = replace(pending, values=read_only(result), digest=digest,
                                   status="released", noise=rows or tuple(drawn))
        self._note(done)
        return result, done

    def _failed(self, pending: Release[Any], exc: BaseException, *, mark: bool
                ) -> BaseException:
        """What a failure after the debit raises: ``exc`` itself for an interrupt, else a
        :class:`~dpkit.errors.ReleaseFailedError` naming only its type (any text may quote
        the data); the record says "failed" and, with ``mark``, so does the ledger."""
        self._note(replace(pending, status="failed"))
        if mark:
            with contextlib.suppress(Exception):  # unmarked, the loss stands all the same
                self.mark(pending.release_id, "failed")
        if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
            return exc
        # a Polars panic is a BaseException too
        return ReleaseFailedError(pending.release_id, type(exc).__name__)


class FilterAccountant(Accountant):
    """An in-memory budget (a :class:`~dpkit.core.compose.PrivacyFilter`); idempotency keys
    need a ledger (``DomainError``)."""

    def __init__(self, budget: PrivacyLoss | PrivacyFilter) -> None:
        self.filter = budget if isinstance(budget, PrivacyFilter) else PrivacyFilter(budget)

    @property
    def budget(self) -> PrivacyLoss:
        return self.filter.budget

    @property
    def spent(self) -> PrivacyLoss:
        return self.filter.spent

    def debit(self, loss: PrivacyLoss, description: str, *,
              idempotency_key: str | None = None, noise: Sequence[NoiseRow] = ()
              ) -> int | None:
        if idempotency_key is not None:
            raise DomainError("idempotency keys need a ledger (the recorded answer lives there)")
        self.filter.spend(loss)
        return None


class ParallelAccountant:
    """PINQ's partition (McSherry 2009, Thm 4): releases on disjoint parts of the data are
    charged to ``parent`` as the *maximum* over parts of what each part has spent, debited
    as that maximum grows (ε, (ε, δ) componentwise, or ρ). Each part charges through its own
    accountant, :meth:`for_part`."""

    def __init__(self, parent: Accountant) -> None:
        self.parent = parent
        self.parts: dict[str, PrivacyLoss] = {}

    def for_part(self, key: Hashable) -> _Part:
        """The accountant of one part."""
        return _Part(self, repr(key))

    def debit_part(self, part: str, loss: PrivacyLoss, description: str,
                   noise: Sequence[NoiseRow]) -> int | None:
        zero = self.parent.measure.zero()
        after = dict(self.parts)
        after[part] = self.parts.get(part, zero) + loss
        before = parallel_composition(list(self.parts.values())) if self.parts else zero
        grows = parallel_composition(list(after.values())) - before
        release_id = self.parent.debit(grows, f"{description} [part {part}]", noise=noise)
        self.parts = after
        return release_id


class _Part(Accountant):
    """One part of a :class:`ParallelAccountant`: debits through the partition, reads and
    records through its parent (its :attr:`last` too)."""

    def __init__(self, partition: ParallelAccountant, name: str) -> None:
        self.partition, self.name = partition, name
        self.records = partition.parent.records

    @property
    def budget(self) -> PrivacyLoss:
        return self.partition.parent.budget

    @property
    def spent(self) -> PrivacyLoss:
        return self.partition.parent.spent

    def debit(self, loss: PrivacyLoss, description: str, *,
              idempotency_key: str | None = None, noise: Sequence[NoiseRow] = ()
              ) -> int | None:
        if idempotency_key is not None:
            raise DomainError("idempotency keys are not supported inside a partition")
        return self.partition.debit_part(self.name, loss, description, noise)

    def mark(self, release_id: int | None, status: str, digest: str | None = None,
             stored: str | None = None) -> None:
        self.partition.parent.mark(release_id, status, digest, stored)

    def _note(self, release: Release[Any] | None) -> None:
        self.last = release
        self.partition.parent._note(release)  # the session sees a part's too


def as_accountant(value: object) -> Accountant:
    """An :class:`Accountant` from what front ends accept: an accountant, a
    :class:`~dpkit.core.compose.PrivacyFilter`, or anything with an ``accountant``
    attribute (a :class:`~dpkit.frame.Session`)."""
    if isinstance(value, Accountant):
        return value
    if isinstance(value, PrivacyFilter):
        return FilterAccountant(value)
    inner = getattr(value, "accountant", None)
    if isinstance(inner, Accountant):
        return inner
    raise DomainError("accountant must be a dpkit Accountant, a PrivacyFilter or a Session")
