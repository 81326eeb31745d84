"""The archive on JetStream: one message a sealed shoe (casino.audit.archive),
under ``casino.archive.<table>.<shoe>``, in a stream that denies deleting and
purging. A table's seals are appended in chain order under a guard on the
table's subjects, each with a message id of its shoe, so that however many
archivers run, each shoe is sealed once and the chain never forks."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import msgspec
from nats.aio.client import Client
from nats.js.api import RawStreamMsg
from nats.js.errors import APIError, BadRequestError, NotFoundError

from casino.store import subjects
from casino.store.eventstore import Conflict
from casino.store.jetstream import ARCHIVE_STREAM, WRONG_LAST_SEQUENCE, JetStreamEventStore


class Kept(msgspec.Struct, frozen=True):
    """One seal as the archive keeps it: its stream sequence, its shoe, the
    hash of the seal before it, when the shoe ended (ISO 8601), the numbers of
    the first and last coups opened from it (0 for none), and the seal's
    bytes. Its hash is computed from the bytes, never taken from a header."""

    seq: int
    table: str
    shoe: str
    previous: str
    ended: str
    first_coup: int
    last_coup: int
    data: bytes

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def _kept(seq: int, subject: str, headers: dict[str, str], data: bytes) -> Kept:
    _, _, table, shoe = subject.split(".")
    first, _, last = headers.get("Casino-Coups", "0-0").partition("-")
    return Kept(seq, table, shoe, headers.get("Casino-Previous", ""), headers.get("Casino-Ended", ""),
                int(first or 0), int(last or 0), data)


def _from_raw(m: RawStreamMsg) -> Kept:
    return _kept(m.seq or 0, m.subject or "", dict(m.headers or {}), m.data or b"")


class SealStore:
    """Reading and appending seals (direct gets: any replica answers)."""

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.reader = JetStreamEventStore(nc, ARCHIVE_STREAM)

    async def last(self, table: str) -> Kept | None:
        """The table's latest seal: the end of its chain."""
        return await self._get_last(subjects.sealed_filter(table))

    async def get(self, table: str, shoe: str) -> Kept | None:
        return await self._get_last(subjects.sealed(table, shoe))

    async def _get_last(self, filter_: str) -> Kept | None:
        try:
            return _from_raw(await self.js.get_last_msg(ARCHIVE_STREAM, filter_, direct=True))
        except NotFoundError:
            return None

    async def put(self, kept: Kept, expected: int) -> int:
        """Append a seal, expecting the table's chain to end at sequence
        ``expected`` (0 for none); its sequence. A seal appended already (a
        retry) is acknowledged as it was; another seal appended first is a
        ``Conflict``, and nothing is written."""
        headers = {"Nats-Msg-Id": f"seal:{kept.table}:{kept.shoe}", "Casino-Previous": kept.previous,
                   "Casino-Hash": kept.hash, "Casino-Ended": kept.ended,
                   "Casino-Coups": f"{kept.first_coup}-{kept.last_coup}",
                   "Nats-Expected-Last-Subject-Sequence": str(expected),
                   "Nats-Expected-Last-Subject-Sequence-Subject": subjects.sealed_filter(kept.table)}
        try:
            ack = await self.js.publish(subjects.sealed(kept.table, kept.shoe), kept.data, stream=ARCHIVE_STREAM,
                                        headers=headers)
        except (BadRequestError, APIError) as exc:
            if getattr(exc, "err_code", None) != WRONG_LAST_SEQUENCE:
                raise
            mine = await self.get(kept.table, kept.shoe)
            if mine is not None and mine.hash == kept.hash:  # a retry of this very seal, written before
                return mine.seq
            raise Conflict(str(exc.description)) from None
        return ack.seq

    async def scan(self, table: str, each: Callable[[Kept], object], after: int = 0) -> None:
        """``each`` of the table's seals in chain order, as they are read."""
        await self.reader.scan_raw(subjects.sealed_filter(table),
                                   lambda seq, subject, headers, data: each(_kept(seq, subject, headers, data)),
                                   after)

    async def seals(self, table: str) -> list[Kept]:
        out: list[Kept] = []
        await self.scan(table, out.append)
        return out

    async def tables(self) -> list[str]:
        """Every table with a seal, from the archive's subjects (one a shoe)."""
        return sorted({subject.split(".")[2] for subject in await self.subjects(subjects.sealed_filter())})

    async def subjects(self, filter_: str) -> list[str]:
        return await self.reader.subjects(filter_)
