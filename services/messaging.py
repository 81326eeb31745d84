"""How messages reach a service, straight from nats-py: commands answered
from subscriptions on their subjects (``CommandServer``), and a durable
consumer's deliveries pulled in batches and handed over in stream order
(``PullConsumer``); what becomes of a delivery that cannot be read or handled
(delivered again, or filed as a dead letter); the consumers' lag as metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg

from casino import commands as c
from casino.metrics import Metrics
from casino.service import TableLocks, answer
from casino.store import envelope, subjects
from casino.store.following import Delivery
from casino.store.jetstream import MAX_DELIVERIES, STREAM, dead_letter, delivery

log = logging.getLogger("casino")
# Where a command is answered: an inbox (nats-py's ``_INBOX.<user>.…``), or a
# reply subject the server made for a request from another account.
REPLY_PREFIXES = ("_INBOX.", "_R_.")


def _command_handler(decoders: dict[str, msgspec.json.Decoder[Any]], handle: Callable[[Any], Awaitable[c.Reply]],
                     reload: Callable[[Any], Awaitable[None]], metrics: Metrics,
                     ) -> Callable[[str, bytes], Awaitable[bytes]]:
    """Answers a command on ``casino.cmd.<table>.<kind>`` with the decoder of its kind."""
    def refused_by(clause: str) -> None:
        metrics.refused.labels(metrics.service, clause).inc()

    async def on_command(subject: str, body: bytes) -> bytes:
        _, _, table, kind = subject.split(".")
        return await answer(body, decoders[kind], handle, reload, refused_by, table)

    return on_command


def command_server(queue: str, decoders: dict[str, msgspec.json.Decoder[Any]], service: Any,
                   metrics: Metrics) -> CommandServer:
    """The service's commands, each kind on its own subject of every table."""
    return CommandServer([subjects.command("*", kind) for kind in decoders], queue,
                         _command_handler(decoders, service.handle, service.reload, metrics), metrics)


class CommandServer:
    """Answers the commands on its subjects straight from nats-py subscriptions
    (faststream's subscriber stack cost a third of a service's CPU per
    command): each table's one at a time, whatever its kind (TableLocks), up
    to ``workers`` tables at once. A table with ``per_table`` commands waiting
    already is answered at once with a refusal: one terminal flooding its own
    table neither queues without bound nor holds a worker another table needs."""

    def __init__(self, subjects_: list[str], queue: str, on_command: Callable[[str, bytes], Awaitable[bytes]],
                 metrics: Metrics, workers: int = 16, per_table: int = 8) -> None:
        self.subjects, self.queue, self.on_command, self.metrics = subjects_, queue, on_command, metrics
        self.slots = asyncio.Semaphore(workers)
        self.per_table = per_table
        self.locks = TableLocks()
        self.waiting: dict[str, int] = {}
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
        if not msg.reply.startswith(REPLY_PREFIXES):
            # A reply goes to the requester's inbox, or across the terminals'
            # account boundary on the subject the server made: never where a
            # request says (an event or secret subject, the JetStream API).
            log.warning("%s: a request on %s with the reply subject %r is not answered",
                        self.queue, msg.subject, msg.reply[:200])
            self.metrics.refused.labels(self.metrics.service, "reply subject").inc()
            return
        table = msg.subject.split(".")[2]
        if self.waiting.get(table, 0) >= self.per_table:
            self.metrics.refused.labels(self.metrics.service, "rate limit").inc()
            with contextlib.suppress(nats.errors.Error):
                await msg.respond(c.encoder.encode(c.refused(
                    f"table {table} has {self.per_table} commands waiting already: ask again once they are "
                    "answered", "rate limit")))
            return
        self.waiting[table] = self.waiting.get(table, 0) + 1
        task = asyncio.create_task(self._answer(msg, table))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _answer(self, msg: Any, table: str) -> None:
        try:
            async with self.locks(table), self.slots:
                with self.metrics.commands.labels(self.metrics.service).time():
                    reply = await self.on_command(msg.subject, msg.data)
                await msg.respond(reply)
        except nats.errors.Error as exc:  # the connection went: the terminal asks again with the same id
            log.warning("%s: no reply sent on %s: %s", self.queue, msg.subject, exc)
        finally:
            self.waiting[table] -= 1
            if not self.waiting[table]:
                del self.waiting[table]


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


async def watch_consumers(nc: Client, durables: list[str], metrics: Metrics, every: float = 2.0) -> None:
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


async def decoded(nc: Client, consumer: str, m: Msg, at: Delivery, metrics: Metrics) -> envelope.Batch | None:
    """A follower cannot wait on a message it cannot read: it is filed at once."""
    try:
        return envelope.decode(m.data)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        await _file_dead_letter(nc, consumer, m.subject, at.stream_seq, m.data,
                                f"{type(exc).__name__}: {exc}", metrics)
        return None


async def failed(nc: Client, consumer: str, m: Msg, at: Delivery, exc: Exception, metrics: Metrics) -> None:
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
        await ack(m)


async def ack(m: Msg) -> None:
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
