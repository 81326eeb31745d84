"""The archiver's consumer: every settlement, one instance at a time
(``services.followers.Sole``), and a sweep of every table at its start and
every ``SWEEP_EVERY`` seconds."""

import asyncio
import logging
from collections.abc import Callable

from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from casino.metrics import Metrics
from casino.store import envelope, subjects
from casino.store.jetstream import STREAM
from services.archiver.service import ARCHIVER_DURABLE, ArchiverService
from services.followers import IN_FLIGHT, Sole, events_subscriber
from services.messaging import ack, documented

log = logging.getLogger("casino")
SWEEP_EVERY = 30.0  # seconds between the archiver's sweeps of every table

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
