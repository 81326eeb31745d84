"""Sealed shoes: every message of an ended shoe and of the coups dealt from
it, in stream order, as one immutable record, compressed, hashed and chained
to the table's previous sealed shoe, so that a shoe removed, reordered or
altered is found. An export file holds a table's seals in order; it is
verified with no server at all (docs/replay.md: "Sealed shoes and export
files" gives the format)."""

from __future__ import annotations

import hashlib
import heapq
import zlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import datetime
from typing import Annotated, BinaryIO

import msgspec
from nats.aio.client import Client

from casino.audit.audits import Report, verify_history
from casino.audit.carried import Carried
from casino.protocol.commands import Token
from casino.readmodels import projections
from casino.readmodels.projections import Projector
from casino.rules.settlement import CoupSettled
from casino.rules.shoe import RoundEnded, ShoeEnded
from casino.rules.text import Text
from casino.store import envelope, subjects
from casino.store.archive import Kept, SealStore
from casino.store.envelope import CoupConfigured, CoupHeld, RulesetRecorded
from casino.store.eventstore import Appended, Stored, read_stored
from casino.store.jetstream import JetStreamEventStore

FORMAT = "casino.seal/1"
FILE_MAGIC = b"casino.export/1\n"
GENESIS = "0" * 64  # what the table's first seal is chained to
Hash = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
# A shoe of eight decks is about a hundred coups, a few MiB of messages: a
# seal that inflates past this, or a record larger, is not one of ours (a
# small file could otherwise inflate to gigabytes before any check).
MOST_SEAL_BYTES = 256 * 1024 * 1024
MOST_HEADER_BYTES = 64 * 1024


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
        return [read_stored(m.seq, m.subject, m.batch, m.msg_id) for m in self.messages]


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
    messages = tuple(Message(m.seq, m.subject, m.msg_id, m.raw if m.unreadable else envelope.encode(m.batch))
                     for m in sorted(stored, key=lambda m: m.seq))
    # zlib's default level: a shoe's seal 5 % larger than at level 9, made in 40 % of the time (docs/benchmarks.md).
    data = zlib.compress(_encoder.encode(Seal(FORMAT, table, shoe, previous, messages)), 6)
    return Sealed(data, hashlib.sha256(data).hexdigest())


def open_seal(sealed: Sealed) -> Seal:
    """The seal in ``sealed``, its hash checked."""
    if hashlib.sha256(sealed.data).hexdigest() != sealed.hash:
        raise ArchiveError(f"a seal's content does not have the hash {sealed.hash}")
    try:
        opened = _decoder.decode(_inflated(sealed))
    except (zlib.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ArchiveError(f"the seal {sealed.hash} cannot be read: {exc}") from None
    if opened.format != FORMAT:
        raise ArchiveError(f"the seal {sealed.hash} is in format {opened.format!r}, not {FORMAT!r}")
    return opened


def _inflated(sealed: Sealed) -> bytes:
    """A seal's bytes inflated, refused past ``MOST_SEAL_BYTES``."""
    inflating = zlib.decompressobj()
    data = inflating.decompress(sealed.data, MOST_SEAL_BYTES)
    if inflating.unconsumed_tail:
        raise ArchiveError(f"the seal {sealed.hash} inflates past {MOST_SEAL_BYTES // 2**20} MiB: not a sealed shoe")
    if not inflating.eof:
        raise ArchiveError(f"the seal {sealed.hash} cannot be read: its compressed data ends early")
    return data


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
    revealed) and every coup opened from it is settled or held for
    compliance (whose wagers stay unsettled for compliance to rule on)."""
    events = [e.data for m in stored for e in m.batch.events]
    if not any(isinstance(e, ShoeEnded) for e in events):
        return False
    return not unsettled(stored)


def unsettled(stored: list[Stored]) -> set[str]:
    """The coups opened among ``stored`` (a readable ``coup.configured``)
    neither settled nor held for compliance. A message under a coup subject
    where no coup opened (a stray) is no coup: it is sealed as it is stored."""
    opened, done = set(), set()
    for m in stored:
        for e in m.batch.events:
            if isinstance(e.data, CoupConfigured):
                opened.add(subjects.tokens(m.subject)[2])
            elif isinstance(e.data, CoupSettled | CoupHeld):
                done.add(subjects.tokens(m.subject)[2])
    return opened - done


def _coups(stored: list[Stored], aggregate: str) -> set[str]:
    """The coups with ``aggregate`` messages among ``stored``."""
    return {coup for m in stored for _, _, coup, of in [subjects.tokens(m.subject)] if of == aggregate}


def opened(stored: Iterable[Stored]) -> set[str]:
    """The coups opened among ``stored`` (their ``coup.configured``): a shoe's
    own, where its record may also hold what was filed before the next coup's
    opening (a card out of it between coups), the next coup opening from the
    next shoe."""
    return {subjects.tokens(m.subject)[2] for m in stored for e in m.batch.events if isinstance(e.data, CoupConfigured)}


class ShoeSeal(msgspec.Struct, frozen=True):
    """A shoe sealed, with what the archive files it under: when the shoe
    ended, the numbers of the first and last coups opened from it (0 for
    none), and the sequence of its latest live message (the shoe's messages
    are removed only once every reader of the stream is past it)."""

    sealed: Sealed
    ended: datetime
    first_coup: int
    last_coup: int
    last_seq: int


def continued(own: list[Stored]) -> list[str]:
    """The coups opened from a shoe that went on into the next (003 7.9: no
    round ended for them in it), whose later messages the seal also holds."""
    ended = {e.data.coup_id for m in own for e in m.batch.events if isinstance(e.data, RoundEnded)}
    return sorted(opened(own) - ended)


def dealt_under(stored: Iterable[Stored]) -> set[str]:
    """The digests of the rulesets the coups among ``stored`` were dealt under."""
    return {e.data.ruleset_digest for m in stored for e in m.batch.events if isinstance(e.data, CoupConfigured)}


def seal_shoe(table: str, shoe: str, previous: str, own: list[Stored], later: Iterable[Stored],
              rulesets: Iterable[Stored]) -> ShoeSeal:
    """Seal one shoe that ``sealable`` allows: ``own``, its messages (every
    message under its subjects); ``later``, its coups' messages filed under the
    next shoe (``continued``); ``rulesets``, the ``ruleset.recorded`` messages
    its coups name, so that it is verified with no file of ours."""
    numbers = sorted(n for c in opened(own) if (n := subjects.coup_number(c)) is not None)
    whole = {m.seq: m for m in [*own, *later, *rulesets]}
    ended = next(e.at for m in own for e in m.batch.events if isinstance(e.data, ShoeEnded))
    return ShoeSeal(seal(table, shoe, previous, whole.values()), ended, numbers[0] if numbers else 0,
                    numbers[-1] if numbers else 0, max(m.seq for m in own))


async def export_table(seals: SealStore, table: str, since: datetime | None = None,
                       until: datetime | None = None) -> tuple[Header, list[Sealed]]:
    """The table's sealed shoes in the archive that ended within [``since``,
    ``until``) (all of them without), with what the first is chained to."""
    kept = await seals.seals(table)
    chosen = [i for i, k in enumerate(kept) if (since is None or datetime.fromisoformat(k.ended) >= since)
              and (until is None or datetime.fromisoformat(k.ended) < until)]
    before = chosen[0] if chosen else len(kept)  # the seals before the window: the first chosen is chained to the last
    previous = kept[before - 1].hash if before else GENESIS
    chosen_seals = [Sealed(kept[i].data, kept[i].hash) for i in chosen]
    header = Header(table, previous, chosen_seals[-1].hash if chosen_seals else previous, len(chosen_seals),
                    since.isoformat() if since else "", until.isoformat() if until else "")
    return header, chosen_seals


async def in_play(live: JetStreamEventStore, table: str, sealed: set[str]) -> list[Sealed]:
    """The table's shoes the live stream holds that are not sealed yet (the
    shoe in play, and one ended but waiting for its coups' settlement or its
    seal), each with the rulesets its coups name, as a seal chained to
    nothing (``previous`` empty): what a dispute needs before the shoe ends.
    No chain proves them until the archiver seals them."""
    shoes = {subjects.tokens(s)[1] for s in await live.subjects(subjects.table_filter(table))} - sealed
    numbered = sorted((n, shoe) for shoe in shoes if (n := subjects.shoe_number(table, shoe)) is not None)
    recorded = await live.read(subjects.event(table, "", "", "ruleset"))
    out = []
    for _, shoe in numbered:
        own = await live.read(subjects.shoe_filter(table, shoe))
        rulesets = [m for m in recorded if any(isinstance(e.data, RulesetRecorded) and e.data.digest in
                                               dealt_under(own) for e in m.batch.events)]
        out.append(seal(table, shoe, "", [*own, *rulesets]))
    return out


def verify_in_play(unsealed: Iterable[Sealed], table: str) -> Report:
    """Shoes exported before their seal: each of the table and marked as not
    sealed; their coups decided again as far as they are dealt (a coup still
    being dealt is left out, as everywhere) and an ended shoe held to its
    commitment. Nothing here is proven by the chain."""
    reports = []
    for sealed in unsealed:
        opened = open_seal(sealed)
        if opened.previous or opened.table != table:
            raise ArchiveError(f"the shoe {opened.shoe} after the seals is not table {table}'s shoe in play")
        stored = opened.stored()
        if stray := next((m.subject for m in stored if subjects.tokens(m.subject)[0] != table), None):
            raise ArchiveError(f"the shoe in play {opened.shoe} of table {table} holds {stray}: not the table's")
        reports.append(verify_history(stored))
    return Report.of(reports)


def verify_export(source: BinaryIO, expect: str | None = None) -> tuple[Header, Report]:
    """An export file verified with no server: the chain of its seals, then
    every ended shoe's commitment and every coup decided again. Anyone can
    seal shoes and chain them: ``expect``, the hash of the last seal as the
    casino's archive holds it (``casino verify --file`` prints it), anchors
    the chain; a file whose chain does not end there is refused. Anything in
    the file that is not what it should be is refused (ArchiveError), never
    a crash."""
    try:
        header, seals, unsealed = read_export(source)
        if not seals and not unsealed:
            raise ArchiveError("the file holds no shoe")
        end = seals[-1].hash if seals else header.previous
        if end != header.last:
            raise ArchiveError(f"the file's last seal is not {header.last}, the one its header names: cut short or "
                               "replaced")
        if expect is not None and end != expect:
            raise ArchiveError(f"the file's chain ends at {end}, not at {expect}: not the casino's "
                               "archive as expected")
        return header, Report.of([verify_seals(seals, header.previous, header.table),
                                  verify_in_play(unsealed, header.table)])
    except ArchiveError:
        raise
    except Exception as exc:  # whatever malformed input makes of a decoder: refused, with what it was
        raise ArchiveError(f"the file cannot be read ({type(exc).__name__}: {str(exc)[:200]})") from None


def verify_seals(seals: Iterable[Sealed], previous: str = GENESIS, table: str | None = None) -> Report:
    """A table's seals in order, the first chained to ``previous``: the chain,
    then each shoe's commitment and each coup decided again, seal by seal
    (each holds its coups whole and the rulesets they name): one seal in
    memory at a time."""
    reports, shoe, coups, carried = [], None, set(), Carried()
    for opened in chained(seals, previous):
        if table is not None and opened.table != table:
            raise ArchiveError(f"the seals are of table {opened.table}, not {table}")
        number = subjects.shoe_number(opened.table, opened.shoe)
        first = 1 if shoe is None and previous == GENESIS else None  # a chain from the genesis begins at shoe 1
        if number is None or (shoe is not None and number != shoe + 1) or (first is not None and number != first):
            raise ArchiveError(f"the seal of shoe {opened.shoe} follows shoe {shoe} of table {opened.table}: "
                               "a shoe is missing, or the seal is not one of the table's")
        stored = opened.stored()
        coups |= _whole(opened, stored)
        shoe = number
        reports.append(verify_history(stored, carried))
    numbers = sorted(n for c in coups if (n := subjects.coup_number(c)) is not None)
    if numbers and len(numbers) != numbers[-1] - numbers[0] + 1:
        missing = sorted(set(range(numbers[0], numbers[-1] + 1)) - set(numbers))
        raise ArchiveError(f"coups {', '.join(map(str, missing[:5]))} are missing from the sealed shoes")
    return Report.of(reports)


def _whole(opened: Seal, stored: list[Stored]) -> set[str]:
    """The coups of a sealed shoe, which must be whole: every message of its
    table, the shoe ended (its order revealed), every coup opened from it
    settled (a shoe is sealed only then: ``sealable``)."""
    for m in stored:
        if subjects.tokens(m.subject)[0] != opened.table:
            raise ArchiveError(f"the seal of shoe {opened.shoe} of table {opened.table} holds {m.subject}: "
                               "relabelled, or not the table's")
    if not any(isinstance(e.data, ShoeEnded) for m in stored if subjects.tokens(m.subject)[1] == opened.shoe
               for e in m.batch.events):
        raise ArchiveError(f"the seal of shoe {opened.shoe} does not hold the shoe's end: not an ended shoe")
    if left := unsettled(stored):
        raise ArchiveError(f"the seal of shoe {opened.shoe} holds coups {', '.join(sorted(left)[:5])} with no "
                           "settlement: a sealed shoe's coups are all settled or held (cut from the seal?)")
    return _coups(stored, "coup")


async def verify_archived(seals: SealStore, table: str, share: int = 0, shares: int = 1) -> Report:
    """Share ``share`` of ``shares`` of a table's sealed shoes verified from the
    archive: a run of shoes in turn, chained to the hash of the seal before
    it (computed from its bytes), so that the shares together cover the whole
    chain and every shoe once (an indexed Job's pods: k8s/audit)."""
    last = await seals.last(table)
    top = subjects.shoe_number(table, last.shoe) if last is not None else None
    if last is None or top is None:
        return Report(0, 0, [])
    first, end = top * share // shares + 1, top * (share + 1) // shares + 1
    before = await seals.get(table, subjects.shoe_id(table, first - 1)) if first > 1 else None
    if first > 1 and before is None:
        raise ArchiveError(f"shoe {subjects.shoe_id(table, first - 1)} is missing from the archive")

    previous, reports = before.hash if before is not None else GENESIS, []
    for n in range(first, end):  # one seal in memory at a time
        k = await seals.get(table, subjects.shoe_id(table, n))
        if k is None:
            raise ArchiveError(f"shoe {subjects.shoe_id(table, n)} is missing from the archive")
        reports.append(verify_seals([Sealed(k.data, k.hash)], previous, table))
        previous = k.hash
    return Report.of(reports)


# ---- export files -----------------------------------------------------------


class Header(msgspec.Struct, frozen=True):
    """An export file's first record: the table, the window asked for, what
    its first seal is chained to (the genesis, or a seal before the window)
    and the hash of its last seal (to compare with the casino's archive or a
    later export: a file cut short, or its last shoe replaced, differs)."""

    table: Token
    previous: Hash
    last: Hash
    seals: Annotated[int, msgspec.Meta(ge=0)]
    since: Text = ""
    until: Text = ""
    # The shoes not sealed yet whose messages follow the seals (``in_play``), each marked as not
    # sealed: outside the chain, proven by no hash until the archiver seals them.
    in_play: tuple[Token, ...] = ()
    # Whose record it is and when it was written (``casino.store.jetstream.Named``): shown, not proven
    # (the chain's hashes, anchored with --expect, prove the seals).
    casino: Text = ""
    record_made: Text = ""
    exported: Text = ""


def write_export(out: BinaryIO, header: Header, seals: Iterable[Sealed], unsealed: Iterable[Sealed] = ()) -> None:
    out.write(FILE_MAGIC)
    _write_record(out, msgspec.json.encode(header))
    for sealed in (*seals, *unsealed):
        _write_record(out, sealed.data)


def read_export(source: BinaryIO) -> tuple[Header, list[Sealed], list[Sealed]]:
    """The header, the seals and the shoes not sealed of an export file (each
    seal's hash computed: the chain says whether they are the table's)."""
    if source.read(len(FILE_MAGIC)) != FILE_MAGIC:
        raise ArchiveError("not a casino export file (it does not begin with casino.export/1)")
    try:
        header = msgspec.json.decode(_read_record(source, MOST_HEADER_BYTES) or b"", type=Header)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ArchiveError(f"the file's header cannot be read: {exc}") from None
    seals = []
    while (data := _read_record(source, MOST_SEAL_BYTES)) is not None:
        seals.append(Sealed(data, hashlib.sha256(data).hexdigest()))
    if len(seals) != header.seals + len(header.in_play):
        raise ArchiveError(f"the file holds {len(seals)} shoes, its header says {header.seals} sealed and "
                           f"{len(header.in_play)} not")
    return header, seals[:header.seals], seals[header.seals:]


def _write_record(out: BinaryIO, data: bytes) -> None:
    out.write(len(data).to_bytes(8, "big"))
    out.write(data)


def _read_record(source: BinaryIO, most: int) -> bytes | None:
    size = source.read(8)
    if not size:
        return None
    if int.from_bytes(size, "big") > most:
        raise ArchiveError(f"the file holds a record of {int.from_bytes(size, 'big'):,} bytes, more than {most:,}: "
                           "not an export of ours")
    data = source.read(int.from_bytes(size, "big"))
    if len(size) != 8 or len(data) != int.from_bytes(size, "big"):
        raise ArchiveError("the file ends in the middle of a record")
    return data


# ---- the history, live and archived ------------------------------------------


def history(nc: Client) -> WithArchive:
    """The store's whole history, live and archived, over ``nc``."""
    return WithArchive(JetStreamEventStore(nc), SealStore(nc))


class WithArchive:
    """The event store as replay, verification and export read it: the live
    stream and the archive's sealed shoes as one history, each message once,
    in stream order (a shoe's seal is checked against its hash as it is
    opened). A filter naming a shoe opens that shoe's seal; one naming a
    coup by number opens the seal of the shoe it was opened from, found by
    halving the table's shoes (each seal says its coups); any other opens
    every seal of the table. Read-only."""

    OPENED = 16  # seals kept opened: a table's coups are read one by one, each shoe's many in a row

    def __init__(self, live: JetStreamEventStore, seals: SealStore) -> None:
        self.live, self.seals = live, seals
        self.opened: dict[tuple[str, str], Seal] = {}
        self.archived_only = 0  # messages scanned from seals alone (their shoes removed from the live stream)

    async def append(self, *args: object, **kwargs: object) -> Appended:
        raise PermissionError("the history is read-only")

    async def read(self, filter_: str, after: int = 0, limit: int | None = None) -> list[Stored]:
        return (await self._merged(filter_, after, limit))[0]

    async def scan_raw(self, filter_: str, each: Callable[[int, str, dict[str, str], bytes], object],
                       after: int = 0, limit: int | None = None) -> None:
        """The live stream's messages as stored (a seal holds only what decodes)."""
        await self.live.scan_raw(filter_, each, after, limit)

    async def scan(self, filter_: str, each: Callable[[Stored], object], after: int = 0,
                   limit: int | None = None) -> None:
        """``read``, handed out one by one; ``archived_only`` counts those its shoes' seals alone held."""
        merged, live = await self._merged(filter_, after, limit)
        for m in merged:
            self.archived_only += m.seq not in live
            each(m)

    async def _merged(self, filter_: str, after: int, limit: int | None) -> tuple[list[Stored], set[int]]:
        live = await self.live.read(filter_, after)
        merged = {m.seq: m for m in await self._archived(filter_) if m.seq > after}
        merged.update((m.seq, m) for m in live)
        return [merged[seq] for seq in sorted(merged)][:limit], {m.seq for m in live}

    async def first(self, filter_: str) -> Stored | None:
        return next(iter(await self.read(filter_)), None)

    async def last(self, filter_: str) -> Stored | None:
        """The live stream's latest (it is later than anything sealed), else the archive's."""
        found = await self.live.last(filter_)
        if found is None and (archived := await self._archived(filter_)):
            return max(archived, key=lambda m: m.seq)
        return found

    async def tables(self) -> list[str]:
        return sorted({*await self.live.tables(), *await self.seals.tables()})

    async def _archived(self, filter_: str) -> list[Stored]:
        tokens = filter_.split(".")
        if tokens[:2] != subjects.EVENTS.split(".") or len(tokens) < 3:
            return []
        table, shoe, coup = (tokens[2:5] + [">", ">"])[:3]
        out: list[Stored] = []
        for t in [table] if table not in ("*", ">") else await self.seals.tables():
            if shoe not in ("*", ">"):
                kept = [k for k in [await self.seals.get(t, shoe)] if k is not None]
            elif coup not in ("*", ">") and (number := subjects.coup_number(coup)) is not None:
                kept = await self._beside(t, number, await self._holding(t, number))
            else:
                kept = await self.seals.seals(t)
            for k in kept:
                # decoded as asked: a shoe's wager books read without its cards, a coup without its shoe's others
                out.extend(read_stored(m.seq, m.subject, m.batch, m.msg_id) for m in self._open(k).messages
                           if subjects.matches(filter_, m.subject))
        return out

    def _open(self, kept: Kept) -> Seal:
        key = (kept.table, kept.shoe)
        if key not in self.opened:
            if len(self.opened) >= self.OPENED:
                del self.opened[next(iter(self.opened))]
            self.opened[key] = open_seal(Sealed(kept.data, kept.hash))
        return self.opened[key]

    async def _beside(self, table: str, number: int, holding: Kept | None) -> list[Kept]:
        """The seal holding coup ``number``, and the shoe's before it where the
        coup is its first (what was filed before its opening may be under the
        shoe a card out between coups came from), or after it where the coup
        is its last (an earlier archiver's seal names a coup among its own
        where it holds only what was filed before its opening)."""
        if holding is None:
            return []
        shoe = subjects.shoe_number(table, holding.shoe) or 0
        near = [shoe - 1] if number == holding.first_coup and shoe > 1 else []
        near += [shoe + 1] if number == holding.last_coup else []
        return [holding] + [k for n in near if (k := await self.seals.get(table, subjects.shoe_id(table, n))) is not None]

    async def _holding(self, table: str, number: int) -> Kept | None:
        """The seal of the shoe coup ``number`` was opened from, if sealed:
        the table's shoes are numbered in turn and their coups follow one
        another, so a few direct gets find it among years of shoes."""
        last = await self.seals.last(table)
        top = subjects.shoe_number(table, last.shoe) if last is not None else None
        if top is None or last is None:
            return None
        if number > last.last_coup and last.last_coup:
            return None
        low, high = 1, top
        while low <= high:
            middle = (low + high) // 2
            kept = await self.seals.get(table, subjects.shoe_id(table, middle))
            probe = middle
            while kept is not None and not kept.first_coup and probe < high:  # a shoe with no coup opened from it
                probe += 1
                kept = await self.seals.get(table, subjects.shoe_id(table, probe))
            if kept is None or not kept.first_coup or number < kept.first_coup:
                high = middle - 1
            elif number > kept.last_coup:
                low = probe + 1
            else:
                return kept
        return None


# ---- the read models folded from the whole history ----------------------------


async def fold_history(projector: Projector, nc: Client,
                       folded: Callable[[Projector, set[tuple[str, str]]], Awaitable[None]]) -> None:
    """The read models folded from the whole history, sealed and live, as
    the live fold made them. Each table's sealed shoes first, from the
    archive in stream order, into a fold of the table's own (``folded`` is
    handed it after each shoe, so that an ended shoe's figures are written
    and let go); then the live stream, page by page, into ``projector``,
    which takes each table's fold, every message under a sealed shoe passed
    over (its seal held it)."""
    seals, sealed = SealStore(nc), {}
    for table in await seals.tables():
        own = Projector()
        sealed[table] = await _fold_sealed(own, seals, table, folded)
        projector.table_status.update(own.table_status)
        projector.shoe_stats.update(own.shoe_stats)
        projector.takings.update(own.takings)
    live = JetStreamEventStore(nc)
    after = 0
    while True:
        page: list[Stored] = []
        await live.scan(f"{subjects.EVENTS}.>", page.append, after, projections.FOLD_PAGE)
        changed: set[tuple[str, str]] = set()
        for m in page:
            table, shoe, _, _ = subjects.tokens(m.subject)
            if not m.unreadable and shoe not in sealed.get(table, ()):
                changed |= projector.apply(m.subject, m.seq, m.batch)
        if page:
            projector.seq = after = max(projector.seq, page[-1].seq)
        await folded(projector, changed)
        if len(page) < projections.FOLD_PAGE:
            return


async def _fold_sealed(own: Projector, seals: SealStore, table: str,
                       folded: Callable[[Projector, set[tuple[str, str]]], Awaitable[None]]) -> set[str]:
    """The table's sealed shoes folded into ``own`` in stream order, one
    shoe after another: a shoe's messages interleave with the next shoe's
    at most (a round ends, or its last coup settles, as the next shoe is
    shuffled), so two seals are open at a time. Its sealed shoes."""
    last = await seals.last(table)
    top = subjects.shoe_number(table, last.shoe) if last is not None else None
    waiting: list[tuple[int, int, Stored]] = []  # (seq, shoe number, message), the next to fold first
    left: dict[int, int] = {}
    shoes: set[str] = set()
    for n in range(1, (top or 0) + 2):
        if n <= (top or 0):
            shoe = subjects.shoe_id(table, n)
            kept = await seals.get(table, shoe)
            if kept is None:
                raise ArchiveError(f"shoe {shoe} is missing from the archive")
            shoes.add(shoe)
            mine = [m for m in open_seal(Sealed(kept.data, kept.hash)).stored()
                    if subjects.tokens(m.subject)[1] == shoe and not m.unreadable]
            left[n] = len(mine)
            for m in mine:
                heapq.heappush(waiting, (m.seq, n, m))
        changed: set[tuple[str, str]] = set()
        while waiting and (left.get(n - 1, 0) or n > (top or 0)):  # the shoe before, whole
            _, of, m = heapq.heappop(waiting)
            left[of] -= 1
            changed |= own.apply(m.subject, m.seq, m.batch)
        await folded(own, changed)
    return shoes
