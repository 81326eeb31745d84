"""Where a table's shoe orders come from, as the shoe service sees it: a port
with three adapters, picked once per table from the tables file (``cards``
and ``shuffle``) as the service is wired (services.shoe.app). The service's own shuffle, kept
secret until its shoe ends; a recognised shuffling machine's reported order,
kept as secretly (services.shoe.readers); or a hand shuffle, of which no
order is known."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from casino.config.tables import Source
from casino.metrics import Metrics
from casino.protocol.commands import SHUFFLING_MACHINE, Waiting
from casino.rules.errors import RuleViolation
from services.shoe.secrets import Order, SecretStore, ShuffleSource


class OrderSource(ABC):
    """Where one table's shoe orders come from."""

    recorded: ClassVar[Source]  # as the shoe's shuffle records it (casino.rules.shoe.ShoeShuffled)
    how: ClassVar[str]  # in words, for a refusal

    @abstractmethod
    async def order(self, secrets: SecretStore, table: str, shoe: str, decks: int) -> Order:
        """The order shoe ``shoe`` is filled with (refused where it is not known yet)."""

    def takes_orders(self, table: str) -> None:
        """Refuse a shuffling machine's order where the table takes none."""
        raise RuleViolation(SHUFFLING_MACHINE, f"table {table} is {self.how}, and takes no shuffling machine's "
                                               "order (the tables file says shuffle = \"recognised\" where it does)")

    async def awaited(self, secrets: SecretStore, table: str, shoe: str) -> Waiting | None:
        """What the table waits for before shoe ``shoe`` can be filled, if anything."""
        return None

    def none_in_play(self, table: str) -> RuleViolation:
        """Why no card-reading shoe's card is taken while no shoe is in play."""
        return RuleViolation("shoe", f"table {table} has no shoe of a card-reading shoe in play")

    def watched(self, metrics: Metrics, table: str) -> None:
        """The table's series that alerts watch, at zero from its first command."""
        return None


class OwnShuffle(OrderSource):
    """The shoe service shuffles: the first order kept for a shoe is its own
    (two instances shuffling at once keep one)."""

    recorded = ""
    how = "dealt from the shoe service's own shuffles"

    def __init__(self, shuffle: ShuffleSource) -> None:
        self.shuffle = shuffle

    async def order(self, secrets: SecretStore, table: str, shoe: str, decks: int) -> Order:
        kept = await secrets.get(table, shoe)
        return kept if kept is not None else await secrets.put(table, shoe, self.shuffle(table, decks))


class MachineOrder(OrderSource):
    """A recognised shuffling machine reports each shoe's order: a shoe waits
    for it, and is filled once it comes."""

    recorded = "recognised"
    how = "shuffled by a recognised shuffling machine"

    async def order(self, secrets: SecretStore, table: str, shoe: str, decks: int) -> Order:
        kept = await secrets.get(table, shoe)
        if kept is None:
            raise RuleViolation(SHUFFLING_MACHINE, f"shoe {shoe} waits for the order the table's shuffling machine "
                                                   "made: it is filled once the machine reports it")
        return kept

    def takes_orders(self, table: str) -> None:
        return None

    async def awaited(self, secrets: SecretStore, table: str, shoe: str) -> Waiting | None:
        return Waiting("shuffle") if await secrets.get(table, shoe) is None else None

    def none_in_play(self, table: str) -> RuleViolation:
        return RuleViolation(SHUFFLING_MACHINE, f"table {table}'s shoe has ended: no card is taken until its "
                                                "shuffling machine reports the order of the next")

    def watched(self, metrics: Metrics, table: str) -> None:
        metrics.orders_replaced.labels(table)


class HandShuffle(OrderSource):
    """Shuffled by hand: no order is known, and a shoe commits to none."""

    recorded = "hand"
    how = "shuffled by hand: its shoes commit to no order"

    async def order(self, secrets: SecretStore, table: str, shoe: str, decks: int) -> Order:
        return (), ""

