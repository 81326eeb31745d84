"""How messages reach a service on its faststream broker: commands on
queue-group subscribers, answered with a reply or a refusal; events from
durable JetStream consumers, delivered in stream order; what becomes of a
delivery that cannot be read or handled (delivered again, or filed as a dead
letter); the consumers' lag as metrics."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NamedTuple

import msgspec
import nats
from faststream import BaseMiddleware
from faststream.nats import NatsBroker, NatsMessage
from faststream.response import PublishType
from nats.aio.client import Client
from pydantic import PlainValidator, WithJsonSchema

from casino.metrics import Metrics
from casino.protocol import commands
from casino.protocol.service import TableLocks, decide, read_command
from casino.store import envelope, subjects
from casino.store.following import Delivery
from casino.store.jetstream import MAX_DELIVERIES, STREAM, dead_letter

log = logging.getLogger("casino")
# Where a command is answered: an inbox (nats-py's ``_INBOX.<user>.…``), or a
# reply subject the server made for a request from another account.
REPLY_PREFIXES = ("_INBOX.", "_R_.")


def documented(tp: Any) -> Any:
    """A handler's annotation for messages whose body is a ``tp``: the
    handler is given what the subscriber's decoder made of the message (a
    ``Received``) as it is, and the AsyncAPI document describes the body by
    msgspec's JSON schema of ``tp`` (faststream makes the document with
    pydantic, which does not know msgspec's types)."""
    (schema,), defs = msgspec.json.schema_components([tp], ref_template="{name}")

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            return inline(defs[node["$ref"]]) if "$ref" in node else {k: inline(v) for k, v in node.items()}
        return [inline(v) for v in node] if isinstance(node, list) else node

    return Annotated[Any, PlainValidator(lambda v: v), WithJsonSchema(inline(schema))]


def replies_to_inboxes(metrics: Metrics) -> type[BaseMiddleware]:
    """A reply goes to the requester's inbox, or across the terminals' account
    boundary on the subject the server made: never where a request says (an
    event or secret subject, the JetStream API). A request asking otherwise is
    not handled, and nothing is published anywhere else."""

    class RepliesToInboxes(BaseMiddleware):
        async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: Any) -> Any:
            if msg.reply_to and not msg.reply_to.startswith(REPLY_PREFIXES):
                log.warning("%s: a request on %s with the reply subject %r is not answered",
                            metrics.service, msg.raw_message.subject, msg.reply_to[:200])
                metrics.refused.labels(metrics.service, "reply subject").inc()
                return None
            return await call_next(msg)

        async def publish_scope(self, call_next: Callable[[Any], Awaitable[Any]], cmd: Any) -> Any:
            if cmd.publish_type is PublishType.REPLY and not cmd.destination.startswith(REPLY_PREFIXES):
                return None
            return await call_next(cmd)

    return RepliesToInboxes


class Received(NamedTuple):
    """What a subscriber's decoder hands its handler, the one argument the
    handler takes (faststream resolves any other, a ``Context`` or a ``Path``,
    in a worker thread for every message)."""

    msg: NatsMessage
    body: Any  # the command, or ``Malformed``; an event batch's bytes, decoded by the handler


def command_decoder(decoder: msgspec.json.Decoder[Any]) -> Callable[[NatsMessage], Awaitable[Received]]:
    """faststream's decoder for one kind of command: the command, or what was wrong with it."""
    async def decode(msg: NatsMessage) -> Received:
        return Received(msg, read_command(msg.body, decoder))

    return decode


async def undecoded(msg: NatsMessage) -> Received:
    """faststream's decoder for events: decoded by the handler, which files what it cannot read."""
    return Received(msg, msg.body)


class CommandGate:
    """Each table's commands one at a time, whatever their kind (TableLocks),
    up to ``workers`` tables at once. A table with ``per_table`` commands
    waiting already is answered at once with a refusal: one terminal flooding
    its own table neither queues without bound nor holds a worker another
    table needs."""

    def __init__(self, metrics: Metrics, workers: int = 16, per_table: int = 8) -> None:
        self.metrics = metrics
        self.slots = asyncio.Semaphore(workers)
        self.per_table = per_table
        self.locks = TableLocks()
        self.waiting: dict[str, int] = {}

    async def answer(self, table: str, command: Any, handle: Callable[[Any], Awaitable[commands.Reply]],
                     reload: Callable[[Any], Awaitable[None]]) -> commands.Reply:
        if self.waiting.get(table, 0) >= self.per_table:
            reply = commands.refused(f"table {table} has {self.per_table} commands waiting already: ask again once "
                              "they are answered", "rate limit")
        else:
            self.waiting[table] = self.waiting.get(table, 0) + 1
            try:
                async with self.locks(table), self.slots:
                    with self.metrics.commands.labels(self.metrics.service).time():
                        reply = await decide(command, handle, reload, table)
            finally:
                self.waiting[table] -= 1
                if not self.waiting[table]:
                    del self.waiting[table]
        if not reply.ok:
            self.metrics.refused.labels(self.metrics.service, reply.clause).inc()
        return reply


def command_subscriber(broker: NatsBroker, kind: str, queue: str, decoder: msgspec.json.Decoder[Any],
                       accepted: Any, gate: CommandGate, service: Callable[[], Any], description: str) -> Any:
    """The queue-group subscriber of one kind of command on every table's
    subject: ``casino.cmd.<table>.<kind>``, answered by the service
    ``service()`` gives (made once the broker is connected). ``supervise``:
    a supervisor's own subject, ``casino.cmd.<table>.supervise.<supervisor>``,
    which only that supervisor's credential may publish on: the command is
    taken as directed by the supervisor it names. What only a supervisor may
    direct (``commands.SUPERVISED``) is refused on any other subject, and a
    command from elsewhere names no supervisor, whatever it says."""
    supervised = kind == "supervise"
    subject = subjects.supervise("{table}", "{supervisor}") if supervised else subjects.command("{table}", kind)
    subscriber = broker.subscriber(subject, queue=queue, max_workers=64, decoder=command_decoder(decoder),
                                   title=subject, description=description)

    @subscriber
    async def on_command(received: documented(accepted)) -> documented(commands.Reply):  # type: ignore[valid-type]
        running = service()
        tokens = received.msg.raw_message.subject.split(".")
        command = received.body
        if supervised:
            command = msgspec.structs.replace(command, supervisor=tokens[4])
        elif isinstance(command, commands.SUPERVISED):
            return commands.refused(f"{type(command).__name__} is directed by a supervisor, on the supervisor's own "
                                    f"credential ({subjects.supervise(tokens[2], '<supervisor>')}), never by a "
                                    "table's terminal", "000 8.20")
        elif getattr(command, "supervisor", ""):  # a name no supervisor's subject gave: nobody's
            command = msgspec.structs.replace(command, supervisor="")
        return await gate.answer(tokens[2], command, running.handle, running.reload)

    return subscriber


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
            metrics.dead_letters.labels(durable)  # at zero until the first: its increase is then seen
            caught_up = caught_up and not info.num_pending
        if caught_up and not metrics.is_ready:
            metrics.set_ready(True)
        await asyncio.sleep(every)


def delivery(msg: NatsMessage) -> Delivery:
    """Where a JetStream delivery stands, from nats-py's reading of its ack subject."""
    meta = msg.raw_message.metadata
    return Delivery(meta.sequence.stream, meta.sequence.consumer, meta.num_delivered, meta.num_pending)


async def decoded(nc: Client, consumer: str, msg: NatsMessage, at: Delivery, metrics: Metrics,
                  ) -> envelope.Batch | None:
    """A follower cannot wait on a message it cannot read: it is filed at once."""
    try:
        return envelope.decode(msg.body)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        await _file_dead_letter(nc, consumer, msg.raw_message.subject, at.stream_seq, msg.body,
                                f"{type(exc).__name__}: {exc}", metrics)
        return None


async def failed(nc: Client, consumer: str, msg: NatsMessage, at: Delivery, exc: Exception, metrics: Metrics) -> None:
    """A delivery that could not be handled is redelivered a few times, then
    filed as a dead letter with the reason."""
    if isinstance(exc, nats.errors.Error | TimeoutError | ConnectionError | OSError | RuntimeError):
        await nak(msg, 1.0)  # the broker or a peer is away: not the event's fault
    elif at.delivered < MAX_DELIVERIES:
        log.warning("%s: delivery %d of seq %d failed: %s", consumer, at.delivered, at.stream_seq, exc)
        await nak(msg, 0.2)
    else:
        await _file_dead_letter(nc, consumer, msg.raw_message.subject, at.stream_seq, msg.body,
                                f"{type(exc).__name__}: {exc}", metrics)
        await ack(msg)


async def ack(msg: NatsMessage) -> None:
    """Ack; if the connection is away the server delivers the message again, which is harmless."""
    with contextlib.suppress(nats.errors.Error):
        await msg.ack()


async def nak(msg: NatsMessage, delay: float) -> None:
    """Ask for the message again after ``delay``; if the connection is away it comes again anyway."""
    with contextlib.suppress(nats.errors.Error):
        await msg.nack(delay=delay)


async def _file_dead_letter(nc: Client, consumer: str, subject: str, seq: int, data: bytes, reason: str,
                            metrics: Metrics) -> None:
    log.error("%s: seq %d goes to the dead letters: %s", consumer, seq, reason)
    await dead_letter(nc.jetstream(), consumer, subject, seq, data, reason)
    metrics.dead_letters.labels(consumer).inc()
