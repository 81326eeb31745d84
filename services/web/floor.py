"""The floor as the web pages show it: each table's tile, from the record and
the read models the projections keep, whatever the number of browsers.

The stream is read in turns: every ``REFRESH`` seconds, the messages appended since the last turn, of
every table at once (a batched direct get), folded into their tables' tiles; a table whose coup, shoe or
settlement moved (``SHOWN``: a wager's messages are folded, and shown with the next of those) has its
read models read again (its status, its shoe, its takings) and its tile drawn, once for every browser
watching. One wakeup and one read serve every message of a turn, where a subscription to each append
cost the web a wakeup for every message. The floor is read only while someone looks at it: it wakes at
the first page or stream that shows tiles (each table taken up from its latest coup, as at a start) and
sleeps ``IDLE`` seconds after the last. The web user creates no consumer and writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable

import msgspec
from nats.aio.client import Client
from sse_starlette import ServerSentEvent

from casino.audit.verify import verify_coup
from casino.cli.console import Console
from casino.protocol.service import log
from casino.readmodels.projections import KvProjections, ShoeStats, TableStatus, Takings
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.baccarat.scoreboard import decoded, of_result
from casino.rules.incidents import CardIncident, CoupRuled, TableClosed, TableReopened
from casino.rules.settlement import CoupSettled
from casino.store import subjects
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import Stored, latest_at_table
from casino.store.jetstream import JetStreamEventStore
from services.web.liveness import Liveness
from services.web.tiles import Summary, Tile

REFRESH = 0.25  # seconds between the floor's turns: what is appended meanwhile is read together
READ_MOST = 10_000  # messages one turn reads at most (the next turn, at once, reads on)
# The aggregates whose messages redraw a tile: those it shows. A wager's (a third or more of a coup's
# appends, none on a tile) is folded, and shown with the next of these: the close of betting, a coup's.
SHOWN = ("coup", "shoe", "settle")
LIVENESS = 2.0  # seconds between looks at which services have a live instance (``services.web.liveness``)
IDLE = 60.0  # seconds the floor is still read after the last page or stream that showed it


class Floor:
    """Every table's tile, kept current; each watcher (a browser's stream)
    told the tables whose tile changed."""

    def __init__(self, nc: Client, currencies: dict[str, str], draw: Callable[[Tile], str],
                 draw_down: Callable[[list[str], list[str]], str],
                 draw_summary: Callable[[Summary], str] = lambda s: "") -> None:
        self.nc, self.draw, self.draw_down, self.draw_summary = nc, draw, draw_down, draw_summary
        self.down_frame = b""
        self.store = JetStreamEventStore(nc)
        self.services = Liveness(nc)  # which services are down, and which keep dying
        self.kv = KvProjections(nc.jetstream())
        self.console = Console(list(currencies), currencies, live=False)
        self.tiles = {t: Tile(v, TableStatus(t), Takings(t)) for t, v in self.console.views.items()}
        self.drawn: dict[str, str] = {}
        self.read_to: dict[str, int] = dict.fromkeys(currencies, 0)  # each table's last message read
        self.settled: list[tuple[str, str]] = []  # (table, coup) settled in what was folded, to be verified
        self.read_at = 0  # the stream sequence the floor's turns have read to
        # Tables whose read models lag what the floor read of their record (the projections write just after),
        # and the turns since: read again at turns 1, 2, 4, ... 64 and every 64th after, until caught up.
        self.lagging: dict[str, int] = {}
        self.record_at: dict[str, float] = {}
        self.watchers: set[asyncio.Queue[bytes]] = set()  # each browser's frames to send, encoded once for all
        self.tasks: list[asyncio.Task[None]] = []
        self.refreshing: asyncio.Task[None] | None = None  # the floor's turns, while someone looks (``look``)
        self.waking = asyncio.Lock()
        self.looked = 0.0  # when a page or stream last showed the floor
        self.on_drawn: Callable[[str], None] = lambda table: None
        # Each table's shoe in play and its scoreboard's results, as last told: its page draws them again (``tell``).
        self.boards: dict[str, tuple[str, int]] = {}

    async def start(self) -> None:
        """The read models opened and the services' liveness watched; the floor is read once someone looks (``look``)."""
        await self.kv.open()
        await self.services.look()
        self.down_frame = self._down_frame()
        self.tasks = [asyncio.create_task(self._watching_services()), asyncio.create_task(self._dozing())]

    async def stop(self) -> None:
        await self._sleep()
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def awake(self) -> bool:
        return self.refreshing is not None

    async def look(self) -> None:
        """Someone looks at the floor: it is read from now on (woken if it slept: its turns read from the stream's
        last message before each table is taken up, so what comes meanwhile is read after), until ``IDLE`` s after."""
        self.looked = time.monotonic()
        async with self.waking:
            if self.awake:
                return
            try:
                last = await self.store.last(f"{subjects.EVENTS}.>")
                self.read_at = last.seq if last is not None else 0
                for table in self.tiles:
                    await self._take_up(table)
                await self._verify_settled()
                await self._read_models(set(self.tiles))
                self.lagging = {t: 1 for t, tile in self.tiles.items()
                                if tile.status.last_event_at < self.record_at.get(t, 0.0)}
            except BaseException:
                await self._sleep()
                raise
            for table in self.tiles:
                self._draw(table)
            self._boards_changed(self.tiles)
            self.refreshing = asyncio.create_task(self._refreshing())

    async def _take_up(self, table: str) -> None:
        """Where the table stands, without reading its history: its latest coup's
        messages (every aggregate's) and its shoe in play's, folded into its tile."""
        held: dict[int, Stored] = {}
        for aggregate in ("coup", "shoe"):
            latest = await latest_at_table(self.store, table, aggregate)
            if latest is not None:
                _, shoe, coup, _ = subjects.tokens(latest.subject)
                held.update((m.seq, m) for m in await self.store.read(
                    subjects.event(table, shoe, coup, "*") if aggregate == "coup" else
                    subjects.event(table, shoe, "*", aggregate)))
        for seq in sorted(held):
            if seq > self.read_to[table]:
                self._fold(table, held[seq])

    async def _sleep(self) -> None:
        """Nobody looks: the floor's turns end."""
        if self.refreshing is not None:
            self.refreshing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.refreshing
            self.refreshing = None
            self.lagging.clear()
            self.settled.clear()

    async def _dozing(self) -> None:
        while True:
            await asyncio.sleep(IDLE / 4)
            if self.awake and not self.watchers and time.monotonic() - self.looked > IDLE:
                async with self.waking:
                    await self._sleep()

    async def _refreshing(self) -> None:
        while True:
            await asyncio.sleep(REFRESH)
            try:
                while await self._turn() >= READ_MOST:  # more waiting: read on at once
                    pass
            except Exception as exc:  # the server away: read again at the next turn
                log.error("web: the floor could not be read: %s: %s", type(exc).__name__, exc)

    async def _turn(self) -> int:
        """The messages since the last turn folded; the tiles they changed drawn, their read models read again."""
        msgs = await self.store.read(f"{subjects.EVENTS}.>", after=self.read_at, limit=READ_MOST)
        shown: set[str] = set()
        for m in msgs:
            self.read_at = m.seq
            tokens = m.subject.split(".")
            table = tokens[2] if len(tokens) == 6 else ""
            if table in self.tiles and m.seq > self.read_to[table]:
                self._fold(table, m)
                if tokens[5] in SHOWN:
                    shown.add(table)
        shown |= await self._verify_settled()
        due = {t for t, n in self.lagging.items() if n & (n - 1) == 0 or n % 64 == 0}
        self.lagging = {t: n + 1 for t, n in self.lagging.items()} | dict.fromkeys(shown - set(self.lagging), 1)
        if shown or due:
            await self._read_models(shown | due)
            for t in shown | due:
                if self.tiles[t].status.last_event_at >= self.record_at.get(t, 0.0):
                    del self.lagging[t]
            changed = {t for t in shown | due if self._draw(t, again=t not in shown)}
            self.tell(changed, self._boards_changed(changed))
        return len(msgs)

    async def _verify_settled(self) -> set[str]:
        """Each coup settled in what was folded, verified as it was recorded:
        read whole from the stream (its table's shoes: a round may go on into
        a new shoe), never from the part of it the floor followed (a floor
        woken mid-coup followed it from the middle). The tables of those
        that failed."""
        settled = list(self.settled)
        records = await asyncio.gather(*(self.store.read(subjects.coup_filter(coup, table)) for table, coup in settled))
        del self.settled[:len(settled)]  # read: not asked again at the next turn
        failed = set()
        for (table, coup), stored in zip(settled, records, strict=True):
            if verify_coup(stored):
                tile, number = self.tiles[table], subjects.coup_number(coup)
                tile.finding, tile.finding_at, tile.finding_coup = f"coup {number} failed verification", time.time(), number
                failed.add(table)
        return failed

    def _fold(self, table: str, m: Stored) -> None:
        """One of the table's messages, read in order, folded into its tile."""
        tile = self.tiles[table]
        self.read_to[table] = m.seq
        if m.unreadable:
            return  # no batch of ours: verification names it on the coup's page
        self.record_at[table] = max([self.record_at.get(table, 0.0), *(e.at.timestamp() for e in m.batch.events)])
        self.console.on_batch(m.subject, m.batch)
        number = subjects.coup_number(subjects.tokens(m.subject)[2])
        for env in m.batch.events:
            e = env.data
            if isinstance(e, CoupConfigured):
                tile.holder = tile.holder if "shoe" in tile.holder else ""
            elif isinstance(e, baccarat_messages.HolderAssigned):
                tile.holder = e.said()
            elif isinstance(e, baccarat_messages.ShoeGivenUp):
                tile.holder = ""
            elif isinstance(e, CardIncident):
                where = f"{'at' if e.coup else 'before'} coup {number}" + (f" ({e.clause})" if e.clause else "")
                tile.incident, tile.incident_at = f"{e.said()} {where}", env.at.timestamp()
                tile.incident_coup = number if e.coup else None
            elif isinstance(e, CoupRuled) and tile.incident:
                tile.incident, tile.incident_at = f"{tile.incident}; {e.said()}", env.at.timestamp()
            elif isinstance(e, TableClosed | TableReopened):
                tile.closed, tile.closed_at = (e.reason if isinstance(e, TableClosed) else ""), env.at.timestamp()
            elif isinstance(e, baccarat_messages.CoupResulted):
                tile.take_results(subjects.tokens(m.subject)[1], {number or 0: of_result(e)})
            elif isinstance(e, CoupSettled):
                self.settled.append((table, e.coup_id))

    async def _values(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], bytes | None]:
        """The read models' values of ``keys``, asked all at once."""
        got = await asyncio.gather(*(self.kv.values([key]) for key in keys))
        return {k: v for one in got for k, v in one.items()}

    async def _read_models(self, tables: set[str]) -> None:
        keys = [(bucket, t) for t in tables for bucket in ("table_status", "takings")]
        got = await self._values(keys)
        for t in tables:
            tile = self.tiles[t]
            if (status := got[("table_status", t)]) is not None:
                tile.status = msgspec.json.decode(status, type=TableStatus)
            if (takings := got[("takings", t)]) is not None:
                tile.takings = msgspec.json.decode(takings, type=Takings)
        shoes = {t: self.tiles[t].status.shoe for t in tables if self.tiles[t].status.shoe}
        got = await self._values([("shoe_stats", s) for s in shoes.values()])
        now = time.time()
        for t, shoe in shoes.items():
            value = got[("shoe_stats", shoe)]
            self.tiles[t].shoe = stats = msgspec.json.decode(value, type=ShoeStats) if value is not None else None
            if stats is not None:  # as the read model has them: the record read since may hold more
                self.tiles[t].take_results(shoe, {n: c for n, r in stats.results.items()
                                                  if (c := decoded(r)) is not None})
            self.tiles[t].counted(now)

    def _draw(self, table: str, again: bool = False) -> bool:
        """The table's tile drawn; ``again``: kept as it was where it draws the same. Whether it was drawn."""
        drawn = self.draw(self.tiles[table]).replace("\n", " ")
        if again and drawn == self.drawn.get(table):
            return False
        self.drawn[table] = drawn
        self.on_drawn(table)
        return True

    def tiles_frame(self, tables: Iterable[str]) -> bytes:
        """One server-sent event with the tiles of ``tables`` and the floor's summary, each swapped in place by its id."""
        summary = self.draw_summary(self.summary()).replace("\n", " ")
        return ServerSentEvent("".join(self.drawn[t] for t in tables) + summary, event="tiles").encode()

    def summary(self) -> Summary:
        """The floor at a glance: its tables dealing, held and alerted, and the house's takings by currency."""
        now, takings = time.time(), dict.fromkeys(sorted({v.currency for v in self.console.views.values()}), 0)
        for t in self.tiles.values():
            takings[t.view.currency] += t.takings.house_net
        phases = [t.view.phase or t.status.phase for t in self.tiles.values()]
        return Summary(len(self.tiles), sum(p in ("betting", "dealing") for p in phases), phases.count("held"),
                       sum(1 for t in self.tiles.values() if t.alerts(now)), takings)

    def everything(self) -> bytes:
        """What a browser is sent as its stream opens (again, after the web was out of reach): every tile."""
        return self.tiles_frame(self.tiles) + self.down_frame

    def _down_frame(self) -> bytes:
        return ServerSentEvent(self.draw_down(self.services.down, self.services.restarting).replace("\n", " "), event="down").encode()

    def _boards_changed(self, tables: Iterable[str]) -> list[str]:
        """Those of ``tables`` whose shoe in play or its results changed since last told."""
        changed = []
        for table in sorted(tables):
            board = (self.tiles[table].results_of, len(self.tiles[table].results))
            if self.boards.get(table) != board:
                self.boards[table] = board
                changed.append(table)
        return changed

    def tell(self, tables: set[str], boards: Iterable[str] = ()) -> None:
        """Every browser sent the tiles changed in one event encoded once, a ``tile-<table>`` event for each (its
        page asks for it), and a ``board-<table>`` event for each of ``boards`` (its page draws its shoe again);
        a browser that does not read is not waited for: what it has not taken is dropped for the whole floor."""
        if not self.watchers:  # nobody looks: no frame is made
            return
        frame = self.tiles_frame(sorted(tables)) + b"".join(
            [*(ServerSentEvent("1", event=f"tile-{t}").encode() for t in sorted(tables)),
             *(ServerSentEvent(str(self.boards[t][1]), event=f"board-{t}").encode() for t in boards)])
        for queue in self.watchers:
            if queue.full():
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(self.everything())
            else:
                queue.put_nowait(frame)

    async def _watching_services(self) -> None:
        while True:
            await asyncio.sleep(LIVENESS)
            try:
                changed = await self.services.look()
            except Exception as exc:  # the server away: looked at again
                log.error("web: the live bucket could not be read: %s: %s", type(exc).__name__, exc)
                continue
            if changed:
                self.down_frame = self._down_frame()
                for queue in self.watchers:
                    if not queue.full():
                        queue.put_nowait(self.down_frame)
