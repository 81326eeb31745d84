"""The shoe service's wiring (``services.wiring``), and its faststream
application for `faststream docs gen services.shoe.app:app --factory` and
`faststream run` ($CASINO_NATS_URL)."""

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from faststream.asgi import AsgiFastStream
from nats.aio.client import Client

from casino.config.tables import Source, TableConfig
from casino.protocol import commands
from casino.store.envelope import Batch
from casino.store.jetstream import JetStreamEventStore
from services import runner
from services.shoe.orders import HandShuffle, MachineOrder, OrderSource, OwnShuffle
from services.shoe.secrets import JetStreamSecrets, ShuffleSource, secure_shuffle
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
        shuffle = self.host.options.get("shuffle", secure_shuffle)
        return ShoeService(store, JetStreamSecrets(nc.jetstream()), shuffle, self.host.clock,
                           order_sources(self.host.tables, shuffle))


def order_sources(tables: Mapping[str, TableConfig] | None, shuffle: ShuffleSource,
                  ) -> dict[str, Callable[[], OrderSource]] | None:
    """Where each table's shoe orders come from, picked once from its tables
    file (services.shoe.orders), each made afresh as the table is taken up;
    None (no tables file): the service's own shuffle at every table."""
    if tables is None:
        return None
    return {name: functools.partial(orders_of, config.source, shuffle) for name, config in tables.items()}


def orders_of(source: Source, shuffle: ShuffleSource) -> OrderSource:
    """The adapter for a table whose cards come from ``source``."""
    return MachineOrder() if source == "recognised" else HandShuffle() if source == "hand" else OwnShuffle(shuffle)


WIRING = ShoeWiring


def app() -> AsgiFastStream:
    return runner.app("shoe")
