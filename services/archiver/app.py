"""The archiver's wiring (``services.wiring``), and its faststream application
for `faststream docs gen services.archiver.app:app --factory` and
`faststream run` ($CASINO_NATS_URL)."""

from typing import Any, ClassVar

from faststream.asgi import AsgiFastStream
from faststream.nats import NatsBroker
from nats.aio.client import Client

from casino.readmodels.projections import checkpointed
from casino.store.jetstream import JetStreamEventStore
from services import runner
from services.archiver import consumer
from services.archiver.service import ARCHIVER_DURABLE, ArchiverService
from services.followers import Sole
from services.wiring import Sent, Wiring


class ArchiverWiring(Wiring):
    kind = "archiver"
    sends: ClassVar[tuple[Sent, ...]] = (Sent("casino.archive.{table}.{shoe}", bytes, "One ended shoe sealed: its "
                                              "messages and its coups', MessagePack, zlib-compressed, hashed and "
                                              "chained to the table's previous seal (docs/replay.md)."),)

    async def make(self, nc: Client, store: JetStreamEventStore) -> Any:
        service = ArchiverService(nc, lambda: checkpointed(nc.jetstream()), self.host.metrics)
        await consumer.ensure_archiver_consumer(nc)
        return service

    def sole(self) -> Sole:
        self.host.durables.append(ARCHIVER_DURABLE)
        return consumer.ArchiverConsumer(lambda: self.host.service, self.host.metrics)

    @classmethod
    def document(cls, broker: NatsBroker) -> None:
        consumer.documented_archiver(broker)


WIRING = ArchiverWiring


def app() -> AsgiFastStream:
    return runner.app("archiver")
