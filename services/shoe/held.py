"""A table's shoe as the shoe service holds it: the shoe folded from the
stream, the secret order of the shoe in play, what each card-reading
shoe's report was taken as, and the steps given for the coups' appends to
carry (services.shoe.carrying)."""

from __future__ import annotations

import msgspec

from casino.rules import shoe as dealing_shoe
from casino.rules.cards import DECK_INDEX, Card
from casino.rules.ruleset import ShoeRules
from casino.store.envelope import READ
from services.repository import Held
from services.shoe.orders import OrderSource
from services.shoe.secrets import Order

# What a card-reading shoe's report is taken as (services.shoe.readers), beside the shuffles it may cause.
TAKEN = (dealing_shoe.CardDrawn, dealing_shoe.CardBurned, dealing_shoe.CardMisdrawn, dealing_shoe.CardRefused,
         dealing_shoe.CutCardReached, dealing_shoe.CutCardMisplaced)


class TableShoe(Held, kw_only=True):
    """A table's shoe, the secret order of the shoe in play, and what of the stream it is folded from."""

    rules: ShoeRules
    document: str = ""  # the ruleset's document: the clauses the shoe cites (casino.rules.shoe.cites)
    state: dealing_shoe.ShoeState = msgspec.field(default_factory=dealing_shoe.ShoeState)
    order: Order | None = None
    shuffles: int = 0
    last_round: str = ""
    # The last round ended: its shoe, the position of its first card and its cards, so that a draw of it
    # asked again once its run has ended it is answered with the same cards.
    ended: tuple[str, int, tuple[Card, ...]] | None = None
    # A card-reading shoe's reports taken in the shoe in play, and in the shoe before it, by the report's id:
    # what each was recorded as.
    reads: dict[str, list[dealing_shoe.AnyShoeEvent]] = msgspec.field(default_factory=dict)
    reads_before: dict[str, list[dealing_shoe.AnyShoeEvent]] = msgspec.field(default_factory=dict)
    # The shoe's steps that the coups' appends carry, in the shoe in play and the one before it, by what names
    # each (a report, a draw: ``envelope.carried_by``), with what each decided; and the one given and not yet
    # confirmed in the coup's record: the coup's next step at the shoe waits for it.
    given: dict[str, list[dealing_shoe.AnyShoeEvent]] = msgspec.field(default_factory=dict)
    given_before: dict[str, list[dealing_shoe.AnyShoeEvent]] = msgspec.field(default_factory=dict)
    pending: str = ""
    pending_draw: tuple[object, ...] = ()  # what the draw given and pending was asked for: another is not it
    carried_seq: int = 0  # the last coup message whose carried steps are folded
    # A step given here is not the one the record holds under its name, or another instance's step is recorded
    # before the one pending: it was decided on a shoe behind the record, folded again at the next command.
    stale: bool = False
    went_on: str = ""  # the round the shoe in play was filled in the middle of (003 7.9): its coup's is another's
    orders: OrderSource  # where the table's shoe orders come from (picked once, from the tables file)

    def anew(self) -> TableShoe:
        """The table's shoe before any event is folded."""
        return TableShoe(rules=self.rules, document=self.document, orders=self.orders)


def fold(t: TableShoe, event: dealing_shoe.AnyShoeEvent, causation: str) -> None:
    if isinstance(event, dealing_shoe.RoundEnded):
        layout = tuple(t.state.layout)
        t.ended = (t.state.shoe_id or "", t.state.position - len(layout), layout)
    t.state = dealing_shoe.evolve(t.state, event)
    if isinstance(event, dealing_shoe.ShoeShuffled):
        t.shuffles += 1
        t.reads_before, t.reads, t.given_before, t.given = t.reads, {}, t.given, {}
        t.went_on = t.state.round or ""  # 003 7.9: a round dealt on from this shoe, opened from the one before
    if causation.startswith(READ) and isinstance(event, TAKEN):  # what a card-reading shoe's report was taken as
        t.reads.setdefault(causation[len(READ):], []).append(event)
    elif isinstance(event, dealing_shoe.RoundEnded):
        t.last_round = event.coup_id


COMPOSITION = "shoe composition"  # a card the shoe cannot hold: more copies than its decks have
ORDER = "committed order"  # a card that is not the next of the order committed to


def refused_why(t: TableShoe, card: str) -> tuple[str, str] | None:
    """Why the shoe cannot have given ``card`` (the clause, and what), or None where it can."""
    index = DECK_INDEX.get(card)
    if index is None:
        return COMPOSITION, f"{card!r} is not a card"
    if t.state.dealt[index] >= t.state.decks:
        return COMPOSITION, f"every {card} of a {t.state.decks}-deck shoe has left it already"
    if t.order is not None and t.order[0][t.state.position] != card:
        # The order's next card is not named: it is secret until the shoe ends.
        return ORDER, f"{card} is not the next card of the order the shuffling machine made"
    return None
