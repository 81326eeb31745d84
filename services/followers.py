"""How a service follows the stream, on durable JetStream pull consumers
taken in turns (``Turns``: every message waiting, handled together): one
consumer its instances share, taken by one instance at a time (``Sole``:
settlement's and the archiver's, each in its service's ``consumer``), or a
consumer of its own (``claim``: the projections' writer). The shoe, wager
and dealer-policy follow nothing: each instance owns its tables
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
from faststream.nats import JStream, NatsBroker, PullSub
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy as ConsumerAck
from nats.js.api import ConsumerConfig, DeliverPolicy
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
    """Make ``made``, the pull consumer ``name`` a service's instances share
    (``Sole``), if it is not there; give one there (an earlier release's, or
    one the cluster's manifests declared) this release's ``filters``, keeping
    its other settings. One that pushed its deliveries (a release before
    they were taken in turns) cannot be changed into a pull consumer: it is
    made again, from the first message after its acknowledgement floor, so
    that nothing it had not seen acknowledged is passed over (what comes
    twice is settled or sealed once, by each record's guard)."""
    js = nc.jetstream()
    try:
        info = await js.consumer_info(STREAM, name)
    except NotFoundError:
        config = made
    else:
        config = info.config
        if config.deliver_subject:
            log.warning("%s: a consumer of an earlier release that pushed its deliveries: made again as a pull "
                        "consumer from stream sequence %d", name, info.ack_floor.stream_seq + 1)
            with contextlib.suppress(NotFoundError):  # another instance made it again first
                await js.delete_consumer(STREAM, name)
            config.deliver_subject = config.deliver_group = None
            config.flow_control = config.idle_heartbeat = config.rate_limit_bps = None
            config.deliver_policy, config.opt_start_seq = DeliverPolicy.BY_START_SEQUENCE, info.ack_floor.stream_seq + 1
            config.opt_start_time = None
        elif sorted(config.filter_subjects or [config.filter_subject or ""]) == sorted(filters):
            return
    config.filter_subject, config.filter_subjects = (filters[0], None) if len(filters) == 1 else (None, filters)
    config.name = None  # made or changed by its durable name, the one API subject its service's user may ask
    await js.add_consumer(STREAM, config)


def events_subscriber(broker: NatsBroker, filter_: str, durable: str, description: str) -> Callable[
        [Callable[..., Awaitable[None]]], Any]:
    """Declare, for the AsyncAPI document, a durable pull consumer whose
    messages are taken in turns (``Turns``), each acknowledged by its
    handler; never subscribed through faststream (docs/architecture.md)."""
    return broker.subscriber(filter_, stream=JStream(STREAM, declare=False), durable=durable,
                             config=ConsumerConfig(durable_name=durable),
                             pull_sub=PullSub(batch_size=TURN_MOST, batch=True), ack_policy=AckPolicy.MANUAL,
                             decoder=undecoded, title=filter_, description=description)


def handed_out(msg: Msg, consumer: str, metrics: Metrics) -> bool:
    """Whether ``consumer`` handed ``msg`` out (its ack subject names it); anything else on the
    subject where it delivers is dropped and counted: only the server writes there."""
    if (msg.reply or "").startswith(f"$JS.ACK.{STREAM}.{consumer}."):
        return True
    metrics.deliveries_refused.labels(consumer).inc()
    log.warning("%s: a message where its consumer delivers that it did not hand out (reply %r): dropped", consumer,
                (msg.reply or "")[:200])
    return False


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
                 lost: Callable[[BaseException], None], metrics: Metrics, *, gather: float = TURN_GATHER,
                 acks_last: bool = True) -> None:
        self.nc, self.consumer, self.handle, self.lost, self.metrics = nc, consumer, handle, lost, metrics
        # ``acks_last``: the turn acknowledged by its last message (ack policy all); otherwise ``handle``
        # acknowledges each message it has handled (ack policy explicit).
        self.gather, self.acks_last = gather, acks_last
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
        if task is not None:
            if not self.handling:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
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
                    if self.acks_last:
                        await ack(msgs[-1])
                    if self.task is not None and self.gather:
                        await asyncio.sleep(self.gather)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("%s: its turns end: %s: %s", self.consumer, type(exc).__name__, exc)
            self.task = None
            await self._unsubscribe()
            self.lost(exc)


class Sole(abc.ABC):
    """A durable pull consumer a service's instances share, taken in turns
    (``Turns``) by one instance at a time: the owner of partition ``SOLE``
    in the owners' bucket (``services.ownership``). The others stand by;
    one of them takes over when it stops, or a lapse after it vanishes, and
    what it held unacknowledged comes again after the consumer's ack wait.
    Each message of a turn is acknowledged once handled (ack policy
    explicit), so that one that fails is asked for again on its own
    (``services.messaging.failed``) while the turn's others are done. Turns
    that end (the server away, the consumer deleted) are taken up again
    every ``AGAIN`` seconds, the consumer made again first. faststream
    declares the consumer for the AsyncAPI document."""

    consumer: ClassVar[str]  # the consumer's durable name
    gather: ClassVar[float] = 0.0  # seconds between a turn's end and the next fetch
    AGAIN: ClassVar[float] = 1.0

    def __init__(self) -> None:
        self.nc: Client | None = None
        self.held = False  # whether this instance owns partition ``SOLE``
        self.turns: Turns | None = None
        self.again: asyncio.Task[None] | None = None

    metrics: Metrics

    async def take(self, nc: Client, parts: set[int]) -> None:
        """Take the consumer's turns if ``parts`` holds ``SOLE``."""
        if SOLE in parts and not self.held:
            self.nc, self.held = nc, True
            await self._turn()
            log.info("%s: this instance takes the consumer's turns", self.consumer)

    async def _turn(self) -> None:
        assert self.nc is not None
        self.turns = Turns(self.nc, self.consumer, self.on_turn, self._lost, self.metrics, gather=self.gather,
                           acks_last=False)
        await self.turns.start()

    def _lost(self, exc: BaseException) -> None:
        self.turns = None
        if self.held:
            self.again = asyncio.create_task(self._take_up_again())

    async def _take_up_again(self) -> None:
        while self.held and self.turns is None:
            await asyncio.sleep(self.AGAIN)
            try:
                assert self.nc is not None
                await self.ensure(self.nc)
                if self.held:
                    await self._turn()
            except (nats.errors.Error, TimeoutError, OSError) as exc:
                log.error("%s: its turns not taken up again yet: %s: %s", self.consumer, type(exc).__name__, exc)

    async def release(self, parts: set[int]) -> None:
        """Let the consumer go if ``parts`` holds ``SOLE``."""
        if SOLE in parts:
            await self.stop()

    async def stop(self) -> None:
        """No more turns; the one being handled ends first."""
        self.held = False
        again, self.again = self.again, None
        if again is not None:
            again.cancel()
        turns, self.turns = self.turns, None
        if turns is not None:
            await turns.stop()

    @abc.abstractmethod
    async def ensure(self, nc: Client) -> None:
        """The consumer as this release follows it, made if it is not there."""

    @abc.abstractmethod
    async def on_turn(self, msgs: list[Msg]) -> None:
        """Handle a turn's messages, in stream order, acknowledging each once it is handled."""
