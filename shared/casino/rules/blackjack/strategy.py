"""Basic strategy for a multi-deck game where the dealer stands on soft 17: the
simulated players' decisions. ``options`` are the actions the coup allows now."""

from __future__ import annotations

from collections.abc import Sequence

from casino.rules.blackjack.hand import total
from casino.rules.cards import Card, blackjack_value, rank


def basic_strategy(cards: Sequence[Card], dealer_up: Card, options: Sequence[str]) -> str:
    """The basic-strategy action among ``options`` (stand, hit, double, split)."""
    up = blackjack_value(dealer_up)
    up = 11 if up == 1 else up
    if "split" in options and len(cards) == 2:
        r = rank(cards[0])
        v = blackjack_value(cards[0])
        pair_splits = {
            "A": True, "8": True, "9": up not in (7, 10, 11), "7": up <= 7, "6": up <= 6,
            "2": up <= 7, "3": up <= 7, "4": up in (5, 6),
        }
        if pair_splits.get(r if v != 10 else "T"):
            return "split"
    t, soft = total(cards)
    can_double = "double" in options

    def double_or(other: str) -> str:
        return "double" if can_double else other

    if soft:
        if t >= 19:
            return "stand"
        if t == 18:
            return double_or("stand") if 3 <= up <= 6 else "stand" if up in (2, 7, 8) else "hit"
        if t == 17:
            return double_or("hit") if 3 <= up <= 6 else "hit"
        if t in (15, 16):
            return double_or("hit") if 4 <= up <= 6 else "hit"
        return double_or("hit") if 5 <= up <= 6 else "hit"
    if t >= 17:
        return "stand"
    if t >= 13:
        return "stand" if up <= 6 else "hit"
    if t == 12:
        return "stand" if 4 <= up <= 6 else "hit"
    if t == 11:
        return double_or("hit") if up != 11 else "hit"
    if t == 10:
        return double_or("hit") if up <= 9 else "hit"
    if t == 9:
        return double_or("hit") if 3 <= up <= 6 else "hit"
    return "hit"
