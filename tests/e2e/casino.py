"""The four services started in the test's event loop on a real nats-server,
with stacked shoes, and a terminal that talks to them through the command
interface."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import TypeVar

import nats
from nats.aio.client import Client
from services import runner
from services.shoe.secrets import Order, ShuffleSource, secure_shuffle

from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules import settlement
from casino.rules.cards import Card
from casino.store import subjects
from casino.store.envelope import AnyEvent
from casino.store.jetstream import JetStreamEventStore

_ids = itertools.count()
SUPERVISOR = "SUP-1"
E = TypeVar("E")


class Stacked:
    """The shuffle source of the tests: each table's shoes in a known order."""

    def __init__(self, orders: dict[str, list[Order]]) -> None:
        self.orders = {table: list(shoes) for table, shoes in orders.items()}

    def __call__(self, table: str, decks: int) -> Order:
        return self.orders[table].pop(0)


class Casino:
    """The four services and a connection; shuffled by ``shoes`` where given, securely otherwise."""

    nc: Client  # connected on entering

    def __init__(self, url: str, tables: dict[str, TableConfig], shoes: dict[str, list[Order]] | None = None) -> None:
        self.url, self.tables = url, tables
        self.shuffle: ShuffleSource = Stacked(shoes) if shoes is not None else secure_shuffle
        self.running: list[runner.Running] = []

    async def __aenter__(self) -> Casino:
        for kind in runner.KINDS:
            await self.start(kind)
        self.nc = await nats.connect(self.url)
        self.peer = Peer(self.nc, timeout=5, attempts=2)
        self.store = JetStreamEventStore(self.nc)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for r in reversed(self.running):
            await r.stop()
        await self.nc.close()

    async def start(self, kind: str) -> runner.Running:
        running = await runner.start(kind, self.url, tables=self.tables, shuffle=self.shuffle)
        self.running.append(running)
        return running

    async def stop(self, kind: str) -> runner.Running:
        """Stop one service (a test may start another in its place)."""
        running = self.service(kind)
        self.running.remove(running)
        await running.stop()
        return running

    def service(self, kind: str) -> runner.Running:
        return next(r for r in self.running if r.kind == kind)

    async def ask(self, table: str, service: str, command: type[commands.Command], **fields: object) -> commands.Reply:
        return await self._send(subjects.command(table, service), table, command, fields)

    async def patiently(self, table: str, service: str, command: type[commands.Command],
                        **fields: object) -> commands.Reply:
        """As a terminal asks: the same command asked again (for a minute at most) while
        the refusal is one to ask again (``commands.ASK_AGAIN``: a service away, say)."""
        fields = await self.numbered(table, command, fields)
        return await self.again(service, command(id=f"t-{next(_ids)}", table=table, **fields))  # type: ignore[call-arg]

    async def numbered(self, table: str, command: type[commands.Command],
                       fields: dict[str, object]) -> dict[str, object]:
        """An opening's fields with the number of the coup it opens, as a
        terminal names it (the latest coup ``table.status`` names, and one),
        unless the test names one."""
        if command is not commands.OpenCoup or "number" in fields:
            return fields
        return {**fields, "number": await next_number(self.peer, table)}

    async def again(self, service: str, cmd: commands.Command) -> commands.Reply:
        """``cmd`` asked, and asked again as ``patiently`` says."""
        for _ in range(60):
            reply = await self.peer.ask(subjects.command(cmd.table, service), cmd)
            if reply.ok or reply.clause not in commands.ASK_AGAIN:
                break
            await asyncio.sleep(1.0)
        return reply

    async def supervise(self, table: str, command: type[commands.Command], **fields: object) -> commands.Reply:
        """What a supervisor directs (a change of procedure, a forfeit), on supervisor SUPERVISOR's own subject."""
        return await self._send(subjects.supervise(table, SUPERVISOR), table, command, fields)

    async def _send(self, subject: str, table: str, command: type[commands.Command],
                    fields: dict[str, object]) -> commands.Reply:
        fields = await self.numbered(table, command, fields)
        return await self.peer.ask(subject, command(id=f"t-{next(_ids)}", table=table, **fields))  # type: ignore[call-arg]

    async def events(self, flt: str) -> list[tuple[str, AnyEvent]]:
        return [(subjects.tokens(m.subject)[3], e.data) for m in await self.store.read(flt) for e in m.batch.events]

    async def recorded(self, coup: str, kind: type[E], timeout: float = 10.0) -> E:
        """The coup's first event of this kind, once it is in the stream."""
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            for _, e in await self.events(subjects.coup_filter(coup)):
                if isinstance(e, kind):
                    return e
            await asyncio.sleep(0.05)
        raise TimeoutError(f"coup {coup} has no {kind.__name__}")

    async def settled(self, coup: str, timeout: float = 10.0) -> settlement.CoupSettled:
        return await self.recorded(coup, settlement.CoupSettled, timeout)


async def next_number(peer: Peer, table: str) -> int:
    """The number of the table's next coup, as a terminal learns it: the latest coup ``table.status`` names, and one."""
    status = await peer.ask(subjects.command(table, "coup"), commands.Status(id=f"t-{next(_ids)}", table=table))
    return (subjects.coup_number(status.coup) or 0) + 1


def order_of(cards: Sequence[Card]) -> Order:
    return tuple(cards), "stacked"
