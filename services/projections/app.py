"""The projections' wiring (``services.wiring``), and its faststream
application for `faststream docs gen services.projections.app:app --factory`
and `faststream run` ($CASINO_NATS_URL)."""

from collections.abc import Coroutine
from typing import Any

from faststream.asgi import AsgiFastStream
from faststream.nats import NatsBroker
from nats.aio.client import Client

from casino.store.jetstream import JetStreamEventStore
from services import followers, runner
from services.projections.service import Projections, documented_projections
from services.wiring import Host, Wiring


class ProjectionsWiring(Wiring):
    kind = "projections"

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.projections = Projections(host.broker, host.metrics, host.durables)

    async def make(self, nc: Client, store: JetStreamEventStore) -> Any:
        return await self.projections.open(store)

    def tasks(self) -> list[Coroutine[Any, Any, None]]:
        return [self.projections.keeping()]

    async def close(self) -> None:
        await self.projections.close()

    @classmethod
    def document(cls, broker: NatsBroker) -> None:
        documented_projections(broker, followers.document_name(cls.kind))


WIRING = ProjectionsWiring


def app() -> AsgiFastStream:
    return runner.app("projections")
