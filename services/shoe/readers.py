"""The shoe service's side of a table with a card-reading shoe (docs/readers.md):
the order its shuffling machine reports, kept secret as the service's own
shuffles are, and each card the shoe reads, checked as it leaves the shoe
against the shoe's composition, the order committed to, and whether the
coup's rules call for a card now."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from casino.protocol.commands import Reply, ShuffleMade, TakeRead
from casino.rules import shoe as dealing_shoe
from casino.rules.cards import DECK_INDEX, full_set, same_cards
from casino.rules.errors import RuleViolation
from casino.store import subjects

if TYPE_CHECKING:
    from services.shoe.service import ShoeService, TableShoe

SHUFFLER = "shuffling machine"  # the clause of a shoe waiting for its machine's order
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


def _answer(t: TableShoe, read: str) -> Reply | None:
    """The answer to a report taken already (the same id sent again): as recorded."""
    for e in t.reads.get(read, ()):
        if isinstance(e, dealing_shoe.CardDrawn):
            return Reply(True, coup=e.coup_id, shoe=e.shoe_id, cards=(e.card,), positions=(e.position,))
        if isinstance(e, dealing_shoe.CardBurned):
            return Reply(True, shoe=e.shoe_id, incident="burned")
        if isinstance(e, dealing_shoe.CardMisdrawn):
            return Reply(True, coup=e.coup_id, shoe=e.shoe_id, incident="misdrawn", reason=e.clause)
        if isinstance(e, dealing_shoe.CardRefused):
            return Reply(True, coup=e.coup_id, shoe=e.shoe_id, incident="refused", reason=e.why, clause=e.clause)
        if isinstance(e, dealing_shoe.CutCardReached):
            return Reply(True, shoe=e.shoe_id, incident="cut card", clause=e.clause)
    return None


async def take(service: ShoeService, cmd: TakeRead) -> Reply:
    """Record what a card-reading shoe reported: a burn card where one is
    due, the card the coup's rules call for (``due``), a misdraw where none is,
    or a card refused (the coup it came in is held by the dealer-policy)."""
    t = await service.table(cmd.table, cmd.ruleset)
    if (answered := _answer(t, cmd.read)) is not None:
        return answered
    if not cmd.cut and (t.state.reshuffle == "now" or (t.state.round is not None and not t.state.active)):
        # 003 7.9: the cut card came out first in the round, and the cards are reshuffled before it goes on:
        # the shoe ended and a new one filled with the order the machine made (refused until it reports it).
        await service._reshuffle(cmd.table, t, cmd.coup or subjects.NO_COUP, cmd.id, cmd.source)
    if not t.state.active or not t.state.source:
        raise RuleViolation("shoe", f"table {cmd.table} has no shoe of a card-reading shoe in play")
    shoe, coup = t.state.shoe_id or "", cmd.coup or subjects.NO_COUP
    events: list[dealing_shoe.AnyShoeEvent]
    if cmd.cut:
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.CutCardOut(), t.document)
    elif (why := refused_why(t, cmd.card)) is not None:
        events = [dealing_shoe.CardRefused(shoe, cmd.coup, cmd.card, cmd.read, why[1], why[0])]
    elif t.state.burns_due:
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.Burn(cmd.card, cmd.read), t.document)
    elif cmd.due:
        if t.state.round != cmd.coup:
            raise RuleViolation("shoe", f"coup {cmd.coup} is not the round being dealt")
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.Draw(cmd.coup, cmd.card, cmd.read), t.document)
    else:
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.Misdraw(cmd.coup, cmd.card, cmd.read, cmd.clause),
                                     t.document)
    await service._commit(cmd.table, t, events, coup, f"{cmd.table}:read:{cmd.read}", cmd.id)
    answered = _answer(t, cmd.read)
    if answered is None:  # recorded by another instance as something else: read back above
        raise RuleViolation("concurrency", f"report {cmd.read} was recorded meanwhile: ask again")
    return answered


async def shuffle_made(service: ShoeService, cmd: ShuffleMade) -> Reply:
    """Keep the order a shuffling machine reports as the table's next shoe's,
    out of the public stream until that shoe ends (the shoe then commits to
    it as it is filled). One order a shoe: another reported for the same shoe
    is refused; the same sent again is answered as kept."""
    t = service.tables.get(cmd.table)
    if t is None:
        raise RuleViolation(SHUFFLER, f"table {cmd.table}'s shoe is not held here yet: its dealer opens a coup first")
    if not same_cards(cmd.cards, full_set(t.rules.decks)):
        raise RuleViolation(SHUFFLER, f"the order reported is not one full set of the shoe's {t.rules.decks} decks")
    shoe = subjects.shoe_id(cmd.table, t.shuffles + 1)
    kept = await service.secrets.put(cmd.table, shoe, (tuple(cmd.cards), secrets.token_hex(16)))
    if kept[0] != tuple(cmd.cards):
        raise RuleViolation(SHUFFLER, f"shoe {shoe} has its machine's order already: one order a shoe")
    return Reply(True, shoe=shoe)
