"""Where a table's cards come from, as the dealer-policy sees it: a port with
two adapters, picked once per table when the service is wired (the tables
file's ``cards``, ``TableConfig.source``). The shoe service's own shuffle is
asked for the cards a step draws; a card-reading shoe's cards are waited
for, each taken as its report comes (services.dealer_policy.reading)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import msgspec

from casino.config.tables import TableConfig
from casino.games import Step
from casino.metrics import Metrics
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules.errors import RuleViolation
from casino.store import subjects

if TYPE_CHECKING:
    from services.dealer_policy.table import TableCoup

CARD_SOURCE = "card source"
INCIDENT_KINDS = ("misdrawn", "refused", "unread", "cut_card")  # the card incidents a coup is held for


class CardSource(ABC):
    """Where one table's cards come from."""

    @abstractmethod
    async def draw(self, t: TableCoup, step: Step) -> commands.Reply | None:
        """The cards of ``step`` (a ``draw``) with their positions in the
        shoe, or None: the coup waits for them to be reported."""

    def told(self, waiting: commands.Waiting) -> commands.Waiting:
        """What the table's terminal is told the coup waits for."""
        return waiting

    @abstractmethod
    def reports(self, t: TableCoup) -> None:
        """Refuse a card-reading shoe's report where the table takes none."""

    @abstractmethod
    def watched(self, metrics: Metrics, t: TableCoup) -> None:
        """The table's series that alerts watch, at zero from its first command."""

    @abstractmethod
    def replied(self, metrics: Metrics, t: TableCoup, waiting: commands.Waiting) -> None:
        """The table answered as waiting for ``waiting``: what alerts watch of it kept."""

    @abstractmethod
    def let_go(self, metrics: Metrics, name: str) -> None:
        """The table held no more by this instance: its series of the moment removed."""


class ShuffledShoe(CardSource):
    """The shoe service deals from its own shuffle: asked for the cards a
    step draws, as many at once as are certainly due, and the run the game's
    rule alone goes on with."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer

    async def draw(self, t: TableCoup, step: Step) -> commands.Reply:
        return await self.peer.must(subjects.command(t.name, "shoe"), commands.DrawCard(
            f"{t.coup}:draw:{step.first}", t.name, t.coup, t.config.ruleset, step.first, step.due, step.run))

    def reports(self, t: TableCoup) -> None:
        raise RuleViolation(CARD_SOURCE, f"table {t.name} is dealt from the shoe service's own shuffle: it takes "
                                         "no card-reading shoe's reports (the tables file says cards = \"shuffled\")")

    # A shuffled table has none of a card-reading shoe's series: no incident, nothing awaited from a device.
    def watched(self, metrics: Metrics, t: TableCoup) -> None:
        pass

    def replied(self, metrics: Metrics, t: TableCoup, waiting: commands.Waiting) -> None:
        pass

    def let_go(self, metrics: Metrics, name: str) -> None:
        pass


class ReadingShoe(CardSource):
    """A card-reading shoe: the coup waits for each card's report (``read``)."""

    async def draw(self, t: TableCoup, step: Step) -> None:
        return None

    def reports(self, t: TableCoup) -> None:
        pass  # each report is taken (services.dealer_policy.reading)

    def told(self, waiting: commands.Waiting) -> commands.Waiting:
        return msgspec.structs.replace(waiting, kind="read") if waiting.kind == "card" else waiting

    def watched(self, metrics: Metrics, t: TableCoup) -> None:
        for kind in INCIDENT_KINDS:
            metrics.card_incidents.labels(t.name, kind)
        metrics.shoes_ended.labels(t.name)

    def replied(self, metrics: Metrics, t: TableCoup, waiting: commands.Waiting) -> None:
        # Since when the coup waits for the shoe's next card (0: it does not).
        t.awaiting_card = (t.awaiting_card or time.time()) if waiting.kind == "read" else 0.0
        metrics.awaiting_card.labels(t.name).set(t.awaiting_card)

    def let_go(self, metrics: Metrics, name: str) -> None:
        metrics.awaiting_card.remove(name)


def source_of(config: TableConfig, peer: Peer) -> CardSource:
    """The adapter for a table of the tables file."""
    return ReadingShoe() if config.source else ShuffledShoe(peer)
