"""The event store contract and its in-memory fake.

``append`` writes one batch under optimistic concurrency: ``expected`` is the
last stream sequence of any message matching ``guard`` (the aggregate's
subject filter), 0 when there is none. A different last sequence raises
``Conflict`` and writes nothing. ``msg_id`` is derived from the cause, so a
retried append is acknowledged as a duplicate and written once, even when the
aggregate has moved on since the first attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import msgspec

from casino.store import subjects
from casino.store.envelope import Batch, decode, encode
from casino.store.subjects import EVENTS, NO_COUP, matches, tokens

# What reading a message that is no batch of ours raises.
UNREADABLE = (msgspec.DecodeError, msgspec.ValidationError, ValueError)


class Conflict(Exception):
    """Another writer appended to the aggregate first."""


class Appended(msgspec.Struct, frozen=True, gc=False):
    seq: int
    duplicate: bool = False


class Stored(msgspec.Struct, frozen=True, gc=False):
    """A stored message as read. One that is no batch this code can read (a
    stray: bytes, the server's answer to a request aimed at an event
    subject, a record of a newer schema, or a batch whose events do not
    decode) is handed on all the same, never raised: its batch empty, why in
    ``unreadable``, its bytes as stored in ``raw`` (a seal keeps them)."""

    seq: int
    subject: str
    batch: Batch
    msg_id: str = ""
    unreadable: str = ""
    raw: bytes = b""


def read_stored(seq: int, subject: str, data: bytes, msg_id: str = "") -> Stored:
    """The stored message ``data`` as read: every reader copes with what the
    record holds, which cannot be edited (``Stored``)."""
    try:
        return Stored(seq, subject, decode(data), msg_id)
    except UNREADABLE as exc:
        return Stored(seq, subject, Batch(()), msg_id, f"{type(exc).__name__}: {exc}"[:300], data)


class EventStore(Protocol):
    async def append(self, subject: str, batch: Batch, *, expected: int, msg_id: str,
                     guard: str | None = None) -> Appended: ...

    async def read(self, filter_: str, after: int = 0, limit: int | None = None) -> list[Stored]:
        """The messages on ``filter_`` with a sequence above ``after``, in
        order: all of them, or the first ``limit``."""

    async def scan(self, filter_: str, each: Callable[[Stored], object]) -> None:
        """``each`` of the messages on ``filter_``, in order, as they are read:
        a history of any length in the memory of one message."""

    async def scan_raw(self, filter_: str, each: Callable[[int, str, dict[str, str], bytes], object],
                       after: int = 0, limit: int | None = None) -> None:
        """``each(seq, subject, headers, data)`` of the messages on ``filter_``
        after ``after``, as stored, read whether or not they decode."""

    async def first(self, filter_: str) -> Stored | None:
        """The earliest message on ``filter_`` (wildcards allowed), None if there is none."""

    async def last(self, filter_: str) -> Stored | None:
        """The latest message on ``filter_`` (wildcards allowed), None if there is none."""


async def latest_at_table(store: EventStore, table: str, aggregate: str) -> Stored | None:
    """The table's latest ``coup`` or ``shoe`` message, looked for in the shoe
    in play. A filter with wildcards over the table's shoes and coups has the
    server match every subject the table ever had, in a time that grows with
    the table's history (``python -m bench.history`` measures it). The
    shoe in play is found from the table's shoe events between coups (a
    shoe's shuffle is one, but for a shoe begun in the middle of a round,
    003 7.9: the shoes after it are looked for by number); everything at the
    shoe is written to the shoe in play, and a coup opened in it is the
    table's latest. Where no coup has opened in it yet (the shoe was filled
    as the last round ended, or a coup begun in the shoe before goes on into
    it), the shoe before holds the latest; failing both, and for shoes named
    otherwise than ``<table>-shoe-<n>``, the whole table is matched."""
    try:
        between = await store.last(subjects.event(table, "*", subjects.NO_COUP, "shoe"))
    except UNREADABLE:  # a stray message that is no batch of ours (until the archiver files it): the whole table
        between = None
    if between is not None and between.unreadable:
        between = None
    number = None if between is None else subjects.shoe_number(table, subjects.tokens(between.subject)[1])
    if number is not None:
        while await store.last(subjects.event(table, subjects.shoe_id(table, number + 1), "*", "shoe")) is not None:
            number += 1
        for shoe in (number, number - 1) if number > 1 else (number,):
            found = await store.last(subjects.event(table, subjects.shoe_id(table, shoe), "*", aggregate))
            if found is not None:
                return found
    return await store.last(subjects.aggregate_filter(aggregate, table))


class InMemoryEventStore:
    """The fake: the same contract, in a list."""

    def __init__(self) -> None:
        self.messages: list[tuple[int, str, bytes]] = []
        self.ids: dict[str, int] = {}

    async def append(self, subject: str, batch: Batch, *, expected: int, msg_id: str,
                     guard: str | None = None) -> Appended:
        if msg_id in self.ids:
            return Appended(self.ids[msg_id], duplicate=True)
        last = max((seq for seq, subj, _ in self.messages if matches(guard or subject, subj)), default=0)
        if last != expected:
            raise Conflict(f"wrong last sequence: {last}")
        seq = len(self.messages) + 1
        self.messages.append((seq, subject, encode(batch)))
        self.ids[msg_id] = seq
        return Appended(seq)

    async def read(self, filter_: str, after: int = 0, limit: int | None = None) -> list[Stored]:
        ids = {seq: msg_id for msg_id, seq in self.ids.items()}
        return [read_stored(seq, subj, data, ids.get(seq, "")) for seq, subj, data in self.messages
                if seq > after and matches(filter_, subj)][:limit]

    async def scan(self, filter_: str, each: Callable[[Stored], object]) -> None:
        for m in await self.read(filter_):
            each(m)

    async def scan_raw(self, filter_: str, each: Callable[[int, str, dict[str, str], bytes], object],
                       after: int = 0, limit: int | None = None) -> None:
        ids = {seq: msg_id for msg_id, seq in self.ids.items()}
        for seq, subj, data in [m for m in self.messages if m[0] > after and matches(filter_, m[1])][:limit]:
            each(seq, subj, {"Nats-Msg-Id": ids.get(seq, "")}, data)

    async def tables(self) -> list[str]:
        """Every table with shoe events between coups, as the stream's store names them."""
        return sorted({tokens(subj)[0] for _, subj, _ in self.messages if matches(f"{EVENTS}.*.*.{NO_COUP}.shoe", subj)})

    async def first(self, filter_: str) -> Stored | None:
        return self._found(filter_, self.messages)

    async def last(self, filter_: str) -> Stored | None:
        return self._found(filter_, reversed(self.messages))

    def _found(self, filter_: str, messages: Iterable[tuple[int, str, bytes]]) -> Stored | None:
        for seq, subj, data in messages:
            if matches(filter_, subj):
                return read_stored(seq, subj, data, next((i for i, s in self.ids.items() if s == seq), ""))
        return None
