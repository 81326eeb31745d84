"""How messages reach a service: commands on nats-py queue subscriptions of
the partitions of the tables it owns, answered with a reply or a refusal;
events from durable JetStream consumers, delivered in stream order; what
becomes of a delivery that cannot be read or handled (delivered again, or
filed as a dead letter); the consumers' lag as metrics."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NamedTuple

import msgspec
import nats
from faststream.nats import NatsBroker, NatsMessage
from nats.aio.client import Client
from nats.aio.msg import Msg
from pydantic import PlainValidator, WithJsonSchema

from casino.metrics import Metrics
from casino.nats import partitions
from casino.nats.permissions import answerable
from casino.protocol import commands
from casino.protocol.service import LANE_BURST, LANE_RATE, Malformed, Rate, TableLocks, decide, read_command
from casino.store import envelope, subjects
from casino.store.following import Delivery
from casino.store.jetstream import MAX_DELIVERIES, STREAM, dead_letter

log = logging.getLogger("casino")
# Where a command is answered on a server with no users (the tests' own): any
# inbox, or a reply subject the server made for a request from another account.
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


class Received(NamedTuple):
    """What a subscriber's decoder hands its handler, the one argument the
    handler takes (faststream resolves any other, a ``Context`` or a ``Path``,
    in a worker thread for every message)."""

    msg: NatsMessage
    body: Any  # the command, or ``Malformed``; an event batch's bytes, decoded by the handler


async def undecoded(msg: NatsMessage) -> Received:
    """faststream's decoder for events: decoded by the handler, which files what it cannot read."""
    return Received(msg, msg.body)


class CommandGate:
    """Each table's commands one at a time, whatever their kind (TableLocks),
    up to ``workers`` tables at once. A table with ``per_table`` of its own
    terminal's commands waiting already is answered at once with a refusal:
    one terminal flooding its own table neither queues without bound nor
    holds a worker another table needs. A supervisor's commands at a table
    wait in a lane of their own (``per_supervisor`` waiting at most, and
    ``SUPERVISOR_RATE`` a second), so that one supervisor's credential,
    stolen or stuck, takes nothing of the terminal's share: the terminal's
    commands are decided in turn with at most a few of the supervisor's."""

    # A supervisor's or a device's commands a second at one table (casino.protocol.service.LANE_RATE).
    SUPERVISOR_RATE = LANE_RATE

    def __init__(self, metrics: Metrics, workers: int = 16, per_table: int = 8, per_supervisor: int = 4) -> None:
        self.metrics = metrics
        self.slots = asyncio.Semaphore(workers)
        self.per_table, self.per_supervisor = per_table, per_supervisor
        self.locks = TableLocks()
        self.waiting: dict[tuple[str, str], int] = {}
        self.rate = Rate(self.SUPERVISOR_RATE, LANE_BURST)

    def _refusal(self, table: str, supervisor: str) -> commands.Reply | None:
        """A refusal for a command that may not wait at ``table`` now (``supervisor``: whose lane, "" the table's)."""
        lane = (table, supervisor)
        if not supervisor:
            if self.waiting.get(lane, 0) >= self.per_table:
                return commands.refused(f"table {table} has {self.per_table} commands waiting already: ask again "
                                        "once they are answered", "rate limit")
            return None
        if self.waiting.get(lane, 0) >= self.per_supervisor or not self.rate.take(f"{table}.{supervisor}"):
            who = f"the table's {'card-reading shoe' if supervisor == 'read' else 'shuffling machine'}" \
                if supervisor in DEVICE_LANES else f"supervisor {supervisor}"
            return commands.refused(f"{who} has asked at table {table} more than "
                                    f"{self.per_supervisor} at once or {self.SUPERVISOR_RATE:.0f} a second: ask "
                                    "again in a moment", "rate limit")
        return None

    async def answer(self, table: str, command: Any, handle: Callable[[Any], Awaitable[commands.Reply]],
                     reload: Callable[[Any], Awaitable[None]], supervisor: str = "") -> commands.Reply:
        lane = (table, supervisor)
        reply = self._refusal(table, supervisor)
        if reply is None:
            self.waiting[lane] = self.waiting.get(lane, 0) + 1
            try:
                async with self.locks(table), self.slots:
                    with self.metrics.commands.labels(self.metrics.service).time():
                        reply = await decide(command, handle, reload, table)
            finally:
                self.waiting[lane] -= 1
                if not self.waiting[lane]:
                    del self.waiting[lane]
        if not reply.ok:
            self.metrics.refused.labels(self.metrics.service, reply.clause).inc()
        return reply


DEVICE_LANES = ("read", "shuffler")


class Commands:
    """The commands an instance answers: those of the partitions of the tables
    it owns (``services.ownership``), one kind after another on nats-py
    queue subscriptions of their own (``take``, ``release``). Each message
    is decided beside the next (``CommandGate``: each table's in turn, up to
    ``IN_HAND`` in hand), its reply published to the requester's inbox.
    faststream's subscriber stack cost more than the work here (a request
    through it 462 µs of CPU, through a nats-py callback 29: docs/architecture.md),
    so commands come through nats-py, in this one place; faststream
    declares their subjects for the AsyncAPI documents (``documented_commands``).

    ``kinds``: each subject token with its queue group and decoder.
    ``supervise``: a supervisor's own subject,
    ``casino.cmd.<table>.supervise.<supervisor>``, which only that
    supervisor's credential may publish on: the command is taken as directed by
    the supervisor it names. What only a supervisor may direct
    (``commands.SUPERVISED``) is refused on any other subject, and a command
    from elsewhere names no supervisor, whatever it says."""

    IN_HAND = 64

    def __init__(self, kinds: dict[str, tuple[str, msgspec.json.Decoder[Any]]], gate: CommandGate,
                 service: Callable[[], Any], metrics: Metrics, *, secured: bool = True) -> None:
        self.kinds, self.gate, self.service, self.metrics = kinds, gate, service, metrics
        self.secured = secured  # connected as a user of the permission model (else a server with no users)
        self.subscriptions: dict[int, list[Any]] = {}
        self.in_hand = asyncio.Semaphore(self.IN_HAND)
        self.answering: set[asyncio.Task[None]] = set()
        self.nc: Client | None = None

    async def take(self, parts: set[int]) -> None:
        """Answer the commands of partitions ``parts`` from now on."""
        assert self.nc is not None
        for part in sorted(parts - set(self.subscriptions)):
            self.subscriptions[part] = [
                await self.nc.subscribe(partitions.owned(kind, part), queue=queue, cb=self._received)
                for kind, (queue, _) in self.kinds.items()]

    async def release(self, parts: set[int]) -> None:
        """Answer no more of partitions ``parts``' commands (those in hand are answered)."""
        for part in sorted(parts & set(self.subscriptions)):
            for subscription in self.subscriptions.pop(part):
                with contextlib.suppress(nats.errors.Error):
                    await subscription.unsubscribe()

    async def stop(self) -> None:
        await self.release(set(self.subscriptions))
        if self.answering:
            await asyncio.wait(self.answering, timeout=10)

    async def _received(self, msg: Any) -> None:
        await self.in_hand.acquire()
        task = asyncio.ensure_future(self.answer(msg))
        self.answering.add(task)
        task.add_done_callback(self.answering.discard)
        task.add_done_callback(lambda _: self.in_hand.release())

    async def answer(self, msg: Any) -> None:
        """Answer one request, to the requester's own inbox or across the
        account boundary on the subject the server made: never where a
        request says (an event or secret subject, the JetStream API, another
        user's inbox where a consumer delivers: ``permissions.answerable``).
        A request asking otherwise is not handled."""
        reply_to = msg.reply or ""
        if not (answerable(reply_to, msg.subject) if self.secured else reply_to.startswith(REPLY_PREFIXES)):
            log.warning("%s: a request on %s with the reply subject %r is not answered", self.metrics.service,
                        msg.subject, reply_to[:200])
            self.metrics.refused.labels(self.metrics.service, "reply subject").inc()
            return
        reply = await self.reply_for(msg.subject, msg.data)
        assert self.nc is not None
        with contextlib.suppress(nats.errors.Error):  # the requester asks again
            await self.nc.publish(reply_to, commands.encoder.encode(reply))

    async def reply_for(self, subject: str, data: bytes) -> commands.Reply:
        """The reply to the command ``data`` that came on ``subject``
        (``casino.cmd.<table>.<kind>.<partition>``, or a supervisor's)."""
        tokens = subject.split(".")
        table, kind = tokens[2], tokens[3]
        _, decoder = self.kinds[kind]
        command = read_command(data, decoder)
        supervisor = tokens[4] if kind == "supervise" else ""
        if supervisor:
            if not isinstance(command, Malformed):
                command = msgspec.structs.replace(command, supervisor=supervisor)
        elif isinstance(command, commands.SUPERVISED):
            return commands.refused(f"{type(command).__name__} is directed by a supervisor, on the supervisor's own "
                                    f"credential ({subjects.supervise(table, '<supervisor>')}), never by a "
                                    "table's terminal", "000 8.20")
        elif getattr(command, "supervisor", ""):  # a name no supervisor's subject gave: nobody's
            command = msgspec.structs.replace(command, supervisor="")
        running = self.service()
        # A device's reports wait in a lane of their own, as a supervisor's do: none takes the terminal's share.
        lane = supervisor or (kind if kind in DEVICE_LANES else "")
        return await self.gate.answer(table, command, running.handle, running.reload, lane)


def documented_commands(broker: NatsBroker, kind: str, queue: str, accepted: Any, description: str) -> None:
    """Declare one kind of command's subject for the AsyncAPI document (the
    commands themselves come through ``Commands``)."""
    subject = partitions.owned(kind, "{partition}").replace("*", "{table}", 1)
    if kind == "supervise":
        subject = subject.replace("*", "{supervisor}", 1)

    @broker.subscriber(subject, queue=queue, title=subject, description=description)
    async def on_command(body: documented(accepted)) -> documented(commands.Reply):  # type: ignore[valid-type]
        raise AssertionError("declared for the document only")


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


def delivery(msg: Msg) -> Delivery:
    """Where a JetStream delivery stands, from nats-py's reading of its ack subject."""
    meta = msg.metadata
    return Delivery(meta.sequence.stream, meta.sequence.consumer, meta.num_delivered, meta.num_pending)


async def decoded(nc: Client, consumer: str, msg: Msg, at: Delivery, metrics: Metrics) -> envelope.Batch | None:
    """A follower cannot wait on a message it cannot read: it is filed at once."""
    try:
        return envelope.decode(msg.data)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        await _file_dead_letter(nc, consumer, msg.subject, at.stream_seq, msg.data, f"{type(exc).__name__}: {exc}",
                                metrics)
        return None


async def failed(nc: Client, consumer: str, msg: Msg, at: Delivery, exc: Exception, metrics: Metrics) -> None:
    """A delivery that could not be handled is redelivered a few times, then
    filed as a dead letter with the reason."""
    if isinstance(exc, nats.errors.Error | TimeoutError | ConnectionError | OSError | RuntimeError):
        await nak(msg, 1.0)  # the broker or a peer is away: not the event's fault
    elif at.delivered < MAX_DELIVERIES:
        log.warning("%s: delivery %d of seq %d failed: %s", consumer, at.delivered, at.stream_seq, exc)
        await nak(msg, 0.2)
    else:
        await _file_dead_letter(nc, consumer, msg.subject, at.stream_seq, msg.data, f"{type(exc).__name__}: {exc}",
                                metrics)
        await ack(msg)


async def ack(msg: Msg) -> None:
    """Ack; if the connection is away the server delivers the message again, which is harmless."""
    with contextlib.suppress(nats.errors.Error):
        await msg.ack()


async def nak(msg: Msg, delay: float) -> None:
    """Ask for the message again after ``delay``; if the connection is away it comes again anyway."""
    with contextlib.suppress(nats.errors.Error):
        await msg.nak(delay=delay)


async def _file_dead_letter(nc: Client, consumer: str, subject: str, seq: int, data: bytes, reason: str,
                            metrics: Metrics) -> None:
    log.error("%s: seq %d goes to the dead letters: %s", consumer, seq, reason)
    await dead_letter(nc.jetstream(), consumer, subject, seq, data, reason)
    metrics.dead_letters.labels(consumer).inc()
