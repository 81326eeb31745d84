"""The simulated tables take every path of every procedure: a bounded run's
record is counted path by path, and a path never taken fails the test (so a
`make run` record exercises every clause, not only the common ones)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conformance.outsider import by_coup, of, read_record

Event = dict[str, Any]
Path_ = Callable[[list[Event]], bool]


def _seats_betting(events: list[Event], test: Callable[[set[str]], bool]) -> bool:
    closed = of(events, "baccarat.betting_closed")
    bets: dict[int, set[str]] = defaultdict(set)
    for w in closed[0]["wagers"] if closed else []:
        bets[w["seat"]].add(w["bet"])
    return any(test(b) for b in bets.values())


def _insurance(events: list[Event], taken: bool) -> bool:
    """The dealer shows an ace and a box takes insurance (or one does not)."""
    dealer = of(events, "blackjack.card_dealt", seat=None)
    if not dealer or not dealer[0]["card"].startswith("A"):
        return False
    boxes = {w["seat"] for e in of(events, "blackjack.betting_closed") for w in e["wagers"]}
    insured = {e["seat"] for e in of(events, "blackjack.decision_taken", action="insurance")}
    return bool(insured) if taken else bool(boxes - insured)


def _any(kind: str, **fields: object) -> Path_:
    return lambda ev: bool(of(ev, kind, **fields))


def _holder(clause: str, plays: str) -> Path_:
    return lambda ev: bool(of(ev, "baccarat.holder_assigned", offer="shoe", clause=clause, plays=plays))


def _assigned(clause: str) -> Path_:
    return lambda ev: any(e["seat"] is None for e in of(ev, "baccarat.holder_assigned", clause=clause))


PATHS: dict[str, Path_] = {
    **{f"dealt by {p}": _any("baccarat.coup_opened", procedure=p)
       for p in ("method_a", "method_b", "method_c", "method_d", "style_a", "style_b")},
    "000 8.6 / 001 8.9(c): the cards or a role refused and offered on":
        lambda ev: any(e["offer"] != "shoe" for e in of(ev, "baccarat.offer_answered", accepted=False)),
    "000 8.10.1: the dealer keeps a hand nobody wagered on": _assigned("000 8.10.1"),
    "000 8.10.2: every wagerer refuses the cards": _assigned("000 8.10.2"),
    "001 8.9(d): nobody takes a role": _assigned("001 8.9(d)"),
    "000 8.15: the shoe declined and offered on":
        lambda ev: bool(of(ev, "baccarat.offer_answered", offer="shoe", accepted=False)),
    "000 8.16: all decline the shoe under Method C": lambda ev: bool(of(ev, "baccarat.procedure_fell_back",
                                                                          clause="000 8.16")),
    "000 8.26: all decline the shoe under Method D": lambda ev: bool(of(ev, "baccarat.procedure_fell_back",
                                                                          clause="000 8.26")),
    "000 8.17.2: a Method C holder plays Player's Hand": _holder("000 8.21", "player"),
    "000 8.27.2: a Method D holder plays Player's Hand": _holder("000 8.30", "player"),
    "000 8.18: the holder keeps the shoe into the next coup": _holder("000 8.18", "banker"),
    **{f"000 8.18: the shoe {reason}": _any("baccarat.shoe_given_up", reason=reason)
       for reason in ("passed", "lost", "forfeited", "no_wager")},
    "000 8.12 / 8.22 / 8.31: a handling breach reported":
        lambda ev: bool(of(ev, "baccarat.handling_breach_reported")),
    "000 8.13 / 8.23 / 8.32 / 001 8.11(a): a hand exposed by its handler":
        lambda ev: bool(of(ev, "baccarat.hand_exposed")),
    "000 8.14.2 / 8.24.2 / 8.33.2: cards given back unexposed": lambda ev: bool(of(ev, "baccarat.cards_returned")),
    "a seat with only a Tie wager": lambda ev: _seats_betting(ev, lambda b: b == {"tie"}),
    "a seat wagering on both Banker and Player": lambda ev: _seats_betting(ev, lambda b: {"banker", "player"} <= b),
    "a pair wager": lambda ev: _seats_betting(ev, lambda b: bool(b & {"player_pair", "banker_pair"})),
    "a wager cancelled": lambda ev: bool(of(ev, "wager.cancelled")),
    "a player sits": _any("wager.player_seated"),
    "a player leaves": _any("wager.player_left"),
    "a back bet": lambda ev: any(e["wager"]["back"] for e in of(ev, "wager.placed")),
    "a tie": lambda ev: bool(of(ev, "baccarat.coup_resulted", winner="tie")),
    "a third card": lambda ev: len(of(ev, "baccarat.card_dealt")) > 4,
    "insurance taken": lambda ev: _insurance(ev, True),
    "insurance declined": lambda ev: _insurance(ev, False),
    **{f"blackjack {a}": _any("blackjack.decision_taken", action=a)
       for a in ("hit", "stand", "double", "split")},
    "a dealer blackjack": lambda ev: bool(of(ev, "blackjack.coup_resulted", dealer_blackjack=True)),
    "a box busts": lambda ev: bool(of(ev, "blackjack.hand_completed", reason="bust")),
    "a player's blackjack": lambda ev: any(h["outcome"] == "blackjack" for e in of(ev, "blackjack.coup_resulted")
                                           for h in e["hands"]),
    "a push": lambda ev: any(h["outcome"] == "push" for e in of(ev, "blackjack.coup_resulted") for h in e["hands"]),
}

SHOE_PATHS: dict[str, Callable[[list[Event]], bool]] = {
    "the cut card reached": lambda ev: bool(of(ev, "shoe.cut_card_reached")),
    "a shoe ended and its order revealed": lambda ev: bool(of(ev, "shoe.ended")),
    "burn cards by the first card's value": lambda ev: len(of(ev, "shoe.card_burned")) > 1,
}


def test_a_bounded_simulated_run_takes_every_path_of_every_procedure(raw_record: Path) -> None:
    record = read_record(raw_record)
    coups, shoes = by_coup(record)
    taken = Counter({name: sum(1 for ev in coups.values() if path(ev)) for name, path in PATHS.items()})
    taken.update({name: sum(1 for ev in shoes.values() if path(ev)) for name, path in SHOE_PATHS.items()})
    never = sorted(name for name in [*PATHS, *SHOE_PATHS] if taken[name] == 0)
    assert not never, f"paths never taken in {len(coups)} coups: {never}; taken: {dict(taken)}"
    assert len(coups) >= 1400
