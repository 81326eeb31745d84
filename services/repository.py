"""The aggregates the services hold, in one shape: an instance keeps the latest
state of each aggregate it decides on, folded from the stream (``Held``), folds
in what other instances append (``take``, ``catch_up``), appends its own
decisions under the stream's guard (``commit``) and tells a command recorded
already by its cause (``Held.recorded``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from casino.protocol.commands import Command, reused
from casino.protocol.service import Clock, Recorder, log, utc_now
from casino.store.envelope import AnyEvent, Batch
from casino.store.eventstore import Appended, EventStore, Stored, read_stored


class Held(msgspec.Struct):
    """What an instance holds of one aggregate besides its state: the stream
    sequence of the last message folded into it, and the commands recorded in
    it by cause (causation id -> digest of the command, ``casino.protocol.commands.digest``)."""

    last_seq: int = 0
    applied: dict[str, str] = msgspec.field(default_factory=dict)

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
                 clock: Clock = utc_now, by_cause: bool = True) -> None:
        self.store, self.fold, self.by_cause = store, fold, by_cause
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
