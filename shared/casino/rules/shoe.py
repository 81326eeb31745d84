"""The shoe: shuffle commitment, burn, cut card, draw, pick-up and reshuffle.

The shoe service shuffles and keeps the order secret (or, at a table with a
card-reading shoe, keeps the order its shuffling machine reports, or knows no
order where the cards were shuffled by hand); this model consumes the recorded
cards as they leave the shoe. At the shuffle only a commitment (a hash
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
from casino.rules.cards import DECK, DECK_INDEX, Card, baccarat_value, full_set, same_cards
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
    read: str = ""  # the card-reading shoe's report of the card, where one read it


class Misdraw(ShoeCommand, frozen=True, tag="shoe.misdraw"):
    """A card out of a card-reading shoe when none was due (``clause``): to the discard rack."""

    coup_id: str
    card: Card
    read: str
    clause: str


class CutCardOut(ShoeCommand, frozen=True, tag="shoe.cut_card_out"):
    """A card-reading shoe's cut card come out: the cut card where it actually came."""


class StartRound(ShoeCommand, frozen=True, tag="shoe.start_round"):
    coup_id: str


class Draw(ShoeCommand, frozen=True, tag="shoe.draw"):
    coup_id: str
    card: Card
    read: str = ""


class EndRound(ShoeCommand, frozen=True, tag="shoe.end_round"):
    coup_id: str
    pickup: tuple[Card, ...]


class EndHeld(ShoeCommand, frozen=True, tag="shoe.end_held"):
    """The round of coup ``coup_id``, held for compliance, ended whatever the
    shoe was dealing: the round in hand (the held coup's, or an earlier
    coup's left open) picked up as the layout holds it, and the held coup's
    round ended with no card where the shoe never dealt it."""

    coup_id: str


class EndShoe(ShoeCommand, frozen=True, tag="shoe.end_shoe"):
    order: tuple[Card, ...]
    salt: str


class EndNow(ShoeCommand, frozen=True, tag="shoe.end_now"):
    """A card-reading shoe ended at once by a supervisor's ruling under the
    house rule ``clause`` (its order left, or its cut card out of place): the
    round being dealt, if it has cards, picked up as the layout holds them,
    and the cards reshuffled now."""

    clause: str


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
    # Where the cards come from (a field of version 3): "" the shoe service's own shuffle, which it deals;
    # a card-reading shoe's, shuffled by a "recognised" shuffling machine (the order it reports is the
    # one committed to) or by "hand" (no order known: no commitment, and nothing revealed at the end).
    source: str = ""


class CardBurned(ShoeEvent, frozen=True, tag="shoe.card_burned"):
    position: int
    card: Card
    face_up: bool
    clause: str = ""  # 002 (3), or the setting; empty in records from before it was cited (version 1)
    read: str = ""  # the id of the card-reading shoe's report of it (version 3); empty where the service dealt it


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
    read: str = ""  # the id of the card-reading shoe's report of it (version 2); empty where the service dealt it


class CardMisdrawn(ShoeEvent, frozen=True, tag="shoe.card_misdrawn"):
    """A card out of a card-reading shoe when none was due (000 8.19, 8.28 where
    a holder drew it): it left the shoe, and goes to the discard rack."""

    coup_id: str
    position: int
    card: Card
    read: str
    clause: str


class CardRefused(ShoeEvent, frozen=True, tag="shoe.card_refused"):
    """A card a card-reading shoe reported that it cannot have given: not the
    next of the order committed to, or more copies than its decks hold. Kept
    out of the shoe's cards (the order's next card is still in it); the coup
    it came in is held."""

    coup_id: str
    card: str
    read: str
    why: str
    clause: str


class RoundEnded(ShoeEvent, frozen=True, tag="shoe.round_ended"):
    coup_id: str
    pickup: tuple[Card, ...]


class ReshuffleRequired(ShoeEvent, frozen=True, tag="shoe.reshuffle_required"):
    when: Literal["now", "after_round", "before_next_round"]
    clause: str


class ShoeEnded(ShoeEvent, frozen=True, tag="shoe.ended"):
    order: tuple[Card, ...]
    salt: str


class CutCardMisplaced(ShoeEvent, frozen=True, tag="shoe.cut_card_misplaced"):
    """A card-reading shoe's cut card out further than the ruleset's tolerance
    from ``cut_index``, where the penetration puts it (``reported``: at
    ``position``), or not out by then (the card at ``position`` came out from
    behind it): not taken where it came; the cut card is reckoned where the
    penetration puts it, and the coup is held for a ruling (``clause``)."""

    position: int
    cut_index: int
    reported: bool
    clause: str


class OrderReplaced(ShoeEvent, frozen=True, tag="shoe.order_replaced"):
    """The order a shuffling machine reported for shoe ``shoe_id`` replaced,
    before the shoe's first card, by the order of the machine's report
    ``read`` (a machine that shuffled again, or a forged order put right):
    recorded, and surveillance alerted. Where the shoe was filled already
    it is ended, its replaced order revealed, and the next filled."""

    read: str


AnyShoeCommand = Shuffle | Burn | StartRound | Draw | EndRound | EndShoe | Misdraw | CutCardOut | EndNow | EndHeld
AnyShoeEvent = (
    ShoeShuffled | CardBurned | RoundStarted | CutCardReached | CardDrawn | RoundEnded | ReshuffleRequired | ShoeEnded
    | CardMisdrawn | CardRefused | CutCardMisplaced | OrderReplaced
)
# A card-reading shoe's shuffles: the order a shuffling machine reports, or none (by hand).
SOURCES = ("recognised", "hand")
TOLERANCE = "setting shoe.cut_card_tolerance"  # the clause of a cut card out of place, or missed
# The clause of a round the shoe is not dealing, or whose cards are not the shoe's: a fault (a coup the
# record holds and the shoe does not), for which the dealer-policy holds the coup for compliance.
ROUND = "shoe round"


# ---- state ----------------------------------------------------------------


class ShoeState(msgspec.Struct, gc=False):
    """What is known about a table's shoe from its events.

    ``evolve`` updates a state in place (a card leaves the shoe at every step
    of every coup, and a copy of a whole shoe's cards at each would cost more
    than the step): ``copy`` keeps one as it is."""

    shoe_id: str | None = None
    decks: int = 0
    cards: int = 0
    cut_index: int | None = None
    commitment: str = ""
    drawn: list[Card] = msgspec.field(default_factory=list)
    # how many of each card of DECK have left the shoe
    dealt: list[int] = msgspec.field(default_factory=lambda: [0] * len(DECK))
    layout: list[Card] = msgspec.field(default_factory=list)
    discard: list[Card] = msgspec.field(default_factory=list)
    returned: list[Card] = msgspec.field(default_factory=list)
    burns_due: int = 0
    burn_by_value: bool = False
    round: str | None = None
    round_cards: int = 0
    cut_reached: bool = False
    reshuffle: Literal["", "now", "after_round", "before_next_round"] = ""
    source: str = ""  # ShoeShuffled.source
    refused_in_a_row: int = 0  # cards a card-reading shoe reported that it cannot have given, since the last it did
    cut_reckoned: bool = False  # a card-reading shoe's cut card out of place: reckoned where the penetration puts it

    @property
    def active(self) -> bool:
        return self.shoe_id is not None

    @property
    def position(self) -> int:
        """Index in the order of the next card to leave the shoe."""
        return len(self.drawn)

    @property
    def read(self) -> bool:
        """Whether the shoe in play is a card-reading shoe's (its cards reported as they leave it)."""
        return bool(self.source)

    @property
    def hand_shuffled(self) -> bool:
        """Whether the shoe in play was shuffled by hand: no order known, none to reveal as it ends."""
        return self.source == "hand"

    @property
    def remaining(self) -> int:
        return self.cards - len(self.drawn)

    @property
    def penetration(self) -> float:
        return len(self.drawn) / self.cards if self.cards else 0.0

    @property
    def ready_for_round(self) -> bool:
        return self.active and self.burns_due == 0 and self.reshuffle == "" and self.round is None


def copy(state: ShoeState) -> ShoeState:
    """A state of its own, equal to ``state``: what ``evolve`` does to one leaves the other as it is."""
    return msgspec.structs.replace(state, drawn=state.drawn.copy(), dealt=state.dealt.copy(),
                                   layout=state.layout.copy(), discard=state.discard.copy(),
                                   returned=state.returned.copy())


class Cites(msgspec.Struct, frozen=True, gc=False):
    """The clauses a table's shoe follows, by the document its ruleset deals
    under. 002 and 003 have cut-card clauses and 002 a burn clause; where a
    text has none (neither baccarat text speaks of a cut card or a burn) the
    ruleset's setting decides the step, and it is the setting that is cited."""

    cut_card: str  # the cut card reached during a round: the round is completed, then the cards reshuffled
    cut_first: str  # the cut card as the first card of a round
    burn: str


def cites(document: str, rules: ShoeRules) -> Cites:
    """The clauses the shoe of a ruleset of ``document`` cites."""
    return _cites(document, rules.cut_card_first_of_round, rules.burn)


@lru_cache(maxsize=32)
def _cites(document: str, cut_card_first_of_round: str, burn_setting: str) -> Cites:
    first = "setting shoe.cut_card_first_of_round"
    burn = "setting shoe.burn"
    if document == "002":
        return Cites("002 (9)", "002 (9)" if cut_card_first_of_round == "deal_round" else first,
                     "002 (3)" if burn_setting == "first_card" else burn)
    if document == "003":
        return Cites("003 7.8", "003 7.9" if cut_card_first_of_round == "reshuffle_now" else first, burn)
    return Cites("setting shoe.penetration", first, burn)


def house_rule(rules: ShoeRules, state: ShoeState, incident: AnyShoeEvent) -> str:
    """The ruling the house rules call for on a card-reading shoe's
    ``incident`` (its shoe ``state`` after it): the ruleset's setting, but the
    shoe ended at its ``end_shoe_after``-th card refused in a row (a shoe that
    has left its committed order, whatever the setting)."""
    if isinstance(incident, CardRefused):
        return "end_shoe" if state.refused_in_a_row >= rules.end_shoe_after else rules.refused
    if isinstance(incident, CutCardMisplaced):
        return rules.cut_card
    return rules.misdraw


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
         document: str = "", source: str = "") -> list[AnyShoeEvent]:
    """Fill a new shoe with ``order``: the shuffle (its commitment published),
    then the burn cards the ruleset burns, from the top of the order. A
    card-reading shoe's (``source``) is the shuffle alone, committed to the
    order its shuffling machine reported (none, shuffled by hand): its burn
    cards are the cards it reads first."""
    committed = "" if source == "hand" else commitment(order, salt)
    shuffled = decide(rules, state, Shuffle(shoe_id, committed), document)
    if source:
        return [msgspec.structs.replace(e, source=source) if isinstance(e, ShoeShuffled) else e for e in shuffled]

    def burn(_: None, s: ShoeState) -> list[AnyShoeEvent]:
        return decide(rules, s, Burn(order[s.position]), document) if s.burns_due else []

    # The shuffle starts a state of its own: ``state`` is left as it is.
    return with_follow_ups(shuffled, state, _EVOLVE, burn, None)[0]


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
    return [CardBurned(state.shoe_id or "", state.position, cmd.card, face_up=first, clause=c.burn, read=cmd.read)]


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
        raise RuleViolation(ROUND, f"coup {cmd.coup_id} is not the round being dealt")
    shoe_id = state.shoe_id
    if shoe_id is None:
        raise RuleViolation(c.cut_first, "the cards must be reshuffled before this round is dealt")
    if state.burns_due:
        raise RuleViolation(c.burn, "the burn card must go to the discard rack before the deal")
    if state.reshuffle == "now":
        raise RuleViolation(c.cut_first, "the cut card came out first in this round: reshuffle immediately")
    _check_card(state, cmd.card)
    pos = len(state.drawn)
    if state.source and state.cut_index is not None and not state.cut_reached:
        return _read_past_the_cut(rules, state, cmd, c)
    if state.cut_index is not None and pos >= state.cut_index and not state.cut_reached:
        first = state.round_cards == 0
        if first and rules.cut_card_first_of_round == "reshuffle_now":
            # 003 7.9: cut card as the first card of a new round -> reshuffle now.
            return [
                CutCardReached(shoe_id, pos, True, c.cut_first),
                ReshuffleRequired(shoe_id, "now", c.cut_first),
            ]
        # 002 (9), 003 7.8: finish the round, then reshuffle.
        return [CutCardReached(shoe_id, pos, first, c.cut_first if first else c.cut_card),
                CardDrawn(shoe_id, cmd.coup_id, pos, cmd.card)]
    return [CardDrawn(shoe_id, cmd.coup_id, pos, cmd.card, cmd.read)]


def _read_past_the_cut(rules: ShoeRules, state: ShoeState, cmd: Draw, c: Cites) -> list[AnyShoeEvent]:
    """A card-reading shoe's card drawn before its cut card came out. It
    reports its cut card where it comes (``CutCardOut``); once the cards are
    further past where the penetration puts it than the tolerance, it has
    missed it (an incident), and the cut card is reckoned, as it is once it
    came out out of place: reached where the penetration puts it, the round
    completed, then the reshuffle (the card drawn has left the shoe, so no
    round is reshuffled before it, whatever the ruleset says of 003 7.9)."""
    shoe_id, pos, cut = state.shoe_id or "", len(state.drawn), state.cut_index or 0
    drawn = CardDrawn(shoe_id, cmd.coup_id, pos, cmd.card, cmd.read)
    if state.cut_reckoned and pos >= cut:
        return [CutCardReached(shoe_id, pos, state.round_cards == 0, c.cut_card), drawn]
    if not state.cut_reckoned and pos > cut + rules.cut_card_tolerance:
        return [CutCardMisplaced(shoe_id, pos, cut, False, TOLERANCE),
                CutCardReached(shoe_id, pos, state.round_cards == 0, c.cut_card), drawn]
    return [drawn]


def _misdraw(state: ShoeState, cmd: Misdraw) -> list[AnyShoeEvent]:
    if not state.source:
        raise RuleViolation("shoe", "only a card-reading shoe's card is misdrawn: the service draws its own")
    _check_card(state, cmd.card)
    return [CardMisdrawn(state.shoe_id or "", cmd.coup_id, len(state.drawn), cmd.card, cmd.read, cmd.clause)]


def _cut_card_out(rules: ShoeRules, state: ShoeState, c: Cites) -> list[AnyShoeEvent]:
    """The cut card out of a card-reading shoe, judged where it came: the first
    card of a round (003 7.9: reshuffle now, where the ruleset says so), else
    during one (002 (9), 003 7.8: the round completed, then the reshuffle)."""
    shoe_id = state.shoe_id
    if shoe_id is None or not state.source or state.cut_index is None:
        raise RuleViolation("shoe", "no cut card is in play in this shoe")
    if state.cut_reached or state.cut_reckoned:
        raise RuleViolation(c.cut_card, "the cut card of this shoe came out already")
    if abs(state.position - state.cut_index) > rules.cut_card_tolerance:
        return [CutCardMisplaced(shoe_id, state.position, state.cut_index, True, TOLERANCE)]
    first = state.round is None or state.round_cards == 0
    if first and rules.cut_card_first_of_round == "reshuffle_now":
        return [CutCardReached(shoe_id, state.position, True, c.cut_first),
                ReshuffleRequired(shoe_id, "now", c.cut_first)]
    if state.round is None:  # between rounds: the next round is dealt, then the reshuffle
        return [CutCardReached(shoe_id, state.position, True, c.cut_first)]
    return [CutCardReached(shoe_id, state.position, first, c.cut_first if first else c.cut_card)]


def _end_round(rules: ShoeRules, state: ShoeState, cmd: EndRound, c: Cites) -> list[AnyShoeEvent]:
    if state.round != cmd.coup_id:
        raise RuleViolation(ROUND, f"coup {cmd.coup_id} is not the round being dealt")
    if not same_cards(cmd.pickup, state.layout):
        raise RuleViolation(ROUND, "the cards picked up must be exactly the cards on the layout")
    shoe_id = state.shoe_id or ""
    events: list[AnyShoeEvent] = [RoundEnded(shoe_id, cmd.coup_id, tuple(cmd.pickup))]
    if state.cut_reached:
        events.append(ReshuffleRequired(shoe_id, "after_round", c.cut_card))
    elif rules.shuffler == "continuous_shuffler":
        events.append(ReshuffleRequired(shoe_id, "before_next_round", "setting shoe.shuffler"))
    return events


def _end_now(state: ShoeState, cmd: EndNow) -> list[AnyShoeEvent]:
    if state.shoe_id is None or not state.source:
        raise RuleViolation("shoe", "no card-reading shoe is in play to end")
    events: list[AnyShoeEvent] = []
    if state.round is not None and state.round_cards:  # the void coup's cards, as the layout holds them
        events.append(RoundEnded(state.shoe_id, state.round, tuple(state.layout)))
    return [*events, ReshuffleRequired(state.shoe_id, "now", cmd.clause)]


def _end_held(state: ShoeState, cmd: EndHeld) -> list[AnyShoeEvent]:
    # Coup ids are the table's and a zero-padded number: a later coup's id sorts after an earlier one's.
    if state.round is not None and state.round > cmd.coup_id:
        raise RuleViolation(ROUND, f"the shoe deals coup {state.round}'s round, which comes after held coup "
                                   f"{cmd.coup_id}")
    shoe_id = state.shoe_id or ""
    events: list[AnyShoeEvent] = []
    if state.round is not None:
        events.append(RoundEnded(shoe_id, state.round, tuple(state.layout)))
    if state.round != cmd.coup_id:
        events.append(RoundEnded(shoe_id, cmd.coup_id, ()))
    return events


def _end_shoe(state: ShoeState, cmd: EndShoe, c: Cites) -> list[AnyShoeEvent]:
    if not state.active:
        raise RuleViolation("shoe", "no shoe is in play")
    if state.round is not None and state.round_cards:
        raise RuleViolation(c.cut_card, "a round in progress is completed before the cards are reshuffled")
    if state.source == "hand":  # no order was known: none is revealed
        if cmd.order or cmd.salt:
            raise RuleViolation("commitment", "a shoe shuffled by hand has no order to reveal")
        return [ShoeEnded(state.shoe_id or "", (), "")]
    check_revealed(cmd.order, cmd.salt, state.commitment, state.decks)
    if list(cmd.order[: state.position]) != state.drawn:
        raise RuleViolation("commitment", "the cards dealt are not the revealed order")
    return [ShoeEnded(state.shoe_id or "", tuple(cmd.order), cmd.salt)]


def _check_card(state: ShoeState, card: Card) -> None:
    index = DECK_INDEX.get(card) if type(card) is str else None
    if index is None:
        raise RuleViolation("shoe", f"{card!r} is not a card")
    if state.dealt[index] >= state.decks:
        raise RuleViolation("shoe", f"every {card} of a {state.decks}-deck shoe has already been dealt")
    if len(state.drawn) >= state.cards:
        raise RuleViolation("shoe", "the shoe is empty")


def _reshuffle_clause(state: ShoeState, c: Cites) -> str:
    return {"now": c.cut_first, "after_round": c.cut_card, "before_next_round": "setting shoe.shuffler"}.get(
        state.reshuffle, "shoe"
    )


# ---- evolve ---------------------------------------------------------------


def evolve(state: ShoeState, event: AnyShoeEvent) -> ShoeState:
    """The shoe after ``event``: ``state`` itself, updated in place, or a new state."""
    after = _EVOLVE.get(type(event))
    return state if after is None else after(state, event)


def _shuffled(state: ShoeState, e: ShoeShuffled) -> ShoeState:
    return ShoeState(shoe_id=e.shoe_id, decks=e.decks, cards=e.cards, cut_index=e.cut_index, commitment=e.commitment,
                     burns_due=e.burns_due, burn_by_value=e.burn_by_value, round=state.round, source=e.source)


def _burned(state: ShoeState, e: CardBurned) -> ShoeState:
    state.refused_in_a_row = 0
    due = state.burns_due - 1
    if state.burn_by_value and e.position == 0:
        # The first card is shown and as many more are burned as its value (tens count ten).
        due = baccarat_value(e.card) or 10
    state.drawn.append(e.card)
    state.dealt[DECK_INDEX[e.card]] += 1
    state.discard.append(e.card)
    state.burns_due = due
    return state


def _drawn(state: ShoeState, e: CardDrawn) -> ShoeState:
    state.refused_in_a_row = 0
    state.drawn.append(e.card)
    state.dealt[DECK_INDEX[e.card]] += 1
    state.layout.append(e.card)
    state.round_cards += 1
    return state


def _misdrawn(state: ShoeState, e: CardMisdrawn) -> ShoeState:
    state.refused_in_a_row = 0
    state.drawn.append(e.card)
    state.dealt[DECK_INDEX[e.card]] += 1
    state.discard.append(e.card)
    return state


def _round_started(state: ShoeState, e: RoundStarted) -> ShoeState:
    state.round, state.round_cards = e.coup_id, 0
    return state


def _round_ended(state: ShoeState, e: RoundEnded) -> ShoeState:
    # the cards go to the discard rack, or back into a continuous shuffler (no cut card)
    (state.discard if state.cut_index is not None else state.returned).extend(e.pickup)
    state.round, state.round_cards, state.layout = None, 0, []
    return state


def _cut_card_reached(state: ShoeState, e: CutCardReached) -> ShoeState:
    state.cut_reached = True
    return state


def _reshuffle_required(state: ShoeState, e: ReshuffleRequired) -> ShoeState:
    state.reshuffle = e.when
    return state


def _refused(state: ShoeState, e: CardRefused) -> ShoeState:
    state.refused_in_a_row += 1
    return state


def _cut_card_misplaced(state: ShoeState, e: CutCardMisplaced) -> ShoeState:
    state.cut_reckoned = True
    return state


# One entry per message type: a lookup, not a chain of type tests (the hot path of a fold).
_DECIDE: dict[type, Callable[[ShoeRules, ShoeState, Any, Cites], list[AnyShoeEvent]]] = {
    Shuffle: _shuffle,
    Burn: lambda rules, state, cmd, c: _burn(state, cmd, c),
    StartRound: lambda rules, state, cmd, c: _start_round(state, cmd, c),
    Draw: _draw,
    EndRound: _end_round,
    EndShoe: lambda rules, state, cmd, c: _end_shoe(state, cmd, c),
    Misdraw: lambda rules, state, cmd, c: _misdraw(state, cmd),
    CutCardOut: lambda rules, state, cmd, c: _cut_card_out(rules, state, c),
    EndNow: lambda rules, state, cmd, c: _end_now(state, cmd),
    EndHeld: lambda rules, state, cmd, c: _end_held(state, cmd),
}
_EVOLVE: dict[type, Callable[[ShoeState, Any], ShoeState]] = {
    ShoeShuffled: _shuffled,
    CardBurned: _burned,
    RoundStarted: _round_started,
    CutCardReached: _cut_card_reached,
    CardDrawn: _drawn,
    RoundEnded: _round_ended,
    ReshuffleRequired: _reshuffle_required,
    ShoeEnded: lambda state, e: ShoeState(round=state.round),
    CardMisdrawn: _misdrawn,
    CardRefused: _refused,
    CutCardMisplaced: _cut_card_misplaced,
}
