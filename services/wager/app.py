"""The wager service's wiring (``services.wiring``), and its faststream
application for `faststream docs gen services.wager.app:app --factory` and
`faststream run` ($CASINO_NATS_URL)."""

from typing import Any, ClassVar

from faststream.asgi import AsgiFastStream
from nats.aio.client import Client

from casino.protocol import commands
from casino.store.envelope import Batch
from casino.store.jetstream import JetStreamEventStore
from services import runner
from services.wager.service import WagerService
from services.wiring import EVENTS, REPLIES, Lane, Sent, Wiring


class WagerWiring(Wiring):
    kind = "wager"
    lanes: ClassVar[tuple[Lane, ...]] = (
        Lane("wager", "wager", commands.WagerCommand, "A terminal's wagers and seating at its table.",
             commands.wager_decoder),
        Lane("book", "wager", commands.BookCommand, "The dealer-policy's closing of a coup's wager book and its extra "
             "stakes (an opening from a dealer-policy of an earlier version: the book opens from the coup's record).",
             commands.book_decoder))
    sends: ClassVar[tuple[Sent, ...]] = (REPLIES, Sent(f"{EVENTS}.wager", Batch, "The wager book's events: seating, "
                                                      "wagers, the book opened and closed."))

    async def make(self, nc: Client, store: JetStreamEventStore) -> Any:
        return WagerService(store, self.host.clock)  # each coup's book is read when a command first names it


WIRING = WagerWiring


def app() -> AsgiFastStream:
    return runner.app("wager")
