"""Rules speed: baccarat coups per second through the pure library (deal,
decide, settle, with every event) against a minimal straight-line dealer
written here, on the same shuffled shoes.

Beside them, three floors of recording a coup as these events: only folding
the events the library gave (the coup's and the shoe's) back into the
library's states; only making each of those events again from its fields, no
rule applied; and making each again and applying it to a state updated in
place with one lookup of its type and one store, the least any fold of these
events does. And the straight-line dealer again, making the library's events
field for field with the library's checks: how quick a deal recorded as these
events can be when it is written for Method A alone."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any, Literal, get_args

import msgspec

from bench.runs import span
from casino.config import rulesets
from casino.rules import play, settlement, shoe
from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.baccarat.clauses import clause
from casino.rules.cards import DECK_INDEX, full_set, same_cards
from casino.rules.ruleset import BaccaratRules
from casino.rules.wagers import Wager, check_book

VALUE = {r: min(i + 1, 10) % 10 for i, r in enumerate("A23456789TJQK")}
BOOK = (Wager(1, "banker", 5000), Wager(2, "player", 2500), Wager(3, "tie", 500))


class Dealer:
    """Players who never answer: Method A needs no answers."""

    def answer(self, coup: Any, w: Any) -> baccarat_messages.AnswerOffer:
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


def straight_with_events(rules: BaccaratRules, orders: list[tuple[tuple[str, ...], str]], coups: int
                         ) -> tuple[list[tuple[list[Any], tuple[settlement.Payout, ...]]], list[Any]]:
    """Method A coups dealt in straight lines from a mutable shoe, making the
    events the library records (the coup's and the shoe's) and checking what it
    checks: each card drawn, the commitment when a shoe ends, the book (the
    library's check) and the payouts (the library's settlement). Each coup's
    events and payouts, and the shoe's events."""
    sr = rules.shoe
    assert sr.burn == "by_first_card_value" and sr.cut_card_first_of_round == "deal_round" and sr.cut_index is not None
    decks, size, cut = sr.decks, sr.cards, sr.cut_index
    cites = shoe.cites(rules.document, sr)
    opened, announce, dealt_by = clause("procedure", "method_a"), clause("announce", "method_a"), clause("dealt", "method_a")
    waiting = list(orders)
    shoe_events: list[Any] = []
    records: list[tuple[list[Any], tuple[settlement.Payout, ...]]] = []
    record = shoe_events.append
    order: tuple[str, ...] = ()
    shoe_id, salt, committed, pos, shuffles = "", "", "", 0, 0
    dealt: list[int] = []
    cut_reached = True  # no shoe yet: the first coup loads one
    for n in range(coups):
        coup_id = f"c{n}"
        if cut_reached:
            if shuffles:
                if shoe.commitment(order, salt) != committed or not same_cards(order, full_set(decks)):
                    raise AssertionError("the revealed order is not the one committed to")
                record(shoe.ShoeEnded(shoe_id, order, salt))
            order, salt = waiting.pop(0)
            shuffles += 1
            shoe_id, committed = f"shoe-{shuffles}", shoe.commitment(order, salt)
            record(shoe.ShoeShuffled(shoe_id, decks, size, cut, committed, 1, True))
            dealt = [0] * len(DECK_INDEX)
            burns = VALUE[order[0][0]] or 10
            for pos in range(burns + 1):  # the first shown, as many more as its value
                dealt[DECK_INDEX[order[pos]]] += 1
                record(shoe.CardBurned(shoe_id, pos, order[pos], pos == 0, cites.burn))
            pos, cut_reached = burns + 1, False
        record(shoe.RoundStarted(shoe_id, coup_id))
        wagers = check_book(rules.table, rules.limits, BOOK)
        start = pos
        p1, b1, p2, b2 = order[pos:pos + 4]
        pp = (VALUE[p1[0]] + VALUE[p2[0]]) % 10
        bp = (VALUE[b1[0]] + VALUE[b2[0]]) % 10
        natural, p3, b3, drawn = pp >= 8 or bp >= 8, "", "", 4
        if not natural:
            if pp <= 5:
                p3, drawn = order[pos + 4], 5
            t = VALUE[p3[0]] if p3 else -1
            if (bp <= 5 if not p3 else (bp <= 2 or (bp == 3 and t != 8) or (bp == 4 and 2 <= t <= 7)
                                        or (bp == 5 and 4 <= t <= 7) or (bp == 6 and 6 <= t <= 7))):
                b3, drawn = order[pos + drawn], drawn + 1
        if pos + drawn > size:
            raise AssertionError("the shoe is empty")
        for k in range(drawn):
            card = order[pos]
            if dealt[DECK_INDEX[card]] >= decks:
                raise AssertionError(f"every {card} has been dealt")
            dealt[DECK_INDEX[card]] += 1
            if pos >= cut and not cut_reached:
                cut_reached = True
                record(shoe.CutCardReached(shoe_id, pos, k == 0, cites.cut_first if k == 0 else cites.cut_card))
            record(shoe.CardDrawn(shoe_id, coup_id, pos, card))
            pos += 1
        events: list[Any] = [
            baccarat_messages.CoupOpened(coup_id, "method_a", (), None, opened), baccarat_messages.BettingClosed(wagers),
            baccarat_messages.CardDealt("player", p1, start, True, None, dealt_by), baccarat_messages.CardDealt("banker", b1, start + 1, True, None, dealt_by),
            baccarat_messages.CardDealt("player", p2, start + 2, True, None, dealt_by), baccarat_messages.CardDealt("banker", b2, start + 3, True, None, dealt_by),
            baccarat_messages.CountAnnounced("player", pp, announce), baccarat_messages.CountAnnounced("banker", bp, announce),
        ]
        if p3:
            pp = (pp + VALUE[p3[0]]) % 10
            events += [baccarat_messages.CardDealt("player", p3, start + 4, True, None, dealt_by), baccarat_messages.CountAnnounced("player", pp, announce)]
        if b3:
            bp = (bp + VALUE[b3[0]]) % 10
            events += [baccarat_messages.CardDealt("banker", b3, pos - 1, True, None, dealt_by), baccarat_messages.CountAnnounced("banker", bp, announce)]
        winner: Literal["player", "banker", "tie"] = "banker" if bp > pp else "player" if pp > bp else "tie"
        result = baccarat_messages.CoupResulted(winner, pp, bp, natural, p1[0] == p2[0], b1[0] == b2[0])
        cards = order[start:pos]
        events += [result, baccarat_messages.CardsPickedUp(cards)]
        record(shoe.RoundEnded(shoe_id, coup_id, cards))
        if cut_reached:
            record(shoe.ReshuffleRequired(shoe_id, "after_round", cites.cut_card))
        records.append((events, settlement.settle_baccarat(rules, wagers, result)))
    return records, shoe_events


def play_all(rules: BaccaratRules, orders: list[tuple[tuple[str, ...], str]], coups: int,
             keep: bool = False) -> tuple[list[play.BaccaratCoupRecord], play.Shoe]:
    """Deal ``coups`` Method A coups from a shoe filled with ``orders``; their records if ``keep``."""
    table_shoe = play.Shoe(rules.shoe, list(orders), document=rules.document)
    records = []
    for n in range(coups):
        record = play.play_baccarat(rules, table_shoe, baccarat_messages.OpenCoup(f"c{n}", "method_a"), BOOK, Dealer())
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


APPLY = {kind: _store for kind in get_args(baccarat_messages.AnyBaccaratEvent) + get_args(shoe.AnyShoeEvent)}


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
    lib, base, folds, builds, leasts, straights = [], [], [], [], [], []
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
        start = time.perf_counter()
        straight_with_events(rules, orders, coups)
        straights.append(time.perf_counter() - start)
    rate, baseline = coups / statistics.median(lib), coups / statistics.median(base)
    fold, build, least, straight = (coups / statistics.median(t) for t in (folds, builds, leasts, straights))
    return {"coups": coups, "runs": runs, "coups_per_s": rate, "coups_per_s_range": span(coups / t for t in lib),
            "baseline_coups_per_s": baseline, "ratio": rate / baseline,
            "same_events_ratio_range": span(s / t for t, s in zip(lib, straights, strict=True)),
            "fold_only": {"coups_per_s": fold, "ratio": fold / baseline},
            "events_only": {"coups_per_s": build, "ratio": build / baseline,
                            "events_per_coup": len(fields) / coups},
            "least_fold": {"coups_per_s": least, "ratio": least / baseline},
            "straight_with_events": {"coups_per_s": straight, "ratio": straight / baseline},
            "same_events_ratio": rate / straight}
