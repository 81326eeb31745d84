"""Rules speed: baccarat coups per second through the pure library (deal,
decide, settle, with every event) against a minimal straight-line dealer
written here, on the same shuffled shoes.

Beside them, three floors of recording a coup as these events: only folding
the events the library gave (the coup's and the shoe's) back into the
library's states; only making each of those events again from its fields, no
rule applied; and making each again and applying it to a state updated in
place with one lookup of its type and one store, the least any fold of these
events does."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any, get_args

import msgspec

from casino import rulesets
from casino.rules import play, shoe
from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as bm
from casino.rules.cards import full_set
from casino.rules.ruleset import BaccaratRules
from casino.rules.wagers import Wager

VALUE = {r: min(i + 1, 10) % 10 for i, r in enumerate("A23456789TJQK")}
BOOK = (Wager(1, "banker", 5000), Wager(2, "player", 2500), Wager(3, "tie", 500))


class Dealer:
    """Players who never answer: Method A needs no answers."""

    def answer(self, coup: Any, w: Any) -> bm.AnswerOffer:
        raise AssertionError("Method A makes no offers")

    def give_back(self, coup: Any, w: Any) -> Any:
        raise AssertionError("Method A passes no cards")


def straight_line(cards: list[str], coups: int) -> int:
    """The baseline: deal, draw by the tableau, pay; no events, no checks."""
    total, i = 0, 0
    for _ in range(coups):
        p = [cards[i], cards[i + 2]]
        b = [cards[i + 1], cards[i + 3]]
        i += 4
        pp = (VALUE[p[0][0]] + VALUE[p[1][0]]) % 10
        bp = (VALUE[b[0][0]] + VALUE[b[1][0]]) % 10
        third = None
        if pp < 8 and bp < 8:
            if pp <= 5:
                third = cards[i]
                i += 1
                pp = (pp + VALUE[third[0]]) % 10
            t = None if third is None else VALUE[third[0]]
            draw = bp <= 5 if t is None else (bp <= 2 or (bp == 3 and t != 8) or (bp == 4 and 2 <= t <= 7)
                                               or (bp == 5 and 4 <= t <= 7) or (bp == 6 and 6 <= t <= 7))
            if draw:
                bp = (bp + VALUE[cards[i][0]]) % 10
                i += 1
        total += 5000 + 5000 * 95 // 100 if bp > pp else 5000 * 2 if pp > bp else 500 * 9
    return total


def play_all(rules: BaccaratRules, orders: list[tuple[tuple[str, ...], str]], coups: int,
             keep: bool = False) -> tuple[list[play.BaccaratCoupRecord], play.Shoe]:
    """Deal ``coups`` Method A coups from a shoe filled with ``orders``; their records if ``keep``."""
    table_shoe = play.Shoe(rules.shoe, list(orders))
    records = []
    for n in range(coups):
        record = play.play_baccarat(rules, table_shoe, bm.OpenCoup(f"c{n}", "method_a"), BOOK, Dealer())
        if keep:
            records.append(record)
    return records, table_shoe


def as_fields(events: list[Any]) -> list[tuple[type, tuple[Any, ...]]]:
    return [(type(e), msgspec.structs.astuple(e)) for e in events]


def remake(fields: list[tuple[type, tuple[Any, ...]]]) -> list[Any]:
    """Each event made again from its fields: what recording it costs at the least."""
    return [kind(*values) for kind, values in fields]


class Applied:
    """A state a fold updates in place, holding the least it can: the last event."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: Any = None


def _store(state: Applied, event: Any) -> None:
    state.last = event


APPLY = {kind: _store for kind in get_args(bm.AnyBaccaratEvent) + get_args(shoe.AnyShoeEvent)}


def least_fold(fields: list[tuple[type, tuple[Any, ...]]]) -> Applied:
    """Each event made again and applied with one lookup of its type and one
    store: the least any fold of these events does, no rule applied."""
    state = Applied()
    for kind, values in fields:
        APPLY[kind](state, kind(*values))
    return state


def measure(coups: int = 2000, runs: int = 5) -> dict[str, Any]:
    rules = rulesets.load("baccarat-000-methods")
    assert isinstance(rules, BaccaratRules)
    rnd = random.Random(7)
    orders = []
    for n in range(coups // 60 + 2):
        cards = list(full_set(rules.shoe.decks))
        rnd.shuffle(cards)
        orders.append((tuple(cards), f"s{n}"))
    lib, base, folds, builds, leasts = [], [], [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        play_all(rules, orders, coups)
        lib.append(time.perf_counter() - start)
        flat = [c for order, _ in orders for c in order]
        start = time.perf_counter()
        straight_line(flat, coups)
        base.append(time.perf_counter() - start)
        records, table_shoe = play_all(rules, orders, coups, keep=True)
        start = time.perf_counter()
        for record in records:
            bac.fold(record.events)
        state = shoe.ShoeState()
        for e in table_shoe.events:
            state = shoe.evolve(state, e)
        folds.append(time.perf_counter() - start)
        fields = as_fields([e for record in records for e in record.events] + list(table_shoe.events))
        start = time.perf_counter()
        remake(fields)
        builds.append(time.perf_counter() - start)
        start = time.perf_counter()
        least_fold(fields)
        leasts.append(time.perf_counter() - start)
    rate, baseline = coups / statistics.median(lib), coups / statistics.median(base)
    fold, build, least = (coups / statistics.median(t) for t in (folds, builds, leasts))
    return {"coups": coups, "runs": runs, "coups_per_s": rate, "baseline_coups_per_s": baseline,
            "ratio": rate / baseline, "fold_only": {"coups_per_s": fold, "ratio": fold / baseline},
            "events_only": {"coups_per_s": build, "ratio": build / baseline,
                            "events_per_coup": len(fields) / coups},
            "least_fold": {"coups_per_s": least, "ratio": least / baseline}}
