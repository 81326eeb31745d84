"""Wiring, in one place: each service's connection, subscriptions, store and peers.

``start(kind, url, ...)`` builds and starts one service in the running event
loop (the tests start all four this way); ``main(kind)`` is each service's
process entry point (``python -m services.shoe --nats URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop
from nats.aio.client import Client

from casino import commands as c
from casino import natsclient
from casino.metrics import Metrics, serve_http
from casino.provision import require_provisioned
from casino.service import Clock, Peer, utc_now
from casino.store.jetstream import JetStreamEventStore
from casino.tables import TableConfig, load_tables
from services.dealer_policy.service import DealerPolicyService
from services.followers import follow, projections, settlement_consumer
from services.messaging import CommandServer, PullConsumer, command_server, watch_consumers
from services.settlement.service import SettlementService
from services.shoe.secrets import JetStreamSecrets
from services.shoe.service import ShoeService, ShuffleSource, secure_shuffle
from services.wager.service import WagerService

KINDS = ("shoe", "wager", "dealer-policy", "settlement")


log = logging.getLogger("casino")


class Running:
    """A started service: its handler object, connection, metrics, and what
    brings it messages."""

    def __init__(self, kind: str, service: Any, nc: Client, metrics: Metrics, commands: CommandServer | None,
                 consumers: list[PullConsumer], finishing: list[Callable[[], Awaitable[None]]]) -> None:
        self.kind, self.service, self.nc, self.metrics = kind, service, nc, metrics
        self.commands, self.consumers, self.finishing = commands, consumers, finishing
        self.tasks: list[asyncio.Task[None]] = []
        self.http: asyncio.AbstractServer | None = None

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.http:
            self.http.close()
        if self.commands:
            await self.commands.stop()
        if isinstance(self.service, DealerPolicyService):
            await self.service.finish_rounds()
        for consumer in self.consumers:
            await consumer.stop()
        for finish in self.finishing:
            await finish()
        await self.nc.drain()


async def start(kind: str, url: str, *, tables: dict[str, TableConfig] | None = None,
                shuffle: ShuffleSource = secure_shuffle, clock: Clock = utc_now, name: str = "",
                http_port: int | None = None) -> Running:
    """Build and start one service; with ``http_port``, serve its metrics and health."""
    tls = _tls()
    servers = url.split(",")  # one server, or the nodes of a cluster
    nc = await natsclient.connect(servers, name=name or kind, max_reconnect_attempts=-1, tls=tls)
    await require_provisioned(nc)  # by the administrator: no service may create a stream
    store = JetStreamEventStore(nc)
    metrics = Metrics(kind)
    # Alive from here (not ready until its consumers have caught up): folding a
    # long history at start is work, not a hang for the startup probe to end.
    http = await serve_http(metrics, http_port) if http_port is not None else None
    service: Any
    commands: CommandServer | None = None
    consumers: list[PullConsumer] = []
    finishing: list[Callable[[], Awaitable[None]]] = []  # once the consumers have stopped
    if kind == "shoe":
        service = ShoeService(store, JetStreamSecrets(nc.jetstream()), shuffle, clock)
        commands = command_server("shoe", {"shoe": c.shoe_decoder}, service, metrics)
    elif kind == "wager":
        service = WagerService(store, clock)  # each coup's book is read when a command first names it
        commands = command_server("wager", {"wager": c.wager_decoder, "book": c.book_decoder}, service, metrics)
    elif kind == "dealer-policy":
        # Patient with the shoe and wager services: one may be restarting.
        service = DealerPolicyService(store, Peer(nc, attempts=25), tables or {}, clock)
        await service.rebuild()
        commands = command_server("coup", {"coup": c.coup_decoder}, service, metrics)
    elif kind == "settlement":
        service = SettlementService(store, clock)
        consumers.append(await settlement_consumer(nc, service, metrics))
    elif kind == "projections":
        service, consumer, last_checkpoint = await projections(nc, store, metrics)
        consumers.append(consumer)
        finishing.append(last_checkpoint)
    else:
        raise ValueError(f"unknown service {kind!r}; one of {', '.join(KINDS)}, projections")
    if kind in ("shoe", "wager", "dealer-policy"):
        consumers.append(await follow(nc, service, kind, metrics))
    service.metrics = metrics
    if kind == "dealer-policy":
        await service.resume()  # before any command arrives: a coup is finished by one hand at a time
    if commands is not None:
        await commands.start(nc)
    for consumer in consumers:
        await consumer.start(nc)
    running = Running(kind, service, nc, metrics, commands, consumers, finishing)
    running.tasks.append(asyncio.create_task(watch_consumers(nc, [c.durable for c in consumers], metrics)))
    running.http = http
    return running


def _tls() -> ssl.SSLContext | None:
    """TLS to NATS when $CASINO_NATS_CA names the CA that signed the server's certificate."""
    ca = os.environ.get("CASINO_NATS_CA")
    return ssl.create_default_context(cafile=ca) if ca else None


def main(kind: str) -> None:
    """Run one service until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(prog=f"python -m services.{kind.replace('-', '_')}")
    parser.add_argument("--nats", default=os.environ.get("CASINO_NATS_URL", "nats://127.0.0.1:4222"),
                        help="NATS server URL, with this service's user (default: $CASINO_NATS_URL)")
    parser.add_argument("--tables", help="tables file (dealer-policy)")
    parser.add_argument("--http-port", type=int, default=None, help="serve /metrics, /healthz, /readyz here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {kind} %(levelname)s %(message)s")
    tables = load_tables(args.tables) if args.tables else None

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        running = await start(kind, args.nats, tables=tables, http_port=args.http_port)
        log.info("%s ready", kind)
        await stop.wait()
        await running.stop()

    uvloop.run(run())  # libuv's loop: less CPU per message than asyncio's own
