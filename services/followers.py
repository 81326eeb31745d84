"""What each service follows from the stream, on durable JetStream consumers
that push their deliveries: settlement every coup and wager event, settling
each coup as its result passes, and the archiver every settlement, each from
one consumer its instances share and one instance at a time takes (``Sole``);
the projections' writer every event, into the read models, verifying each
coup as it settles (a consumer of its own, ``claim``). The shoe, wager and
dealer-policy follow nothing: each instance owns its tables
(services.ownership) and applies its own appends as it makes them.

Deliveries come through nats-py subscriptions, handled one at a time in the
order they came: a consumer delivers new messages in stream order.
faststream declares the consumers for the AsyncAPI documents.
(faststream's pull subscribers either wait to fill a batch or handle the
messages of one fetch concurrently: docs/architecture.md.)"""

import abc
import asyncio
import contextlib
import json
import logging
import os
import random
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import nats
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy as ConsumerAck
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from casino.metrics import Metrics
from casino.nats import permissions
from casino.store import envelope, subjects
from casino.store.eventstore import Stored
from casino.store.following import Delivery
from casino.store.jetstream import STREAM
from services.archiver.service import ARCHIVER_DURABLE, ArchiverService
from services.messaging import ack, decoded, delivery, documented, failed, undecoded
from services.settlement.service import FOLLOWED, SettlementService

log = logging.getLogger("casino")

SWEEP_EVERY = 30.0  # seconds between the archiver's sweeps of every table
IN_FLIGHT = 1024  # deliveries a consumer hands out before the first of them is acknowledged
ACK_EVERY = 64  # an instance's own consumer (ack policy all) is acknowledged at least this often
SETTLEMENT = "settlement"  # the consumer settlement's instances share, and their queue group
SETTLEMENT_DELIVERY = "_INBOX.settlement.events"  # where the shared settlement consumer delivers
SOLE = 0  # the partition whose owner alone takes a shared consumer's deliveries (settlement's, the archiver's)


# The consumers of their own each consuming service may hold at once: its
# user may create, look at and acknowledge those names alone
# (casino.nats.permissions), so no user can make more and exhaust the
# server's. An instance claims a free one at its start; one left by an
# instance gone lapses ``LAPSES`` seconds after its last subscriber.
SLOTS = permissions.SLOTS
LAPSES = 60.0
CONSUMER_EXISTS = 10148  # the server's error code: a consumer of that name exists already


def slot_names(kind: str) -> list[str]:
    return [f"{kind}-{k}" for k in range(SLOTS)]


def document_name(kind: str) -> str:
    """The name the AsyncAPI documents give an instance's consumer."""
    return f"{kind}-{os.environ.get('CASINO_INSTANCE') or 'instance'}"


def own_consumer(name: str, filter_: str, **settings: Any) -> ConsumerConfig:
    return ConsumerConfig(name=name, durable_name=name, filter_subject=filter_, inactive_threshold=LAPSES,
                          ack_policy=ConsumerAck.ALL, max_ack_pending=IN_FLIGHT, deliver_group=name, **settings)


async def claim(nc: Client, kind: str, config_for: Callable[[str], ConsumerConfig]) -> ConsumerConfig:
    """Create a consumer of this instance's own under a free one of the
    service's names (``config_for(name)``), delivering to this instance's
    inbox; never one that exists (another instance's). Where none is free, or
    the server refuses (its limit of consumers reached), it says so and asks
    again every few seconds: the service waits, it does not stop."""
    while True:
        why = ""
        for name in random.sample(slot_names(kind), SLOTS):
            config = config_for(name)
            config.deliver_subject = nc.new_inbox()
            subject = f"$JS.API.CONSUMER.CREATE.{STREAM}.{name}" + (
                f".{config.filter_subject}" if config.filter_subject else "")
            reply = json.loads((await nc.request(subject, json.dumps(
                {"stream_name": STREAM, "config": config.as_dict(), "action": "create"}).encode(), timeout=10)).data)
            error = reply.get("error")
            if error is None:
                return config
            why = str(error.get("description"))
            if error.get("err_code") != CONSUMER_EXISTS:
                break
        log.error("%s: no consumer of its own can be created (%s; %d names, one left by an instance gone lapses "
                  "%.0f s after it): asked again in 5 s", kind, why, SLOTS, LAPSES)
        await asyncio.sleep(5.0)


def events_subscriber(broker: NatsBroker, filter_: str, durable: str, config: ConsumerConfig,
                      description: str) -> Callable[[Callable[..., Awaitable[None]]], Any]:
    """A durable consumer's deliveries, acknowledged by the handler. The
    consumer delivers to a queue group of its own name (nats-py binds a queue
    subscription to the durable consumer of the queue's name): the instances
    that share it (settlement's) share its deliveries."""
    config.deliver_group = durable
    return broker.subscriber(filter_, queue=durable, stream=JStream(STREAM, declare=False),
                             config=config, ack_policy=AckPolicy.MANUAL, decoder=undecoded, title=filter_,
                             description=description)


class Acks:
    """Acknowledges an own consumer's deliveries (ack policy all) every
    ``ACK_EVERY`` messages and whenever nothing more is waiting."""

    def __init__(self) -> None:
        self.unacked = 0

    async def handled(self, msg: Msg, pending: int) -> None:
        self.unacked += 1
        if pending == 0 or self.unacked >= ACK_EVERY:
            await ack(msg)
            self.unacked = 0


async def ensure_settlement_consumer(nc: Client) -> None:
    """Create the consumer settlement's instances share, or give one declared
    elsewhere (the cluster's manifests) the filters this release follows,
    keeping its other settings. A short ack wait: what a killed instance had
    in hand comes again within seconds."""
    js = nc.jetstream()
    filters = [subjects.aggregate_filter(a) for a in FOLLOWED]
    try:
        config = (await js.consumer_info(STREAM, "settlement")).config
    except NotFoundError:
        config = ConsumerConfig(durable_name="settlement", deliver_subject=SETTLEMENT_DELIVERY,
                                deliver_group="settlement", ack_wait=5.0, max_ack_pending=IN_FLIGHT)
    else:
        if not config.deliver_subject:
            raise RuntimeError("the consumer settlement is a pull consumer of an earlier release: delete it, and "
                               "settlement creates it again delivering from the first unsettled coup")
        if sorted(config.filter_subjects or [config.filter_subject or ""]) == sorted(filters):
            return
    config.filter_subject, config.filter_subjects = None, filters
    await js.add_consumer(STREAM, config)


class Sole(abc.ABC):
    """The deliveries of a consumer a service's instances share (a queue group
    on its deliver subject), taken by one instance at a time: the owner of
    partition ``SOLE`` in the owners' bucket (``services.ownership``). The
    others stand by; one of them takes over when it stops, or a lapse after
    it vanishes, and what it held unacknowledged comes again after the
    consumer's ack wait. The deliveries come through a nats-py subscription,
    one at a time in the order they came: faststream's subscriber stack cost
    264 µs of CPU a delivery here, nats-py's callback 16 to 22
    (docs/architecture.md); faststream declares the consumer for the AsyncAPI
    document."""

    deliver: ClassVar[str]  # the consumer's deliver subject
    queue: ClassVar[str]  # and its queue group

    def __init__(self) -> None:
        self.nc: Client | None = None
        self.subscription: Any = None

    metrics: Metrics

    async def take(self, nc: Client, parts: set[int]) -> None:
        """Take the deliveries if ``parts`` holds ``SOLE``."""
        if SOLE in parts and self.subscription is None:
            self.nc = nc
            self.metrics.deliveries_refused.labels(self.queue)  # at zero until the first
            self.subscription = await nc.subscribe(self.deliver, queue=self.queue, cb=self._delivered)
            log.info("%s: this instance takes the deliveries", self.queue)

    async def _delivered(self, msg: Msg) -> None:
        """A delivery of the consumer's own (its ack subject names it), handled;
        anything else published on the deliver subject dropped and counted:
        only the server writes there."""
        if not (msg.reply or "").startswith(f"$JS.ACK.{STREAM}.{self.queue}."):
            self.metrics.deliveries_refused.labels(self.queue).inc()
            log.warning("%s: a message on its deliver subject that its consumer did not deliver (reply %r): dropped",
                        self.queue, (msg.reply or "")[:200])
            return
        await self.on_event(msg)

    async def release(self, parts: set[int]) -> None:
        """Let the deliveries go if ``parts`` holds ``SOLE``."""
        if SOLE in parts:
            await self.stop()

    async def stop(self) -> None:
        if self.subscription is not None:
            with contextlib.suppress(nats.errors.Error):
                await self.subscription.unsubscribe()
            self.subscription = None

    @abc.abstractmethod
    async def on_event(self, msg: Msg) -> None:
        """Handle one delivery, and acknowledge it once handled."""


class SettlementConsumer(Sole):
    """Settlement follows every coup and wager event and settles each coup as
    its result passes, the settlements of several tables at once
    (``casino.store.following``: a coup it could not follow whole is read
    back from the stream), one instance at a time (``Sole``). Shared by
    several, a coup's messages went to several instances, and each read back
    the coups it saw in part: three instances spent 2.8 ms of CPU a coup
    where one spent 1.3 (docs/architecture.md)."""

    deliver, queue = SETTLEMENT_DELIVERY, SETTLEMENT

    def __init__(self, service: Callable[[], SettlementService], metrics: Metrics,
                 later: Callable[[Awaitable[None]], None]) -> None:
        super().__init__()
        self.service, self.metrics, self.later = service, metrics, later

    async def _settle(self, msg: Msg, at: Delivery, due: Any) -> None:
        assert self.nc is not None
        try:
            await self.service().settle(due)
        except Exception as exc:
            with contextlib.suppress(nats.errors.Error, TimeoutError):  # not filed: it comes again after the ack wait
                await failed(self.nc, SETTLEMENT, msg, at, exc, self.metrics)
        else:
            await ack(msg)

    async def on_event(self, msg: Msg) -> None:
        assert self.nc is not None
        at = delivery(msg)
        settling = self.service()
        with self.metrics.handling.labels(SETTLEMENT).time():
            batch = await decoded(self.nc, SETTLEMENT, msg, at, self.metrics)
            if batch is None:
                settling.following.forget()
                due = None
            else:
                due = settling.follow(Stored(at.stream_seq, msg.subject, batch), at)
        if due is None:
            await ack(msg)
        else:
            self.later(self._settle(msg, at, due))


def documented_settlement(broker: NatsBroker) -> None:
    """Declare settlement's consumer for the AsyncAPI document (its deliveries come through ``SettlementConsumer``)."""
    @events_subscriber(broker, f"{subjects.EVENTS}.>", SETTLEMENT, ConsumerConfig(durable_name=SETTLEMENT),
                       "Every coup and wager event, each coup settled as its result passes "
                       f"(the filters: {', '.join(subjects.aggregate_filter(a) for a in FOLLOWED)}).")
    async def on_event(received: documented(envelope.Batch)) -> None:  # type: ignore[valid-type]
        raise AssertionError("declared for the document only")


ARCHIVER_DELIVERY = "_INBOX.archiver.events"  # where the archiver's consumer delivers


async def ensure_archiver_consumer(nc: Client) -> None:
    """Create the consumer the archiver's instances share, if it does not exist:
    every settlement, from the first (the archiver's sweep seals what came before it)."""
    js = nc.jetstream()
    try:
        await js.consumer_info(STREAM, ARCHIVER_DURABLE)
    except NotFoundError:
        await js.add_consumer(STREAM, ConsumerConfig(
            durable_name=ARCHIVER_DURABLE, deliver_subject=ARCHIVER_DELIVERY, deliver_group=ARCHIVER_DURABLE,
            filter_subject=subjects.aggregate_filter("settle"), deliver_policy=DeliverPolicy.NEW, ack_wait=60.0,
            max_ack_pending=IN_FLIGHT))


class ArchiverConsumer(Sole):
    """The archiver follows every settlement (one in a shoe after the table's
    last sealed one may let that shoe be sealed) and sweeps every table at
    its start and every ``SWEEP_EVERY`` seconds, one instance at a time (``Sole``)."""

    deliver, queue = ARCHIVER_DELIVERY, ARCHIVER_DURABLE

    def __init__(self, service: Callable[[], ArchiverService], metrics: Metrics) -> None:
        super().__init__()
        self.service, self.metrics = service, metrics
        self.sweeping: asyncio.Task[None] | None = None

    async def take(self, nc: Client, parts: set[int]) -> None:
        await super().take(nc, parts)
        if self.subscription is not None and self.sweeping is None:
            self.sweeping = asyncio.create_task(self._sweeping())

    async def stop(self) -> None:
        if self.sweeping is not None:
            self.sweeping.cancel()
            self.sweeping = None
        await super().stop()

    async def _sweeping(self) -> None:
        while self.subscription is not None:  # besides its cancellation, which Python 3.11 may lose
            try:
                await self.service().sweep()
            except Exception as exc:  # the server away, or a reply late: the next sweep tries again
                log.error("archiver: sweep: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(SWEEP_EVERY)

    async def on_event(self, msg: Msg) -> None:
        archiving = self.service()
        table, shoe, _, _ = subjects.tokens(msg.subject)
        with self.metrics.handling.labels(ARCHIVER_DURABLE).time():
            if archiving.behind(table, shoe):
                try:
                    await archiving.advance(table)
                except Exception as exc:  # not the settlement's fault: the next sweep takes the table again
                    log.error("archiver: table %s: %s: %s", table, type(exc).__name__, exc)
        await ack(msg)


def documented_archiver(broker: NatsBroker) -> None:
    """Declare the archiver's consumer for the AsyncAPI document (its deliveries come through ``ArchiverConsumer``)."""
    @events_subscriber(broker, subjects.aggregate_filter("settle"), ARCHIVER_DURABLE,
                       ConsumerConfig(durable_name=ARCHIVER_DURABLE),
                       "Every settlement: the shoes before the one it is in may be sealed and removed.")
    async def on_event(received: documented(envelope.Batch)) -> None:  # type: ignore[valid-type]
        raise AssertionError("declared for the document only")
