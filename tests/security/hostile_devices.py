"""A card-reading table on a secured casino, driven by hand as its devices
and its people would: its terminal, the floor supervisor, its card-reading
shoe and its shuffling machine, each on its own credential; the physical
shoe as the machine (or the dealer) shuffled it (``casino.cli.devices``)."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from nats.aio.client import Client

from casino.audit.archive import history
from casino.audit.audits import Report, verify_history
from casino.cli.devices import Devices
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.nats import permissions as natsauth
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules import settlement
from casino.store import subjects
from casino.store.envelope import AnyEvent
from casino.store.eventstore import Stored
from tests.e2e.casino import next_number
from tests.security.secured import Secured, secured_casino

SUPERVISOR = natsauth.SIMULATED_SUPERVISORS[0]
E = TypeVar("E")


class Table:
    """One card-reading table and the users who deal at it."""

    def __init__(self, casino: Secured, name: str, terminal: Client, supervisor: Client, reader: Client,
                 shuffler: Client, compliance: Client) -> None:
        self.casino, self.name = casino, name
        self.config = casino.tables[name]
        self.terminal, self.supervisor_nc = Peer(terminal, timeout=5, attempts=2), Peer(supervisor, timeout=5, attempts=2)
        self.reader, self.shuffler = Peer(reader, timeout=5, attempts=2), Peer(shuffler, timeout=5, attempts=2)
        self.devices = Devices(name, self.config, rulesets.load(self.config.ruleset), self.reader, self.shuffler,
                               random.Random(7))
        self.store = history(compliance)  # the live stream, and the shoes the archiver has sealed

    async def ask(self, command: type[commands.Command], **fields: object) -> commands.Reply:
        """The table's terminal asks the dealer-policy (again while it is told to ask again)."""
        return await self._again(self.terminal, subjects.command(self.name, "coup"), command, fields)

    async def wager(self, command: type[commands.Command], **fields: object) -> commands.Reply:
        return await self._again(self.terminal, subjects.command(self.name, "wager"), command, fields)

    async def supervise(self, command: type[commands.Command], **fields: object) -> commands.Reply:
        """The floor supervisor directs, on their own credential's subject."""
        return await self._again(self.supervisor_nc, subjects.supervise(self.name, SUPERVISOR), command, fields)

    async def report(self, card: str, read: str = "") -> commands.Reply:
        """The card-reading shoe reports a card (``read``: its report's id; a new one by default)."""
        return await self.send(commands.CardRead(read or f"r-{uuid.uuid4().hex[:12]}", self.name, card))

    async def send(self, report: commands.Command) -> commands.Reply:
        return await self._ask_again(self.reader, subjects.command(self.name, "read"), report)

    async def order(self, cards: list[str], read: str = "") -> commands.Reply:
        """The shuffling machine reports an order."""
        return await self._ask_again(self.shuffler, subjects.command(self.name, "shuffler"), commands.ShuffleMade(
            read or f"o-{uuid.uuid4().hex[:12]}", self.name, tuple(cards)))

    async def _again(self, peer: Peer, subject: str, command: type[commands.Command],
                     fields: dict[str, object]) -> commands.Reply:
        if command is commands.OpenCoup and "number" not in fields:
            fields = {**fields, "number": await next_number(self.terminal, self.name)}
        return await self._ask_again(peer, subject, command(id=f"t-{uuid.uuid4().hex[:12]}", table=self.name,
                                                            **fields))  # type: ignore[call-arg]

    @staticmethod
    async def _ask_again(peer: Peer, subject: str, cmd: commands.Command) -> commands.Reply:
        for _ in range(40):
            reply = await peer.ask(subject, cmd)
            if reply.ok or reply.clause not in commands.ASK_AGAIN:
                return reply
            await asyncio.sleep(0.3)
        return reply

    async def open(self) -> str:
        """The next coup opened, the devices answering what the shoe asks of them first (an order, the burn)."""
        for _ in range(30):
            opened = await self.ask(commands.OpenCoup)
            if opened.ok:
                return opened.coup
            assert await self.devices.answer_refusal(opened), opened
        raise AssertionError(opened)

    async def bet_and_close(self, coup: str, amount: int = 1000) -> commands.Reply:
        await self.wager(commands.Sit, coup=coup, seat=1, player="P1")
        await self.wager(commands.PlaceWager, coup=coup, seat=1, bet="box", amount=amount)
        return await self.ask(commands.CloseBetting, coup=coup)

    async def deal_out(self, coup: str, reply: commands.Reply) -> commands.Reply:
        """The coup dealt to its end: the shoe reads each card due, the player stands."""
        for _ in range(40):
            w = reply.waiting
            assert reply.ok and w is not None, reply
            if w.kind == "finished":
                return reply
            if w.kind == "read":
                reply = await self.devices.read()
            elif w.kind == "decision":
                reply = await self.ask(commands.Decide, coup=coup, seat=w.seat, hand=w.box_hand, action="stand")
            else:
                raise AssertionError(w)
        raise AssertionError(reply)

    async def deal_coup(self) -> str:
        coup = await self.open()
        await self.deal_out(coup, await self.bet_and_close(coup))
        await self.recorded(coup, settlement.CoupSettled)
        return coup

    async def events(self, filter_: str | None = None) -> list[AnyEvent]:
        return [e.data for m in await self.history(filter_) for e in m.batch.events]

    async def history(self, filter_: str | None = None) -> list[Stored]:
        return await self.store.read(filter_ or subjects.table_filter(self.name))

    async def recorded(self, coup: str, kind: type[E], timeout: float = 10.0) -> E:
        """The coup's first event of this kind, once it is in the stream."""
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            for e in await self.events(subjects.coup_filter(coup, self.name)):
                if isinstance(e, kind):
                    return e
            await asyncio.sleep(0.05)
        raise TimeoutError(f"coup {coup} has no {kind.__name__}")

    async def verified(self) -> Report:
        return verify_history(await self.history())

    def incidents(self, kind: str) -> float:
        """What the dealer-policy's ``casino_card_incidents_total`` counts at the table for ``kind``."""
        running = next(r for r in self.casino.running if r.kind == "dealer-policy")
        value = running.metrics.registry.get_sample_value("casino_card_incidents_total",
                                                          {"table": self.name, "kind": kind})
        return value or 0.0

    def counted(self, metric: str, service: str, **labels: str) -> float:
        running = next(r for r in self.casino.running if r.kind == service)
        return running.metrics.registry.get_sample_value(metric, labels) or 0.0


@asynccontextmanager
async def read_table(tmp: Path, name: str, ruleset: str, shuffle: str = "recognised") -> AsyncIterator[Table]:
    """A secured casino with one card-reading table, its users connected."""
    tables = {name: TableConfig(ruleset, cards="read", shuffle=shuffle)}  # type: ignore[arg-type]
    tmp.mkdir(parents=True, exist_ok=True)
    async with secured_casino(tmp, tables) as casino:
        users = ("terminal-" + name, f"supervisor-{SUPERVISOR}", f"reader-{name}", f"shuffler-{name}", "compliance")
        connections = [await casino.connect(user) for user in users]
        try:
            yield Table(casino, name, *connections)
        finally:
            for nc in connections:
                await nc.close()
