"""How a service follows the stream, on durable JetStream consumers, a
turn at a time (every message waiting, handled together): one consumer its
instances share, whose deliveries are pushed and taken by one instance at a
time (``Sole``: settlement's and the archiver's, each in its service's
``consumer``); or a pull consumer of its own (``claim``: the projections'
writer), taken in turns of a fetch (``Turns``). The shoe, wager and
dealer-policy follow nothing: each instance owns its tables
(services.ownership) and applies its own appends as it makes them.

Both come through nats-py's core subscriptions: a consumer hands out new
messages in stream order. faststream declares the consumers for the
AsyncAPI documents. (faststream's pull subscribers either wait to fill a
batch or handle the messages of one fetch concurrently: docs/architecture.md.)"""

import abc
import asyncio
import contextlib
import json
import logging
import os
import random
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import nats
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy as ConsumerAck
from nats.js.api import ConsumerConfig
from nats.js.errors import NotFoundError

from casino.metrics import Metrics
from casino.nats import permissions
from casino.store.jetstream import STREAM
from services.messaging import ack, undecoded

log = logging.getLogger("casino")

IN_FLIGHT = 1024  # deliveries a consumer hands out before the first of them is acknowledged
TURN_MOST = 256  # the messages one turn of a pull consumer takes at most
# Seconds between one turn's end and the next fetch: what comes meanwhile is taken in one turn, a wakeup
# for many messages rather than one a message (services.projections.service writes its keys once a turn).
TURN_GATHER = 0.05
FETCH_WAITS = 5.0  # seconds a fetch waits for its first message before it is asked again
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
    """A pull consumer of an instance's own (``Turns`` takes its messages), acknowledged up to a turn's last."""
    return ConsumerConfig(name=name, durable_name=name, filter_subject=filter_, inactive_threshold=LAPSES,
                          ack_policy=ConsumerAck.ALL, max_ack_pending=IN_FLIGHT, **settings)


async def claim(nc: Client, kind: str, config_for: Callable[[str], ConsumerConfig]) -> ConsumerConfig:
    """Create a pull consumer of this instance's own under a free one of the
    service's names (``config_for(name)``); never one that exists (another
    instance's). Where none is free, or
    the server refuses (its limit of consumers reached), it says so and asks
    again every few seconds: the service waits, it does not stop."""
    while True:
        why = ""
        for name in random.sample(slot_names(kind), SLOTS):
            config = config_for(name)
            # A create of a consumer just like one that exists is answered as done: this claim's own mark
            # makes it unlike any other instance's.
            config.description = f"claimed {secrets.token_hex(8)}"
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


async def shared_consumer(nc: Client, name: str, filters: list[str], made: ConsumerConfig) -> None:
    """Make ``made``, the consumer ``name`` a service's instances share
    (``Sole``), if it is not there; give one there (an earlier release's, or
    one the cluster's manifests declared) this release's ``filters``, keeping
    its other settings, changed by its durable name (by its name, nats-py
    asks a subject the service's user may not). A pull consumer of that name
    is an earlier release's, which this one cannot change into one that
    pushes: the start stops, saying what to do."""
    js = nc.jetstream()
    try:
        config = (await js.consumer_info(STREAM, name)).config
    except NotFoundError:
        config = made
    else:
        if not config.deliver_subject:
            raise RuntimeError(f"the consumer {name} is a pull consumer of an earlier release: delete it, and "
                               f"{name} creates it again")
        if sorted(config.filter_subjects or [config.filter_subject or ""]) == sorted(filters):
            return
    config.filter_subject, config.filter_subjects = (filters[0], None) if len(filters) == 1 else (None, filters)
    config.name = None
    await js.add_consumer(STREAM, config)


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


def handed_out(msg: Msg, consumer: str, metrics: Metrics) -> bool:
    """Whether ``consumer`` handed ``msg`` out (its ack subject names it); anything else on the
    subject where it delivers is dropped and counted: only the server writes there."""
    if (msg.reply or "").startswith(f"$JS.ACK.{STREAM}.{consumer}."):
        return True
    metrics.deliveries_refused.labels(consumer).inc()
    log.warning("%s: a message where its consumer delivers that it did not hand out (reply %r): dropped", consumer,
                (msg.reply or "")[:200])
    return False


async def _ended(task: asyncio.Task[None] | None, handling: bool) -> None:
    """A task that takes turns, ended: cancelled while it waits for one, let finish the one it handles."""
    if task is not None:
        if not handling:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class ConsumerLost(Exception):
    """The server no longer has the consumer a ``Turns`` fetches from (it lapsed, or was deleted)."""


class Turns:
    """A pull consumer's messages, taken a turn at a time: a fetch waits up to
    ``FETCH_WAITS`` for the first message and takes every one waiting behind
    it (``TURN_MOST`` at most), and ``handle`` is given them together, in
    stream order; the next fetch is asked ``TURN_GATHER`` after the turn, so
    that what came meanwhile is taken together too. One wakeup, one handling
    and one acknowledgement (the turn's last, ack policy all) serve every
    message of a turn, where a push consumer's deliveries pay each of them a
    message. Messages on the inbox that the consumer did not hand out are
    dropped and counted: only the server writes there. ``handle`` raising, or
    the consumer gone, ends the turns (``lost`` is told): nothing after a
    message not handled is acknowledged."""

    def __init__(self, nc: Client, consumer: str, handle: Callable[[list[Msg]], Awaitable[None]],
                 lost: Callable[[BaseException], None], metrics: Metrics) -> None:
        self.nc, self.consumer, self.handle, self.lost, self.metrics = nc, consumer, handle, lost, metrics
        self.arrived: list[Msg] = []
        self.answered = asyncio.Event()
        self.status = ""
        self.task: asyncio.Task[None] | None = None
        self.subscription: Any = None
        self.handling = False

    async def start(self) -> None:
        self.subscription = await self.nc.subscribe(self.nc.new_inbox(), cb=self._arrived)
        self.metrics.deliveries_refused.labels(self.consumer)  # at zero until the first
        self.task = asyncio.create_task(self._turns())

    async def stop(self) -> None:
        """No more turns: the one being handled ends first; what a fetch was bringing comes again after the ack wait."""
        task, self.task = self.task, None
        await _ended(task, self.handling)
        await self._unsubscribe()

    async def _unsubscribe(self) -> None:
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            with contextlib.suppress(nats.errors.Error):
                await subscription.unsubscribe()

    async def _arrived(self, msg: Msg) -> None:
        status = (msg.headers or {}).get("Status")
        if status is not None and not msg.data:
            if status != "100":  # a heartbeat; anything else ends the fetch
                self.status = f"{status} {(msg.headers or {}).get('Description', '')}".strip()
                self.answered.set()
        elif handed_out(msg, self.consumer, self.metrics):
            self.arrived.append(msg)
            if len(self.arrived) >= TURN_MOST:
                self.answered.set()

    async def _fetch(self) -> list[Msg]:
        """Every message waiting, once the first has come (none if ``FETCH_WAITS`` go by)."""
        self.arrived, self.status = [], ""
        self.answered.clear()
        request = {"batch": TURN_MOST, "expires": int(FETCH_WAITS * 1e9), "no_wait": True}
        await self.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{self.consumer}", json.dumps(request).encode(),
                              reply=self.subscription.subject)
        with contextlib.suppress(TimeoutError):  # unanswered (the server away a moment): asked again
            await asyncio.wait_for(self.answered.wait(), FETCH_WAITS + 5.0)
        if self.status.startswith(("409 Consumer Deleted", "503")):  # 503: no consumer of the name to answer
            raise ConsumerLost(f"{self.consumer}: {self.status}")
        return self.arrived

    async def _turns(self) -> None:
        try:
            while self.task is not None:
                msgs = await self._fetch()
                if msgs and self.task is not None:
                    self.handling = True
                    try:
                        await self.handle(msgs)
                    finally:
                        self.handling = False
                    await ack(msgs[-1])
                    if self.task is not None:
                        await asyncio.sleep(TURN_GATHER)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("%s: its turns end: %s: %s", self.consumer, type(exc).__name__, exc)
            self.task = None
            await self._unsubscribe()
            self.lost(exc)


class Sole(abc.ABC):
    """The deliveries of a consumer a service's instances share (a queue group
    on its deliver subject), taken by one instance at a time: the owner of
    partition ``SOLE`` in the owners' bucket (``services.ownership``). The
    others stand by; one of them takes over when it stops, or a lapse after
    it vanishes, and what it held unacknowledged comes again after the
    consumer's ack wait. The deliveries come through a nats-py subscription
    (faststream's subscriber stack cost 264 µs of CPU a delivery here,
    nats-py's callback 16 to 22: docs/architecture.md) and are handled a
    turn at a time: every delivery that came while the last turn was handled
    is handed over together, in the order they came, each acknowledged once
    handled (ack policy explicit), so that one that fails is asked for again
    on its own. (A pull consumer taken in turns of a fetch cost settlement
    more at a floor's pace, not less: docs/benchmarks.md.) faststream
    declares the consumer for the AsyncAPI document."""

    deliver: ClassVar[str]  # the consumer's deliver subject
    queue: ClassVar[str]  # and its queue group

    def __init__(self) -> None:
        self.nc: Client | None = None
        self.subscription: Any = None
        self.delivered: list[Msg] = []  # since the last turn began
        self.arrived = asyncio.Event()
        self.turning: asyncio.Task[None] | None = None
        self.handling = False

    metrics: Metrics

    async def take(self, nc: Client, parts: set[int]) -> None:
        """Take the deliveries if ``parts`` holds ``SOLE``."""
        if SOLE in parts and self.subscription is None:
            self.nc = nc
            self.metrics.deliveries_refused.labels(self.queue)  # at zero until the first
            self.turning = asyncio.create_task(self._turns())
            self.subscription = await nc.subscribe(self.deliver, queue=self.queue, cb=self._delivered)
            log.info("%s: this instance takes the deliveries", self.queue)

    async def _delivered(self, msg: Msg) -> None:
        """A delivery of the consumer's own (its ack subject names it), kept
        for the next turn; anything else published on the deliver subject
        dropped and counted: only the server writes there."""
        if handed_out(msg, self.queue, self.metrics):
            self.delivered.append(msg)
            self.arrived.set()

    async def _turns(self) -> None:
        while True:
            await self.arrived.wait()
            self.arrived.clear()
            msgs, self.delivered = self.delivered, []
            self.handling = True
            try:
                await self.on_turn(msgs)
            except Exception as exc:  # what it did not acknowledge comes again after the ack wait
                log.error("%s: a turn of %d deliveries: %s: %s", self.queue, len(msgs), type(exc).__name__, exc)
            finally:
                self.handling = False
            if self.subscription is None:
                return

    async def release(self, parts: set[int]) -> None:
        """Let the deliveries go if ``parts`` holds ``SOLE``."""
        if SOLE in parts:
            await self.stop()

    async def stop(self) -> None:
        """No more deliveries; the turn being handled ends first (what waited for the next comes again)."""
        if self.subscription is not None:
            with contextlib.suppress(nats.errors.Error):
                await self.subscription.unsubscribe()
            self.subscription = None
        turning, self.turning = self.turning, None
        await _ended(turning, self.handling)
        self.delivered = []

    @abc.abstractmethod
    async def on_turn(self, msgs: list[Msg]) -> None:
        """Handle a turn's deliveries, in the order they came, acknowledging each once it is handled."""
