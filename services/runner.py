"""Wiring, in one place: each service's broker, subscriptions, store and peers.

``start(kind, url, ...)`` builds and starts one service in the running event
loop (the tests start all four this way); ``main(kind)`` is each service's
process entry point (``python -m services.shoe --nats URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import re
import signal
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import nats
from faststream.nats import JStream, NatsBroker, NatsMessage, PullSub
from nats.aio.client import Client
from nats.js.api import ConsumerConfig, DeliverPolicy

from casino import commands as c
from casino.projections import KvProjections, Projector
from casino.service import Clock, Peer, TableLocks, answer, utc_now
from casino.store import envelope, subjects
from casino.store.jetstream import STREAM, JetStreamEventStore, ensure_streams
from casino.tables import TableConfig, load_tables
from services.dealer_policy.service import DealerPolicyService
from services.settlement.service import SettlementService
from services.shoe.secrets import JetStreamSecrets
from services.shoe.service import ShoeService, ShuffleSource, secure_shuffle
from services.wager.service import WagerService

KINDS = ("shoe", "wager", "dealer-policy", "settlement")
log = logging.getLogger("casino")


class Running:
    """A started service: its handler object, broker and connection."""

    def __init__(self, kind: str, service: Any, broker: NatsBroker, nc: Client) -> None:
        self.kind, self.service, self.broker, self.nc = kind, service, broker, nc

    async def stop(self) -> None:
        await self.broker.stop()
        await self.nc.drain()


def _command_handler(decoder: msgspec.json.Decoder[Any], handle: Callable[[Any], Awaitable[c.Reply]],
                     reload: Callable[[Any], Awaitable[None]]) -> Callable[[NatsMessage], Awaitable[bytes]]:
    locks = TableLocks()

    async def on_command(msg: NatsMessage) -> bytes:
        table = msg.raw_message.subject.split(".")[2]
        async with locks(table):
            return await answer(msg.body, decoder, handle, reload)

    return on_command


async def start(kind: str, url: str, *, tables: dict[str, TableConfig] | None = None,
                shuffle: ShuffleSource = secure_shuffle, clock: Clock = utc_now, name: str = "") -> Running:
    """Build and start one service."""
    nc = await nats.connect(url, name=name or kind, max_reconnect_attempts=-1)
    await ensure_streams(nc.jetstream())
    store = JetStreamEventStore(nc)
    broker = NatsBroker(url, logger=log, log_level=logging.DEBUG, name=f"{name or kind}-broker",
                        max_reconnect_attempts=-1)
    service: Any
    if kind == "shoe":
        service = ShoeService(store, JetStreamSecrets(nc.jetstream()), shuffle, clock)
        broker.subscriber(subjects.command("*", "shoe"), queue="shoe", max_workers=16)(
            _command_handler(c.shoe_decoder, service.handle, service.reload))
    elif kind == "wager":
        service = WagerService(store, clock)
        await service.rebuild()
        broker.subscriber(subjects.command("*", "wager"), queue="wager", max_workers=16)(
            _command_handler(c.wager_decoder, service.handle, service.reload))
    elif kind == "dealer-policy":
        service = DealerPolicyService(store, Peer(nc), tables or {}, clock)
        await service.rebuild()
        broker.subscriber(subjects.command("*", "coup"), queue="coup", max_workers=16)(
            _command_handler(c.coup_decoder, service.handle, service.reload))
    elif kind == "settlement":
        service = SettlementService(store, clock)

        async def on_coup_events(msg: NatsMessage) -> None:
            await service.on_coup_events(msg.raw_message.subject, envelope.decode(msg.body))

        broker.subscriber(subjects.aggregate_filter("coup"), stream=JStream(STREAM, declare=False),
                          durable="settlement", pull_sub=PullSub(batch_size=32))(on_coup_events)
    elif kind == "projections":
        service = await _projections(broker, nc, store)
    else:
        raise ValueError(f"unknown service {kind!r}; one of {', '.join(KINDS)}, projections")
    if kind in ("shoe", "wager", "dealer-policy"):
        _follow(broker, service, kind)
    await broker.start()
    if kind == "dealer-policy":
        await service.resume()
    return Running(kind, service, broker, nc)


_instances = itertools.count()
# faststream handles the messages of one fetch concurrently; a follower needs
# them in stream order, so it takes each fetch as one batch.
ORDERED = PullSub(batch_size=64, timeout=1.0, batch=True)


def _in_order(msg: NatsMessage) -> list[Any]:
    raw = msg.raw_message
    return sorted(raw if isinstance(raw, list) else [raw], key=lambda m: m.metadata.sequence.stream)


def _instance(kind: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{kind}-{socket.gethostname()}-{os.getpid()}-{next(_instances)}")


async def _projections(broker: NatsBroker, nc: Client, store: JetStreamEventStore) -> Projector:
    """Fold the stream into the read models from the first event, then keep
    them current from a durable consumer that starts where the fold ended."""
    kv = await KvProjections(nc.jetstream()).open()
    projector = Projector()
    for m in await store.read(f"{subjects.EVENTS}.>"):
        projector.apply(m.subject, m.seq, m.batch)
    await kv.put(projector, set(projector.everything()))

    async def on_events(msg: NatsMessage) -> None:
        changed: set[tuple[str, str]] = set()
        for m in _in_order(msg):
            changed |= projector.apply(m.subject, m.metadata.sequence.stream, envelope.decode(m.data))
        if changed:
            await kv.put(projector, changed)

    broker.subscriber(f"{subjects.EVENTS}.>", stream=JStream(STREAM, declare=False), durable=_instance("projections"),
                      pull_sub=ORDERED, deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                      config=ConsumerConfig(opt_start_seq=projector.seq + 1, inactive_threshold=600.0))(on_events)
    return projector


def _follow(broker: NatsBroker, service: Any, kind: str) -> None:
    """Keep the service's state current from a durable consumer of its own
    aggregate's events: what another instance of it appends."""
    aggregate = {"shoe": "shoe", "wager": "wager", "dealer-policy": "coup"}[kind]
    name = _instance(kind)

    async def on_events(msg: NatsMessage) -> None:
        for m in _in_order(msg):
            await service.observe(m.subject, m.metadata.sequence.stream, envelope.decode(m.data))

    broker.subscriber(subjects.aggregate_filter(aggregate), stream=JStream(STREAM, declare=False), durable=name,
                      pull_sub=ORDERED, deliver_policy=DeliverPolicy.NEW,
                      config=ConsumerConfig(inactive_threshold=600.0))(on_events)


def main(kind: str) -> None:
    """Run one service until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(prog=f"python -m services.{kind.replace('-', '_')}")
    parser.add_argument("--nats", default="nats://127.0.0.1:4222", help="NATS server URL")
    parser.add_argument("--tables", help="tables file (dealer-policy)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {kind} %(levelname)s %(message)s")
    tables = load_tables(args.tables) if args.tables else None

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        running = await start(kind, args.nats, tables=tables)
        log.info("%s ready", kind)
        await stop.wait()
        await running.stop()

    asyncio.run(run())
