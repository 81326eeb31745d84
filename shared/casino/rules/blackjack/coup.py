"""The blackjack coup aggregate: ``decide(rules, state, command)`` and ``evolve``.

The deal follows 002 (4) with a hole card the dealer may not look at until all
players have acted, or 003 7.3 with no hole card (the dealer's second card comes
after the players, 003 7.6). Players act box by box clockwise from the dealer's
left (002 (5), 003 7.4); every total is announced (002 (5)-(7), 003 7.4-7.6);
the cards are picked up in the order of 002 (8) or 003 7.7.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import msgspec

from casino.rules.aggregate import violation, with_follow_ups
from casino.rules.blackjack import hand as hand_totals
from casino.rules.blackjack.messages import (
    AnyBlackjackCommand,
    AnyBlackjackEvent,
    BettingClosed,
    CardDealt,
    CardsPickedUp,
    CloseBetting,
    CoupOpened,
    CoupResulted,
    DealCard,
    Decide,
    DecisionTaken,
    HandCompleted,
    HandResult,
    HoleCardTurned,
    OpenCoup,
    Outcome,
    TotalAnnounced,
)
from casino.rules.cards import Card, is_card, rank
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BlackjackRules
from casino.rules.wagers import check_book

Phase = Literal["new", "betting", "dealing", "playing", "dealer", "finished"]


class Placed(msgspec.Struct, frozen=True, gc=False):
    card: Card
    position: int
    face_up: bool = True


class Hand(msgspec.Struct, frozen=True, gc=False):
    """One hand of a box (a box holds more than one after a split)."""

    stake: int
    original: int
    cards: tuple[Placed, ...] = ()
    from_split: bool = False
    split_aces: bool = False
    doubled: bool = False
    draw_due: bool = False
    announced: bool = False
    done: bool = False

    @property
    def codes(self) -> tuple[Card, ...]:
        return tuple([p.card for p in self.cards])


class Box(msgspec.Struct, frozen=True, gc=False):
    """A betting box with a wager, its hands and any insurance."""

    seat: int
    wager: int
    hands: tuple[Hand, ...]
    insurance: int = 0
    acted: bool = False


class BlackjackCoup(msgspec.Struct, frozen=True, gc=False):
    """What is known about one blackjack coup from its events."""

    coup_id: str = ""
    phase: Phase = "new"
    hole_card: bool = True
    boxes: tuple[Box, ...] = ()
    dealer: tuple[Placed, ...] = ()
    turn: int = 0
    last_position: int = -1
    result: CoupResulted | None = None
    pickup: tuple[Card, ...] = ()

    @property
    def dealer_cards(self) -> tuple[Card, ...]:
        return tuple([p.card for p in self.dealer])

    def current(self) -> tuple[int, int] | None:
        """(box index, hand index) of the hand whose turn it is."""
        if self.phase != "playing" or self.turn >= len(self.boxes):
            return None
        for i, h in enumerate(self.boxes[self.turn].hands):
            if not h.done:
                return self.turn, i
        return None


class Awaiting(msgspec.Struct, frozen=True, gc=False):
    """What the coup waits for: ``open``, ``close_betting``, ``card`` (to ``seat``'s
    ``hand``, or the dealer when seat is None), ``decision`` (from ``seat`` for
    ``hand``) or ``nothing``."""

    kind: Literal["open", "close_betting", "card", "decision", "nothing"]
    seat: int | None = None
    hand: int = 0
    face_up: bool = True
    clause: str = ""


def _clause(hole_card: bool, hole: str, no_hole: str) -> str:
    """The clause of the hole-card rules (002) or of the no-hole-card rules (003)."""
    return hole if hole_card else no_hole


def awaiting(s: BlackjackCoup, rules: BlackjackRules) -> Awaiting:
    """The next thing this coup waits for."""
    if s.phase == "new":
        return Awaiting("open")
    if s.phase == "betting":
        return Awaiting("close_betting")
    if s.phase == "dealing":
        return _initial_slot(s)
    if s.phase == "playing":
        cur = s.current()
        if cur is None:
            return Awaiting("nothing")
        box, hand = s.boxes[cur[0]], s.boxes[cur[0]].hands[cur[1]]
        if hand.draw_due or len(hand.cards) < 2:
            return Awaiting("card", box.seat, cur[1], True, _clause(s.hole_card, "002 (6)", "003 7.5"))
        return Awaiting("decision", box.seat, cur[1], clause=_clause(s.hole_card, "002 (5)", "003 7.4"))
    if s.phase == "dealer":
        if not s.hole_card and len(s.dealer) == 1:
            return Awaiting("card", None, 0, True, "003 7.6")
        if all(p.face_up for p in s.dealer) and hand_totals.dealer_must_draw(s.dealer_cards, rules.dealer_hits_soft_17):
            return Awaiting("card", None, 0, True, _clause(s.hole_card, "002 (7)", "003 7.6"))
    return Awaiting("nothing")


def _initial_slot(s: BlackjackCoup) -> Awaiting:
    n = len(s.boxes)
    dealt = len(s.dealer) + sum(len(b.hands[0].cards) for b in s.boxes)
    hole = "002 (4)" if s.hole_card else "003 7.3"
    if dealt < n:
        return Awaiting("card", s.boxes[dealt].seat, 0, True, f"{hole}(a)" if s.hole_card else "003 7.3(a)")
    if dealt == n:
        return Awaiting("card", None, 0, True, f"{hole}(b)")
    if dealt <= 2 * n:
        return Awaiting("card", s.boxes[dealt - n - 1].seat, 0, True, f"{hole}(c)")
    return Awaiting("card", None, 0, False, "002 (4)(d)")


def initial_cards(s: BlackjackCoup) -> int:
    """How many cards the initial deal gives (002 (4), 003 7.3)."""
    return 2 * len(s.boxes) + (2 if s.hole_card else 1)


# ---- decide ---------------------------------------------------------------


def copy(state: BlackjackCoup) -> BlackjackCoup:
    """The coup itself: a blackjack coup is never changed in place (each event makes a new one)."""
    return state


def decide(rules: BlackjackRules, state: BlackjackCoup, command: AnyBlackjackCommand) -> list[AnyBlackjackEvent]:
    """The events ``command`` causes, or ``RuleViolation`` naming the clause."""
    return step(rules, state, command)[0]


def step(rules: BlackjackRules, state: BlackjackCoup, command: AnyBlackjackCommand) -> tuple[list[AnyBlackjackEvent], BlackjackCoup]:
    """``decide`` and the coup after its events: the same as ``fold(decide(...), state)``."""
    return with_follow_ups(_primary(rules, state, command), state, _EVOLVE, _automatic, rules)


def check(rules: BlackjackRules, state: BlackjackCoup, command: AnyBlackjackCommand) -> RuleViolation | None:
    """Whether ``command`` is allowed now; the violation names the clause."""
    return violation(lambda: _primary(rules, state, command))


def _primary(rules: BlackjackRules, s: BlackjackCoup, cmd: AnyBlackjackCommand) -> list[AnyBlackjackEvent]:
    handle = _DECIDE.get(type(cmd))
    if handle is None:
        raise RuleViolation("protocol", f"unknown blackjack command {type(cmd).__name__}")
    return handle(rules, s, cmd)


def _open(rules: BlackjackRules, s: BlackjackCoup, cmd: OpenCoup) -> list[AnyBlackjackEvent]:
    if s.phase != "new":
        raise RuleViolation("coup", "the coup is already open")
    return [CoupOpened(cmd.coup_id, rules.hole_card, _clause(rules.hole_card, "002 (4)", "003 7.3"))]


def _close_betting(rules: BlackjackRules, s: BlackjackCoup, cmd: CloseBetting) -> list[AnyBlackjackEvent]:
    if s.phase != "betting":
        raise RuleViolation("coup", "betting is not open")
    book = check_book(rules.table, rules.limits, cmd.wagers)
    dealt_to = _clause(rules.hole_card, "002 (4)(a)", "003 7.3(a)")
    if not book:
        raise RuleViolation(dealt_to, "cards go only to boxes containing a wager, and none has one")
    if len({w.seat for w in book}) < len(book):
        raise RuleViolation(dealt_to, "a box is dealt one hand: the book holds two wagers on one box")
    # 002 (4): boxes in the order they are dealt, clockwise from the dealer's left.
    return [BettingClosed(tuple(sorted(book, key=lambda w: rules.seats.index(w.seat))))]


def _deal(rules: BlackjackRules, s: BlackjackCoup, cmd: DealCard) -> list[AnyBlackjackEvent]:
    if cmd.by is not None:
        raise RuleViolation("002 (10)", "no player may handle, remove or alter the cards; only the dealer deals")
    a = awaiting(s, rules)
    if a.kind != "card":
        raise RuleViolation(_clause(s.hole_card, "002 (6)", "003 7.5"), f"no card is due (the coup is waiting for: {a.kind})")
    if not is_card(cmd.card):
        raise RuleViolation("shoe", f"{cmd.card!r} is not a card")
    if cmd.position <= s.last_position:
        raise RuleViolation("002 (1)", "cards come from the dealing shoe in order")
    return [CardDealt(a.seat, a.hand, cmd.card, cmd.position, a.face_up, a.clause)]


def _decide(rules: BlackjackRules, s: BlackjackCoup, cmd: Decide) -> list[AnyBlackjackEvent]:
    turn = _clause(s.hole_card, "002 (5)", "003 7.4")
    a = awaiting(s, rules)
    if a.kind != "decision":
        raise RuleViolation(turn, f"no decision is due (the coup is waiting for: {a.kind})")
    if cmd.seat != a.seat or cmd.hand != a.hand:
        raise RuleViolation(turn, f"it is the turn of seat {a.seat} hand {a.hand}, not seat {cmd.seat} hand {cmd.hand}")
    cur = s.current()
    assert cur is not None
    box = s.boxes[cur[0]]
    hand = box.hands[cur[1]]
    cards = hand.codes
    # The decision on the first two cards (002 (5), 003 7.4), or on the hand after an additional card (002 (6), 003 7.5).
    cited = turn if len(cards) == 2 else _clause(s.hole_card, "002 (6)", "003 7.5")
    if cmd.action == "insurance":
        if not rules.insurance:
            raise RuleViolation("ruleset insurance", "insurance is not offered at this table")
        if rank(s.dealer[0].card) != "A":
            raise RuleViolation("game rules: insurance", "insurance is offered only when the dealer's face card is an ace")
        if box.acted or box.insurance or len(box.hands) > 1:
            raise RuleViolation("game rules: insurance", "insurance is taken once, before any other decision of the box")
        if not 0 < cmd.amount <= box.wager // 2:
            raise RuleViolation("game rules: insurance", f"insurance is more than 0 and at most half the wager ({box.wager // 2})")
        return [DecisionTaken(cmd.seat, cmd.hand, "insurance", cmd.amount, cited)]
    if cmd.amount:
        raise RuleViolation("protocol", f"{cmd.action} takes no amount")
    if cmd.action == "stand":
        return [DecisionTaken(cmd.seat, cmd.hand, "stand", 0, cited), HandCompleted(cmd.seat, cmd.hand, "stand")]
    if cmd.action == "hit":
        return [DecisionTaken(cmd.seat, cmd.hand, "hit", 0, cited)]
    if len(cards) != 2:
        raise RuleViolation(f"game rules: {cmd.action}", f"{cmd.action} only on the first two cards of a hand")
    if cmd.action == "double":
        t = hand_totals.total(cards)[0]
        allowed = {"any_two": True, "9_10_11": 9 <= t <= 11, "10_11": 10 <= t <= 11}[rules.double_on]
        if not allowed:
            raise RuleViolation("ruleset double_on", f"doubling is allowed on {rules.double_on}, not on {t}")
        if hand.from_split and not rules.double_after_split:
            raise RuleViolation("ruleset double_after_split", "no doubling after a split at this table")
        return [DecisionTaken(cmd.seat, cmd.hand, "double", hand.stake, cited)]
    if not hand_totals.is_pair(cards, rules.split_by_value):
        raise RuleViolation("game rules: split", "only a pair may be split")
    if len(box.hands) >= rules.max_hands:
        raise RuleViolation("ruleset max_hands", f"a box may hold at most {rules.max_hands} hands")
    if hand.split_aces and not rules.resplit_aces:
        raise RuleViolation("ruleset resplit_aces", "split aces may not be split again")
    return [DecisionTaken(cmd.seat, cmd.hand, "split", hand.original, cited)]


# One entry per command type: a lookup, not a chain of type tests.
_DECIDE: dict[type, Callable[[BlackjackRules, BlackjackCoup, Any], list[AnyBlackjackEvent]]] = {
    OpenCoup: _open,
    CloseBetting: _close_betting,
    DealCard: _deal,
    Decide: _decide,
}


# ---- automatic steps ------------------------------------------------------


def _automatic(rules: BlackjackRules, s: BlackjackCoup) -> list[AnyBlackjackEvent]:
    if s.phase == "playing":
        cur = s.current()
        if cur is None:
            return []
        box = s.boxes[cur[0]]
        hand = box.hands[cur[1]]
        if hand.draw_due or len(hand.cards) < 2:
            return []
        cards = hand.codes
        if not hand.announced:
            first = len(cards) == 2 and not hand.from_split and not hand.draw_due
            t, soft = hand_totals.total(cards)
            clause = _clause(s.hole_card, "002 (5)" if first else "002 (6)", "003 7.4" if first else "003 7.5")
            return [TotalAnnounced(box.seat, cur[1], t, soft, clause)]
        reason = _finished(rules, hand, len(box.hands))
        return [HandCompleted(box.seat, cur[1], reason)] if reason else []
    if s.phase == "dealer":
        if s.hole_card and not s.dealer[1].face_up:
            # 002 (4)(d), (7): the hold card is turned only after all players have acted.
            return [HoleCardTurned(s.dealer[1].card, s.dealer[1].position, "002 (7)")]
        if awaiting(s, rules).kind == "card":
            return []
        t, soft = hand_totals.total(s.dealer_cards)
        clause = _clause(s.hole_card, "002 (7)", "003 7.6")
        return [TotalAnnounced(None, 0, t, soft, clause), _result(rules, s), _pickup(rules, s)]
    return []


def _finished(
    rules: BlackjackRules, hand: Hand, hands_in_box: int
) -> Literal["bust", "doubled", "split_aces", "blackjack", "twenty_one"] | None:
    cards = hand.codes
    t = hand_totals.total(cards)[0]
    if t > 21:
        return "bust"
    if hand.doubled:
        return "doubled"
    if hand.split_aces:
        # Split aces take one card each, unless a new pair of aces may be split again.
        may_resplit = rules.resplit_aces and hand_totals.is_pair(cards, False) and hands_in_box < rules.max_hands
        return None if may_resplit else "split_aces"
    if t == 21:
        return "blackjack" if hand_totals.is_blackjack(cards, hand.from_split) else "twenty_one"
    return None


def outcome(hand: Hand, dealer: tuple[Card, ...]) -> Outcome:
    """How one hand fares against the dealer's finished hand."""
    cards = hand.codes
    dealer_bj = hand_totals.is_blackjack(dealer)
    if hand_totals.is_blackjack(cards, hand.from_split):
        return "push" if dealer_bj else "blackjack"
    if dealer_bj or hand_totals.is_bust(cards):
        return "lose"
    p, d = hand_totals.total(cards)[0], hand_totals.total(dealer)[0]
    if d > 21 or p > d:
        return "win"
    return "push" if p == d else "lose"


def _result(rules: BlackjackRules, s: BlackjackCoup) -> CoupResulted:
    dealer = s.dealer_cards
    hands = tuple(
        HandResult(b.seat, i, outcome(h, dealer), hand_totals.total(h.codes)[0], h.stake, h.original)
        for b in s.boxes for i, h in enumerate(b.hands)
    )
    insured = tuple((b.seat, b.insurance) for b in s.boxes if b.insurance)
    return CoupResulted(hand_totals.total(dealer)[0], hand_totals.is_blackjack(dealer), hands, insured)


def _pickup(rules: BlackjackRules, s: BlackjackCoup) -> CardsPickedUp:
    return CardsPickedUp(pickup_order(rules, s, s.dealer_cards), "002 (8)" if rules.pickup == "dealer_first" else "003 7.7")


def pickup_order(rules: BlackjackRules, s: BlackjackCoup, dealer: Sequence[str]) -> tuple[str, ...]:
    """The order the coup's cards are picked up in, the dealer's being ``dealer``
    (002 (8): the dealer's first; 003 7.7: the players' first), each box's
    from the dealer's right."""
    players = tuple(p.card for b in reversed(s.boxes) for h in b.hands for p in h.cards)
    if rules.pickup == "dealer_first":
        return (*dealer, *players)
    return (*players, *dealer)


# ---- evolve ---------------------------------------------------------------


def evolve(state: BlackjackCoup, event: AnyBlackjackEvent) -> BlackjackCoup:
    """The coup after ``event``."""
    after = _EVOLVE.get(type(event))
    return state if after is None else after(state, event)


replace = msgspec.structs.replace


def _betting_closed(s: BlackjackCoup, e: BettingClosed) -> BlackjackCoup:
    return replace(s, boxes=tuple(Box(w.seat, w.amount, (Hand(w.amount, w.amount),)) for w in e.wagers), phase="dealing")


def _card_dealt(s: BlackjackCoup, e: CardDealt) -> BlackjackCoup:
    placed = Placed(e.card, e.position, e.face_up)
    s = replace(s, last_position=e.position)
    if e.seat is None:
        s = replace(s, dealer=s.dealer + (placed,))
    else:
        s = _with_hand(s, e.seat, e.hand, lambda h: replace(
            h, cards=h.cards + (placed,), draw_due=False, announced=h.announced and s.phase == "dealing"))
    if s.phase == "dealing" and len(s.dealer) + sum(len(b.hands[0].cards) for b in s.boxes) == initial_cards(s):
        return replace(s, phase="playing", turn=0)
    return s


def _total_announced(s: BlackjackCoup, e: TotalAnnounced) -> BlackjackCoup:
    return s if e.seat is None else _with_hand(s, e.seat, e.hand, lambda h: replace(h, announced=True))


def _hand_completed(s: BlackjackCoup, e: HandCompleted) -> BlackjackCoup:
    s = _with_hand(s, e.seat, e.hand, lambda h: replace(h, done=True))
    while s.turn < len(s.boxes) and all(h.done for h in s.boxes[s.turn].hands):
        s = replace(s, turn=s.turn + 1)
    return replace(s, phase="dealer") if s.turn >= len(s.boxes) else s


def _taken(s: BlackjackCoup, e: DecisionTaken) -> BlackjackCoup:
    r = msgspec.structs.replace
    i = _box_index(s, e.seat)
    box = r(s.boxes[i], acted=True) if e.action != "insurance" else r(s.boxes[i], insurance=e.amount)
    hands = list(box.hands)
    h = hands[e.hand]
    if e.action == "hit":
        hands[e.hand] = r(h, draw_due=True)
    elif e.action == "double":
        hands[e.hand] = r(h, stake=h.stake + e.amount, doubled=True, draw_due=True)
    elif e.action == "split":
        aces = rank(h.cards[0].card) == "A"
        first = r(h, cards=h.cards[:1], from_split=True, split_aces=aces, announced=False)
        second = Hand(h.original, h.original, h.cards[1:], from_split=True, split_aces=aces)
        hands[e.hand : e.hand + 1] = [first, second]
    return r(s, boxes=s.boxes[:i] + (r(box, hands=tuple(hands)),) + s.boxes[i + 1 :])


def _box_index(s: BlackjackCoup, seat: int) -> int:
    for i, b in enumerate(s.boxes):
        if b.seat == seat:
            return i
    raise LookupError(f"no box at seat {seat}")


def _with_hand(s: BlackjackCoup, seat: int, index: int, change: Callable[[Hand], Hand]) -> BlackjackCoup:
    r = msgspec.structs.replace
    i = _box_index(s, seat)
    box = s.boxes[i]
    hands = list(box.hands)
    hands[index] = change(hands[index])
    return r(s, boxes=s.boxes[:i] + (r(box, hands=tuple(hands)),) + s.boxes[i + 1 :])


# One entry per event type: a lookup, not a chain of type tests (the fold's hot path).
_EVOLVE: dict[type, Callable[[BlackjackCoup, Any], BlackjackCoup]] = {
    CoupOpened: lambda s, e: BlackjackCoup(coup_id=e.coup_id, phase="betting", hole_card=e.hole_card),
    BettingClosed: _betting_closed,
    CardDealt: _card_dealt,
    TotalAnnounced: _total_announced,
    DecisionTaken: lambda s, e: _taken(s, e),
    HandCompleted: _hand_completed,
    HoleCardTurned: lambda s, e: replace(s, dealer=tuple(replace(p, face_up=True) for p in s.dealer)),
    CoupResulted: lambda s, e: replace(s, result=e, phase="finished"),
    CardsPickedUp: lambda s, e: replace(s, pickup=e.cards),
}


def fold(events: Iterable[AnyBlackjackEvent], state: BlackjackCoup | None = None) -> BlackjackCoup:
    """Rebuild a coup from its events (a replay is exactly this fold)."""
    s = state or BlackjackCoup()
    for e in events:
        s = evolve(s, e)
    return s
