"""How a service follows the stream, on durable JetStream consumers that
push their deliveries: one consumer its instances share, taken by one
instance at a time (``Sole``: settlement's and the archiver's, each in its
service's ``consumer``), or a consumer of its own (``claim``: the
projections' writer). The shoe, wager and
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
from nats.js.api import ConsumerConfig

from casino.metrics import Metrics
from casino.nats import permissions
from casino.store.jetstream import STREAM
from services.messaging import ack, undecoded

log = logging.getLogger("casino")

IN_FLIGHT = 1024  # deliveries a consumer hands out before the first of them is acknowledged
ACK_EVERY = 64  # an instance's own consumer (ack policy all) is acknowledged at least this often
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
