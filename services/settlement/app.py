"""Settlement's wiring (``services.wiring``), and its faststream application
for `faststream docs gen services.settlement.app:app --factory` and
`faststream run` ($CASINO_NATS_URL)."""

from typing import Any, ClassVar

from faststream.asgi import AsgiFastStream
from faststream.nats import NatsBroker
from nats.aio.client import Client

from casino.store.envelope import Batch
from casino.store.jetstream import JetStreamEventStore
from services import runner
from services.followers import Sole
from services.settlement import consumer
from services.settlement.service import SettlementService
from services.wiring import EVENTS, Sent, Wiring


class SettlementWiring(Wiring):
    kind = "settlement"
    sends: ClassVar[tuple[Sent, ...]] = (Sent(f"{EVENTS}.settle", Batch, "Each coup's settlement: every wager paid "
                                                                        "by the ruleset."),)

    async def make(self, nc: Client, store: JetStreamEventStore) -> Any:
        service = SettlementService(store, self.host.clock)
        await consumer.ensure_settlement_consumer(nc)
        return service

    def sole(self) -> Sole:
        self.host.durables.append(consumer.SETTLEMENT)
        return consumer.SettlementConsumer(lambda: self.host.service, self.host.metrics)

    @classmethod
    def document(cls, broker: NatsBroker) -> None:
        consumer.documented_settlement(broker)


WIRING = SettlementWiring


def app() -> AsgiFastStream:
    return runner.app("settlement")
