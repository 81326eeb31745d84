"""Read models for the floor: table status, shoe statistics, per-table takings.

``Projector`` is a fold of the event stream (pure); the projections service
keeps its result in JetStream key-value buckets as events arrive, with a
checkpoint of the fold's whole state (one value: its stream sequence and every
table's and shoe in play's figures) from which a restart folds on, and
``casino projections rebuild`` folds the stream again from the first event.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import msgspec

from casino.rules import settlement, shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.baccarat import scoreboard
from casino.rules.blackjack import messages as blackjack_messages
from casino.store import subjects
from casino.store.envelope import Batch, CoupConfigured, CoupHeld, decode
from casino.store.eventstore import UNREADABLE, EventStore, Stored

BUCKETS = {"table_status": "casino_table_status", "shoe_stats": "casino_shoe_stats", "takings": "casino_takings"}
META = "casino_projections"
log = logging.getLogger("casino")
FOLD_PAGE = 10_000  # messages read and folded at a time from the store: memory bounded however long the stream


class TableStatus(msgspec.Struct):
    table: str
    game: str = ""
    ruleset: str = ""
    coup: str = ""
    coups: int = 0
    procedure: str = ""
    phase: str = ""
    shoe: str = ""
    last_result: str = ""
    last_event_at: float = 0.0


class ShoeStats(msgspec.Struct):
    shoe: str
    table: str
    decks: int = 0
    cards: int = 0
    cut_index: int | None = None
    burned: int = 0
    drawn: int = 0
    rounds: int = 0
    cut_card_reached: bool = False
    reshuffle: str = ""
    ended: bool = False
    # Each baccarat coup's result by its number (a voided coup has none), as
    # casino.rules.baccarat.scoreboard.code writes it: the shoe's scoreboard, drawn live.
    results: dict[int, str] = msgspec.field(default_factory=dict)

    @property
    def penetration(self) -> float:
        return (self.burned + self.drawn) / self.cards if self.cards else 0.0


class Takings(msgspec.Struct):
    table: str
    coups_settled: int = 0
    staked: int = 0
    returned: int = 0
    house_net: int = 0


# Raised whenever the fold changes what it makes of the events: a checkpoint of
# another version is not restored, and the service folds again from the first event.
FOLD_VERSION = 2  # 2: a shoe's results (ShoeStats.results)


class Checkpoint(msgspec.Struct):
    """The fold's whole state at a stream sequence."""

    version: int
    seq: int
    table_status: list[TableStatus]
    shoe_stats: list[ShoeStats]
    takings: list[Takings]


class Projector:
    """The fold: apply each stored batch in stream order."""

    def __init__(self) -> None:
        self.table_status: dict[str, TableStatus] = {}
        self.shoe_stats: dict[str, ShoeStats] = {}
        self.takings: dict[str, Takings] = {}
        self.seq = 0

    def apply(self, subject: str, seq: int, batch: Batch) -> set[tuple[str, str]]:
        """Apply one batch; the (bucket, key) pairs it changed. A batch already
        applied (a redelivery) changes nothing."""
        if seq <= self.seq:
            return set()
        self.seq = seq
        table, shoe_id, coup, _ = subjects.tokens(subject)
        changed: set[tuple[str, str]] = {("table_status", table)}
        self._status(table).last_event_at = max(self._status(table).last_event_at,
                                                max(env.at.timestamp() for env in batch.events))
        for env in batch.events:
            e = env.data
            if isinstance(e, shoe.ShoeEvent):
                self._shoe(table, e)
                changed.add(("shoe_stats", e.shoe_id))
            elif isinstance(e, settlement.CoupSettled):
                t = self.takings.setdefault(table, Takings(table))
                t.coups_settled += 1
                t.staked += e.staked
                t.returned += e.returned
                t.house_net = t.staked - t.returned
                status = self._status(table)
                if status.coup == e.coup_id:
                    status.phase = "settled"
                changed |= {("takings", table), ("table_status", table)}
            else:
                if isinstance(e, baccarat_messages.CoupResulted) and (st := self.shoe_stats.get(shoe_id)) is not None \
                        and not st.ended:
                    st.results[subjects.coup_number(coup) or 0] = scoreboard.code(scoreboard.of_result(e))
                    changed.add(("shoe_stats", shoe_id))
                if self._coup(table, shoe_id, coup, e):
                    changed.add(("table_status", table))
        return changed

    def fold(self, stored: Iterable[Stored]) -> set[tuple[str, str]]:
        """Apply stored batches in stream order; the (bucket, key) pairs they changed."""
        changed: set[tuple[str, str]] = set()
        for m in stored:
            changed |= self.apply(m.subject, m.seq, m.batch)
        return changed

    def _status(self, table: str) -> TableStatus:
        return self.table_status.setdefault(table, TableStatus(table))

    def _coup(self, table: str, shoe_id: str, coup: str, e: object) -> bool:
        s = self._status(table)
        match e:
            case CoupConfigured():
                s.game, s.ruleset, s.coup, s.coups, s.shoe = e.game, e.ruleset, coup, e.coup_number, shoe_id
                s.phase, s.procedure = "betting", ""
            case baccarat_messages.CoupOpened():
                s.procedure = e.procedure
            case baccarat_messages.ProcedureFellBack():
                s.procedure = e.procedure
            case baccarat_messages.BettingClosed() | blackjack_messages.BettingClosed():
                s.phase = "dealing"
            case baccarat_messages.CoupResulted():
                s.phase, s.last_result = "finished", f"{e.winner} {e.player_points}-{e.banker_points}"
            case blackjack_messages.CoupResulted():
                s.phase = "finished"
                s.last_result = f"dealer {'blackjack' if e.dealer_blackjack else e.dealer_total}"
            case CoupHeld():
                s.phase = "held"
            case _:
                return False
        return True

    def _shoe(self, table: str, e: shoe.ShoeEvent) -> None:
        st = self.shoe_stats.setdefault(e.shoe_id, ShoeStats(e.shoe_id, table))
        match e:
            case shoe.ShoeShuffled():
                st.decks, st.cards, st.cut_index = e.decks, e.cards, e.cut_index
            case shoe.CardBurned():
                st.burned += 1
            case shoe.CardDrawn():
                st.drawn += 1
            case shoe.RoundStarted():
                st.rounds += 1
            case shoe.CutCardReached():
                st.cut_card_reached = True
            case shoe.ReshuffleRequired():
                st.reshuffle = f"{e.when} ({e.clause})"
            case shoe.ShoeEnded():
                st.ended = True

    def forget_ended_shoes(self, among: Iterable[str] | None = None) -> None:
        """Let go of the shoes that have ended, once their last figures are
        written: no event comes for a shoe after its end, and the live read
        models would otherwise hold every shoe ever dealt. ``among``: the
        shoes whose figures were just written (None: every shoe held), so
        that a write costs what it changed, not the floor's shoes."""
        for shoe_id in [k for k in (self.shoe_stats if among is None else among)
                        if (st := self.shoe_stats.get(k)) is not None and st.ended]:
            del self.shoe_stats[shoe_id]

    def checkpoint(self) -> bytes:
        """The whole state, compressed (a few hundred bytes a table)."""
        state = Checkpoint(FOLD_VERSION, self.seq, list(self.table_status.values()),
                           list(self.shoe_stats.values()), list(self.takings.values()))
        return zlib.compress(msgspec.msgpack.encode(state))

    @classmethod
    def from_checkpoint(cls, data: bytes) -> Projector | None:
        """The fold as checkpointed; None for a checkpoint of another version of the fold."""
        state = msgspec.msgpack.decode(zlib.decompress(data), type=Checkpoint)
        if state.version != FOLD_VERSION:
            return None
        projector = cls()
        projector.seq = state.seq
        projector.table_status = {s.table: s for s in state.table_status}
        projector.shoe_stats = {s.shoe: s for s in state.shoe_stats}
        projector.takings = {t.table: t for t in state.takings}
        return projector

    def value(self, bucket: str, key: str) -> bytes:
        source: dict[str, Any] = getattr(self, bucket)
        return msgspec.json.encode(source[key])

    def everything(self) -> dict[tuple[str, str], bytes]:
        return {(b, k): self.value(b, k) for b in BUCKETS for k in getattr(self, b)}


async def _raw_page(store: EventStore, after: int) -> list[tuple[int, str, bytes]]:
    """The next ``FOLD_PAGE`` messages after ``after``, as stored: sequence, subject, data."""
    raw: list[tuple[int, str, bytes]] = []
    await store.scan_raw(f"{subjects.EVENTS}.>", lambda seq, subject, _, data: raw.append((seq, subject, data)),
                         after, FOLD_PAGE)
    return raw


async def fold_stream(projector: Projector, store: EventStore,
                      folded: Callable[[set[tuple[str, str]]], Awaitable[None]]) -> None:
    """Fold the store from the projector's sequence to its end, ``FOLD_PAGE``
    messages at a time, handing ``folded`` the (bucket, key) pairs each page
    changed: a first fold of a long history holds one page, not the history.
    A message that is no batch of ours (a stray, filed as a dead letter by
    the consumers that meet it) is passed over, as the consumers pass it."""
    while True:
        raw = await _raw_page(store, projector.seq)
        page = []
        for seq, subject, data in raw:
            try:
                page.append(Stored(seq, subject, decode(data)))
            except UNREADABLE as exc:
                log.warning("%s seq %d is no batch of ours (%s): passed over", subject, seq, exc)
        changed = projector.fold(page)
        if raw:
            projector.seq = max(projector.seq, raw[-1][0])
        await folded(changed)
        if len(raw) < FOLD_PAGE:
            return


CHECKPOINTED = "checkpointed"  # the key of the stream sequence the checkpoint covers, in the META bucket


async def checkpointed(js: Any) -> int:
    """The stream sequence the read models' last checkpoint covers, 0 for
    none (the archiver removes nothing after it: a restart folds on from
    there). Read from the META bucket alone."""
    from nats.js.errors import KeyNotFoundError

    try:
        entry = await (await js.key_value(META)).get(CHECKPOINTED)
    except KeyNotFoundError:
        return 0
    try:
        return int(entry.value or b"0")
    except ValueError:  # not written by the projections: nothing is covered until they write it again
        return 0


class KvProjections:
    """The projections in JetStream key-value buckets."""

    def __init__(self, js: Any) -> None:
        self.js = js
        self.kv: dict[str, Any] = {}

    async def open(self) -> KvProjections:
        """Bind the buckets, which the administrator created (``create``)."""
        from nats.js.errors import BucketNotFoundError

        for bucket in [*BUCKETS.values(), META]:
            try:
                self.kv[bucket] = await self.js.key_value(bucket)
            except BucketNotFoundError:
                raise RuntimeError(f"the read models' bucket {bucket} is missing: the administrator creates the "
                                   "buckets (`casino run` does, or casino.nats.provision)") from None
        return self

    @staticmethod
    async def create(js: Any, replicas: int = 1) -> None:
        """Create the buckets that do not exist yet (the administrator's, once)."""
        from nats.js.errors import BucketNotFoundError

        for bucket in [*BUCKETS.values(), META]:
            try:
                await js.key_value(bucket)
            except BucketNotFoundError:
                await js.create_key_value(bucket=bucket, history=1, direct=True, replicas=replicas)

    async def put(self, projector: Projector, changed: set[tuple[str, str]], with_seq: bool = True) -> None:
        """The keys changed, then (``with_seq``) the stream sequence they are written up to."""
        for bucket, key in sorted(changed):
            await self.kv[BUCKETS[bucket]].put(key, projector.value(bucket, key))
        if with_seq:
            await self.kv[META].put("seq", str(projector.seq).encode())

    async def seq(self) -> int:
        entry = await self._meta("seq")
        return int(entry or b"0")

    async def save(self, projector: Projector) -> None:
        """The checkpoint, in one value, after the keys it covers are written:
        keys written after it (a stop before the next) are written again, the
        same, by the fold from it."""
        await self.kv[META].put("checkpoint", projector.checkpoint())
        await self.kv[META].put(CHECKPOINTED, str(projector.seq).encode())
    async def restore(self) -> Projector | None:
        """The fold as of the last checkpoint; None where none was saved, or
        the one saved cannot be read (the fold starts again from the first event)."""
        data = await self._meta("checkpoint")
        if not data:
            return None
        try:
            return Projector.from_checkpoint(data)
        except (zlib.error, msgspec.DecodeError) as exc:
            log.warning("the projections' checkpoint cannot be read (%s): folding from the first event", exc)
            return None

    async def _meta(self, key: str) -> bytes | None:
        from nats.js.errors import KeyNotFoundError

        try:
            value: bytes | None = (await self.kv[META].get(key)).value
        except KeyNotFoundError:
            return None
        return value

    async def values(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], bytes | None]:
        """The live value of each (bucket, key), None where there is none. Read
        key by key: a listing of keys is a watcher that may stop short under load."""
        from nats.js.errors import KeyNotFoundError

        out: dict[tuple[str, str], bytes | None] = {}
        for bucket, key in keys:
            try:
                out[(bucket, key)] = (await self.kv[BUCKETS[bucket]].get(key)).value
            except KeyNotFoundError:
                out[(bucket, key)] = None
        return out

    async def everything_listed(self) -> dict[tuple[str, str], bytes]:
        """Every key of every bucket, as listed from the bucket's subjects (for
        drawing; comparisons read by key). A reader creates no consumer, so
        no watcher: the keys come from the stream's information."""
        out = {}
        for name, bucket in BUCKETS.items():
            for key in await self._keys(bucket):
                out[(name, key)] = (await self.kv[bucket].get(key)).value or b""
        return out

    async def _keys(self, bucket: str) -> list[str]:
        prefix = f"$KV.{bucket}."
        info = await self.js.stream_info(f"KV_{bucket}", subjects_filter=f"{prefix}>")
        return sorted(subject.removeprefix(prefix) for subject in info.state.subjects or {})
