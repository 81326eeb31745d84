"""Where a table's cards come from, as the dealer-policy sees it: a port with
two adapters, picked once per table when the service is wired (the tables
file's ``cards``, ``TableConfig.source``). The shoe service's own shuffle is
asked for the cards a step draws; a card-reading shoe's cards are waited
for, each taken as its report comes (services.dealer_policy.reading)."""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod

import msgspec

from casino.config.tables import TableConfig
from casino.games import Step
from casino.metrics import Metrics
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules import incidents
from casino.rules.errors import RuleViolation
from casino.store import subjects

CARD_SOURCE = "card source"
# The card incidents a coup is held for, and the reports a closed table counts (casino_card_incidents_total).
INCIDENT_KINDS = (*incidents.KINDS, "while_closed")


class CardSource(ABC):
    """Where one table's cards come from."""

    @abstractmethod
    async def draw(self, peer: Peer, ask: commands.DrawCard) -> commands.Reply | None:
        """The cards a step draws (``ask``, as the dealer-policy asks the shoe
        for them) with their positions in the shoe (``peer`` asks the other
        services), or None: the coup waits for them to be reported."""

    def told(self, waiting: commands.Waiting) -> commands.Waiting:
        """What the table's terminal is told the coup waits for."""
        return waiting

    @abstractmethod
    def reports(self, table: str) -> None:
        """Refuse a card-reading shoe's report where the table takes none."""

    @abstractmethod
    def watched(self, metrics: Metrics, table: str) -> None:
        """The table's series that alerts watch, at zero from its first command."""

    @abstractmethod
    def replied(self, metrics: Metrics, table: str, waiting: commands.Waiting, since: float) -> float:
        """The table answered as waiting for ``waiting``: since when it has
        waited for a card-reading shoe's card (``since`` as kept), as alerts
        watch it."""

    @abstractmethod
    def let_go(self, metrics: Metrics, name: str) -> None:
        """The table held no more by this instance: its series of the moment removed."""


class ShuffledShoe(CardSource):
    """The shoe service deals from its own shuffle: asked for the cards a
    step draws, as many at once as are certainly due, and the run the game's
    rule alone goes on with."""

    async def draw(self, peer: Peer, ask: commands.DrawCard) -> commands.Reply:
        return await peer.must(subjects.command(ask.table, "shoe"), ask)

    def reports(self, table: str) -> None:
        raise RuleViolation(CARD_SOURCE, f"table {table} is dealt from the shoe service's own shuffle: it takes "
                                         "no card-reading shoe's reports (the tables file says cards = \"shuffled\")")

    # A shuffled table has none of a card-reading shoe's series: no incident, nothing awaited from a device.
    def watched(self, metrics: Metrics, table: str) -> None:
        pass

    def replied(self, metrics: Metrics, table: str, waiting: commands.Waiting, since: float) -> float:
        return 0.0

    def let_go(self, metrics: Metrics, name: str) -> None:
        pass


class ReadingShoe(CardSource):
    """A card-reading shoe: the coup waits for each card's report (``read``)."""

    async def draw(self, peer: Peer, ask: commands.DrawCard) -> None:
        return None

    def reports(self, table: str) -> None:
        pass  # each report is taken (services.dealer_policy.reading)

    def told(self, waiting: commands.Waiting) -> commands.Waiting:
        return msgspec.structs.replace(waiting, kind="read") if waiting.kind == "card" else waiting

    def watched(self, metrics: Metrics, table: str) -> None:
        for kind in INCIDENT_KINDS:
            metrics.card_incidents.labels(table, kind)
        for clause in (incidents.WATCHED, incidents.CROWDED):
            metrics.tables_closed.labels(table, clause)
        metrics.shoes_ended.labels(table)

    def replied(self, metrics: Metrics, table: str, waiting: commands.Waiting, since: float) -> float:
        since = (since or time.time()) if waiting.kind == "read" else 0.0  # 0: it waits for no card
        metrics.awaiting_card.labels(table).set(since)
        metrics.table_closed.labels(table).set(waiting.kind == "closed")
        return since

    def let_go(self, metrics: Metrics, name: str) -> None:
        metrics.awaiting_card.remove(name)
        metrics.table_closed.remove(name)


def draw_id(coup: str, step: Step, next_coup: str) -> str:
    """A draw's command id, and what names the shoe's step it gives
    (``envelope.carried_by``): the coup, its first card and a digest of what
    it asks for. Two dealer-policies asking for the same card for different
    steps (a stale one's choice never recorded) ask different draws, and the
    shoe tells which one a coup's record carries."""
    asked = msgspec.json.encode((step.due, step.run, next_coup))
    return f"{coup}:draw:{step.first}:{hashlib.sha256(asked).hexdigest()[:12]}"


def source_of(config: TableConfig) -> CardSource:
    """The adapter for a table of the tables file."""
    return ReadingShoe() if config.source else ShuffledShoe()
