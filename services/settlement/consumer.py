"""Settlement's consumer: every coup and wager event, one instance at a time
(``services.followers.Sole``), each coup settled as its result passes."""

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig
from nats.js.errors import NotFoundError

from casino.metrics import Metrics
from casino.store import envelope, subjects
from casino.store.eventstore import Stored
from casino.store.following import Delivery
from casino.store.jetstream import STREAM
from services.followers import IN_FLIGHT, Sole, events_subscriber
from services.messaging import ack, decoded, delivery, documented, failed
from services.settlement.service import FOLLOWED, SettlementService

SETTLEMENT = "settlement"  # the consumer settlement's instances share, and their queue group
SETTLEMENT_DELIVERY = "_INBOX.settlement.events"  # where the shared settlement consumer delivers


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
