"""The games the casino deals, one entry each: what the dealer-policy,
settlement and verification need of a game, over its pure rules
(``casino.rules.<game>``). A game is added here, and nowhere else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal, NamedTuple

import msgspec

from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.rules import settlement
from casino.rules import wagerbook as wager_book
from casino.rules.baccarat import coup as baccarat
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import coup as blackjack
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.blackjack.messages import Action
from casino.rules.cards import Card
from casino.rules.errors import RuleViolation
from casino.rules.incidents import voided
from casino.rules.ruleset import BaccaratRules, BlackjackRules, Ruleset
from casino.rules.runs import RUN, DealerRun, Run, TableauRun, pickup_of
from casino.rules.settlement import Payout
from casino.rules.wagers import Wager
from casino.store.envelope import AnyEvent, CoupConfigured

# The coup aggregate of any game (each game's own frozen state).
Coup = baccarat.BaccaratCoup | blackjack.BlackjackCoup


class Carry(NamedTuple):
    """What a finished coup leaves to the next at its table: the shoe holder
    (000 8.18), the style in force with the shoe it is in force on (001 8.5)
    and the procedure the table deals by until a supervisor directs another
    (000 8.2, 001 8.5: the casino's choice, not a terminal's)."""

    holder: int | None = None
    style: str = ""
    style_shoe: str = ""
    holder_player: str = ""  # who the holder is: the shoe goes with the player (000 8.18)
    procedure: str = ""


class Step(NamedTuple):
    """A coup's next step, as its game decides it (``Game.next_step``):
    ``draw`` the cards due, ``pass`` the cards of a hand, ``await`` a player
    (or a decision), or ``finished``."""

    kind: Literal["draw", "pass", "await", "finished"]
    waiting: commands.Waiting  # what the table is told the coup waits for: for whom a card is, whose hand is passed
    first: int = 0  # draw: the index in the coup of the first card due (0 first)
    due: int = 0  # draw: how many cards are certainly due, whatever they turn out to be
    run: Run | None = None  # draw: how the run goes on past them by the game's rule alone (None: it does not)


class Game(ABC):
    """One game: its coup aggregate, the commands the dealer gives it, and how
    its recorded events are decided again and paid."""

    name: ClassVar[str]
    rules_type: ClassVar[type]
    result_type: ClassVar[type]  # the event that holds a coup's result
    betting_closed: ClassVar[type]  # the event that holds the wagers the coup deals to
    card_dealt: ClassVar[type]  # the event of a card dealt from the shoe
    # The command each recorded event implies, by the event's type (verification
    # decides it again; a coup has dozens of events to turn back into commands).
    command_of: ClassVar[dict[type, Callable[[Any], Any]]]

    @abstractmethod
    def new(self) -> Coup:
        """A coup not yet opened."""

    @abstractmethod
    def step(self, rules: Any, state: Any, command: Any) -> tuple[list[Any], Any]:
        """The events ``command`` causes and the coup after them, ``state``
        moved on in place (``RuleViolation`` if refused, ``state`` as it was)."""

    @abstractmethod
    def decide(self, rules: Any, state: Any, command: Any) -> list[Any]:
        """The events ``command`` causes (``RuleViolation`` if refused); ``state`` is left as it is."""

    @abstractmethod
    def evolve(self, state: Any, event: Any) -> Coup:
        """The coup after ``event``: ``state`` updated in place, or a new coup."""

    @abstractmethod
    def copy(self, state: Any) -> Coup:
        """A coup equal to ``state`` that what ``evolve`` does to ``state`` leaves as it is."""

    @abstractmethod
    def waiting(self, rules: Any, state: Any) -> commands.Waiting:
        """What the coup waits for, as the table terminal is told."""

    @abstractmethod
    def opening(self, rules: Any, config: TableConfig, coup: str, procedure: str, carry: Carry,
                shoe: str, supervisor: str = "") -> Any:
        """The command that opens coup ``coup`` from shoe ``shoe``, by
        ``procedure`` (empty: the one in force), directed by ``supervisor``
        when it came on a supervisor's own subject."""

    @abstractmethod
    def close_betting(self, wagers: tuple[Wager, ...]) -> Any: ...

    @abstractmethod
    def deal(self, card: Card, position: int, seat: int | None) -> Any:
        """A card from the shoe's ``position``, drawn by ``seat`` (None: the dealer)."""

    @abstractmethod
    def from_terminal(self, command: commands.CoupCommand) -> Any:
        """The game's command for a table terminal's command; refused if it has none."""

    @abstractmethod
    def cards_dealt(self, state: Any) -> int: ...

    @abstractmethod
    def cards_due(self, state: Any) -> int:
        """How many cards are certainly due now, whatever they turn out to be."""

    @abstractmethod
    def payouts(self, rules: Any, book: wager_book.Book, result: Any) -> tuple[Payout, ...]:
        """Every wager of ``book`` paid by ``result``; the stakes the coup played
        with must be the book's."""

    def carry(self, state: Any, shoe: str, carried: Carry) -> Carry:
        """What the finished coup ``state`` (dealt from ``shoe``) leaves to the next."""
        return carried

    def pass_cards(self, hand: str) -> Any:
        raise RuleViolation("coup", f"no cards are passed in {self.name}")

    def extra(self, event: Any, table: str, coup: str, cause: str) -> commands.PlaceExtra | None:
        """The extra stake (a double, a split, insurance) the event recorded
        for ``cause`` calls for, if any: what the wager book is asked to book."""
        return None

    def run(self, rules: Any, state: Any) -> Run | None:
        """How a draw of the cards now due goes on, one card after another, by
        the game's rule alone (nobody waited for); None where it does not."""
        return None

    def next_step(self, rules: Any, state: Any) -> Step:
        """The coup's next step: the one place the dealing's order is decided.
        The dealer-policy takes the steps a dealer takes (``draw``, ``pass``)
        until one waits for somebody; a card-reading shoe's card is taken where
        the step is ``draw``."""
        waiting = self.waiting(rules, state)
        if waiting.kind == "card":
            return Step("draw", waiting, self.cards_dealt(state), self.cards_due(state), self.run(rules, state))
        if waiting.kind == "pass" and waiting.hand is not None:
            return Step("pass", waiting)
        return Step("finished" if waiting.kind == "finished" else "await", waiting)

    def procedure(self, state: Any) -> str:
        """The dealing procedure of the coup (a metric's label), if the game has several."""
        return ""


def _not_for(game: str, command: commands.CoupCommand) -> RuleViolation:
    return RuleViolation("protocol", f"{type(command).__name__} is not a {game} command")


class Baccarat(Game):
    name = "baccarat"
    rules_type = BaccaratRules
    result_type = baccarat_messages.CoupResulted
    betting_closed = baccarat_messages.BettingClosed
    card_dealt = baccarat_messages.CardDealt
    command_of: ClassVar[dict[type, Callable[[Any], Any]]] = {
        baccarat_messages.CoupOpened: lambda e: baccarat_messages.OpenCoup(
            e.coup_id, e.procedure, e.approvals, None, e.shoe_holder, e.shoe_holder_player, e.in_force, e.supervisor),
        baccarat_messages.BettingClosed: lambda e: baccarat_messages.CloseBetting(e.wagers),
        baccarat_messages.OfferAnswered: lambda e: baccarat_messages.AnswerOffer(e.seat, e.accepted, e.plays),
        baccarat_messages.CardDealt: lambda e: baccarat_messages.DealCard(e.card, e.position, e.by),
        baccarat_messages.CardsPassed: lambda e: baccarat_messages.PassCards(e.hand),
        baccarat_messages.HandExposed: lambda e: baccarat_messages.ExposeHand(e.seat, e.hand),
        baccarat_messages.CardsReturned: lambda e: baccarat_messages.ReturnCards(e.seat, e.hand),
        baccarat_messages.HandlingBreachReported: lambda e: baccarat_messages.ReportHandlingBreach(
            e.seat, e.hand, e.note),
        baccarat_messages.ShoeGivenUp: lambda e: baccarat_messages.PassShoe(e.seat) if e.reason == "passed"
        else baccarat_messages.ForfeitShoe(e.seat, e.supervisor),
    }

    new = staticmethod(baccarat.BaccaratCoup)
    step = staticmethod(baccarat.step)
    decide = staticmethod(baccarat.decide)
    evolve = staticmethod(baccarat.evolve)
    copy = staticmethod(baccarat.copy)

    def waiting(self, rules: Any, state: Any) -> commands.Waiting:
        next_ = baccarat.awaiting(state)
        kind = "finished" if next_.kind == "nothing" else next_.kind
        holder = baccarat.shoe_holder_after(state) if state.phase == "finished" else state.shoe_holder
        return commands.Waiting(kind, next_.seat, next_.hand, offer=next_.offer, shoe_holder=holder)

    def opening(self, rules: Any, config: TableConfig, coup: str, procedure: str, carry: Carry,
                shoe: str, supervisor: str = "") -> Any:
        # 001 8.5: the style in force on the shoe; a continuous shuffler deals each round from a new one
        continuous = rules.shoe.shuffler == "continuous_shuffler"
        style = (carry.style or None) if carry.style_shoe == shoe or continuous else None
        # The procedure in force: the last coup's, else the tables file's, else the ruleset's first.
        in_force = carry.procedure or config.procedure or rules.procedures[0]
        return baccarat_messages.OpenCoup(coup, procedure or in_force, config.approvals, style, carry.holder,
                                          carry.holder_player, in_force, supervisor)

    def carry(self, state: Any, shoe: str, carried: Carry) -> Carry:
        style, style_shoe = carried.style, carried.style_shoe
        if state.opened_as.startswith("style"):
            style, style_shoe = state.opened_as, shoe
        return Carry(baccarat.shoe_holder_after(state), style, style_shoe, baccarat.shoe_holder_player_after(state),
                     state.opened_as)

    def close_betting(self, wagers: tuple[Wager, ...]) -> Any:
        return baccarat_messages.CloseBetting(wagers)

    def deal(self, card: Card, position: int, seat: int | None) -> Any:
        return baccarat_messages.DealCard(card, position, seat)

    def pass_cards(self, hand: str) -> Any:
        return baccarat_messages.PassCards("player" if hand == "player" else "banker")

    def from_terminal(self, command: commands.CoupCommand) -> Any:
        match command:
            case commands.AnswerOffer():
                return baccarat_messages.AnswerOffer(command.seat, command.accept, command.plays)
            case commands.ExposeHand():
                return baccarat_messages.ExposeHand(command.seat, command.hand)
            case commands.ReturnCards():
                return baccarat_messages.ReturnCards(command.seat, command.hand)
            case commands.ReportHandlingBreach():
                return baccarat_messages.ReportHandlingBreach(command.seat, command.hand, command.note)
            case commands.PassShoe():
                return baccarat_messages.PassShoe(command.seat)
            case commands.ForfeitShoe():
                return baccarat_messages.ForfeitShoe(command.seat, command.supervisor)
        raise _not_for(self.name, command)

    def cards_dealt(self, state: Any) -> int:
        return len(state.cards)

    def cards_due(self, state: Any) -> int:
        # The rest of the initial deal; after it one at a time: the tableau decides
        # on each (a run the tableau alone decides is drawn on by the shoe).
        return 4 - len(state.cards) if state.phase == "dealing" else 1

    def run(self, rules: Any, state: Any) -> Run | None:
        if not baccarat.dealt_by_tableau(state):
            return None
        return TableauRun(pickup_of(baccarat.pickup_order(state, (RUN,))))

    def procedure(self, state: Any) -> str:
        return str(state.procedure)

    def payouts(self, rules: Any, book: wager_book.Book, result: Any) -> tuple[Payout, ...]:
        return settlement.settle_baccarat(rules, book.wagers, result)


class Blackjack(Game):
    name = "blackjack"
    rules_type = BlackjackRules
    result_type = blackjack_messages.CoupResulted
    betting_closed = blackjack_messages.BettingClosed
    card_dealt = blackjack_messages.CardDealt
    command_of: ClassVar[dict[type, Callable[[Any], Any]]] = {
        blackjack_messages.CoupOpened: lambda e: blackjack_messages.OpenCoup(e.coup_id),
        blackjack_messages.BettingClosed: lambda e: blackjack_messages.CloseBetting(e.wagers),
        blackjack_messages.CardDealt: lambda e: blackjack_messages.DealCard(e.card, e.position),
        blackjack_messages.DecisionTaken: lambda e: blackjack_messages.Decide(
            e.seat, e.hand, e.action, e.amount if e.action == "insurance" else 0),
    }
    ACTIONS: ClassVar[tuple[Action, ...]] = ("stand", "hit", "double", "split", "insurance")

    new = staticmethod(blackjack.BlackjackCoup)
    step = staticmethod(blackjack.step)
    decide = staticmethod(blackjack.decide)
    evolve = staticmethod(blackjack.evolve)
    copy = staticmethod(blackjack.copy)

    def waiting(self, rules: Any, state: Any) -> commands.Waiting:
        next_ = blackjack.awaiting(state, rules)
        kind = "finished" if next_.kind == "nothing" else next_.kind
        if kind != "decision" or next_.seat is None:
            return commands.Waiting(kind, next_.seat, box_hand=next_.hand)
        box = next(b for b in state.boxes if b.seat == next_.seat)
        options = tuple(a for a in self.ACTIONS if blackjack.check(
            rules, state, blackjack_messages.Decide(next_.seat, next_.hand, a, 1 if a == "insurance" else 0)) is None)
        return commands.Waiting(kind, next_.seat, box_hand=next_.hand, cards=box.hands[next_.hand].codes,
                                dealer=tuple(p.card for p in state.dealer if p.face_up), options=options)

    def opening(self, rules: Any, config: TableConfig, coup: str, procedure: str, carry: Carry,
                shoe: str, supervisor: str = "") -> Any:
        # Blackjack is dealt one way (002 (4), 003 7.3): no method or style to deal by, nor for a supervisor to
        # direct (000 8.2 and 001 8.5 are baccarat's); asked for, refused rather than ignored.
        if procedure or supervisor:
            asked = f"{procedure} directed by {supervisor}" if procedure and supervisor else procedure or (
                f"a coup directed by {supervisor}")
            raise RuleViolation("002 (4)" if rules.hole_card else "003 7.3",
                                f"{asked}: a blackjack table is dealt one way, with no method or style to choose")
        return blackjack_messages.OpenCoup(coup)

    def close_betting(self, wagers: tuple[Wager, ...]) -> Any:
        return blackjack_messages.CloseBetting(wagers)

    def deal(self, card: Card, position: int, seat: int | None) -> Any:
        return blackjack_messages.DealCard(card, position)

    def from_terminal(self, command: commands.CoupCommand) -> Any:
        if isinstance(command, commands.Decide):
            return blackjack_messages.Decide(command.seat, command.hand, command.action, command.amount)
        raise _not_for(self.name, command)

    def extra(self, event: Any, table: str, coup: str, cause: str) -> commands.PlaceExtra | None:
        if isinstance(event, blackjack_messages.DecisionTaken) and event.action in ("double", "split", "insurance"):
            return commands.PlaceExtra(cause, table, coup, event.seat, event.hand, event.action,
                                       event.amount)
        return None

    def cards_dealt(self, state: Any) -> int:
        return len(state.dealer) + sum(len(h.cards) for b in state.boxes for h in b.hands)

    def cards_due(self, state: Any) -> int:
        # The rest of the initial deal; after it one at a time (a player's decision depends on each).
        if state.phase == "dealing":
            return blackjack.initial_cards(state) - self.cards_dealt(state)
        return 1

    def run(self, rules: Any, state: Any) -> Run | None:
        # 002 (7), 003 7.6: every player has acted; the dealer's rule alone decides each further card
        if state.phase != "dealer":
            return None
        pickup = pickup_of(blackjack.pickup_order(rules, state, (*state.dealer_cards, RUN)))
        return DealerRun(state.dealer_cards, rules.dealer_hits_soft_17, pickup)

    def payouts(self, rules: Any, book: wager_book.Book, result: Any) -> tuple[Payout, ...]:
        # Each payout names the player of the box it pays (the box's wager, else who is seated there).
        players = {w.seat: w.player for w in book.wagers if w.player and not w.back}
        payouts = tuple(msgspec.structs.replace(p, player=players.get(p.seat) or book.seated_at(p.seat))
                        for p in settlement.settle_blackjack(rules, result))
        for seat in {p.seat for p in payouts}:
            if sum(p.stake for p in payouts if p.seat == seat) != book.staked(seat):
                raise RuleViolation("settlement", f"seat {seat}'s stakes differ from the wager book")
        return payouts


GAMES: dict[str, Game] = {game.name: game for game in (Baccarat(), Blackjack())}
RESULT_OF: dict[type, str] = {game.result_type: game.name for game in GAMES.values()}  # the game, by its result's type
DEALT_IN: dict[type, str] = {game.card_dealt: game.name for game in GAMES.values()}  # by its card dealt's type
RESULTS: tuple[type, ...] = tuple(RESULT_OF)
CARD_DEALT: frozenset[type] = frozenset(DEALT_IN)
BETTING_CLOSED: frozenset[type] = frozenset(game.betting_closed for game in GAMES.values())


def ends_coup(event: object) -> bool:
    """Whether ``event`` ends its coup for settlement: its result, or its voiding."""
    return isinstance(event, RESULTS) or voided(event)


def of(rules: Ruleset) -> Game:
    """The game a ruleset is for."""
    return next(game for game in GAMES.values() if isinstance(rules, game.rules_type))


def named(name: str) -> Game:
    """The game recorded as ``name`` (``coup.configured``)."""
    if name not in GAMES:
        raise RuleViolation("ruleset", f"{name!r} is not a game this casino deals")
    return GAMES[name]


def payouts_of(events: list[AnyEvent], book: wager_book.Book | None = None,
               rules: Ruleset | None = None) -> tuple[Payout, ...]:
    """The payouts of a coup from its recorded events: ruleset (loaded by the
    name its coup names unless the caller has it), book (folded from them
    unless the caller has) and result.

    The stakes the coup played with must be the stakes the wager book holds;
    otherwise the coup is not settled and the difference is reported.
    """
    configured = next(e for e in events if isinstance(e, CoupConfigured))
    book = wager_book.book_of(events) if book is None else book
    if any(voided(e) for e in events):  # void by a supervisor's ruling: every stake returned as it was staked
        return tuple(Payout(w.seat, w.bet, w.amount, w.amount, player=w.player) for w in book.wagers) + tuple(
            Payout(x.seat, x.kind, x.amount, x.amount, hand=x.hand, player=book.seated_at(x.seat))
            for x in book.extras)
    rules = rulesets.load(configured.ruleset) if rules is None else rules
    result = next(e for e in events if isinstance(e, RESULTS))
    game = of(rules)
    if not isinstance(result, game.result_type):
        raise RuleViolation("settlement", f"the coup's result is not a {game.name} result")
    return game.payouts(rules, book, result)
