"""Two instances of every service, each a process of its own, and two
terminals at every table racing each other at every step (opening, wagering,
closing, answering, deciding, passing the shoe and forfeiting it between
coups): every coup is dealt once, to its number, from its own closed book,
with the shoe held by whom the coup before left it with (000 8.18), and
verifies, as the product verifies it and as the outsider's checker does; no
wager stands that came after its book closed; a kill -9 of each service on
the way. `make soak` runs it longer, with ten kills of each."""

from __future__ import annotations

import asyncio
import json
import os
import random
from pathlib import Path

import nats
import pytest

from casino.audit.audits import verify_history
from casino.cli.run import APPROVALS
from casino.cli.simulator import SimulatedTable
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules import wagerbook
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.store import envelope, subjects
from casino.store.eventstore import Stored
from casino.store.jetstream import JetStreamEventStore
from tests.conformance import outsider
from tests.faults.harness import SERVICES, Processes, audit

pytestmark = pytest.mark.anyio
COUPS = int(os.environ.get("CASINO_SOAK_RACING_COUPS", "40"))  # per table
# Per service: each kill -9 moves the killed instance's tables to the other once its membership lapses.
KILLS = int(os.environ.get("CASINO_SOAK_RACING_KILLS", "1"))
TABLES = {"BAC000-1": TableConfig("baccarat-000-methods", approvals=APPROVALS),
          "BAC000-2": TableConfig("baccarat-000-methods", approvals=APPROVALS),  # begins with Method C: a holder
          "BJ002-1": TableConfig("blackjack-002-hole-card"), "BJ003-1": TableConfig("blackjack-003-no-hole-card")}


class Racer(SimulatedTable):
    """A terminal that asks what the coup waits for and does it, whatever the
    other terminal at its table is doing: its refusals (the other was first)
    are part of the race. It opens the coup after the one it looked at, as
    a terminal's dealer does: an opening sent on a stale look, or asked again
    after the table moved on (a request lost with a killed instance, asked
    again 10 s later), is refused, never chased to the table's next (which
    at the end of a run would open one more coup than the run deals)."""

    looked = 0  # the number of the coup this terminal last looked at

    async def _number(self) -> int:
        return self.looked + 1

    async def race(self, coups: int) -> None:
        while True:
            status = await self.ask("coup", commands.Status)
            waiting, number = status.waiting, subjects.coup_number(status.coup) or 0
            if waiting is None or waiting.kind in ("open", "finished"):
                if number >= coups:
                    return
                if waiting is not None and waiting.shoe_holder is not None and self.rnd.random() < 0.3:
                    # 000 8.18, 8.20: the holder gives the shoe up as the other terminal opens the next coup
                    await self._give_up_shoe(status.coup, waiting.shoe_holder, forfeit=self.rnd.random() < 0.5)
                    continue  # the table may have moved on meanwhile: asked again
                self.looked = number
                await self.open_coup(self._procedure())  # another procedure as the floor supervisor directs
            elif waiting.kind == "close_betting":
                await self._seat_players(status.coup)
                for seat, bet, amount in self._wagers()[:2]:
                    await self.ask("wager", commands.PlaceWager, coup=status.coup, seat=seat, bet=bet, amount=amount)
                await self.ask("coup", commands.CloseBetting, coup=status.coup)
            elif waiting.kind in ("answer", "expose", "decision"):
                await self._respond(status.coup, waiting)
            else:  # the dealer's own step, under way at an instance
                await asyncio.sleep(0.01)


async def settled(nc: nats.NATS, coups: int, timeout: float = 120) -> list[Stored]:
    store = JetStreamEventStore(nc)
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        stored = await store.read(f"{subjects.EVENTS}.>")
        if sum(1 for m in stored if subjects.tokens(m.subject)[3] == "settle") >= coups * len(TABLES):
            return stored
        if asyncio.get_running_loop().time() > deadline:
            return stored
        await asyncio.sleep(0.5)


def dealt_from_their_own_books(stored: list[Stored]) -> list[str]:
    """Each coup's betting closed on its own book's closing wagers, and no wager
    was recorded after its book closed."""
    problems = []
    closed: dict[str, tuple[object, ...]] = {}
    dealt: dict[str, tuple[object, ...]] = {}
    for m in stored:
        coup = subjects.tokens(m.subject)[2]
        for e in m.batch.events:
            if isinstance(e.data, wagerbook.BookClosed):
                closed[coup] = tuple(sorted((w.seat, w.bet, w.amount) for w in e.data.wagers))
            elif isinstance(e.data, wagerbook.WagerPlaced | wagerbook.WagerCancelled) and coup in closed:
                problems.append(f"{coup}: {type(e.data).__name__} after its book closed")
            elif isinstance(e.data, baccarat_messages.BettingClosed | blackjack_messages.BettingClosed):
                dealt[coup] = tuple(sorted((w.seat, w.bet, w.amount) for w in e.data.wagers))
    problems += [f"{coup}: dealt to {wagers}, its book closed on {closed.get(coup)}"
                 for coup, wagers in dealt.items() if closed.get(coup) != wagers]
    return problems


async def test_two_of_every_service_with_terminals_racing_deal_every_coup_once_and_right(
        nats_url: str, tmp_path: Path) -> None:
    casino = Processes(nats_url, tmp_path / "procs", TABLES, replicas=2)
    casino.start_all()
    nc = await nats.connect(nats_url)
    terminals = [await nats.connect(nats_url) for _ in range(2 * len(TABLES))]
    stop = asyncio.Event()
    try:
        chaos = asyncio.create_task(casino.chaos(KILLS, seed=int.from_bytes(os.urandom(2), "big"), stop=stop))
        rnd = random.Random(33)
        racers = [Racer(table, config, Peer(terminals[2 * i + k], timeout=10, attempts=40),
                        random.Random(rnd.random()), None, JetStreamEventStore(nc),  # type: ignore[arg-type]
                        first=2 if table == "BAC000-2" else 0)
                  for i, (table, config) in enumerate(TABLES.items()) for k in range(2)]
        dealt = 0
        while dealt < COUPS or not chaos.done():  # every planned kill lands while coups are being dealt
            dealt += COUPS
            await asyncio.wait_for(asyncio.gather(*(r.race(dealt) for r in racers)), 600)
        stop.set()
        await chaos
        stored = await settled(nc, dealt)
    finally:
        casino.stop_all()
        for t in terminals:
            await t.close()
    await nc.close()
    assert audit(stored, TABLES, dealt) == []
    assert dealt_from_their_own_books(stored) == []
    report = verify_history(stored)
    assert report.findings == [] and report.coups == dealt * len(TABLES)
    raw = [(m.subject, m.seq, json.loads(envelope.encode(m.batch))["events"]) for m in stored]
    assert outsider.check(raw) == []
    if KILLS:
        assert casino.kills == {s: KILLS for s in SERVICES}
