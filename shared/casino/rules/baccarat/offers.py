"""Who is offered the cards or the shoe, and in which order.

Each function returns the whole chain of seats in the order the offer goes
round: the first seat is asked first, and each refusal passes the offer to the
next (000 8.6, 8.8; 001 8.9(b)-(c); 000 8.15, 8.25).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from casino.rules.table import Table
from casino.rules.wagers import Wager


def _stakes(wagers: Iterable[Wager], bets: tuple[str, ...]) -> dict[int, int]:
    """Largest stake per seat on any of ``bets``."""
    out: dict[int, int] = {}
    for w in wagers:
        if w.bet in bets:
            out[w.seat] = max(out.get(w.seat, 0), w.amount)
    return out


def _by_amount(stakes: dict[int, int], order_ties: Callable[[list[int]], list[int]]) -> tuple[int, ...]:
    chain: list[int] = []
    for amount in sorted(set(stakes.values()), reverse=True):
        chain += order_ties([s for s, a in stakes.items() if a == amount])
    return tuple(chain)


def method_b_cards(table: Table, wagers: Iterable[Wager], hand: str) -> tuple[int, ...]:
    """000 8.5-8.8: highest stake on ``hand`` first (8.5), then the next highest
    (8.6); equal highest stakes from the seat nearest the dealer's right (8.7),
    moving counter-clockwise (8.8)."""

    def ties(seats: list[int]) -> list[int]:
        return table.counter_clockwise(seats)

    return _by_amount(_stakes(wagers, (hand,)), ties)


def style_b_role(table: Table, wagers: Iterable[Wager], hand: str) -> tuple[int, ...]:
    """001 8.9 (and 8.10 for Player): highest stake on ``hand`` first (a); equal
    stakes from the lowest numbered seat, then counter-clockwise (b); then the
    next highest stake (c)."""

    def ties(seats: list[int]) -> list[int]:
        return table.counter_clockwise_from(table.lowest_numbered(seats), seats)

    return _by_amount(_stakes(wagers, (hand,)), ties)


def method_c_shoe(table: Table, wagers: Iterable[Wager]) -> tuple[int, ...]:
    """000 8.15: counter-clockwise from the lowest numbered seat with a wager."""
    seats = {w.seat for w in wagers}
    if not seats:
        return ()
    return tuple(table.counter_clockwise_from(table.lowest_numbered(seats), seats))


def method_d_shoe(table: Table, wagers: Iterable[Wager]) -> tuple[int, ...]:
    """000 8.25: highest stake on Banker or Player first, then the next highest;
    equal stakes to the lowest numbered seat first."""
    return _by_amount(_stakes(wagers, ("banker", "player")), sorted)
