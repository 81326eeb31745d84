"""Simulated tables: players who wager within the limits, accept or refuse the
cards and the shoe, and play blackjack by basic strategy, all through the same
command interface a table terminal uses."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterator

from nats.aio.client import Client
from nats.aio.msg import Msg

from casino import commands as c
from casino import rulesets
from casino.console import Console
from casino.rules.blackjack.strategy import basic_strategy
from casino.rules.ruleset import BaccaratRules, Ruleset
from casino.rules.settlement import CoupSettled
from casino.service import Peer
from casino.store import envelope, subjects
from casino.store.jetstream import JetStreamEventStore
from casino.tables import TableConfig


class Refused(Exception):
    pass


class SimulatedTable:
    def __init__(self, name: str, config: TableConfig, peer: Peer, rnd: random.Random,
                 settled: Callable[[str], contextlib.AbstractContextManager[asyncio.Event]], store: JetStreamEventStore) -> None:
        self.name, self.config, self.peer, self.rnd, self.settled = name, config, peer, rnd, settled
        self.store = store
        # Seconds from closing the betting to settlement, by coup, once a benchmark
        # asks for them (a dict here); kept for no one, they would grow without end.
        self.close_to_settled: dict[str, float] | None = None
        self.rules: Ruleset = rulesets.load(config.ruleset)
        self.coups = 0
        self.stopped = False  # no coup opened after this is set

    async def ask(self, service: str, command: type[c.Command], **fields: object) -> c.Reply:
        # Command ids are unique everywhere (the seed only steers the players' choices).
        cmd = command(id=f"sim-{self.name}-{uuid.uuid4().hex}", table=self.name, **fields)
        for _ in range(60):
            reply = await self.peer.ask(subjects.command(self.name, service), cmd)
            if reply.ok or reply.clause not in ("internal", "concurrency", "event store", "rate limit"):
                return reply
            await asyncio.sleep(0.5)  # the service could not finish (a broker or peer away): the same command again
        return reply

    def _procedure(self) -> str:
        if isinstance(self.rules, BaccaratRules):
            return self.rnd.choice(self.rules.procedures)
        return ""

    async def play(self, coups: int | None, every: float = 0.0, first: float = 0.0) -> None:
        """Deal ``coups`` (forever when None): one after the other, or with
        ``every``, a coup opened every so many seconds (the first after ``first``)."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(first)
        while (coups is None or self.coups < coups) and not self.stopped:
            started = loop.time()
            await self.one_coup()
            self.coups += 1
            await asyncio.sleep(max(0.0, started + every - loop.time()))

    async def one_coup(self) -> None:
        opened = await self.ask("coup", c.OpenCoup, procedure=self._procedure())
        if not opened.ok:  # e.g. 001 8.5: the style in force stays until the shoe ends
            opened = await self.ask("coup", c.OpenCoup, procedure="")
        if not opened.ok:
            # A coup left in hand (the terminal stopped in the middle of it) is dealt to its end first.
            opened = await self.ask("coup", c.Status)
            if not (opened.ok and opened.waiting and opened.waiting.kind not in ("open", "finished")):
                raise Refused(f"{self.name}: {opened.clause}: {opened.reason}")
        with self.settled(coup := opened.coup) as done:
            await self._deal(coup, done, opened.waiting)

    async def _deal(self, coup: str, done: asyncio.Event, waiting: c.Waiting | None) -> None:
        """Place the wagers and close the betting (unless closed already), answer
        what the coup waits for, and wait for its settlement."""
        closing = time.perf_counter()
        reply = c.Reply(True, coup=coup, waiting=waiting)
        if waiting is None or waiting.kind == "close_betting":
            for seat, bet, amount in self._wagers():
                await self.ask("wager", c.PlaceWager, coup=coup, seat=seat, bet=bet, amount=amount)
            closing = time.perf_counter()
            reply = await self.ask("coup", c.CloseBetting, coup=coup)
        while reply.ok and reply.waiting is not None and reply.waiting.kind not in ("finished", "open"):
            reply = await self._respond(coup, reply.waiting)
        if not reply.ok:
            raise Refused(f"{self.name} {coup}: {reply.clause}: {reply.reason}")
        await self.settlement(coup, done)
        if self.close_to_settled is not None:
            self.close_to_settled[coup] = time.perf_counter() - closing

    async def settlement(self, coup: str, done: asyncio.Event, timeout: float = 300) -> None:
        """Until the coup is settled: the live event, or (if the connection was
        away when it passed) the stream itself."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout=2)
            if done.is_set():
                return
            with contextlib.suppress(Exception):
                if await self.store.read(f"{subjects.EVENTS}.*.*.{coup}.settle"):
                    return
            if asyncio.get_running_loop().time() > deadline:
                raise Refused(f"{self.name} {coup}: not settled within {timeout:.0f} s")

    def _wagers(self) -> list[tuple[int, str, int]]:
        seats = self.rnd.sample(self.rules.seats, self.rnd.randint(1, min(5, len(self.rules.seats))))
        out = []
        for seat in seats:
            bets = ["box"] if not isinstance(self.rules, BaccaratRules) else \
                [self.rnd.choice(["player", "banker"])] + (["tie"] if "tie" in self.rules.limits and
                                                           self.rnd.random() < 0.2 else [])
            for bet in bets:
                limit = self.rules.limits[bet]  # type: ignore[index]
                out.append((seat, bet, self.rnd.choice([limit.min, 2 * limit.min, 5 * limit.min])))
        return out

    async def _respond(self, coup: str, w: c.Waiting) -> c.Reply:
        assert w.seat is not None
        if w.kind == "answer":
            return await self.ask("coup", c.AnswerOffer, coup=coup, seat=w.seat, accept=self.rnd.random() < 0.6)
        if w.kind == "expose":
            kind = c.ExposeHand if self.rnd.random() < 0.7 else c.ReturnCards
            return await self.ask("coup", kind, coup=coup, seat=w.seat, hand=w.hand)
        if w.kind == "decision":
            if "insurance" in w.options and self.rnd.random() < 0.1:
                return await self.ask("coup", c.Decide, coup=coup, seat=w.seat, hand=w.box_hand, action="insurance",
                                      amount=self.rules.limits["box"].min // 2)  # type: ignore[index]
            action = basic_strategy(w.cards, w.dealer[0], w.options)
            return await self.ask("coup", c.Decide, coup=coup, seat=w.seat, hand=w.box_hand, action=action)
        raise Refused(f"{self.name} {coup}: cannot answer {w.kind}")


class Simulator:
    """Drives tables until each has dealt ``coups`` (forever when None), flat
    out or, with ``every``, each opening a coup every so many seconds."""

    def __init__(self, nc: Client, tables: dict[str, TableConfig], seed: int | None = None,
                 console: Console | None = None, patience: int = 5, every: float = 0.0,
                 terminals: dict[str, Client] | None = None) -> None:
        """``nc`` watches the events; each table's commands go by its terminal's
        connection in ``terminals`` (a terminal user of its own), else by ``nc``."""
        self.nc, self.tables, self.console, self.every = nc, tables, console, every
        self.rnd = random.Random(seed)
        self.waiting: dict[str, asyncio.Event] = {}
        self.peers = {name: Peer((terminals or {}).get(name, nc), timeout=10, attempts=patience) for name in tables}
        self.playing: list[SimulatedTable] = []

    def stop(self) -> None:
        """Open no more coups: each table finishes the one in hand, and its
        play ends whether or not its task is also cancelled."""
        for table in self.playing:
            table.stopped = True

    @contextlib.contextmanager
    def _settled(self, coup: str) -> Iterator[asyncio.Event]:
        """Set when the coup's settlement passes, while its table waits for it
        (and no longer: a casino dealing for days would keep every coup)."""
        self.waiting[coup] = done = asyncio.Event()
        try:
            yield done
        finally:
            del self.waiting[coup]

    async def _on_event(self, msg: Msg) -> None:
        batch = envelope.decode(msg.data)
        if self.console:
            self.console.on_batch(msg.subject, batch)
        for env in batch.events:
            if isinstance(env.data, CoupSettled) and (done := self.waiting.get(env.data.coup_id)) is not None:
                done.set()

    async def run(self, coups: int | None) -> None:
        # The console shows every event; the players only wait for their settlements.
        watched = f"{subjects.EVENTS}.>" if self.console else subjects.aggregate_filter("settle")
        sub = await self.nc.subscribe(watched, cb=self._on_event)
        store = JetStreamEventStore(self.nc)
        tables = [SimulatedTable(name, cfg, self.peers[name], random.Random(self.rnd.random()), self._settled, store)
                  for name, cfg in self.tables.items()]
        self.playing = tables
        # Paced tables start at even intervals, as tables on a floor do not deal in step.
        plays = [asyncio.ensure_future(t.play(coups, self.every, self.every * i / len(tables)))
                 for i, t in enumerate(tables)]
        try:
            done, _ = await asyncio.wait(plays, return_when=asyncio.FIRST_EXCEPTION)
            for play in done:
                play.result()  # a table that failed fails the run
        finally:
            await _ended(plays, self.stop)
            await sub.unsubscribe()


async def _ended(plays: list[asyncio.Task[None]], stop: Callable[[], None]) -> None:
    """Until every table's play has ended, stopping those still dealing: no
    table opens another coup, and each is cancelled again until it ends (in
    Python 3.11 a cancellation is lost in a request answered at that moment)."""
    stop()
    pending = {play for play in plays if not play.done()}
    while pending:
        for play in pending:
            play.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)
    for play in plays:
        if not play.cancelled():
            play.exception()  # retrieved: the run reports the first failure only
