"""Wiring, in one place: each service's connection, subscriptions, store and peers.

``start(kind, url, ...)`` builds and starts one service in the running event
loop (the tests start all four this way); ``main(kind)`` is each service's
process entry point (``python -m services.shoe --nats URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import os
import re
import signal
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import nats
import uvloop
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from casino import commands as c
from casino import natsclient
from casino.metrics import Metrics, serve_http
from casino.projections import KvProjections, Projector, fold_stream
from casino.rules.settlement import CoupSettled
from casino.rules.shoe import RoundStarted
from casino.service import Clock, Peer, TableLocks, answer, utc_now
from casino.store import envelope, subjects
from casino.store.eventstore import EventStore, Stored
from casino.store.following import Delivery, Following
from casino.store.jetstream import (
    MAX_DELIVERIES,
    STREAM,
    JetStreamEventStore,
    dead_letter,
    delivery,
    ensure_streams,
)
from casino.tables import TableConfig, load_tables
from casino.verify import verify_coup
from services.dealer_policy.service import DealerPolicyService
from services.settlement.service import FOLLOWED, Due, SettlementService
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


def _command_handler(decoders: dict[str, msgspec.json.Decoder[Any]], handle: Callable[[Any], Awaitable[c.Reply]],
                     reload: Callable[[Any], Awaitable[None]], metrics: Metrics,
                     ) -> Callable[[str, bytes], Awaitable[bytes]]:
    """Answers a command on ``casino.cmd.<table>.<kind>`` with the decoder of
    its kind, one command of a table at a time whatever its kind."""
    locks = TableLocks()

    def refused_by(clause: str) -> None:
        metrics.refused.labels(metrics.service, clause).inc()

    async def on_command(subject: str, body: bytes) -> bytes:
        _, _, table, kind = subject.split(".")
        async with locks(table):
            return await answer(body, decoders[kind], handle, reload, refused_by, table)

    return on_command


def _command_server(queue: str, decoders: dict[str, msgspec.json.Decoder[Any]], service: Any,
                    metrics: Metrics) -> CommandServer:
    """The service's commands, each kind on its own subject of every table."""
    return CommandServer([subjects.command("*", kind) for kind in decoders], queue,
                         _command_handler(decoders, service.handle, service.reload, metrics), metrics)


class CommandServer:
    """Answers the commands on its subjects straight from nats-py subscriptions
    (faststream's subscriber stack cost a third of a service's CPU per
    command), up to ``workers`` at once; each table's in turn (TableLocks)."""

    def __init__(self, subjects_: list[str], queue: str, on_command: Callable[[str, bytes], Awaitable[bytes]],
                 metrics: Metrics, workers: int = 16) -> None:
        self.subjects, self.queue, self.on_command, self.metrics = subjects_, queue, on_command, metrics
        self.slots = asyncio.Semaphore(workers)
        self.running: set[asyncio.Task[None]] = set()
        self.subs: list[Any] = []

    async def start(self, nc: Client) -> None:
        self.subs = [await nc.subscribe(subject, queue=self.queue, cb=self._receive) for subject in self.subjects]

    async def stop(self) -> None:
        """Take no more commands and finish the ones in hand."""
        for sub in self.subs:
            await sub.unsubscribe()
        if self.running:
            await asyncio.wait(self.running, timeout=10)

    async def _receive(self, msg: Any) -> None:
        await self.slots.acquire()
        task = asyncio.create_task(self._answer(msg))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _answer(self, msg: Any) -> None:
        try:
            with self.metrics.commands.labels(self.metrics.service).time():
                reply = await self.on_command(msg.subject, msg.data)
            if msg.reply:
                await msg.respond(reply)
        except nats.errors.Error as exc:  # the connection went: the terminal asks again with the same id
            log.warning("%s: no reply sent on %s: %s", self.queue, msg.subject, exc)
        finally:
            self.slots.release()


class PullConsumer:
    """Takes a durable pull consumer's deliveries straight from nats-py and
    hands them to ``on_batch`` (each with its ``Delivery``) in stream order,
    as many at once as arrived while the last were handled. Handlers ack what
    they handled; if one raises, what it did not ack comes again.

    faststream's batch fetch waits to fill its batch (up to its timeout, so a
    coup's result would wait with it), and with nats-py 2.16 a fetch that ends
    on nats-py's own asyncio timeout stops faststream's fetch loop with the
    fetched messages in hand: they come again only after the ack wait, behind
    later ones, which an in-order reader must not allow. Its per-message stack
    also cost settlement most of its CPU.

    One pull request is outstanding at a time; the next goes when it is used
    up, when the server ends it (a status: expired, no messages, a new
    leader), or after ``expires`` (a request lost with a reconnect)."""

    def __init__(self, durable: str, on_batch: Callable[[list[tuple[Msg, Delivery]]], Awaitable[None]],
                 batch: int = 64, expires: float = 2.0) -> None:
        self.durable, self.on_batch, self.batch, self.expires = durable, on_batch, batch, expires
        self.ended = asyncio.Event()
        self.left = 0
        self.arrived: list[Msg] = []
        self.handling: asyncio.Task[None] | None = None
        self.sub: Any = None
        self.task: asyncio.Task[None] | None = None
        self.running: set[asyncio.Task[None]] = set()

    def later(self, work: Awaitable[None]) -> None:
        """Go on with ``work`` beside the next deliveries (it acks its own)."""
        task = asyncio.ensure_future(work)
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def start(self, nc: Client) -> None:
        inbox = nc.new_inbox()
        self.sub = await nc.subscribe(inbox, cb=self._receive)
        self.task = asyncio.create_task(self._pull(nc, inbox))

    async def stop(self) -> None:
        """Take no more deliveries and finish the work in hand."""
        if self.task is not None:
            self.task.cancel()
        if self.sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await self.sub.unsubscribe()
        if self.handling is not None:
            self.running.add(self.handling)
        if self.running:
            await asyncio.wait(self.running, timeout=10)

    async def _pull(self, nc: Client, inbox: str) -> None:
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{self.durable}"
        request = json.dumps({"batch": self.batch, "expires": int(self.expires * 1e9)}).encode()
        while True:
            self.ended.clear()
            self.left = self.batch
            with contextlib.suppress(nats.errors.Error):  # away: the next request goes after `expires`
                await nc.publish(subject, request, reply=inbox)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ended.wait(), self.expires + 0.5)

    async def _receive(self, msg: Msg) -> None:
        if not msg.data and msg.headers and "Status" in msg.headers:
            if msg.headers["Status"] != "100":  # anything but a heartbeat ends the request
                self.ended.set()
            return
        self.left -= 1
        if self.left <= 0:
            self.ended.set()
        self.arrived.append(msg)
        if self.handling is None:
            self.handling = asyncio.create_task(self._handle())

    async def _handle(self) -> None:
        try:
            while self.arrived:
                msgs, self.arrived = self.arrived, []
                try:
                    delivered = [(m, delivery(m.reply)) for m in msgs]
                    await self.on_batch(sorted(delivered, key=lambda md: md[1].stream_seq))
                except Exception:
                    log.exception("%s: handling a batch failed; what was not acknowledged comes again",
                                  self.durable)
                    for m in msgs:
                        if not m._ackd:
                            await _nak(m, 1.0)
        finally:
            self.handling = None


async def start(kind: str, url: str, *, tables: dict[str, TableConfig] | None = None,
                shuffle: ShuffleSource = secure_shuffle, clock: Clock = utc_now, name: str = "",
                http_port: int | None = None) -> Running:
    """Build and start one service; with ``http_port``, serve its metrics and health."""
    tls = _tls()
    servers = url.split(",")  # one server, or the nodes of a cluster
    nc = await natsclient.connect(servers, name=name or kind, max_reconnect_attempts=-1, tls=tls)
    await ensure_streams(nc.jetstream())
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
        commands = _command_server("shoe", {"shoe": c.shoe_decoder}, service, metrics)
    elif kind == "wager":
        service = WagerService(store, clock)  # each coup's book is read when a command first names it
        commands = _command_server("wager", {"wager": c.wager_decoder, "book": c.book_decoder}, service, metrics)
    elif kind == "dealer-policy":
        # Patient with the shoe and wager services: one may be restarting.
        service = DealerPolicyService(store, Peer(nc, attempts=25), tables or {}, clock)
        await service.rebuild()
        commands = _command_server("coup", {"coup": c.coup_decoder}, service, metrics)
    elif kind == "settlement":
        service = SettlementService(store, clock)
        consumers.append(await _settlement_consumer(nc, service, metrics))
    elif kind == "projections":
        service, consumer, last_checkpoint = await _projections(nc, store, metrics)
        consumers.append(consumer)
        finishing.append(last_checkpoint)
    else:
        raise ValueError(f"unknown service {kind!r}; one of {', '.join(KINDS)}, projections")
    if kind in ("shoe", "wager", "dealer-policy"):
        consumers.append(await _follow(nc, service, kind, metrics))
    service.metrics = metrics
    if kind == "dealer-policy":
        await service.resume()  # before any command arrives: a coup is finished by one hand at a time
    if commands is not None:
        await commands.start(nc)
    for consumer in consumers:
        await consumer.start(nc)
    running = Running(kind, service, nc, metrics, commands, consumers, finishing)
    running.tasks.append(asyncio.create_task(_watch_consumers(nc, [c.durable for c in consumers], metrics)))
    running.http = http
    return running


async def _watch_consumers(nc: Client, durables: list[str], metrics: Metrics, every: float = 2.0) -> None:
    """Consumer lag from consumer info; ready once every consumer has caught up."""
    js = nc.jetstream()
    while True:
        caught_up = True
        for durable in durables:
            try:
                info = await js.consumer_info(STREAM, durable)
            except Exception:  # the consumer is being created, or the server is away
                caught_up = False
                continue
            metrics.pending.labels(durable).set(info.num_pending or 0)
            metrics.ack_pending.labels(durable).set(info.num_ack_pending or 0)
            metrics.redelivered.labels(durable).set(info.num_redelivered or 0)
            caught_up = caught_up and not info.num_pending
        if caught_up and not metrics.is_ready:
            metrics.set_ready(True)
        await asyncio.sleep(every)


_instances = itertools.count()


async def _decoded(nc: Client, consumer: str, m: Msg, at: Delivery, metrics: Metrics) -> envelope.Batch | None:
    """A follower cannot wait on a message it cannot read: it is filed at once."""
    try:
        return envelope.decode(m.data)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        await _file_dead_letter(nc, consumer, m.subject, at.stream_seq, m.data,
                                f"{type(exc).__name__}: {exc}", metrics)
        return None


async def _verify(store: EventStore, table: str, coup: str, kept: list[Stored] | None,
                  metrics: Metrics) -> None:
    """Verify a settled coup from the messages kept as they passed; one not
    followed whole, or with a finding, is judged on its record read back from
    the stream (its table's shoes: a round may go on into a new shoe)."""
    findings = verify_coup(kept) if kept is not None else None
    if findings != []:
        metrics.read_back.labels(metrics.service).inc()
        findings = verify_coup(await store.read(subjects.coup_filter(coup, table)))
    metrics.verified.labels(table).inc()
    if findings:
        metrics.verification_failures.labels(table).inc()
        for f in findings:
            log.error("verification: %s event seq %d: %s", f.coup, f.seq, f.what)


async def _failed(nc: Client, consumer: str, m: Msg, at: Delivery, exc: Exception, metrics: Metrics) -> None:
    """A delivery that could not be handled is redelivered a few times, then
    filed as a dead letter with the reason."""
    if isinstance(exc, nats.errors.Error | TimeoutError | ConnectionError | OSError | RuntimeError):
        await _nak(m, 1.0)  # the broker or a peer is away: not the event's fault
    elif at.delivered < MAX_DELIVERIES:
        log.warning("%s: delivery %d of seq %d failed: %s", consumer, at.delivered, at.stream_seq, exc)
        await _nak(m, 0.2)
    else:
        await _file_dead_letter(nc, consumer, m.subject, at.stream_seq, m.data, f"{type(exc).__name__}: {exc}",
                                metrics)
        await _ack(m)


async def _ack(m: Msg) -> None:
    """Ack; if the connection is away the server delivers the message again, which is harmless."""
    with contextlib.suppress(nats.errors.Error):
        await m.ack()


async def _nak(m: Msg, delay: float) -> None:
    """Ask for the message again after ``delay``; if the connection is away it comes again anyway."""
    with contextlib.suppress(nats.errors.Error):
        await m.nak(delay=delay)


async def _file_dead_letter(nc: Client, consumer: str, subject: str, seq: int, data: bytes, reason: str,
                            metrics: Metrics) -> None:
    log.error("%s: seq %d goes to the dead letters: %s", consumer, seq, reason)
    await dead_letter(nc.jetstream(), consumer, subject, seq, data, reason)
    metrics.dead_letters.labels(consumer).inc()


def _gauges(projector: Projector, metrics: Metrics) -> None:
    """The floor's figures that only the whole history gives: house net, penetration."""
    for table, takings in projector.takings.items():
        metrics.house_net.labels(table).set(takings.house_net)
    for table, status in projector.table_status.items():
        metrics.coup_open.labels(table).set(1 if status.phase in ("betting", "dealing", "finished") else 0)
        metrics.last_event.labels(table).set(status.last_event_at)
        shoe = projector.shoe_stats.get(status.shoe)
        if shoe is not None:
            metrics.penetration.labels(table).set(shoe.penetration)


def _tls() -> ssl.SSLContext | None:
    """TLS to NATS when $CASINO_NATS_CA names the CA that signed the server's certificate."""
    ca = os.environ.get("CASINO_NATS_CA")
    return ssl.create_default_context(cafile=ca) if ca else None


def _instance(kind: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{kind}-{socket.gethostname()}-{os.getpid()}-{next(_instances)}")


CHECKPOINT_EVERY = 1.0  # seconds between the projections' checkpoints, at most


async def _projections(nc: Client, store: JetStreamEventStore, metrics: Metrics,
                       ) -> tuple[Projector, PullConsumer, Callable[[], Awaitable[None]]]:
    """Fold the stream into the read models on from the last checkpoint (from
    the first event if there is none), then keep them current from a durable
    consumer that starts where the fold ended, saving a checkpoint at most
    every ``CHECKPOINT_EVERY`` seconds and on stopping: a restart reads only
    what came since. Returned with the projector and the consumer: the last
    checkpoint, to save once the consumer has stopped."""
    kv = await KvProjections(nc.jetstream()).open()
    name = _instance("projections")
    projector = await kv.restore() or Projector()
    written = projector.seq  # the stream sequence up to which every key changed is written

    async def write(changed: set[tuple[str, str]]) -> None:
        nonlocal written
        await kv.put(projector, changed)
        written = projector.seq
        projector.forget_ended_shoes()

    async def folded(changed: set[tuple[str, str]]) -> None:  # each page written, then checkpointed
        await write(changed)
        await kv.save(projector)

    async def last_checkpoint() -> None:
        if written == projector.seq:  # not ahead of the keys (a batch cut short in the middle)
            await kv.save(projector)

    await fold_stream(projector, store, folded)
    loop = asyncio.get_running_loop()
    next_save = loop.time() + CHECKPOINT_EVERY
    _gauges(projector, metrics)
    # Each coup's messages from its round's start, verified from memory when it settles.
    following = Following(first=(RoundStarted,))

    async def on_batch(msgs: list[tuple[Msg, Delivery]]) -> None:
        nonlocal next_save
        with metrics.handling.labels("projections").time():
            changed: set[tuple[str, str]] = set()
            settled: list[tuple[str, str]] = []
            for m, at in msgs:
                batch = await _decoded(nc, name, m, at, metrics)
                if batch is None:
                    following.forget()
                    continue
                following.take(Stored(at.stream_seq, m.subject, batch), at)
                changed |= projector.apply(m.subject, at.stream_seq, batch)
                settled += [(subjects.tokens(m.subject)[0], e.data.coup_id) for e in batch.events
                            if isinstance(e.data, CoupSettled)]
            if changed:
                await write(changed)
                _gauges(projector, metrics)
                if loop.time() >= next_save:
                    await kv.save(projector)
                    next_save = loop.time() + CHECKPOINT_EVERY
            for table, coup in settled:  # every settled coup is verified as it closes
                await _verify(store, table, coup, following.pop(coup), metrics)
            await _ack(msgs[-1][0])  # and every delivery before it (ack policy all)

    await nc.jetstream().add_consumer(STREAM, ConsumerConfig(
        durable_name=name, filter_subject=f"{subjects.EVENTS}.>", deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=projector.seq + 1, inactive_threshold=600.0, ack_policy=AckPolicy.ALL))
    return projector, PullConsumer(name, on_batch), last_checkpoint


async def _follow(nc: Client, service: Any, kind: str, metrics: Metrics) -> PullConsumer:
    """Keep the service's state current from a durable consumer of its own
    aggregate's events: what another instance of it appends."""
    aggregate = {"shoe": "shoe", "wager": "wager", "dealer-policy": "coup"}[kind]
    name = _instance(kind)

    async def on_batch(msgs: list[tuple[Msg, Delivery]]) -> None:
        with metrics.handling.labels(kind).time():
            for m, at in msgs:
                batch = await _decoded(nc, name, m, at, metrics)
                if batch is not None:
                    await service.observe(m.subject, at.stream_seq, batch)
            await _ack(msgs[-1][0])  # and every delivery before it (ack policy all)

    await nc.jetstream().add_consumer(STREAM, ConsumerConfig(
        durable_name=name, filter_subject=subjects.aggregate_filter(aggregate), deliver_policy=DeliverPolicy.NEW,
        inactive_threshold=600.0, ack_policy=AckPolicy.ALL))
    return PullConsumer(name, on_batch)


async def _ensure_filters(nc: Client, durable: str, filters: list[str]) -> None:
    """Create the durable consumer, or give one declared elsewhere (an older
    release, the cluster's manifests) these filters, keeping its other settings.
    A short ack wait: what a killed instance had in hand comes again within seconds."""
    js = nc.jetstream()
    try:
        config = (await js.consumer_info(STREAM, durable)).config
    except NotFoundError:
        config = ConsumerConfig(durable_name=durable, ack_wait=5.0)
    else:
        if sorted(config.filter_subjects or [config.filter_subject or ""]) == sorted(filters):
            return
    config.filter_subject, config.filter_subjects = None, filters
    await js.add_consumer(STREAM, config)


async def _settlement_consumer(nc: Client, service: SettlementService, metrics: Metrics) -> PullConsumer:
    """Settlement follows every coup and wager event from its durable consumer
    and settles each coup as its result passes, the settlements of several
    tables at once (``casino.store.following``: a coup it could not follow
    whole is read back from the stream)."""
    name = "settlement"
    await _ensure_filters(nc, name, [subjects.aggregate_filter(a) for a in FOLLOWED])

    async def settle(m: Msg, at: Delivery, due: Due) -> None:
        try:
            await service.settle(due)
        except Exception as exc:
            with contextlib.suppress(nats.errors.Error, TimeoutError):  # not filed: it comes again after the ack wait
                await _failed(nc, name, m, at, exc, metrics)
        else:
            await _ack(m)

    async def on_batch(msgs: list[tuple[Msg, Delivery]]) -> None:
        for m, at in msgs:
            with metrics.handling.labels(name).time():
                batch = await _decoded(nc, name, m, at, metrics)
                if batch is None:
                    service.following.forget()
                    due = None
                else:
                    due = service.follow(Stored(at.stream_seq, m.subject, batch), at)
            if due is None:
                await _ack(m)
            else:
                consumer.later(settle(m, at, due))

    consumer = PullConsumer(name, on_batch)
    return consumer


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
