"""The rules benchmark's baseline is a real dealer: on the cards the library
dealt, coup by coup, the straight-line dealer written in the benchmark draws
the same third cards (the tableau, the standard rule behind 000 and 001) and
pays on the same winner. A baseline that skipped part of the tableau would
make the ratio meaningless."""

from __future__ import annotations

import random

from bench import rules as bench_rules

from casino.config import rulesets
from casino.rules import shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.cards import full_set
from casino.rules.ruleset import BaccaratRules

# What the straight-line dealer adds up for one coup, by its winner.
PAID = {"banker": 5000 + 5000 * 95 // 100, "player": 5000 * 2, "tie": 500 * 9}


RULES = rulesets.load("baccarat-000-methods")
assert isinstance(RULES, BaccaratRules)


def shuffled(seed: int, shoes: int) -> list[tuple[tuple[str, ...], str]]:
    """``shoes`` shuffled orders of the ruleset's shoe, each with its salt."""
    rnd = random.Random(seed)
    orders = []
    for n in range(shoes):
        cards = list(full_set(RULES.shoe.decks))
        rnd.shuffle(cards)
        orders.append((tuple(cards), f"s{n}"))
    return orders


def test_the_straight_line_dealer_deals_each_coup_as_the_rules_do() -> None:
    records, _ = bench_rules.play_all(RULES, shuffled(11, 12), 600, keep=True)
    winners: set[str] = set()
    every_card: list[str] = []
    third_cards = paid = 0
    for record in records:
        dealt = [e.card for e in record.events if isinstance(e, baccarat_messages.CardDealt)]
        result = next(e for e in record.events if isinstance(e, baccarat_messages.CoupResulted))
        # Dealt in the order the baseline takes them: player, banker, player, banker, third cards.
        # A card it wanted that the rules did not deal is an IndexError.
        assert bench_rules.straight_line(dealt, 1) == PAID[result.winner], (dealt, result)
        every_card += dealt
        paid += PAID[result.winner]
        winners.add(result.winner)
        third_cards += len(dealt) - 4
    # All the coups in one run: a coup that took a card too few would shift every coup after it.
    assert bench_rules.straight_line(every_card, len(records)) == paid
    assert winners == {"banker", "player", "tie"} and third_cards > 300


def twenty_coups_events(seed: int) -> list[object]:
    """Every event the library records dealing 20 coups from one shuffled shoe, the shoe's included."""
    records, table_shoe = bench_rules.play_all(RULES, shuffled(seed, 1), 20, keep=True)
    return [e for record in records for e in record.events] + list(table_shoe.events)


def test_the_events_only_floor_makes_every_event_of_the_coups_again() -> None:
    """The floor of recording a coup makes the same events the library
    recorded, the coup's and the shoe's, field for field."""
    events = twenty_coups_events(3)
    assert len(events) > 20 * 15 and bench_rules.remake(bench_rules.as_fields(events)) == events
    figures = bench_rules.measure(60, 1)
    assert figures["events_only"]["events_per_coup"] > 15 and figures["events_only"]["coups_per_s"] > 0


def test_the_least_fold_floor_makes_and_applies_every_event_in_order() -> None:
    """The least fold makes each recorded event again and applies it, in the
    order recorded: the state it leaves holds the last of them."""
    events = twenty_coups_events(5)
    kinds = {type(e) for e in events}
    assert kinds <= set(bench_rules.APPLY) and len(kinds) > 8
    for upto in (1, len(events) // 2, len(events)):
        applied = bench_rules.least_fold(bench_rules.as_fields(events[:upto]))
        assert applied.last == events[upto - 1] and applied.last is not events[upto - 1]
    figures = bench_rules.measure(60, 1)
    assert figures["least_fold"]["coups_per_s"] > 0
    assert figures["least_fold"]["ratio"] == figures["least_fold"]["coups_per_s"] / figures["baseline_coups_per_s"]


def test_the_straight_line_dealer_with_events_records_what_the_library_records() -> None:
    """Written apart from the library, for Method A alone, it makes the same
    events, coup's and shoe's, field for field (burns, cut card, reshuffles and
    revealed orders included), and the same payouts: a floor of the same work,
    and a second witness that the library deals Method A as the tableau says."""
    orders = shuffled(13, 12)
    records, table_shoe = bench_rules.play_all(RULES, orders, 600, keep=True)
    coups, shoe_events = bench_rules.straight_with_events(RULES, orders, 600)
    assert [events for events, _ in coups] == [record.events for record in records]
    assert [payouts for _, payouts in coups] == [record.payouts for record in records]
    assert shoe_events == table_shoe.events
    assert sum(isinstance(e, shoe.ShoeEnded) for e in shoe_events) >= 6
    assert sum(isinstance(e, baccarat_messages.CardDealt) for events, _ in coups for e in events) > 600 * 4 + 300
    figures = bench_rules.measure(60, 1)
    assert figures["straight_with_events"]["coups_per_s"] > 0
