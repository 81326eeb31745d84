"""Settlement's consumer: every coup and wager event, taken a turn at a time
by one instance at a time (``services.followers.Sole``), each coup settled
as its result passes."""

import asyncio
import contextlib
from collections.abc import Callable

import nats
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig

from casino.metrics import Metrics
from casino.store import envelope, subjects
from casino.store.eventstore import Stored
from casino.store.following import Delivery
from services.followers import IN_FLIGHT, Sole, events_subscriber, shared_consumer
from services.messaging import ack, decoded, delivery, documented, failed
from services.settlement.service import FOLLOWED, Due, SettlementService

SETTLEMENT = "settlement"  # the consumer settlement's instances share, and their queue group
SETTLEMENT_DELIVERY = "_INBOX.settlement.events"  # where the shared settlement consumer delivers


async def ensure_settlement_consumer(nc: Client) -> None:
    """Make the consumer settlement's instances share, or give one declared
    elsewhere (the cluster's manifests, an earlier release) the filters this
    release follows (``services.followers.shared_consumer``). A short ack
    wait: what a killed instance had in hand comes again within seconds."""
    await shared_consumer(nc, SETTLEMENT, [subjects.aggregate_filter(a) for a in FOLLOWED], ConsumerConfig(
        durable_name=SETTLEMENT, deliver_subject=SETTLEMENT_DELIVERY, deliver_group=SETTLEMENT, ack_wait=5.0,
        max_ack_pending=IN_FLIGHT))


class SettlementConsumer(Sole):
    """Settlement follows every coup and wager event, a turn at a time
    (every delivery waiting, ``Sole``), and settles each coup as its result
    passes (``casino.store.following``: a coup it could not follow whole is
    read back from the stream): the coups a turn closes are settled
    together, their appends awaited at once, each message acknowledged once
    handled, and one instance at a time. Shared by several, a coup's
    messages went to several instances, and each read back the coups it saw
    in part: three instances spent 2.8 ms of CPU a coup where one spent 1.3
    (docs/architecture.md)."""

    deliver, queue = SETTLEMENT_DELIVERY, SETTLEMENT

    def __init__(self, service: Callable[[], SettlementService], metrics: Metrics) -> None:
        super().__init__()
        self.service, self.metrics = service, metrics

    async def _settle(self, msg: Msg, at: Delivery, due: Due) -> None:
        assert self.nc is not None
        try:
            await self.service().settle(due)
        except Exception as exc:
            with contextlib.suppress(nats.errors.Error, TimeoutError):  # not filed: it comes again after the ack wait
                await failed(self.nc, SETTLEMENT, msg, at, exc, self.metrics)
        else:
            await ack(msg)

    async def on_turn(self, msgs: list[Msg]) -> None:
        assert self.nc is not None
        settling = self.service()
        dues: list[tuple[Msg, Delivery, Due]] = []
        with self.metrics.handling.labels(SETTLEMENT).time():
            for msg in msgs:
                at = delivery(msg)
                batch = await decoded(self.nc, SETTLEMENT, msg, at, self.metrics)
                if batch is None:
                    settling.following.forget()
                    due = None
                else:
                    due = settling.follow(Stored(at.stream_seq, msg.subject, batch), at)
                if due is None:
                    await ack(msg)
                else:
                    dues.append((msg, at, due))
        await asyncio.gather(*(self._settle(msg, at, due) for msg, at, due in dues))


def documented_settlement(broker: NatsBroker) -> None:
    """Declare settlement's consumer for the AsyncAPI document (its deliveries come through ``SettlementConsumer``)."""
    @events_subscriber(broker, f"{subjects.EVENTS}.>", SETTLEMENT, ConsumerConfig(durable_name=SETTLEMENT),
                       "Every coup and wager event, each coup settled as its result passes "
                       f"(the filters: {', '.join(subjects.aggregate_filter(a) for a in FOLLOWED)}).")
    async def on_event(received: documented(envelope.Batch)) -> None:  # type: ignore[valid-type]
        raise AssertionError("declared for the document only")
