"""The shoe service's wiring (``services.wiring``), and its faststream
application for `faststream docs gen services.shoe.app:app --factory` and
`faststream run` ($CASINO_NATS_URL)."""

from typing import Any, ClassVar

from faststream.asgi import AsgiFastStream
from nats.aio.client import Client

from casino.protocol import commands
from casino.store.envelope import Batch
from casino.store.jetstream import JetStreamEventStore
from services import runner
from services.shoe.secrets import JetStreamSecrets, secure_shuffle
from services.shoe.service import ShoeService
from services.wiring import EVENTS, REPLIES, Lane, Sent, Wiring


class ShoeWiring(Wiring):
    kind = "shoe"
    secrets = True
    lanes: ClassVar[tuple[Lane, ...]] = (
        Lane("shoe", "shoe", commands.ShoeCommand, "The dealer-policy's requests to the shoe: start a round, draw "
             "the cards due, end the round, take a card-reading shoe's report.", commands.shoe_decoder),
        Lane("shuffler", "shoe", commands.ShuffleMade, "A card-reading table's shuffling machine: the order it made "
             "for the table's next shoe (docs/readers.md), kept secret until that shoe ends.",
             commands.shuffler_decoder))
    sends: ClassVar[tuple[Sent, ...]] = (REPLIES, Sent(f"{EVENTS}.shoe", Batch, "The shoe's events: shuffled (with "
                                                      "the order's commitment), rounds, cards drawn, the order "
                                                      "revealed as the shoe ends."))

    async def make(self, nc: Client, store: JetStreamEventStore) -> Any:
        # Each table's orders come from where its tables file says (services.shoe.orders).
        return ShoeService(store, JetStreamSecrets(nc.jetstream()), self.host.options.get("shuffle", secure_shuffle),
                           self.host.clock, self.host.tables)


WIRING = ShoeWiring


def app() -> AsgiFastStream:
    return runner.app("shoe")
