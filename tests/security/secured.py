"""The casino on a real nats-server configured with the permission model of
casino.nats.permissions, as `make run` and the Helm values apply it: every service as
its own user, each table's terminal in the terminals' account, and spies that
try everything a hostile user could."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig
from services import runner

from casino.cli.simulator import SUPERVISOR, Simulator
from casino.config.tables import TableConfig
from casino.nats import client as natsclient
from casino.nats import permissions as natsauth
from casino.nats.provision import provision
from casino.nats.server import NatsServer
from casino.store.jetstream import SECRETS_STREAM, STREAM

TABLES = {"BAC000-1": TableConfig("baccarat-000-methods"), "BJ002-1": TableConfig("blackjack-002-hole-card")}
# The same tables with card-reading shoes (docs/readers.md): a recognised shuffling machine's, and a hand shuffle's.
READ_TABLES = {"BAC000-1": TableConfig("baccarat-000-methods", cards="read", shuffle="recognised"),
               "BJ002-1": TableConfig("blackjack-002-hole-card", cards="read", shuffle="hand")}
SERVICE_USERS = runner.EVERY_KIND


class Secured:
    """The server, its users' URLs, and the services started as their users."""

    def __init__(self, server: NatsServer, users: dict[str, natsauth.User], passwords: dict[str, str],
                 tables: dict[str, TableConfig]) -> None:
        self.server, self.users, self.passwords, self.tables = server, users, passwords, tables
        self.running: list[runner.Running] = []

    def url(self, user: str) -> str:
        return natsauth.with_credentials(self.server.url, user, self.passwords[user])

    async def connect(self, user: str, errors: list[str] | None = None, **options: object) -> Client:
        async def on_error(exc: Exception) -> None:
            if errors is not None:
                errors.append(str(exc))

        return await natsclient.connect(self.url(user), error_cb=on_error, **options)  # type: ignore[arg-type]

    def allowed(self, user: str) -> tuple[str, ...]:
        """What ``user`` may subscribe to."""
        return (*self.users[user].subscribe, f"{natsauth.inbox(user)}.>")

    async def start_services(self) -> None:
        for kind in runner.EVERY_KIND:
            self.running.append(await runner.start(kind, self.url(kind), tables=self.tables))

    async def deal(self, coups: int, seed: int = 5, faults: float = 0.0) -> None:
        """Each table deals ``coups`` through its own terminal's user, and a
        card-reading table's devices report on theirs (misbehaving at ``faults``)."""
        floor = await self.connect("floor")
        terminals = {t: await self.connect(f"terminal-{t}") for t in self.tables}
        supervisor = await self.connect(f"supervisor-{SUPERVISOR}")
        devices = {t: (await self.connect(f"reader-{t}"), await self.connect(f"shuffler-{t}"))
                   for t, config in self.tables.items() if config.source}
        try:
            await Simulator(floor, self.tables, seed=seed, terminals=terminals, supervisor=supervisor,
                            devices=devices, faults=faults).run(coups)
        finally:
            for nc in (floor, *terminals.values(), supervisor, *(c for pair in devices.values() for c in pair)):
                await nc.close()

    async def orders(self) -> dict[str, tuple[tuple[str, ...], str]]:
        """Every shoe's secret order and salt, as the shoe service alone may read them."""
        shoe = await self.connect("shoe")
        out = {}
        try:
            js = shoe.jetstream()
            info = await js.stream_info(SECRETS_STREAM, subjects_filter="casino.secret.>")
            for subject in info.state.subjects or {}:
                m = await js.get_last_msg(SECRETS_STREAM, subject, direct=True)
                secret = msgspec.json.decode(m.data or b"")
                out[subject] = (tuple(secret["order"]), secret["salt"])
        finally:
            await shoe.close()
        return out

    async def settlement_consumer(self) -> ConsumerConfig:
        """The settlement durable's configuration, as its own user alone may read it."""
        nc = await self.connect("settlement")
        try:
            return (await nc.jetstream().consumer_info(STREAM, natsauth.SETTLEMENT_DURABLE)).config
        finally:
            await nc.close()

    async def stop_services(self) -> None:
        for r in reversed(self.running):
            await r.stop()
        self.running.clear()


@contextlib.asynccontextmanager
async def secured_casino(tmp: Path, tables: dict[str, TableConfig] = TABLES, services: bool = True,
                         provisioned: bool = True) -> AsyncIterator[Secured]:
    users = natsauth.permissions(tables, natsauth.SIMULATED_SUPERVISORS, [t for t, c in tables.items() if c.source])
    passwords = natsauth.passwords(users)
    config = tmp / "nats.conf"
    config.write_text(natsauth.server_config(users, passwords))
    server = NatsServer(tmp / "nats", config=config).start()
    casino = Secured(server, users, passwords, tables)
    try:
        if provisioned:
            admin = await casino.connect("admin")
            await provision(admin)
            await admin.close()
        if services:
            await casino.start_services()
        yield casino
    finally:
        try:
            await casino.stop_services()
        finally:
            server.stop()


class Spy:
    """A connection that keeps everything it receives."""

    def __init__(self, user: str, nc: Client, errors: list[str]) -> None:
        self.user, self.nc, self.errors = user, nc, errors
        self.received: list[Msg] = []

    async def listen(self, *subjects: str) -> None:
        for subject in subjects:
            with contextlib.suppress(nats.errors.Error):
                await self.nc.subscribe(subject, cb=self._keep)
        await self.nc.flush()
        await asyncio.sleep(0.1)

    async def _keep(self, msg: Msg) -> None:
        self.received.append(msg)
