"""The baccarat coup aggregate: ``decide(rules, state, command)`` and ``evolve``.

A coup goes through betting, offers (the shoe under Methods C and D, the roles
under Style B), the deal, the handling of the cards by players (Methods B, C, D,
Style B), the dealer's turning over and announcing of the counts, the third-card
draws of the tableau, and the result. Steps the dealer takes without waiting for
anyone (making the next offer, announcing, the result and the pick-up) are
emitted together with the command that makes them due, so every recorded coup
is a complete, self-explaining sequence of facts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import msgspec

from casino.rules.aggregate import violation, with_follow_ups
from casino.rules.baccarat import offers, tableau
from casino.rules.baccarat.clauses import choice, clause
from casino.rules.baccarat.messages import (
    AnswerOffer,
    AnyBaccaratCommand,
    AnyBaccaratEvent,
    Approval,
    BettingClosed,
    CardDealt,
    CardsPassed,
    CardsPickedUp,
    CardsReturned,
    CardsTurnedOver,
    CloseBetting,
    CountAnnounced,
    CoupOpened,
    CoupResulted,
    DealCard,
    ExposeHand,
    ForfeitShoe,
    Hand,
    HandExposed,
    HandlingBreachReported,
    HolderAssigned,
    Offer,
    OfferAnswered,
    OfferMade,
    OfferOrder,
    OpenCoup,
    PassCards,
    PassShoe,
    ProcedureFellBack,
    ReportHandlingBreach,
    ReturnCards,
    ShoeGivenUp,
)
from casino.rules.cards import Card, is_card
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BaccaratRules
from casino.rules.settlement import settle_baccarat
from casino.rules.wagers import Wager, amount_on, check_book, own

Phase = Literal["new", "betting", "offers", "dealing", "handling", "drawing", "finished"]
HANDS: tuple[Hand, Hand] = ("player", "banker")
SHOE_METHODS = ("method_c", "method_d")
PASSING = ("method_b", "style_b")


class Dealt(msgspec.Struct, frozen=True, gc=False):
    """A card on the layout."""

    hand: Hand
    card: Card
    position: int
    face_up: bool
    by: int | None


class BaccaratCoup(msgspec.Struct, gc=False):
    """What is known about one baccarat coup from its events.

    ``evolve`` and ``step`` update a coup in place (each of a coup's dozen
    events would otherwise make a whole coup anew): ``copy`` keeps one as it
    is. Every field holds a value never changed in place (a tuple, not a
    list), so a copy of the coup is a copy of its fields."""

    coup_id: str = ""
    phase: Phase = "new"
    procedure: str = ""
    opened_as: str = ""
    approvals: tuple[Approval, ...] = ()
    wagers: tuple[Wager, ...] = ()
    offers_todo: tuple[Offer, ...] = ()
    offer: Offer | None = None
    order: tuple[int, ...] = ()
    chain: tuple[int, ...] = ()
    asked: int | None = None
    refusals: int = 0
    shoe_holder: int | None = None
    holder_player: str = ""  # who the holder is (the shoe goes with the player, not the seat)
    holder_plays: Hand | None = None
    player_holder: int | None = None
    banker_holder: int | None = None
    decided: tuple[Hand, ...] = ()
    handle_todo: tuple[Hand, ...] = ()
    out: Hand | None = None
    cards: tuple[Dealt, ...] = ()
    player: tuple[Card, ...] = ()  # the cards of each hand, in the order dealt
    banker: tuple[Card, ...] = ()
    result: CoupResulted | None = None
    pickup: tuple[Card, ...] = ()
    shoe_given_up: bool = False

    def hand(self, hand: Hand) -> tuple[Card, ...]:
        return self.player if hand == "player" else self.banker

    def holder(self, hand: Hand) -> int | None:
        """The seat handling ``hand``'s cards, None for the dealer."""
        if self.procedure in SHOE_METHODS:
            return self.shoe_holder if hand == self.holder_plays else None
        return self.player_holder if hand == "player" else self.banker_holder


class Awaiting(msgspec.Struct, frozen=True, gc=False):
    """What the coup waits for: ``close_betting``, ``answer`` (from ``seat``),
    ``card`` (for ``hand``, drawn by ``seat`` or the dealer), ``pass`` (the dealer
    passes ``hand`` to ``seat``), ``expose`` (``seat`` exposes or returns
    ``hand``), or ``nothing`` once the coup is finished."""

    kind: Literal["open", "close_betting", "answer", "card", "pass", "expose", "nothing"]
    seat: int | None = None
    hand: Hand | None = None
    offer: Offer | None = None
    face_up: bool = True


_OPEN, _CLOSE_BETTING, _NOTHING = Awaiting("open"), Awaiting("close_betting"), Awaiting("nothing")


def awaiting(state: BaccaratCoup) -> Awaiting:
    """The next thing this coup waits for."""
    s = state
    phase = s.phase
    if phase == "new":
        return _OPEN
    if phase == "betting":
        return _CLOSE_BETTING
    if s.asked is not None:
        return Awaiting("answer", seat=s.asked, offer=s.offer)
    due = _card_due(s)
    if due is not None:
        return Awaiting("card", _dealer_seat(s), due, None, _face_up(s))
    if phase == "handling" and s.handle_todo:
        h = s.handle_todo[0]
        seat = s.holder(h)
        if s.out is None and s.procedure in PASSING:
            return Awaiting("pass", seat=seat, hand=h)
        return Awaiting("expose", seat=seat, hand=h)
    return _NOTHING


def _card_due(s: BaccaratCoup) -> Hand | None:
    """The hand the next card goes to, if a card is what the coup waits for."""
    if s.phase == "dealing":
        return None if s.asked is not None else "player" if len(s.cards) % 2 == 0 else "banker"
    if s.phase == "drawing":
        return tableau.next_hand_to_draw(s.player, s.banker)
    return None


def pickup_order(s: BaccaratCoup, more: Sequence[str]) -> tuple[str, ...]:
    """The order the coup's cards are picked up in, ``more`` dealt after
    those on the layout: the order they were dealt in."""
    return (*(d.card for d in s.cards), *more)


def dealt_by_tableau(state: BaccaratCoup) -> bool:
    """Whether every card still due is drawn one after another by the tableau
    alone, nobody waited for: the third cards, and the initial deal too where no
    player handles the cards (Method A, Style A). The shoe may then draw them
    all at once (``tableau.another_card``)."""
    s = state
    return s.phase == "drawing" or (s.phase == "dealing" and not _to_handle(s))


def _dealer_seat(s: BaccaratCoup) -> int | None:
    return s.shoe_holder if s.procedure in SHOE_METHODS else None


def _face_up(s: BaccaratCoup) -> bool:
    if s.procedure in SHOE_METHODS:
        return False  # 000 8.19, 8.28: a player holding the shoe deals face down
    if s.phase == "drawing":
        return True  # third cards are dealt face up by the dealer
    return s.procedure in ("method_a", "style_a")  # 000 8.3.1, 001 8.6; B and 001 8.12 face down


# ---- decide ---------------------------------------------------------------


def copy(state: BaccaratCoup) -> BaccaratCoup:
    """A coup of its own, equal to ``state``: what ``evolve`` does to one leaves the other as it is."""
    return replace(state)


def decide(rules: BaccaratRules, state: BaccaratCoup, command: AnyBaccaratCommand) -> list[AnyBaccaratEvent]:
    """The events ``command`` causes, or ``RuleViolation`` naming the clause; ``state`` is left as it is."""
    return step(rules, copy(state), command)[0]


def step(rules: BaccaratRules, state: BaccaratCoup, command: AnyBaccaratCommand) -> tuple[list[AnyBaccaratEvent], BaccaratCoup]:
    """``decide``, and ``state`` moved on in place by its events (the same as
    ``fold(decide(...), state)``); refused, ``state`` is left as it was."""
    return with_follow_ups(_primary(rules, state, command), state, _EVOLVE, _automatic, rules)


def check(rules: BaccaratRules, state: BaccaratCoup, command: AnyBaccaratCommand) -> RuleViolation | None:
    """Whether ``command`` is allowed now; the violation names the clause."""
    return violation(lambda: _primary(rules, state, command))


def _primary(rules: BaccaratRules, s: BaccaratCoup, cmd: AnyBaccaratCommand) -> list[AnyBaccaratEvent]:
    handle = _DECIDE.get(type(cmd))
    if handle is None:
        raise RuleViolation("protocol", f"unknown baccarat command {type(cmd).__name__}")
    return handle(rules, s, cmd)


def _close_betting(rules: BaccaratRules, s: BaccaratCoup, cmd: CloseBetting) -> list[AnyBaccaratEvent]:
    _expect(s, "close_betting", "betting is not open")
    return [BettingClosed(check_book(rules.table, rules.limits, cmd.wagers))]


def _report_breach(rules: BaccaratRules, s: BaccaratCoup, cmd: ReportHandlingBreach) -> list[AnyBaccaratEvent]:
    _check_handler(s, cmd.seat, cmd.hand, "breach")
    return [HandlingBreachReported(cmd.hand, cmd.seat, cmd.note, clause("breach", s.procedure))]


def _expect(s: BaccaratCoup, kind: str, why: str, clause_: str = "coup") -> Awaiting:
    a = awaiting(s)
    if a.kind != kind:
        raise RuleViolation(clause_, f"{why} (the coup is waiting for: {a.kind})")
    return a


def _has(approvals: Iterable[Approval], rules: BaccaratRules, what: str) -> bool:
    needed = rules.approvals.get(what)
    return needed is None or any(a.what == what and a.by == needed for a in approvals)


def _open(rules: BaccaratRules, s: BaccaratCoup, cmd: OpenCoup) -> list[AnyBaccaratEvent]:
    _expect(s, "open", "the coup is already open")
    procedure = cmd.procedure
    if procedure == "style_c":
        if rules.style_c == "refused" or "style_c" not in rules.procedures:
            raise RuleViolation("001 8.5", "Style C is named but its text is not in our copy; it is refused by this ruleset")
        procedure = "style_b" if rules.style_c == "as_style_b" else "style_a"
    elif procedure not in rules.procedures:
        raise RuleViolation(choice(procedure), f"{procedure} is not a procedure this table may use ({', '.join(rules.procedures)})")
    needs_b = procedure == "method_b" or (procedure in SHOE_METHODS and rules.fallback_method == "method_b")
    if needs_b and not _has(cmd.approvals, rules, "method_b"):
        raise RuleViolation("000 8.4", "Method B needs the prior approval of an inspector")
    if procedure == "style_b" and not _has(cmd.approvals, rules, "style_b"):
        raise RuleViolation("001 8.5", "Style B needs approval under this ruleset")
    if cmd.shoe_style is not None and procedure.startswith("style") and cmd.shoe_style != procedure:
        if rules.shoe.shuffler != "continuous_shuffler":
            raise RuleViolation("001 8.5", f"a game dealt from a shoe continues in {cmd.shoe_style} until it ends")
        if not _has(cmd.approvals, rules, "style_change") or "style_change" not in rules.approvals:
            raise RuleViolation("001 8.5", "on a continuous shuffler the style changes only by approved procedure")
    if cmd.in_force and procedure != cmd.in_force and not cmd.supervisor:
        raise RuleViolation(choice(procedure), f"the table deals by {cmd.in_force}; dealing by {procedure} is the "
                                               f"casino's choice, directed by a supervisor on their own credential, "
                                               f"never by a table's terminal")
    holder = cmd.shoe_holder
    if holder is not None:
        rules.table.check_seat(holder)
        if procedure != "method_c":
            # 000 8.18: the holder keeps the shoe until passing it, losing or being directed to forfeit it.
            raise RuleViolation("000 8.18", f"seat {holder} holds the shoe under Method C; it is passed (000 8.18) "
                                            f"or forfeited at a supervisor's direction (000 8.20) before a coup "
                                            f"is dealt by {procedure}")
    return [CoupOpened(cmd.coup_id, procedure, cmd.approvals, holder, clause("procedure", procedure),
                       cmd.shoe_holder_player if holder is not None else "", cmd.in_force, cmd.supervisor)]


def _answer(rules: BaccaratRules, s: BaccaratCoup, cmd: AnswerOffer) -> list[AnyBaccaratEvent]:
    a = _expect(s, "answer", "nothing is being offered")
    if cmd.seat != a.seat:
        raise RuleViolation(clause("order", s.procedure), f"the offer is to seat {a.seat}, not seat {cmd.seat}")
    offer = s.offer or "shoe"
    plays: Hand = cmd.plays if offer == "shoe" else ("player" if offer == "player" else "banker")
    if cmd.accept and offer == "shoe" and plays == "player" and not _has(s.approvals, rules, "holder_plays_player"):
        raise RuleViolation(clause("plays_player", s.procedure), "playing Player's Hand needs a casino supervisor's prior approval")
    events: list[AnyBaccaratEvent] = [OfferAnswered(offer, cmd.seat, cmd.accept, plays)]
    if cmd.accept:
        events.append(HolderAssigned(offer, cmd.seat, plays, clause("holder", s.procedure), _player_at(s, cmd.seat)))
    return events


def _player_at(s: BaccaratCoup, seat: int) -> str:
    """Who wagers at ``seat`` as the player seated there (empty where the table records no one)."""
    return next((w.player for w in own(s.wagers) if w.seat == seat and w.player), "")


def _deal(rules: BaccaratRules, s: BaccaratCoup, cmd: DealCard) -> list[AnyBaccaratEvent]:
    hand = _card_due(s)
    if hand is None:
        raise RuleViolation("tableau", f"no card is due (the coup is waiting for: {awaiting(s).kind})")
    if not is_card(cmd.card):
        raise RuleViolation("shoe", f"{cmd.card!r} is not a card")
    seat = _dealer_seat(s)
    if cmd.by != seat:
        who = "the dealer" if seat is None else f"the player in seat {seat}"
        raise RuleViolation(clause("deals", s.procedure), f"this card must be drawn by {who}")
    face_up = _face_up(s)
    events: list[AnyBaccaratEvent] = [CardDealt(hand, cmd.card, cmd.position, face_up, cmd.by,
                                                clause("dealt", s.procedure))]
    if s.phase == "drawing":
        if not face_up:
            events.append(CardsTurnedOver(hand, (cmd.position,), clause("turn_over", s.procedure)))
        after = tableau.points(s.hand(hand) + (cmd.card,))
        events.append(CountAnnounced(hand, after, clause("announce", s.procedure)))
    return events


def _pass(rules: BaccaratRules, s: BaccaratCoup, cmd: PassCards) -> list[AnyBaccaratEvent]:
    if s.out is not None:
        raise RuleViolation("000 8.11", f"only one hand may be handled at a time: the {s.out}'s cards are out")
    a = awaiting(s)
    if s.procedure not in PASSING:
        raise RuleViolation(clause("deals", s.procedure), f"cards are not passed to players under {s.procedure}")
    if a.kind != "pass" or a.hand != cmd.hand:
        raise RuleViolation("000 8.11", f"the {cmd.hand}'s cards are not due to be passed now")
    assert a.seat is not None
    return [CardsPassed(cmd.hand, a.seat, clause("pass", s.procedure))]


def _check_handler(s: BaccaratCoup, seat: int, hand: Hand, step: str) -> None:
    a = awaiting(s)
    if a.kind != "expose" or a.hand != hand or a.seat != seat:
        raise RuleViolation(clause(step, s.procedure), f"seat {seat} is not the player designated to handle the {hand}'s cards now")


def _give_back(rules: BaccaratRules, s: BaccaratCoup, cmd: ExposeHand | ReturnCards) -> list[AnyBaccaratEvent]:
    _check_handler(s, cmd.seat, cmd.hand, "expose")
    if isinstance(cmd, ExposeHand):
        return [HandExposed(cmd.hand, cmd.seat, clause("expose", s.procedure))]
    return [CardsReturned(cmd.hand, cmd.seat, clause("return", s.procedure))]


def _give_up_shoe(rules: BaccaratRules, s: BaccaratCoup, cmd: PassShoe | ForfeitShoe) -> list[AnyBaccaratEvent]:
    c = clause("forfeit", s.opened_as) if isinstance(cmd, ForfeitShoe) else "000 8.18"
    if s.shoe_holder != cmd.seat or s.shoe_given_up:
        raise RuleViolation(c, f"seat {cmd.seat} does not hold the shoe")
    given_up = (ShoeGivenUp(cmd.seat, "forfeited", c, cmd.supervisor, s.holder_player) if isinstance(cmd, ForfeitShoe)
                else ShoeGivenUp(cmd.seat, "passed", c, player=s.holder_player))
    if s.phase == "dealing" and not s.cards:
        return [given_up, ProcedureFellBack(rules.fallback_method, c)]
    if s.phase not in ("betting", "finished"):
        raise RuleViolation(c, "the shoe changes hands between coups or before the first card")
    return [given_up]


# One entry per command type: a lookup, not a chain of type tests.
_DECIDE: dict[type, Callable[[BaccaratRules, BaccaratCoup, Any], list[AnyBaccaratEvent]]] = {
    OpenCoup: _open,
    CloseBetting: _close_betting,
    AnswerOffer: _answer,
    DealCard: _deal,
    PassCards: _pass,
    ExposeHand: _give_back,
    ReturnCards: _give_back,
    ReportHandlingBreach: _report_breach,
    PassShoe: _give_up_shoe,
    ForfeitShoe: _give_up_shoe,
}


# ---- automatic steps ------------------------------------------------------


def _automatic(rules: BaccaratRules, s: BaccaratCoup) -> list[AnyBaccaratEvent]:
    """The next step the dealer takes without waiting for anyone, if any."""
    if s.offer is not None and s.asked is None:
        if s.chain:
            return [OfferMade(s.offer, s.chain[0], _offer_clause(s))]
        why = "all_declined" if s.refusals else "no_wager"
        done: list[AnyBaccaratEvent] = [HolderAssigned(s.offer, None, None, clause(why, s.procedure))]
        if s.offer == "shoe":
            done.append(ProcedureFellBack(rules.fallback_method, clause(why, s.procedure)))
        return done
    phase = s.phase
    if phase == "drawing":
        return _result(rules, s) if _card_due(s) is None else []
    if phase == "dealing":
        return []
    if phase == "offers" and s.offer is None and s.offers_todo:
        return _start_offer(rules, s, s.offers_todo[0])
    if phase == "handling" and s.offer is None and s.out is None:
        if s.handle_todo:
            h = s.handle_todo[0]
            if s.procedure == "method_b" and h not in s.decided:
                return _start_offer(rules, s, h)
            return []
        return _turn_over_and_announce(s)
    return []


def _offer_clause(s: BaccaratCoup) -> str:
    """Why the offer goes to the next seat: the highest stake (000 8.5, 001 8.9(a)),
    equal stakes in seat order (000 8.7-8.8, 001 8.9(b)), or the next highest
    stake after refusals (000 8.6, 001 8.9(c))."""
    if s.offer == "shoe":
        return clause("order", s.procedure)
    stake = {seat: amount_on(own(s.wagers), seat, s.offer or "") for seat in s.order}
    seat = s.chain[0]
    if s.refusals == 0:
        tied = sum(1 for a in stake.values() if a == stake[seat]) > 1
        return clause("first_tied" if tied else "first", s.procedure)
    before = s.order[s.refusals - 1]
    return clause("next_equal" if stake[before] == stake[seat] else "next_lower", s.procedure)


def _start_offer(rules: BaccaratRules, s: BaccaratCoup, offer: Offer) -> list[AnyBaccaratEvent]:
    table, w = rules.table, own(s.wagers)  # the seated players' own wagers: back bets are offered nothing
    if offer == "shoe":
        if s.shoe_holder is not None:
            if not any(x.seat == s.shoe_holder for x in w):
                # 000 8.15: the shoe is offered only to a player who has placed a wager; a holder
                # without one gives it up, and it is offered afresh.
                return [ShoeGivenUp(s.shoe_holder, "no_wager", "000 8.15", player=s.holder_player)]
            if s.holder_player and _player_at(s, s.shoe_holder) not in ("", s.holder_player):
                # 000 8.18: the shoe is the player's who accepted it, not the seat's. He has left it and
                # another player wagers there: given up, and offered afresh (8.15).
                return [ShoeGivenUp(s.shoe_holder, "left", "000 8.18", player=s.holder_player)]
            return [HolderAssigned("shoe", s.shoe_holder, s.holder_plays or "banker", "000 8.18", s.holder_player)]
        order = offers.method_c_shoe(table, w) if s.procedure == "method_c" else offers.method_d_shoe(table, w)
    elif s.procedure == "style_b":
        order = offers.style_b_role(table, w, offer)
    else:
        order = offers.method_b_cards(table, w, offer)
    return [OfferOrder(offer, order, clause("order", s.procedure))]


def _turn_over_and_announce(s: BaccaratCoup) -> list[AnyBaccaratEvent]:
    events: list[AnyBaccaratEvent] = []
    down = [d for d in s.cards if not d.face_up]
    for h in HANDS if down else ():
        positions = tuple([d.position for d in down if d.hand == h])
        if positions:
            unfilled = s.procedure == "style_b" and s.holder(h) is None  # no Banker or Player: the setting decides
            events.append(CardsTurnedOver(h, positions, clause("turn_over_unfilled" if unfilled else "turn_over",
                                                               s.procedure)))
    announce = clause("announce", s.procedure)
    events.append(CountAnnounced("player", tableau.points(s.player), announce))  # Player's count first
    events.append(CountAnnounced("banker", tableau.points(s.banker), announce))
    return events


def _result(rules: BaccaratRules, s: BaccaratCoup) -> list[AnyBaccaratEvent]:
    p, b = s.player, s.banker
    player_points, banker_points = tableau.points(p), tableau.points(b)
    won: Literal["player", "banker", "tie"] = (
        "player" if player_points > banker_points else "banker" if banker_points > player_points else "tie")
    events: list[AnyBaccaratEvent] = [
        CoupResulted(won, player_points, banker_points, tableau.is_natural(p, b), tableau.is_pair(p),
                     tableau.is_pair(b)),
        CardsPickedUp(pickup_order(s, ())),
    ]
    if s.procedure == "method_c" and s.shoe_holder is not None and _holder_loses(rules, s, events[0]):
        events.append(ShoeGivenUp(s.shoe_holder, "lost", "000 8.18", player=s.holder_player))
    return events


def _holder_loses(rules: BaccaratRules, s: BaccaratCoup, result: AnyBaccaratEvent) -> bool:
    """000 8.18 "the player's wager loses", as the ruleset reads it
    (``holder_loses_shoe``): any of the holder's own wagers losing (the
    default: Banker and Player wagers push on a tie, a Tie or pair wager loses
    unless it comes), or the hand the holder plays losing."""
    assert isinstance(result, CoupResulted)
    if rules.holder_loses_shoe == "hand_played":
        return result.winner not in ("tie", s.holder_plays)
    mine = [w for w in own(s.wagers) if w.seat == s.shoe_holder]
    return any(p.returned == 0 for p in settle_baccarat(rules, mine, result))


# ---- evolve ---------------------------------------------------------------


def evolve(state: BaccaratCoup, event: AnyBaccaratEvent) -> BaccaratCoup:
    """The coup after ``event``: ``state`` itself, updated in place, or a new coup."""
    after = _EVOLVE.get(type(event))
    return state if after is None else after(state, event)


replace = msgspec.structs.replace


def _opened(s: BaccaratCoup, e: CoupOpened) -> BaccaratCoup:
    return BaccaratCoup(coup_id=e.coup_id, phase="betting", procedure=e.procedure, opened_as=e.procedure,
                        approvals=e.approvals, shoe_holder=e.shoe_holder, holder_player=e.shoe_holder_player,
                        holder_plays="banker" if e.shoe_holder is not None else None)


def _betting_closed(s: BaccaratCoup, e: BettingClosed) -> BaccaratCoup:
    todo: tuple[Offer, ...] = (("shoe",) if s.procedure in SHOE_METHODS
                               else ("banker", "player") if s.procedure == "style_b" else ())
    s.wagers, s.offers_todo, s.phase = e.wagers, todo, "offers" if todo else "dealing"
    return s


def _offer_order(s: BaccaratCoup, e: OfferOrder) -> BaccaratCoup:
    if s.offers_todo[:1] == (e.offer,):
        s.offers_todo = s.offers_todo[1:]
    s.offer, s.order, s.chain, s.refusals = e.offer, e.seats, e.seats, 0
    return s


def _offer_made(s: BaccaratCoup, e: OfferMade) -> BaccaratCoup:
    s.asked = e.seat
    return s


def _offer_answered(s: BaccaratCoup, e: OfferAnswered) -> BaccaratCoup:
    s.asked = None
    if not e.accepted:
        s.chain, s.refusals = s.chain[1:], s.refusals + 1
    return s


def _fell_back(s: BaccaratCoup, e: ProcedureFellBack) -> BaccaratCoup:
    s.procedure, s.shoe_holder, s.holder_plays, s.phase = e.procedure, None, None, "dealing"
    return s


def _card_dealt(s: BaccaratCoup, e: CardDealt) -> BaccaratCoup:
    s.cards += (Dealt(e.hand, e.card, e.position, e.face_up, e.by),)
    if e.hand == "player":
        s.player += (e.card,)
    else:
        s.banker += (e.card,)
    if s.phase == "dealing" and len(s.cards) == 4:
        s.phase, s.handle_todo = "handling", _to_handle(s)
    return s


def _cards_passed(s: BaccaratCoup, e: CardsPassed) -> BaccaratCoup:
    s.out = e.hand
    return s


def _hand_exposed(s: BaccaratCoup, e: HandExposed) -> BaccaratCoup:
    s.cards = tuple(replace(d, face_up=True) if d.hand == e.hand else d for d in s.cards)
    s.out, s.handle_todo = None, s.handle_todo[1:]
    return s


def _cards_returned(s: BaccaratCoup, e: CardsReturned) -> BaccaratCoup:
    s.out, s.handle_todo = None, s.handle_todo[1:]
    return s


def _turned_over(s: BaccaratCoup, e: CardsTurnedOver) -> BaccaratCoup:
    s.cards = tuple(replace(d, face_up=True) if d.position in e.positions else d for d in s.cards)
    return s


def _announced(s: BaccaratCoup, e: CountAnnounced) -> BaccaratCoup:
    if s.phase == "handling" and e.hand == "banker":
        s.phase = "drawing"
    return s


def _resulted(s: BaccaratCoup, e: CoupResulted) -> BaccaratCoup:
    s.result, s.phase = e, "finished"
    return s


def _picked_up(s: BaccaratCoup, e: CardsPickedUp) -> BaccaratCoup:
    s.pickup = e.cards
    return s


def _shoe_given_up(s: BaccaratCoup, e: ShoeGivenUp) -> BaccaratCoup:
    s.shoe_given_up = True
    if s.phase != "finished":
        s.shoe_holder, s.holder_player = None, ""
    return s


def _assigned(s: BaccaratCoup, e: HolderAssigned) -> BaccaratCoup:
    s.offer, s.chain, s.asked = None, (), None
    if e.offer == "shoe":
        if e.seat is not None:
            s.shoe_holder, s.holder_plays, s.phase, s.shoe_given_up = e.seat, e.plays, "dealing", False
            s.holder_player = e.player
        return s
    if e.offer == "player":
        s.player_holder = e.seat
    else:
        s.banker_holder = e.seat
    s.decided += (e.offer,)
    if s.phase == "offers" and not s.offers_todo:
        s.phase = "dealing"
    elif s.phase == "handling" and e.seat is None:
        s.handle_todo = s.handle_todo[1:]
    return s


# One entry per event type: a lookup, not a chain of type tests (the fold's hot path).
_EVOLVE: dict[type, Callable[[BaccaratCoup, Any], BaccaratCoup]] = {
    CoupOpened: _opened,
    BettingClosed: _betting_closed,
    OfferOrder: _offer_order,
    OfferMade: _offer_made,
    OfferAnswered: _offer_answered,
    HolderAssigned: _assigned,
    ProcedureFellBack: _fell_back,
    CardDealt: _card_dealt,
    CardsPassed: _cards_passed,
    HandExposed: _hand_exposed,
    CardsReturned: _cards_returned,
    CardsTurnedOver: _turned_over,
    CountAnnounced: _announced,
    CoupResulted: _resulted,
    CardsPickedUp: _picked_up,
    ShoeGivenUp: _shoe_given_up,
}


def _to_handle(s: BaccaratCoup) -> tuple[Hand, ...]:
    if s.procedure == "method_b":
        return HANDS
    if s.procedure in SHOE_METHODS:
        return () if s.shoe_holder is None or s.holder_plays is None else (s.holder_plays,)
    if s.player_holder is None:
        return () if s.banker_holder is None else ("banker",)
    return HANDS if s.banker_holder is not None else ("player",)


def fold(events: Iterable[AnyBaccaratEvent], state: BaccaratCoup | None = None) -> BaccaratCoup:
    """Rebuild a coup from its events (a replay is exactly this fold), from
    a new coup or on from ``state`` (left as it is)."""
    s = BaccaratCoup() if state is None else copy(state)
    for e in events:
        s = evolve(s, e)
    return s


def shoe_holder_after(state: BaccaratCoup) -> int | None:
    """The seat of the player who keeps the shoe into the next coup (000 8.18; Method C only)."""
    if state.procedure != "method_c" or state.shoe_given_up:
        return None
    return state.shoe_holder


def shoe_holder_player_after(state: BaccaratCoup) -> str:
    """Who keeps the shoe into the next coup: the player, as the table records him."""
    return state.holder_player if shoe_holder_after(state) is not None else ""
