"""Each service as a faststream application, wired in one place: its broker
(the one NATS connection it has), its subscribers, its store and peers, and
``/metrics``, ``/healthz`` and ``/readyz`` as ASGI routes.

``Running(kind, url, ...)`` declares a service; ``start`` connects it and
starts it in the running event loop (the tests start all four this way);
``main(kind)`` is each service's process entry point (``python -m
services.shoe --nats URL``); ``app(kind)`` is the application
``faststream docs gen`` and ``faststream run`` are given.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import ssl
import threading
import time
from typing import Any

import uvicorn
import uvloop
from fast_depends.msgspec import MsgSpecSerializer
from faststream.asgi import AsgiFastStream, AsgiResponse, get
from faststream.nats import NatsBroker
from faststream.security import BaseSecurity
from faststream.specification import AsyncAPI
from nats.aio.client import Client
from prometheus_client import make_asgi_app

from casino.config.tables import TableConfig, load_tables
from casino.metrics import Metrics
from casino.nats import client as natsclient
from casino.nats.provision import require_provisioned
from casino.protocol.service import Clock, utc_now
from casino.store.jetstream import JetStreamEventStore
from services import wiring
from services.messaging import CommandGate, Commands, documented, documented_commands, watch_consumers
from services.ownership import TICK, Ownership

KINDS = ("shoe", "wager", "dealer-policy", "settlement")
EVERY_KIND = (*KINDS, "projections", "archiver")
# /healthz says a service is stalled once its event loop has not run for this
# long (a hang, not work: a fold or a read gives the loop back between pages).
STALLED_AFTER = 30.0
DEFAULT_URL = "nats://127.0.0.1:4222"

log = logging.getLogger("casino")

class Running:
    """One service: its faststream application and broker, its handler object
    once connected (``service``), and its metrics; what the service is comes
    from its wiring (``services.wiring.of``)."""

    def __init__(self, kind: str, url: str = DEFAULT_URL, *, tables: dict[str, TableConfig] | None = None,
                 clock: Clock = utc_now, name: str = "", **options: Any) -> None:
        if kind not in EVERY_KIND:
            raise ValueError(f"unknown service {kind!r}; one of {', '.join(EVERY_KIND)}")
        self.kind, self.tables, self.clock, self.options = kind, tables or {}, clock, options
        self.metrics = Metrics(kind)
        servers = url.split(",")  # one server, or the nodes of a cluster
        tls = _tls()
        self.broker = NatsBroker(
            servers, name=name or kind, inbox_prefix=natsclient.inbox_prefix(servers), max_reconnect_attempts=-1,
            security=BaseSecurity(ssl_context=tls) if tls else None, serializer=MsgSpecSerializer(), apply_types=False,
            logger=log, log_level=logging.DEBUG, graceful_timeout=10.0)
        self.service: Any = None
        self.gate = CommandGate(self.metrics)
        self.durables: list[str] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.http: uvicorn.Server | None = None
        self.http_thread: threading.Thread | None = None
        self.beat = time.monotonic()  # the event loop's last turn, as /healthz reads it
        self.wiring = wiring.of(kind)(self)
        # The commands of the tables this instance owns (shoe, wager, dealer-policy).
        lanes = self.wiring.lanes
        self.commands = Commands({lane.token: (lane.queue, lane.decoder) for lane in lanes}, self.gate,
                                 lambda: self.service, self.metrics,
                                 secured=natsclient.inbox_prefix(servers) != "_INBOX") if lanes else None
        self.ownership: Ownership | None = None
        # Settlement's and the archiver's deliveries, taken by one instance at a time.
        self.sole = self.wiring.sole()
        for subject, schema, doc in self.wiring.sends:  # for the AsyncAPI document: never published through
            self.broker.publisher(subject, schema=documented(schema), title=subject, description=doc)
        self.app = AsgiFastStream(
            self.broker, asgi_routes=[("/metrics", make_asgi_app(self.metrics.registry)),
                                      ("/healthz", _healthz(self)), ("/readyz", _readyz(self.metrics))],
            specification=AsyncAPI(title=f"casino {kind}", version="1", schema_version="3.0.0",
                                   description=f"The {kind} service's subjects: what it answers and what it follows."),
            on_startup=[self._open], after_startup=[self._watch], on_shutdown=[self._finish], logger=log)

    @property
    def nc(self) -> Client:
        return self.broker.connection

    async def start(self, http_port: int | None = None, http_host: str = "0.0.0.0") -> Running:
        """Start the application; with ``http_port``, serve its ASGI routes
        there on ``http_host`` (every interface, as a pod does; loopback for a
        casino on one machine): alive from the start, not ready until its
        consumers have caught up (folding a long history at start is work,
        not a hang for the startup probe to end). The routes are served from
        a thread of their own, with its own event loop, so that a scrape or a
        probe is answered while the service is busy; /healthz reads the
        service's event loop's heartbeat, and says when it has stalled."""
        if http_port is not None:
            config = uvicorn.Config(self.app, host=http_host, port=http_port, lifespan="off", log_level="warning")
            self.http = uvicorn.Server(config)
            self.http_thread = threading.Thread(target=self.http.run, name=f"{self.kind}-http", daemon=True)
            self.http_thread.start()
            self.tasks.append(asyncio.create_task(self._beat()))
            while not self.http.started:  # serving before the service starts: a probe finds it alive
                if not self.http_thread.is_alive():
                    raise RuntimeError(f"{self.kind}: /metrics, /healthz and /readyz could not be served on "
                                       f"{http_host}:{http_port} (the log says why)")
                await asyncio.sleep(0.01)
        await self.app.start()
        return self

    async def _beat(self) -> None:
        while True:
            self.beat = time.monotonic()
            await asyncio.sleep(1.0)

    async def stop(self) -> None:
        if self.http is not None and self.http_thread is not None:
            self.http.should_exit = True
            await asyncio.to_thread(self.http_thread.join, 10)
        await self.app.stop()

    async def _open(self) -> None:
        """Connect, and make the service before any message arrives."""
        nc = await self.broker.connect()
        await require_provisioned(nc, secrets=self.wiring.secrets)  # by the administrator, as declared
        self.service = await self.wiring.make(nc, JetStreamEventStore(nc))
        self.service.metrics = self.metrics
        if self.commands is not None:
            self.commands.nc = nc
        if self.commands is not None or self.sole is not None:  # its share, at once: all where it is alone
            self.ownership = Ownership(nc, self.kind, self._take, self._release, self.metrics)
            await self.ownership.start()

    async def _take(self, parts: set[int]) -> None:
        """Own the tables of ``parts``: held afresh from the store (the
        dealer-policy finishing any step a coup was left in), then their
        commands; settlement's and the archiver's deliveries with partition ``SOLE``."""
        if self.sole is not None:
            await self.sole.take(self.nc, parts)
            return
        assert self.commands is not None
        self.service.let_go(parts)
        self.wiring.took(self.service, parts)
        await self.commands.take(parts)

    async def _release(self, parts: set[int]) -> None:
        if self.sole is not None:
            await self.sole.release(parts)
            return
        assert self.commands is not None
        await self.commands.release(parts)
        self.service.let_go(parts)

    async def _watch(self) -> None:
        self.tasks.append(asyncio.create_task(watch_consumers(self.nc, self.durables, self.metrics)))
        self.tasks += [asyncio.create_task(work) for work in self.wiring.tasks()]

    async def _finish(self) -> None:
        """Take no more commands, finish the rounds and the work in hand, then
        the rest (the broker stops after this, and its connection with it)."""
        for task in self.tasks:
            task.cancel()
        if self.ownership is not None and not self.nc.is_connected:  # nothing to hand on: the others' lapse will
            await self.ownership.stop()
        elif self.ownership is not None and await self.ownership.leave():
            await asyncio.sleep(1.5 * TICK)  # answering until the instances that take the tables over do
        if self.commands is not None:
            await self.commands.stop()
        if self.sole is not None:
            await self.sole.stop()
        await self.wiring.finishing(self.service)
        for subscriber in self.broker.subscribers:
            await subscriber.stop()
        await self.wiring.close()


async def start(kind: str, url: str, *, tables: dict[str, TableConfig] | None = None, clock: Clock = utc_now,
                name: str = "", http_port: int | None = None, http_host: str = "0.0.0.0", **options: Any) -> Running:
    """Build and start one service; with ``http_port``, serve its metrics and
    health; ``options``: what the service's wiring takes of a caller (the shoe's ``shuffle``)."""
    return await Running(kind, url, tables=tables, clock=clock, name=name, **options).start(http_port, http_host)


def _healthz(running: Running) -> Any:
    @get(include_in_schema=False)
    async def healthz(scope: Any) -> AsgiResponse:
        if (still := time.monotonic() - running.beat) > STALLED_AFTER:
            return AsgiResponse(f"stalled: the event loop has not run for {still:.0f} s\n".encode(), status_code=503,
                                headers={"content-type": "text/plain"})
        return AsgiResponse(b"alive\n", status_code=200, headers={"content-type": "text/plain"})

    return healthz


def _readyz(metrics: Metrics) -> Any:
    @get(include_in_schema=False)
    async def readyz(scope: Any) -> AsgiResponse:
        if metrics.is_ready:
            return AsgiResponse(b"ready\n", status_code=200, headers={"content-type": "text/plain"})
        return AsgiResponse(b"catching up\n", status_code=503, headers={"content-type": "text/plain"})

    return readyz


def app(kind: str) -> AsgiFastStream:
    """The service's application, not connected: for ``faststream docs gen``
    (its command subjects, which ``Commands`` subscribes to as it owns their
    partitions, and the consumers it follows, under the names the documents give them)."""
    running = Running(kind, os.environ.get("CASINO_NATS_URL", DEFAULT_URL))
    for lane in running.wiring.lanes:
        documented_commands(running.broker, lane.token, lane.queue, lane.accepted, lane.description)
    running.wiring.document(running.broker)
    return running.app


def _tls() -> ssl.SSLContext | None:
    """TLS to NATS when $CASINO_NATS_CA names the CA that signed the server's certificate."""
    ca = os.environ.get("CASINO_NATS_CA")
    return ssl.create_default_context(cafile=ca) if ca else None


STOP_WITHIN = 6.0  # seconds a service's process takes to stop at most, whatever the broker is doing


def _exit_now(kind: str, why: str) -> None:
    """End the process at once (the broker away: nothing left to hand on or write)."""
    log.warning("%s: %s: ending now", kind, why)
    logging.shutdown()
    os._exit(0)


def main(kind: str) -> None:
    """Run one service until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(prog=f"python -m services.{kind.replace('-', '_')}")
    parser.add_argument("--nats", default=os.environ.get("CASINO_NATS_URL", DEFAULT_URL),
                        help="NATS server URL, with this service's user (default: $CASINO_NATS_URL)")
    parser.add_argument("--tables", help="tables file (shoe, dealer-policy)")
    parser.add_argument("--http-port", type=int, default=None, help="serve /metrics, /healthz, /readyz here")
    parser.add_argument("--http-host", default="0.0.0.0", help="the address they are served on (default: every interface)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {kind} %(levelname)s %(message)s")
    tables = load_tables(args.tables) if args.tables else None

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def asked() -> None:
            if stop.is_set():  # asked twice: at once
                _exit_now(kind, "asked to stop again")
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, asked)
        starting = asyncio.ensure_future(
            start(kind, args.nats, tables=tables, http_port=args.http_port, http_host=args.http_host))
        waiting = asyncio.ensure_future(stop.wait())
        await asyncio.wait({starting, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():  # still connecting (the broker away): nothing taken, nothing to hand on
            _exit_now(kind, "asked to stop while starting")
        running = starting.result()
        log.info("%s ready", kind)
        await waiting
        if not running.nc.is_connected:  # the broker away: nothing can be handed on or written
            _exit_now(kind, "asked to stop with the broker away")
        # A stop hands the tables on and finishes the work in hand; whatever the broker is doing, the
        # process ends within STOP_WITHIN (a rollout waits for it; a terminal asks again meanwhile).
        deadline = threading.Timer(STOP_WITHIN, _exit_now, (kind, f"not stopped within {STOP_WITHIN:.0f} s"))
        deadline.daemon = True
        deadline.start()
        await running.stop()
        deadline.cancel()

    uvloop.run(run())  # libuv's loop: less CPU per message than asyncio's own
