"""``Game.next_step``: the one place a coup's next step is decided (draw these
cards, pass a hand's cards, wait for somebody, or finished), and the run of a
draw named as data (casino.rules.runs), so that whoever draws the cards holds
no game of its own."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from casino import games
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.games import Carry, Step
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.cards import DECK, Card
from casino.rules.ruleset import BlackjackRules
from casino.rules.runs import DealerRun, Pickup, TableauRun, end_of
from casino.rules.wagers import Wager

BACCARAT, BLACKJACK = "baccarat-000-methods", "blackjack-003-no-hole-card"


def stand(state: Any, step: Step) -> Any:
    return blackjack_messages.Decide(step.waiting.seat, step.waiting.box_hand or 0, "stand")


def deal(ruleset: str, procedure: str, wagers: tuple[Wager, ...], cards: list[Card], by_runs: bool,
         answer: Callable[[Any, Step], Any] = stand) -> tuple[list[Any], list[Step]]:
    """One coup dealt by its steps alone, as the dealer-policy and the shoe
    deal it: each draw's cards taken from ``cards`` in turn, with its run
    (``by_runs``) or one card at a time; the coup's events and its steps."""
    rules = rulesets.load(ruleset)
    game = games.of(rules)
    state, events, steps, layout = game.new(), [], [], []

    def do(command: Any) -> None:
        nonlocal state
        evs, state = game.step(rules, state, command)
        events.extend(evs)

    do(game.opening(rules, TableConfig(ruleset), "T-000001", procedure, Carry(), "T-1"))
    do(game.close_betting(wagers))
    while (step := game.next_step(rules, state)).kind != "finished":
        steps.append(step)
        if step.kind == "draw":
            end = step.first + step.due
            while len(layout) < end_of(step.run if by_runs else None, layout, step.first, step.due):
                layout.append(cards[len(layout)])  # the shoe draws on by the run's rule, one card after another
                end = len(layout)
            for position in range(step.first, end):
                do(game.deal(layout[position], position, game.next_step(rules, state).waiting.seat))
        elif step.kind == "pass":
            do(game.pass_cards(step.waiting.hand or ""))
        else:
            do(answer(state, step))
    return events, steps


def test_a_baccarat_coup_nobody_handles_is_one_draw_the_tableau_runs_on() -> None:
    """Method A: four cards certainly due, then each the tableau calls for,
    drawn as one run (2S 3H 2D 3C: both hands draw a third card)."""
    wagers = (Wager(1, "banker", 2500),)
    events, steps = deal(BACCARAT, "method_a", wagers, ["2S", "3H", "2D", "3C", "6H", "9D"], by_runs=True)
    assert [(s.kind, s.first, s.due, s.run) for s in steps] == [("draw", 0, 4, TableauRun(Pickup()))]
    assert sum(type(e).__name__ == "CardDealt" for e in events) == 6


def test_a_blackjack_coup_waits_for_each_player_and_then_draws_the_dealers_run() -> None:
    """003: the initial deal (a box, the dealer, the box), the player's
    decision awaited, then the dealer's cards as one run by the ruleset's
    drawing rule, which carries the dealer's cards so far."""
    rules = rulesets.load(BLACKJACK)
    assert isinstance(rules, BlackjackRules)
    events, steps = deal(BLACKJACK, "", (Wager(1, "box", 1000),), ["TS", "6H", "9D", "5C", "2D", "3S", "KH"],
                         by_runs=True)
    assert [(s.kind, s.first, s.due) for s in steps] == [("draw", 0, 3), ("await", 0, 0), ("draw", 3, 1)]
    assert steps[0].run is None and steps[1].waiting.kind == "decision"
    # 003 7.7: the players' cards picked up first, then the dealer's, the run's last
    assert steps[2].run == DealerRun(("6H",), rules.dealer_hits_soft_17, Pickup(("TS", "9D", "6H")))
    assert [e.card for e in events if type(e).__name__ == "CardDealt"][3:] == ["5C", "2D", "3S", "KH"]  # to 16, then 26


@pytest.mark.parametrize(("ruleset", "procedure", "wagers"), [
    (BACCARAT, "method_a", (Wager(1, "player", 2500),)),
    (BLACKJACK, "", (Wager(1, "box", 1000), Wager(3, "box", 1000))),
])
def test_a_coup_drawn_by_runs_is_the_coup_drawn_card_by_card(ruleset: str, procedure: str,
                                                             wagers: tuple[Wager, ...]) -> None:
    """The run a step names is only a shortcut: over 300 shuffled orders, the
    coup dealt by runs records the very events of the coup dealt one step a
    card, in fewer draws."""
    fewer = 0
    for seed in range(300):
        cards = [*DECK] * 8
        random.Random(seed).shuffle(cards)
        by_runs, run_steps = deal(ruleset, procedure, wagers, cards, by_runs=True)
        by_cards, card_steps = deal(ruleset, procedure, wagers, cards, by_runs=False)
        assert by_runs == by_cards, f"order {seed}"
        fewer += len(run_steps) < len(card_steps)
    assert fewer > 100  # a run saved a draw in many of them


def hit_to_15(state: Any, step: Step) -> Any:
    seat, hand = step.waiting.seat, step.waiting.box_hand or 0
    box = next(b for b in state.boxes if b.seat == seat)
    total = sum(min(10, "A23456789TJQK".index(p.card[0]) + 1) for p in box.hands[hand].cards)
    return blackjack_messages.Decide(seat, hand, "hit" if total < 15 else "stand")


@pytest.mark.parametrize(("ruleset", "procedure", "wagers", "answer"), [
    (BACCARAT, "method_a", (Wager(1, "player", 2500),), stand),
    (BLACKJACK, "", (Wager(1, "box", 1000), Wager(3, "box", 1000)), stand),
    (BLACKJACK, "", (Wager(1, "box", 1000), Wager(3, "box", 1000)), hit_to_15),
    ("blackjack-002-hole-card", "", (Wager(2, "box", 1000),), hit_to_15),
])
def test_a_run_draws_the_coups_last_cards_and_names_the_rounds_pickup_around_them(
        ruleset: str, procedure: str, wagers: tuple[Wager, ...], answer: Callable[[Any, Step], Any]) -> None:
    """A run is the coup's last draw, whatever its cards: the shoe ends the
    round with it, picking the cards up in the order its ``pickup`` names
    around the cards it drew, which is the coup's own (002 (8), 003 7.7),
    over 300 shuffled orders."""
    runs = 0
    for seed in range(300):
        cards = [*DECK] * 8
        random.Random(seed).shuffle(cards)
        events, steps = deal(ruleset, procedure, wagers, cards, by_runs=True, answer=answer)
        ran = [s for s in steps if s.kind == "draw" and s.run is not None]
        if not ran:  # the players all bust, or the dealer stood on the cards dealt: no run
            continue
        runs += 1
        assert ran[-1] is steps[-1], f"order {seed}: a step after the run"
        dealt = [e.card for e in events if type(e).__name__ == "CardDealt"]
        picked = next(e for e in events if type(e).__name__ == "CardsPickedUp").cards
        assert ran[-1].run is not None and ran[-1].run.pickup is not None
        assert ran[-1].run.pickup.around(dealt[ran[-1].first:]) == picked, f"order {seed}"
    assert runs > 150
