"""Sealed shoes: every message of an ended shoe and of the coups dealt from
it, in stream order, as one immutable record, compressed, hashed and chained
to the table's previous sealed shoe, so that a shoe removed, reordered or
altered is found. An export file holds a table's seals in order; it is
verified with no server at all (docs/replay.md: "Sealed shoes and export
files" gives the format)."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import BinaryIO

import msgspec

from casino.audit.audits import Report, verify_history
from casino.rules.shoe import ShoeEnded
from casino.store import envelope, subjects
from casino.store.envelope import CoupConfigured, RulesetRecorded
from casino.store.eventstore import EventStore, Stored

FORMAT = "casino.seal/1"
FILE_MAGIC = b"casino.export/1\n"
GENESIS = "0" * 64  # what the table's first seal is chained to


class Message(msgspec.Struct, array_like=True, frozen=True):
    """One stored message: its stream sequence, subject, message id and batch (JSON, as appended)."""

    seq: int
    subject: str
    msg_id: str
    batch: bytes


class Seal(msgspec.Struct, frozen=True):
    """A sealed shoe: ``previous`` is the hash of the table's seal before it."""

    format: str
    table: str
    shoe: str
    previous: str
    messages: tuple[Message, ...]

    def stored(self) -> list[Stored]:
        return [Stored(m.seq, m.subject, envelope.decode(m.batch), m.msg_id) for m in self.messages]


class Sealed(msgspec.Struct, frozen=True):
    """A seal as kept: its compressed bytes and their hash (sha256, hex), which the next seal names."""

    data: bytes
    hash: str


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Seal)


class ArchiveError(Exception):
    """A seal or an export file that is not what it says it is."""


def seal(table: str, shoe: str, previous: str, stored: Iterable[Stored]) -> Sealed:
    """Seal a shoe's messages (``stored``, the shoe's and its coups', each once, in any order)."""
    messages = tuple(Message(m.seq, m.subject, m.msg_id, envelope.encode(m.batch))
                     for m in sorted(stored, key=lambda m: m.seq))
    data = zlib.compress(_encoder.encode(Seal(FORMAT, table, shoe, previous, messages)), 9)
    return Sealed(data, hashlib.sha256(data).hexdigest())


def open_seal(sealed: Sealed) -> Seal:
    """The seal in ``sealed``, its hash checked."""
    if hashlib.sha256(sealed.data).hexdigest() != sealed.hash:
        raise ArchiveError(f"a seal's content does not have the hash {sealed.hash}")
    try:
        opened = _decoder.decode(zlib.decompress(sealed.data))
    except (zlib.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ArchiveError(f"the seal {sealed.hash} cannot be read: {exc}") from None
    if opened.format != FORMAT:
        raise ArchiveError(f"the seal {sealed.hash} is in format {opened.format!r}, not {FORMAT!r}")
    return opened


def chained(seals: Iterable[Sealed], previous: str = GENESIS) -> Iterator[Seal]:
    """Each seal opened, in order, each chained to the one before it (the
    first to ``previous``), of one table, each shoe once."""
    table, shoes = None, set()
    for sealed in seals:
        opened = open_seal(sealed)
        if opened.previous != previous:
            raise ArchiveError(f"the seal of shoe {opened.shoe} is chained to {opened.previous}, not to the seal "
                               f"before it ({previous}): a shoe was removed, reordered or altered")
        if table is not None and opened.table != table:
            raise ArchiveError(f"the seal of shoe {opened.shoe} is of table {opened.table}, not {table}")
        if opened.shoe in shoes:
            raise ArchiveError(f"shoe {opened.shoe} is sealed twice")
        table, previous = opened.table, sealed.hash
        shoes.add(opened.shoe)
        yield opened


def sealable(stored: list[Stored]) -> bool:
    """Whether a shoe's messages may be sealed: the shoe has ended (its order
    revealed) and every coup opened from it is settled."""
    events = [e.data for m in stored for e in m.batch.events]
    if not any(isinstance(e, ShoeEnded) for e in events):
        return False
    return _coups(stored, "coup") <= _coups(stored, "settle")


def _coups(stored: list[Stored], aggregate: str) -> set[str]:
    """The coups with ``aggregate`` messages among ``stored``."""
    return {coup for m in stored for _, _, coup, of in [subjects.tokens(m.subject)] if of == aggregate}


def table_seals(stored: list[Stored]) -> list[tuple[datetime, Sealed]]:
    """The seals of a table's shoes that may be sealed, from its history in
    stream order, each with the time its shoe ended: from its first shoe on,
    up to the first that may not be sealed yet (the chain has no gaps). Each
    seal also holds the rulesets its coups were dealt under (``ruleset.recorded``),
    so that it is verified without any file of ours."""
    rulesets = {e.data.digest: m for m in stored for e in m.batch.events if isinstance(e.data, RulesetRecorded)}
    shoes: dict[str, list[Stored]] = {}
    coups: dict[str, list[Stored]] = {}
    for m in stored:
        _, shoe, coup, _ = subjects.tokens(m.subject)
        if shoe != subjects.NO_COUP:
            shoes.setdefault(shoe, []).append(m)
            coups.setdefault(coup, []).append(m)
    out, previous = [], GENESIS
    for shoe, msgs in shoes.items():  # in the order each shoe's first message came
        if not sealable(msgs):
            break
        opened = _coups(msgs, "coup")
        dealt_under = {e.data.ruleset_digest for m in msgs for e in m.batch.events if isinstance(e.data, CoupConfigured)}
        # A round gone on into the next shoe (003 7.9) is sealed whole with the shoe it was opened from.
        whole = {m.seq: m for m in [*msgs, *(m for c in sorted(opened) for m in coups[c]),
                                    *(rulesets[d] for d in sorted(dealt_under) if d in rulesets)]}
        sealed = seal(subjects.tokens(msgs[0].subject)[0], shoe, previous, whole.values())
        ended = next(e.at for m in msgs for e in m.batch.events if isinstance(e.data, ShoeEnded))
        out.append((ended, sealed))
        previous = sealed.hash
    return out


async def export_table(store: EventStore, table: str, since: datetime | None = None,
                       until: datetime | None = None) -> tuple[Header, list[Sealed]]:
    """The table's sealed shoes that ended within [``since``, ``until``) (all
    of them without), with what the first is chained to."""
    sealed = table_seals(await store.read(subjects.table_filter(table)))
    chosen = [i for i, (ended, _) in enumerate(sealed)
              if (since is None or ended >= since) and (until is None or ended < until)]
    previous = sealed[chosen[0] - 1][1].hash if chosen and chosen[0] > 0 else GENESIS
    seals = [sealed[i][1] for i in chosen]
    header = Header(table, previous, seals[-1].hash if seals else previous, len(seals),
                    since.isoformat() if since else "", until.isoformat() if until else "")
    return header, seals


def verify_export(source: BinaryIO) -> tuple[Header, Report]:
    """An export file verified with no server: the chain of its seals, then
    every ended shoe's commitment and every coup decided again."""
    header, seals = read_export(source)
    opened = list(chained(seals, header.previous))
    if opened and opened[0].table != header.table:
        raise ArchiveError(f"the file's seals are of table {opened[0].table}, its header says {header.table}")
    if (seals[-1].hash if seals else header.previous) != header.last:
        raise ArchiveError(f"the file's last seal is not {header.last}, the one its header names: cut short or replaced")
    stored = {m.seq: m for s in opened for m in s.stored()}  # a ruleset held by several seals, once
    return header, verify_history([stored[seq] for seq in sorted(stored)])


# ---- export files -----------------------------------------------------------


class Header(msgspec.Struct, frozen=True):
    """An export file's first record: the table, the window asked for, what
    its first seal is chained to (the genesis, or a seal before the window)
    and the hash of its last seal (to compare with the casino's archive or a
    later export: a file cut short, or its last shoe replaced, differs)."""

    table: str
    previous: str
    last: str
    seals: int
    since: str = ""
    until: str = ""


def write_export(out: BinaryIO, header: Header, seals: Iterable[Sealed]) -> None:
    out.write(FILE_MAGIC)
    _write_record(out, msgspec.json.encode(header))
    for sealed in seals:
        _write_record(out, sealed.data)


def read_export(source: BinaryIO) -> tuple[Header, list[Sealed]]:
    """The header and the seals of an export file (each seal's hash computed:
    the chain says whether they are the table's)."""
    if source.read(len(FILE_MAGIC)) != FILE_MAGIC:
        raise ArchiveError("not a casino export file (it does not begin with casino.export/1)")
    header = msgspec.json.decode(_read_record(source) or b"", type=Header)
    seals = []
    while (data := _read_record(source)) is not None:
        seals.append(Sealed(data, hashlib.sha256(data).hexdigest()))
    if len(seals) != header.seals:
        raise ArchiveError(f"the file holds {len(seals)} seals, its header says {header.seals}")
    return header, seals


def _write_record(out: BinaryIO, data: bytes) -> None:
    out.write(len(data).to_bytes(8, "big"))
    out.write(data)


def _read_record(source: BinaryIO) -> bytes | None:
    size = source.read(8)
    if not size:
        return None
    data = source.read(int.from_bytes(size, "big"))
    if len(size) != 8 or len(data) != int.from_bytes(size, "big"):
        raise ArchiveError("the file ends in the middle of a record")
    return data
