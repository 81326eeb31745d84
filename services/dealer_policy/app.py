"""The dealer-policy's wiring (``services.wiring``), and its faststream
application for `faststream docs gen services.dealer_policy.app:app --factory`
and `faststream run` ($CASINO_NATS_URL)."""

from typing import Any, ClassVar

from faststream.asgi import AsgiFastStream
from nats.aio.client import Client

from casino.protocol import commands
from casino.protocol.service import Peer
from casino.store.envelope import Batch
from casino.store.jetstream import JetStreamEventStore
from services import runner
from services.dealer_policy.service import DealerPolicyService
from services.wiring import EVENTS, REPLIES, Lane, Sent, Wiring


class DealerPolicyWiring(Wiring):
    kind = "dealer-policy"
    lanes: ClassVar[tuple[Lane, ...]] = (
        Lane("coup", "coup", commands.CoupCommand, "A terminal's commands to the coup: open it, close betting, answer "
             "offers, expose cards, decide, and the shoe's passing.", commands.coup_decoder),
        Lane("supervise", "coup", commands.SupervisorCommand, "What a supervisor directs (a holder's shoe forfeited, "
             "000 8.20; a coup opened by another procedure than the one in force, 000 8.2, 001 8.5), each supervisor "
             "on a subject of their own that only their credential may publish on: the event records who.",
             commands.supervise_decoder),
        Lane("read", "coup", commands.ReaderReport, "A card-reading table's shoe: each card as it leaves the shoe, "
             "and the cut card (docs/readers.md).", commands.reader_decoder))
    sends: ClassVar[tuple[Sent, ...]] = (
        REPLIES, Sent(f"{EVENTS}.coup", Batch, "The coup's events: configured, dealt, offered, decided, resulted."),
        Sent("casino.ev.{table}.-.-.ruleset", Batch, "A table's ruleset, recorded whole before the first coup dealt "
             "under it and whenever it changes."),
        Sent("casino.cmd.{table}.shoe", commands.ShoeCommand, "Asked of the shoe service."),
        Sent("casino.cmd.{table}.book", commands.BookCommand, "Asked of the wager service."))

    async def make(self, nc: Client, store: JetStreamEventStore) -> Any:
        # Patient with the shoe and wager services: one may be restarting.
        return DealerPolicyService(store, Peer(nc, attempts=25), self.host.tables, self.host.clock)

    def took(self, service: Any, parts: set[int]) -> None:
        service.take(parts)  # each table folded afresh, a step a coup was left in finished

    async def finishing(self, service: Any) -> None:
        await service.finish_rounds()


WIRING = DealerPolicyWiring


def app() -> AsgiFastStream:
    return runner.app("dealer-policy")
