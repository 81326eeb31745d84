"""The aggregates the services hold, in one shape: an instance keeps the latest
state of each aggregate it decides on, folded from the stream (``Held``), folds
in what other instances append (``take``, ``catch_up``), appends its own
decisions under the stream's guard (``commit``, or several taken at once:
``stage`` then ``flush``, undone by ``unstage`` where they are not recorded)
and tells a command recorded already by its cause (``Held.recorded``)."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from casino.protocol.commands import Command, reused
from casino.protocol.service import Clock, Recorder, log, utc_now
from casino.store.envelope import AnyEvent, Batch
from casino.store.eventstore import Appended, EventStore, Stored, read_stored


class Staged(msgspec.Struct):
    """Decisions taken but not yet appended (``Repository.stage``): recorded
    together as one batch by ``Repository.flush``."""

    steps: list[tuple[list[AnyEvent], str, str, str]] = []  # (events, message id, causation, its command's digest)
    before: Any = None  # the aggregate as it was before the first, put back if they are not recorded
    wide: bool = False  # whether they are guarded on more than the aggregate's own subject (the first ``keep`` says)
    opening: str = ""  # the command id of the step that opens the aggregate, if one does
    filed: str = ""  # the aggregate they are filed under, where another than the one held (a coup not yet opened)
    shoe: str = ""  # and the shoe they are filed under there (the one a card out between coups came from)


class Held(msgspec.Struct):
    """What an instance holds of one aggregate besides its state: the stream
    sequence of the last message folded into it, the commands recorded in it
    by cause (causation id -> digest of the command, ``casino.protocol.commands.digest``),
    and the decisions staged and not yet recorded."""

    last_seq: int = 0
    applied: dict[str, str] = msgspec.field(default_factory=dict)
    staged: Staged = msgspec.field(default_factory=Staged)

    def recorded(self, command: Command) -> bool:
        """Whether ``command`` is recorded in the aggregate already (a retry:
        answered from the record, decided no more). A command id used again
        for another command is refused."""
        digest = self.applied.get(command.id)
        if digest is None:
            return False
        if (conflict := reused(command, digest)) is not None:
            raise conflict
        return True


H = TypeVar("H", bound=Held)
Observe = Callable[[str, int, Batch], Awaitable[None]]


class Repository(Generic[H]):
    """Folding and committing one kind of aggregate: ``fold`` applies one event
    (and its cause) to the state a ``Held`` carries. With ``by_cause`` off, the causes are not
    kept (an aggregate that lives as long as its table, told a retry by its
    state instead)."""

    def __init__(self, store: EventStore, producer: str, fold: Callable[[H, Any, str], None], *,
                 clock: Clock = utc_now, by_cause: bool = True, copy_: Callable[[H], H] = copy.copy) -> None:
        """``copy_``: a copy of an aggregate that staging it leaves as it is
        (a shallow one, by default: ``fold`` replaces what it changes)."""
        self.store, self.fold, self.by_cause, self.copy = store, fold, by_cause, copy_
        self.recorder = Recorder(store, producer, clock)

    def take(self, held: H, seq: int, batch: Batch) -> bool:
        """Fold a stored batch into ``held``, unless it is folded already."""
        if seq <= held.last_seq:
            return False
        for env in batch.events:
            self.fold(held, env.data, env.causation)
            if self.by_cause:
                held.applied[env.causation] = env.command
        held.last_seq = seq
        return True

    async def catch_up(self, filter_: str, after: int, observe: Observe,
                       unreadable: Callable[[Stored], None] | None = None) -> None:
        """Hand ``observe`` everything on ``filter_`` after sequence ``after``:
        what other instances appended since this one last looked. A message
        that is no batch of ours (settlement's consumer files it as a dead
        letter) is handed to ``unreadable``, else to ``observe`` with nothing
        in it: passed over, and counted by the aggregate's guard (left out, the
        guard would expect less than the stream holds for ever)."""
        stored: list[Stored] = []
        await self.store.scan_raw(filter_, lambda seq, subject, headers, data: stored.append(
            read_stored(seq, subject, data, headers.get("Nats-Msg-Id", ""))), after)
        for m in stored:
            if m.unreadable:
                log.warning("%s seq %d is no batch of ours (%s): passed over", m.subject, m.seq, m.unreadable)
                if unreadable is not None:
                    unreadable(m)
                    continue
            await observe(m.subject, m.seq, m.batch)

    async def commit(self, held: H, subject: str, events: Sequence[AnyEvent], *, msg_id: str, table: str,
                     shoe: str, coup: str, causation: str, command: str = "", expected: int | None = None,
                     guard: str | None = None) -> Appended:
        """Append the events of one decision as one batch, expecting the
        aggregate's subjects (or ``guard``'s) to end at ``expected`` (by default
        the last message folded into ``held``): another instance's write since
        is a ``Conflict``. The events are folded into ``held`` at once, unless
        the stream took them for a duplicate (written before: the record stands,
        not this decision; the caller reads it back) or a catch-up brought
        them first."""
        ack = await self.recorder.record(
            subject, events, expected=held.last_seq if expected is None else expected, msg_id=msg_id, table=table,
            shoe=shoe, coup=coup, causation=causation, command=command, guard=guard)
        if not ack.duplicate and ack.seq > held.last_seq:
            for e in events:
                self.fold(held, e, causation)
            if self.by_cause:
                held.applied[causation] = command
            held.last_seq = ack.seq
        return ack

    def keep(self, held: H, wide: bool = False) -> None:
        """Before the first decision staged: the aggregate as it is, kept to be
        put back, and whether the decisions are guarded on more than its subject."""
        if held.staged.before is None:
            held.staged.before, held.staged.wide = self.copy(held), wide

    def stage(self, held: H, events: Sequence[AnyEvent], msg_id: str, causation: str, command: str = "") -> None:
        """Take a decision now (folded into ``held`` at once) and record it with
        the next ``flush``; ``command`` is the digest of the command that caused it."""
        self.keep(held)
        for e in events:
            self.fold(held, e, causation)
        if self.by_cause:
            held.applied = {**held.applied, causation: command}  # a new dict: the kept aggregate keeps the old
        held.staged.steps.append((list(events), msg_id, causation, command))

    def unstage(self, held: H) -> None:
        """Undo the decisions not recorded: nothing happened that is not in the stream."""
        before = held.staged.before
        if before is not None:
            for field in held.__struct_fields__:
                if field != "staged":
                    setattr(held, field, getattr(before, field))
        held.staged = Staged()

    async def flush(self, held: H, subject: str, *, expected: int, table: str, shoe: str, coup: str,
                    guard: str | None = None) -> Appended | None:
        """Append every staged decision as one batch (None where none is
        staged), expecting the subjects (``subject``'s, or ``guard``'s) to end
        at ``expected``; not recorded, they are undone. A batch the stream
        takes for a duplicate was written before, by these decisions asked
        again or by another instance's taken on a record this one had not
        seen (the stream's deduplication answers before its guard): the record
        stands, not these decisions, and they are undone too (the caller reads
        the record back, as ``commit``'s callers do)."""
        steps = held.staged.steps
        if not steps:
            return None
        try:
            ack = await self.recorder.record(
                subject, [e for evs, _, _, _ in steps for e in evs], expected=expected, msg_id=steps[0][1],
                table=table, shoe=shoe, coup=coup, causation=[cause for evs, _, cause, _ in steps for _ in evs],
                command=[command for evs, _, _, command in steps for _ in evs], guard=guard)
        except BaseException:
            self.unstage(held)
            raise
        if ack.duplicate:
            self.unstage(held)
        else:
            held.staged = Staged()
            held.last_seq = max(held.last_seq, ack.seq)
        return ack
