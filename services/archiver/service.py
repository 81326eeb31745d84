"""The archiver's handler: each table's ended shoes, in turn, sealed into the
archive and then removed from the live stream, so that the live stream holds
the shoes in play and a few before them however many years a table deals.

A shoe is sealed once it has ended (its order revealed), every coup opened
from it is settled or held for compliance, and the next shoe has a settled
coup of its own: from then on no service needs anything of it to deal (each
finds its state in the shoes after it). What verifying it finds is reported
and sealed with it: the record cannot change, and kept live the shoe would
hold the archive up for ever. The seal is appended under the table's chain
guard, read back and checked; the shoe's messages are removed only then, and
only once every consumer of the stream and the read models' checkpoint are
past them, after checking the seal holds each of them as the live stream
does. A crash anywhere leaves either a shoe not sealed (sealed again, the
same, later), or sealed and not removed (removed later): nothing is lost,
nothing sealed twice.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import msgspec
from nats.aio.client import Client

from casino.audit.archive import (
    GENESIS,
    ArchiveError,
    Sealed,
    ShoeSeal,
    continued,
    dealt_under,
    open_seal,
    seal_shoe,
    sealable,
)
from casino.audit.audits import verify_history
from casino.metrics import Metrics
from casino.nats.permissions import SETTLEMENT_DURABLE
from casino.protocol.service import TableLocks, log
from casino.store import envelope, subjects
from casino.store.archive import Kept, SealStore
from casino.store.envelope import RulesetRecorded
from casino.store.eventstore import Conflict, Stored
from casino.store.jetstream import ARCHIVE_STREAM, DLQ_SUBJECTS, STREAM, JetStreamEventStore, dead_letter

ARCHIVER_DURABLE = "archiver"
PURGE = f"$JS.API.STREAM.PURGE.{STREAM}"
CONSUMERS = f"$JS.API.CONSUMER.LIST.{STREAM}"


class ArchiverService:
    """``advance(table)`` seals what of the table may be sealed and removes
    what of it may be removed; ``checkpoint()`` is the stream sequence the
    read models' checkpoint covers (casino.readmodels.projections). ``step``, when
    given, is awaited at each step of the way with its name (for the tests'
    crashes)."""

    def __init__(self, nc: Client, checkpoint: Callable[[], Awaitable[int]], metrics: Metrics | None = None,
                 step: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.nc = nc
        self.store = JetStreamEventStore(nc)
        self.seals = SealStore(nc)
        self.checkpoint = checkpoint
        self.metrics = metrics or Metrics("archiver")
        self.step = step
        self.locks = TableLocks()
        self.sealed_to: dict[str, int] = {}  # table -> number of its latest sealed shoe
        # table -> the shoe this instance sealed and has not removed yet, and the sequence of the latest of
        # its messages read into the seal: every message of the shoe up to it is in the seal as read.
        self.just_sealed: dict[str, tuple[str, int]] = {}
        self.rulesets: dict[str, dict[str, Stored]] = {}  # table -> digest -> ruleset.recorded message
        self.removal_denied = False
        self.unremoved: set[str] = set()  # tables with a sealed shoe left live until nothing needs it

    async def _at(self, name: str) -> None:
        if self.step is not None:
            await self.step(name)

    def behind(self, table: str, shoe: str) -> bool:
        """Whether a settlement in ``shoe`` may let an earlier shoe of the table
        be sealed, or a shoe of it sealed is still to be removed (something
        still needed it, such as the read models' checkpoint, a second away)."""
        number = subjects.shoe_number(table, shoe)
        return table in self.unremoved or (number is not None and number - 1 > self.sealed_to.get(table, -1))

    async def advance(self, table: str) -> int:
        """Seal every shoe of the table that may be sealed, in turn, and remove
        every sealed shoe that may be removed; how many shoes were sealed."""
        sealed = 0
        self.metrics.archiving(table)
        async with self.locks(table):
            while True:
                last = await self.seals.last(table)
                number = 0 if last is None else subjects.shoe_number(table, last.shoe)
                if number is None:
                    raise ArchiveError(f"table {table}'s archive ends with shoe {last and last.shoe}, "
                                       "not a shoe the shoe service named")
                self.sealed_to[table] = number
                await self._remove_sealed(table, number)
                ready = await self._ready(table, number + 1, GENESIS if last is None else last.hash)
                if ready is None:
                    break
                try:
                    await self._store(table, ready, last)
                except Conflict:  # another archiver appended first: take the chain as it now ends
                    continue
                sealed += 1
            await self._backlog(table)
        return sealed

    async def _ready(self, table: str, number: int, previous: str) -> ShoeSeal | None:
        """The seal of the table's shoe ``number``, if it may be sealed now."""
        shoe, after = subjects.shoe_id(table, number), subjects.shoe_id(table, number + 1)
        if await self.store.first(subjects.event(table, after, "*", "settle")) is None:
            return None  # until the next shoe has settled a coup, the services may need this one
        own = await self.store.read(subjects.shoe_filter(table, shoe))
        if not own or not sealable(own):
            return None
        later = [m for coup in continued(own) for m in await self.store.read(subjects.coup_filter(coup, table, after))]
        rulesets = await self._rulesets(table, dealt_under(own))
        ready = seal_shoe(table, shoe, previous, own, later, rulesets)
        # Sealed whatever the verification finds: an ended shoe whose coups are all settled or held is
        # whole, and a finding in it (a coup held, a message that cannot be read) is in the record for good;
        # it is reported, and found again by every verification of the seal. Kept live, it would hold
        # the archive up for ever.
        for f in verify_history(open_seal(ready.sealed).stored()).findings:
            self.metrics.archive_failures.labels(table, "verification").inc()
            log.error("archiver: shoe %s sealed with a finding: %s event seq %d: %s", shoe, f.coup, f.seq, f.what)
        return ready

    async def _rulesets(self, table: str, digests: set[str]) -> list[Stored]:
        known = self.rulesets.setdefault(table, {})
        if digests - known.keys():
            for m in await self.store.read(subjects.event(table, "", "", "ruleset")):
                known.update((e.data.digest, m) for e in m.batch.events if isinstance(e.data, RulesetRecorded))
        return [known[d] for d in sorted(digests) if d in known]

    async def _store(self, table: str, ready: ShoeSeal, last: Kept | None) -> None:
        """Append the seal, read it back and check it."""
        opened = open_seal(ready.sealed)
        kept = Kept(0, table, opened.shoe, opened.previous, ready.ended.isoformat(), ready.first_coup,
                    ready.last_coup, ready.sealed.data)
        await self._at("sealing")
        await self.seals.put(kept, 0 if last is None else last.seq)
        await self._at("sealed")
        back = await self.seals.get(table, opened.shoe)
        if back is None or back.hash != ready.sealed.hash:
            self.metrics.archive_failures.labels(table, "read_back").inc()
            raise ArchiveError(f"the seal of shoe {opened.shoe} read back is not the one stored")
        self.metrics.archive_sealed.labels(table).inc()
        self.sealed_to[table] = subjects.shoe_number(table, opened.shoe) or 0
        self.just_sealed[table] = (opened.shoe, ready.last_seq)
        log.info("archiver: shoe %s sealed (%d messages, %d bytes, %s)", opened.shoe, len(opened.messages),
                 len(ready.sealed.data), ready.sealed.hash)

    async def _remove_sealed(self, table: str, sealed_to: int) -> None:
        """Remove from the live stream the table's sealed shoes still in it,
        oldest first, each once nothing reading the stream still needs it."""
        while sealed_to:
            first = await self._raw(subjects.event(table, "*", subjects.NO_COUP, "shoe"), limit=1)
            number = None if not first else subjects.shoe_number(table, subjects.tokens(first[0][1])[1])
            if number is None or number > sealed_to:
                break
            if not await self._remove(table, subjects.shoe_id(table, number)):
                if not self.removal_denied:  # asked again until it goes (services.archiver.consumer)
                    self.unremoved.add(table)
                return
        self.unremoved.discard(table)

    async def _remove(self, table: str, shoe: str) -> bool:
        """Remove one sealed shoe's messages from the live stream, if every
        one of them is in its seal as stored, and nothing still needs them.
        A shoe this instance has just sealed is not read again: its messages
        up to the latest read into the seal are removed, and what is left
        under it (written after it was read) is read and compared."""
        if self.removal_denied:  # the stream refuses every purge: nothing to read or compare
            return False
        just = self.just_sealed.pop(table, None)
        if just is not None and just[0] == shoe and not (
                await self._consumed(just[1]) and await self._purge(table, shoe, just[1] + 1)):
            self.just_sealed.setdefault(table, just)  # its messages still needed: removed later
            return False
        live = await self._raw(subjects.shoe_filter(table, shoe))
        if not live:
            return True
        kept = await self.seals.get(table, shoe)
        if kept is None:
            raise ArchiveError(f"shoe {shoe} is not in the archive")
        held = {m.seq: m for m in open_seal(Sealed(kept.data, kept.hash)).messages}
        for seq, subject, msg_id, data in live:
            h = held.get(seq)
            if h is None:  # written under the shoe after it was sealed: not its record
                await self._stray(table, shoe, seq, subject, data)
            elif (h.subject, h.msg_id, h.batch) != (subject, msg_id, _as_sealed(data)):
                self.metrics.archive_failures.labels(table, "differs").inc()
                raise ArchiveError(f"shoe {shoe}'s message seq {seq} is not in its seal as stored: not removed")
        return await self._consumed(max(seq for seq, _, _, _ in live)) and await self._purge(table, shoe)

    async def _purge(self, table: str, shoe: str, below: int = 0) -> bool:
        """The shoe's messages removed from the live stream (``below``: those before that sequence only)."""
        await self._at("removing")
        asked: dict[str, object] = {"filter": subjects.shoe_filter(table, shoe)}
        if below:
            asked["seq"] = below
        reply = json.loads((await self.nc.request(PURGE, json.dumps(asked).encode(), timeout=10)).data)
        if "error" in reply:
            self.metrics.archive_failures.labels(table, "removal").inc()
            if reply["error"].get("err_code") == 10110:  # a stream of an earlier release denies purging
                self.removal_denied = True
                log.error("archiver: the stream %s denies removing anything (made by an earlier release): "
                          "shoes are sealed and kept live", STREAM)
                return False
            raise ArchiveError(f"removing shoe {shoe}: {reply['error'].get('description')}")
        await self._at("removed")
        self.metrics.archive_removed.labels(table).inc(reply.get("purged", 0))
        return True

    async def _raw(self, filter_: str, limit: int | None = None) -> list[tuple[int, str, str, bytes]]:
        """The live messages on ``filter_`` as stored, (seq, subject, message id,
        data), read whether or not they decode."""
        out: list[tuple[int, str, str, bytes]] = []
        await self.store.scan_raw(filter_, lambda seq, subject, headers, data: out.append(
            (seq, subject, headers.get("Nats-Msg-Id", ""), data)), limit=limit)
        return out

    async def _stray(self, table: str, shoe: str, seq: int, subject: str, data: bytes) -> None:
        """A message under a sealed shoe that its seal does not hold (written
        after the seal, by a fault or by whoever holds a writer's credential):
        filed as a dead letter with the reason, kept for good, and removed with
        the shoe, so that the table and the archive go on."""
        self.metrics.archive_failures.labels(table, "stray").inc()
        log.error("archiver: seq %d on %s was written under shoe %s after it was sealed: filed as a dead letter "
                  "(%s.archiver) and removed with the shoe", seq, subject, shoe, DLQ_SUBJECTS)
        await dead_letter(self.store.js, "archiver", subject, seq, data,
                          f"written under shoe {shoe} after it was sealed; not in its seal")

    async def _consumed(self, seq: int) -> bool:
        """Whether what must have read a sealed shoe's messages before they go
        has: settlement's consumer (every coup of it settled, and its
        deliveries acknowledged) and the read models' checkpoint (a restart of
        the projections folds on from there). Nobody else holds removal up:
        the services need nothing of a shoe that has ended and whose
        coups are settled, and a consumer any other user made (one delivery
        held unacknowledged) must not stall the archive."""
        offset = 0
        while True:  # the consumers' list, a page at a time, until settlement's is found
            page = json.loads((await self.nc.request(CONSUMERS, json.dumps({"offset": offset}).encode(),
                                                     timeout=10)).data)
            consumers = page.get("consumers") or []
            c = next((c for c in consumers if c.get("name") == SETTLEMENT_DURABLE), None)
            if c is not None:
                floor = (c.get("ack_floor") or {}).get("stream_seq", 0)
                if floor < seq and (c.get("num_pending") or c.get("num_ack_pending")):
                    log.info("archiver: seq %d waits for settlement's consumer (acknowledged up to %d)", seq, floor)
                    return False
                break
            offset += len(consumers)
            if not consumers or offset >= page.get("total", 0):
                break
        if (covered := await self.checkpoint()) < seq:
            log.info("archiver: seq %d waits for the read models' checkpoint (at %d)", seq, covered)
            return False
        return True

    async def _backlog(self, table: str) -> None:
        """Ended shoes of the table not yet sealed: those before the shoe in play."""
        latest = await self.store.last(subjects.event(table, "*", subjects.NO_COUP, "shoe"))
        in_play = None if latest is None else subjects.shoe_number(table, subjects.tokens(latest.subject)[1])
        if in_play is not None:
            self.metrics.archive_backlog.labels(table).set(max(0, in_play - 1 - self.sealed_to.get(table, 0)))

    async def sweep(self) -> None:
        """Every table advanced, and the streams' sizes."""
        for table in await self.store.tables():
            try:
                await self.advance(table)
            except ArchiveError as exc:
                log.error("archiver: table %s: %s", table, exc)
        for stream in (STREAM, ARCHIVE_STREAM):
            state = (await self.store.js.stream_info(stream)).state
            self.metrics.stream_messages.labels(stream).set(state.messages)
            self.metrics.stream_bytes.labels(stream).set(state.bytes)


def _as_sealed(data: bytes) -> bytes:
    """A stored batch as a seal holds it (decoded and encoded again); bytes
    that do not decode, as they are (they then differ from any seal's)."""
    try:
        return envelope.encode(envelope.decode(data))
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return data
