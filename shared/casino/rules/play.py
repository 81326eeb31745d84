"""Dealing a whole coup from a shoe: the shoe and coup aggregates side by side.

This is the loop a dealer follows, with the players' answers and decisions
coming from a ``Players`` policy and each card from the shoe's recorded order.
Tests use it with stacked shoes; the simulator and the benchmarks with shuffled
ones. It is pure: the order of the cards is an input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from casino.rules import settlement, shoe
from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.baccarat import tableau
from casino.rules.blackjack import coup as bj
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.cards import Card
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BaccaratRules, BlackjackRules, ShoeRules
from casino.rules.settlement import Payout
from casino.rules.wagers import Wager


class BaccaratPlayers(Protocol):
    """How the seated players answer offers and handle the cards they receive."""

    def answer(self, coup: bac.BaccaratCoup, waiting: bac.Awaiting) -> baccarat_messages.AnswerOffer: ...

    def give_back(self, coup: bac.BaccaratCoup, waiting: bac.Awaiting) -> baccarat_messages.ExposeHand | baccarat_messages.ReturnCards: ...


class BlackjackPlayers(Protocol):
    """How the players decide each hand."""

    def decide(self, coup: bj.BlackjackCoup, waiting: bj.Awaiting) -> blackjack_messages.Decide: ...


class Shoe(msgspec.Struct):
    """A table's shoe with the orders it will be filled with, in turn.

    ``orders`` stands in for the shoe service's secret shuffles: each is a full
    order of cards and the salt of its commitment.
    """

    rules: ShoeRules
    orders: list[tuple[tuple[Card, ...], str]]
    state: shoe.ShoeState = msgspec.field(default_factory=shoe.ShoeState)
    current: tuple[tuple[Card, ...], str] | None = None
    events: list[shoe.AnyShoeEvent] = []
    shuffles: int = 0
    prefix: str = "shoe-"
    document: str = ""  # the ruleset's document: the clauses the shoe cites

    def do(self, command: shoe.AnyShoeCommand) -> list[shoe.AnyShoeEvent]:
        return self.apply(shoe.decide(self.rules, self.state, command, self.document))

    def apply(self, events: list[shoe.AnyShoeEvent]) -> list[shoe.AnyShoeEvent]:
        for e in events:
            self.state = shoe.evolve(self.state, e)
        self.events.extend(events)
        return events

    def reshuffle(self) -> None:
        """End the shoe in play (revealing its order) and load the next order."""
        if self.state.active and self.current is not None:
            self.do(shoe.EndShoe(*self.current))
        if not self.orders:
            raise RuleViolation("shoe", "no shuffled order is left to fill the shoe")
        self.current = self.orders.pop(0)
        self.shuffles += 1
        self.apply(shoe.fill(self.rules, self.state, f"{self.prefix}{self.shuffles}", *self.current, self.document))

    def start_round(self, coup_id: str) -> None:
        if not self.state.ready_for_round:
            self.reshuffle()
        self.do(shoe.StartRound(coup_id))

    def draw(self, coup_id: str) -> tuple[Card, int]:
        """The next card of the round, reshuffling first where 003 7.9 says so."""
        while True:
            assert self.current is not None
            position = len(self.state.drawn)
            if position == self.state.cards:
                raise RuleViolation("shoe", "the shoe is empty: the cut card leaves too few cards for a round")
            drawn = self.do(shoe.Draw(coup_id, self.current[0][position]))[-1]
            if type(drawn) is shoe.CardDrawn:  # the last event of a card drawn
                return drawn.card, drawn.position
            self.reshuffle()

    def end_round(self, coup_id: str, pickup: tuple[Card, ...]) -> None:
        self.do(shoe.EndRound(coup_id, pickup))


class BaccaratCoupRecord(msgspec.Struct):
    coup: bac.BaccaratCoup
    events: list[baccarat_messages.AnyBaccaratEvent]
    payouts: tuple[Payout, ...]


def play_baccarat(
    rules: BaccaratRules,
    table_shoe: Shoe,
    opening: baccarat_messages.OpenCoup,
    wagers: Sequence[Wager],
    players: BaccaratPlayers,
) -> BaccaratCoupRecord:
    """Deal one baccarat coup to the end and settle it."""
    state = bac.BaccaratCoup()
    events: list[baccarat_messages.AnyBaccaratEvent] = []

    def do(command: baccarat_messages.AnyBaccaratCommand) -> None:
        nonlocal state
        evs, state = bac.step(rules, state, command)
        events.extend(evs)

    do(opening)
    table_shoe.start_round(opening.coup_id)
    do(baccarat_messages.CloseBetting(tuple(wagers)))
    while (w := bac.awaiting(state)).kind != "nothing":
        if w.kind == "card":
            # as the dealer-policy asks the shoe: a run the tableau alone decides is drawn at once
            run = [table_shoe.draw(opening.coup_id)]
            if bac.dealt_by_tableau(state):
                cards = [d.card for d in state.cards] + [run[0][0]]
                while tableau.another_card(cards):
                    run.append(table_shoe.draw(opening.coup_id))
                    cards.append(run[-1][0])
            for card, position in run:  # one hand after another, drawn by the same seat
                do(baccarat_messages.DealCard(card, position, w.seat))
        elif w.kind == "answer":
            do(players.answer(state, w))
        elif w.kind == "pass":
            assert w.hand is not None
            do(baccarat_messages.PassCards(w.hand))
        elif w.kind == "expose":
            do(players.give_back(state, w))
        else:
            raise RuleViolation("coup", f"cannot continue from {w.kind}")
    table_shoe.end_round(opening.coup_id, state.pickup)
    assert state.result is not None
    return BaccaratCoupRecord(state, events, settlement.settle_baccarat(rules, state.wagers, state.result))


class BlackjackCoupRecord(msgspec.Struct):
    coup: bj.BlackjackCoup
    events: list[blackjack_messages.AnyBlackjackEvent]
    payouts: tuple[Payout, ...]


def play_blackjack(
    rules: BlackjackRules,
    table_shoe: Shoe,
    coup_id: str,
    wagers: Sequence[Wager],
    players: BlackjackPlayers,
) -> BlackjackCoupRecord:
    """Deal one blackjack coup to the end and settle it."""
    state = bj.BlackjackCoup()
    events: list[blackjack_messages.AnyBlackjackEvent] = []

    def do(command: blackjack_messages.AnyBlackjackCommand) -> None:
        nonlocal state
        evs, state = bj.step(rules, state, command)
        events.extend(evs)

    do(blackjack_messages.OpenCoup(coup_id))
    table_shoe.start_round(coup_id)
    do(blackjack_messages.CloseBetting(tuple(wagers)))
    while (w := bj.awaiting(state, rules)).kind != "nothing":
        if w.kind == "card":
            card, position = table_shoe.draw(coup_id)
            do(blackjack_messages.DealCard(card, position))
        elif w.kind == "decision":
            do(players.decide(state, w))
        else:
            raise RuleViolation("coup", f"cannot continue from {w.kind}")
    table_shoe.end_round(coup_id, state.pickup)
    assert state.result is not None
    return BlackjackCoupRecord(state, events, settlement.settle_blackjack(rules, state.result))
