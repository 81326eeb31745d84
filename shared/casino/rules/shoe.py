"""The shoe: shuffle commitment, burn, cut card, draw, pick-up and reshuffle.

The shoe service shuffles and keeps the order secret; this model consumes the
recorded cards as they leave the shoe. At the shuffle only a commitment (a hash
of the order and a salt) is published; when the shoe ends the order and salt are
revealed and checked against every card that was burned or drawn. Card
conservation holds at every step: each card of the set is still in the shoe, on
the layout, or in the discard rack (or back in a continuous shuffler).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Literal

import msgspec

from casino.rules.aggregate import violation, with_follow_ups
from casino.rules.cards import DECK, DECK_INDEX, Card, baccarat_value, full_set, is_card, same_cards
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import ShoeRules


def commitment(order: Sequence[Card], salt: str) -> str:
    """The published hash of a shuffled order: sha256 of ``salt:card card ...``."""
    return hashlib.sha256(f"{salt}:{' '.join(order)}".encode()).hexdigest()


# ---- commands -------------------------------------------------------------


class ShoeCommand(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A command to the shoe of one table."""


class Shuffle(ShoeCommand, frozen=True, tag="shoe.shuffle"):
    shoe_id: str
    commitment: str


class Burn(ShoeCommand, frozen=True, tag="shoe.burn"):
    card: Card


class StartRound(ShoeCommand, frozen=True, tag="shoe.start_round"):
    coup_id: str


class Draw(ShoeCommand, frozen=True, tag="shoe.draw"):
    coup_id: str
    card: Card


class EndRound(ShoeCommand, frozen=True, tag="shoe.end_round"):
    coup_id: str
    pickup: tuple[Card, ...]


class EndShoe(ShoeCommand, frozen=True, tag="shoe.end_shoe"):
    order: tuple[Card, ...]
    salt: str


# ---- events ---------------------------------------------------------------


class ShoeEvent(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A fact about the shoe of one table."""

    shoe_id: str


class ShoeShuffled(ShoeEvent, frozen=True, tag="shoe.shuffled"):
    decks: int
    cards: int
    cut_index: int | None
    commitment: str
    burns_due: int
    burn_by_value: bool


class CardBurned(ShoeEvent, frozen=True, tag="shoe.card_burned"):
    position: int
    card: Card
    face_up: bool


class RoundStarted(ShoeEvent, frozen=True, tag="shoe.round_started"):
    coup_id: str


class CutCardReached(ShoeEvent, frozen=True, tag="shoe.cut_card_reached"):
    position: int
    first_of_round: bool
    clause: str


class CardDrawn(ShoeEvent, frozen=True, tag="shoe.card_drawn"):
    coup_id: str
    position: int
    card: Card


class RoundEnded(ShoeEvent, frozen=True, tag="shoe.round_ended"):
    coup_id: str
    pickup: tuple[Card, ...]


class ReshuffleRequired(ShoeEvent, frozen=True, tag="shoe.reshuffle_required"):
    when: Literal["now", "after_round", "before_next_round"]
    clause: str


class ShoeEnded(ShoeEvent, frozen=True, tag="shoe.ended"):
    order: tuple[Card, ...]
    salt: str


AnyShoeCommand = Shuffle | Burn | StartRound | Draw | EndRound | EndShoe
AnyShoeEvent = (
    ShoeShuffled | CardBurned | RoundStarted | CutCardReached | CardDrawn | RoundEnded | ReshuffleRequired | ShoeEnded
)


# ---- state ----------------------------------------------------------------


class ShoeState(msgspec.Struct, frozen=True, gc=False):
    """What is known about a table's shoe from its events."""

    shoe_id: str | None = None
    decks: int = 0
    cards: int = 0
    cut_index: int | None = None
    commitment: str = ""
    drawn: tuple[Card, ...] = ()
    dealt: tuple[int, ...] = (0,) * len(DECK)  # how many of each card of DECK have left the shoe
    layout: tuple[Card, ...] = ()
    discard: tuple[Card, ...] = ()
    returned: tuple[Card, ...] = ()
    burns_due: int = 0
    burn_by_value: bool = False
    round: str | None = None
    round_cards: int = 0
    cut_reached: bool = False
    reshuffle: Literal["", "now", "after_round", "before_next_round"] = ""

    @property
    def active(self) -> bool:
        return self.shoe_id is not None

    @property
    def position(self) -> int:
        """Index in the order of the next card to leave the shoe."""
        return len(self.drawn)

    @property
    def remaining(self) -> int:
        return self.cards - len(self.drawn)

    @property
    def penetration(self) -> float:
        return len(self.drawn) / self.cards if self.cards else 0.0

    @property
    def ready_for_round(self) -> bool:
        return self.active and self.burns_due == 0 and self.reshuffle == "" and self.round is None


class Cites(msgspec.Struct, frozen=True, gc=False):
    """The clauses a table's shoe follows, by the document its ruleset deals
    under. 002 and 003 have cut-card clauses and 002 a burn clause; where a
    text has none (neither baccarat text speaks of a cut card or a burn) the
    ruleset's setting decides the step, and it is the setting that is cited."""

    cut_card: str  # the cut card reached during a round: the round is completed, then the cards reshuffled
    cut_first: str  # the cut card as the first card of a round
    burn: str


@lru_cache(maxsize=32)
def cites(document: str, rules: ShoeRules) -> Cites:
    """The clauses the shoe of a ruleset of ``document`` cites."""
    first = "setting shoe.cut_card_first_of_round"
    burn = "setting shoe.burn"
    if document == "002":
        return Cites("002 (9)", "002 (9)" if rules.cut_card_first_of_round == "deal_round" else first,
                     "002 (3)" if rules.burn == "first_card" else burn)
    if document == "003":
        return Cites("003 7.8", "003 7.9" if rules.cut_card_first_of_round == "reshuffle_now" else first, burn)
    return Cites("setting shoe.penetration", first, burn)


def _burns_for(rules: ShoeRules) -> int:
    # 002 (3): the first card after each shuffle goes to the discard rack.
    return 0 if rules.burn == "none" else 1


# ---- decide ---------------------------------------------------------------


def decide(rules: ShoeRules, state: ShoeState, command: AnyShoeCommand, document: str = "") -> list[AnyShoeEvent]:
    """The events that ``command`` causes, or ``RuleViolation`` if it is not
    allowed; ``document`` is the one the table's ruleset deals under (the
    clauses cited, ``cites``)."""
    handle = _DECIDE.get(type(command))
    if handle is None:
        raise RuleViolation("protocol", f"unknown shoe command {type(command).__name__}")
    return handle(rules, state, command, cites(document, rules))


def fill(rules: ShoeRules, state: ShoeState, shoe_id: str, order: Sequence[Card], salt: str,
         document: str = "") -> list[AnyShoeEvent]:
    """Fill a new shoe with ``order``: the shuffle (its commitment published),
    then the burn cards the ruleset burns, from the top of the order."""
    shuffled = decide(rules, state, Shuffle(shoe_id, commitment(order, salt)), document)
    return with_follow_ups(shuffled, state, evolve, lambda s: decide(rules, s, Burn(order[s.position]), document)
                           if s.burns_due else [])[0]


def check_revealed(order: Sequence[Card], salt: str, committed: str, decks: int) -> None:
    """Refuse a revealed order and salt that are not the shuffle's: another
    commitment, or not one full set of the shoe's decks."""
    if commitment(order, salt) != committed:
        raise RuleViolation("commitment", "the revealed order and salt do not match the shuffle's commitment")
    if not same_cards(order, full_set(decks)):
        raise RuleViolation("commitment", "the revealed order is not one full set of cards")


def check(rules: ShoeRules, state: ShoeState, command: AnyShoeCommand, document: str = "") -> RuleViolation | None:
    """Whether ``command`` is allowed now; the violation says why not."""
    return violation(lambda: decide(rules, state, command, document))


def _shuffle(rules: ShoeRules, state: ShoeState, cmd: Shuffle, c: Cites) -> list[AnyShoeEvent]:
    if state.active:
        raise RuleViolation("shoe", "the current shoe must end (and be revealed) before a new shuffle")
    if state.round is not None and state.round_cards:
        raise RuleViolation(c.cut_card, "a round in progress is completed before the cards are reshuffled")
    return [
        ShoeShuffled(cmd.shoe_id, rules.decks, rules.cards, rules.cut_index, cmd.commitment,
                     _burns_for(rules), rules.burn == "by_first_card_value"),
    ]


def _burn(state: ShoeState, cmd: Burn, c: Cites) -> list[AnyShoeEvent]:
    if not state.active or state.burns_due == 0:
        raise RuleViolation(c.burn, "no burn card is due")
    _check_card(state, cmd.card)
    # The first burn card is turned face up where its value sets further burns.
    first = state.position == 0
    return [CardBurned(state.shoe_id or "", state.position, cmd.card, face_up=first)]


def _start_round(state: ShoeState, cmd: StartRound, c: Cites) -> list[AnyShoeEvent]:
    if not state.active:
        raise RuleViolation("shoe", "no shoe is in play")
    if state.round is not None:
        raise RuleViolation("shoe", f"round {state.round} has not ended")
    if state.burns_due:
        raise RuleViolation(c.burn, "the burn card must go to the discard rack before the deal")
    if state.reshuffle:
        raise RuleViolation(_reshuffle_clause(state, c), "the cards must be reshuffled before the next round")
    return [RoundStarted(state.shoe_id or "", cmd.coup_id)]


def _draw(rules: ShoeRules, state: ShoeState, cmd: Draw, c: Cites) -> list[AnyShoeEvent]:
    if state.round != cmd.coup_id:
        raise RuleViolation("shoe", f"coup {cmd.coup_id} is not the round being dealt")
    if not state.active:
        raise RuleViolation(c.cut_first, "the cards must be reshuffled before this round is dealt")
    if state.burns_due:
        raise RuleViolation(c.burn, "the burn card must go to the discard rack before the deal")
    if state.reshuffle == "now":
        raise RuleViolation(c.cut_first, "the cut card came out first in this round: reshuffle immediately")
    _check_card(state, cmd.card)
    shoe_id, pos = state.shoe_id or "", state.position
    events: list[AnyShoeEvent] = []
    if state.cut_index is not None and pos >= state.cut_index and not state.cut_reached:
        first = state.round_cards == 0
        if first and rules.cut_card_first_of_round == "reshuffle_now":
            # 003 7.9: cut card as the first card of a new round -> reshuffle now.
            return [
                CutCardReached(shoe_id, pos, True, c.cut_first),
                ReshuffleRequired(shoe_id, "now", c.cut_first),
            ]
        # 002 (9), 003 7.8: finish the round, then reshuffle.
        events.append(CutCardReached(shoe_id, pos, first, c.cut_first if first else c.cut_card))
    events.append(CardDrawn(shoe_id, cmd.coup_id, pos, cmd.card))
    return events


def _end_round(rules: ShoeRules, state: ShoeState, cmd: EndRound, c: Cites) -> list[AnyShoeEvent]:
    if state.round != cmd.coup_id:
        raise RuleViolation("shoe", f"coup {cmd.coup_id} is not the round being dealt")
    if not same_cards(cmd.pickup, state.layout):
        raise RuleViolation("shoe", "the cards picked up must be exactly the cards on the layout")
    shoe_id = state.shoe_id or ""
    events: list[AnyShoeEvent] = [RoundEnded(shoe_id, cmd.coup_id, cmd.pickup)]
    if state.cut_reached:
        events.append(ReshuffleRequired(shoe_id, "after_round", c.cut_card))
    elif rules.shuffler == "continuous_shuffler":
        events.append(ReshuffleRequired(shoe_id, "before_next_round", "setting shoe.shuffler"))
    return events


def _end_shoe(state: ShoeState, cmd: EndShoe, c: Cites) -> list[AnyShoeEvent]:
    if not state.active:
        raise RuleViolation("shoe", "no shoe is in play")
    if state.round is not None and state.round_cards:
        raise RuleViolation(c.cut_card, "a round in progress is completed before the cards are reshuffled")
    check_revealed(cmd.order, cmd.salt, state.commitment, state.decks)
    if tuple(cmd.order[: state.position]) != state.drawn:
        raise RuleViolation("commitment", "the cards dealt are not the revealed order")
    return [ShoeEnded(state.shoe_id or "", tuple(cmd.order), cmd.salt)]


def _check_card(state: ShoeState, card: Card) -> None:
    if not is_card(card):
        raise RuleViolation("shoe", f"{card!r} is not a card")
    if state.dealt[DECK_INDEX[card]] >= state.decks:
        raise RuleViolation("shoe", f"every {card} of a {state.decks}-deck shoe has already been dealt")
    if state.remaining == 0:
        raise RuleViolation("shoe", "the shoe is empty")


def _reshuffle_clause(state: ShoeState, c: Cites) -> str:
    return {"now": c.cut_first, "after_round": c.cut_card, "before_next_round": "setting shoe.shuffler"}.get(
        state.reshuffle, "shoe"
    )


# ---- evolve ---------------------------------------------------------------


def evolve(state: ShoeState, event: AnyShoeEvent) -> ShoeState:
    """The shoe after ``event``."""
    after = _EVOLVE.get(type(event))
    return state if after is None else after(state, event)


replace = msgspec.structs.replace


def _shuffled(state: ShoeState, e: ShoeShuffled) -> ShoeState:
    return ShoeState(shoe_id=e.shoe_id, decks=e.decks, cards=e.cards, cut_index=e.cut_index, commitment=e.commitment,
                     burns_due=e.burns_due, burn_by_value=e.burn_by_value, round=state.round)


def _burned(state: ShoeState, e: CardBurned) -> ShoeState:
    due = state.burns_due - 1
    if state.burn_by_value and e.position == 0:
        # The first card is shown and as many more are burned as its value (tens count ten).
        due = baccarat_value(e.card) or 10
    return replace(state, drawn=state.drawn + (e.card,), dealt=_tally(state.dealt, e.card),
              discard=state.discard + (e.card,), burns_due=due)


def _drawn(state: ShoeState, e: CardDrawn) -> ShoeState:
    return replace(state, drawn=state.drawn + (e.card,), dealt=_tally(state.dealt, e.card),
              layout=state.layout + (e.card,), round_cards=state.round_cards + 1)


def _round_ended(state: ShoeState, e: RoundEnded) -> ShoeState:
    if state.cut_index is None:  # a continuous shuffler takes the cards back
        return replace(state, round=None, round_cards=0, layout=(), returned=state.returned + e.pickup)
    return replace(state, round=None, round_cards=0, layout=(), discard=state.discard + e.pickup)


# One entry per message type: a lookup, not a chain of type tests (the hot path of a fold).
_DECIDE: dict[type, Callable[[ShoeRules, ShoeState, Any, Cites], list[AnyShoeEvent]]] = {
    Shuffle: _shuffle,
    Burn: lambda rules, state, cmd, c: _burn(state, cmd, c),
    StartRound: lambda rules, state, cmd, c: _start_round(state, cmd, c),
    Draw: _draw,
    EndRound: _end_round,
    EndShoe: lambda rules, state, cmd, c: _end_shoe(state, cmd, c),
}
_EVOLVE: dict[type, Callable[[ShoeState, Any], ShoeState]] = {
    ShoeShuffled: _shuffled,
    CardBurned: _burned,
    RoundStarted: lambda state, e: replace(state, round=e.coup_id, round_cards=0),
    CutCardReached: lambda state, e: replace(state, cut_reached=True),
    CardDrawn: _drawn,
    RoundEnded: _round_ended,
    ReshuffleRequired: lambda state, e: replace(state, reshuffle=e.when),
    ShoeEnded: lambda state, e: ShoeState(round=state.round),
}


def _tally(dealt: tuple[int, ...], card: Card) -> tuple[int, ...]:
    i = DECK_INDEX[card]
    return (*dealt[:i], dealt[i] + 1, *dealt[i + 1:])
