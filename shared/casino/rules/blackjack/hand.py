"""Blackjack hand totals and the dealer's drawing rule."""

from __future__ import annotations

from collections.abc import Sequence

from casino.rules.cards import DECK, Card, blackjack_value, rank

_VALUE = {card: blackjack_value(card) for card in DECK}


def total(cards: Sequence[Card]) -> tuple[int, bool]:
    """The best total of a hand and whether it is soft (an ace counted as 11)."""
    hard, ace = 0, False
    for c in cards:  # a hand has two or three cards: a plain loop is the fastest way
        v = _VALUE[c]
        hard += v
        ace = ace or v == 1
    if ace and hard <= 11:
        return hard + 10, True
    return hard, False


def is_blackjack(cards: Sequence[Card], from_split: bool = False) -> bool:
    """An ace and a ten-value card as the first two cards of an unsplit hand."""
    return len(cards) == 2 and not from_split and total(cards)[0] == 21


def is_bust(cards: Sequence[Card]) -> bool:
    return total(cards)[0] > 21


def dealer_must_draw(cards: Sequence[Card], hits_soft_17: bool) -> bool:
    """The dealer draws to 16 and stands on 17; on soft 17 as the ruleset says.

    002 (7) refers to "regulation 23(2)" for the dealer's additional cards; the
    ruleset's ``dealer_hits_soft_17`` stands in for it.
    """
    t, soft = total(cards)
    return t < 17 or (t == 17 and soft and hits_soft_17)


def dealer_drawn_on(dealer: Sequence[Card], drawn: Sequence[Card], count: int, hits_soft_17: bool) -> int:
    """How many cards a run drawn for the dealer's hand holds once every player
    has acted (002 (7), 003 7.6): ``count`` at least, then each further card
    while the dealer must still draw, known once the cards before it
    (``drawn``, in the order drawn after ``dealer``, the dealer's cards so far)
    are. As ``tableau.drawn_on`` for baccarat: nobody is waited for."""
    while len(drawn) >= count and dealer_must_draw((*dealer, *drawn[:count]), hits_soft_17):
        count += 1
    return count


def is_pair(cards: Sequence[Card], by_value: bool) -> bool:
    """Two cards that may be split: the same rank (or the same value if allowed)."""
    if len(cards) != 2:
        return False
    if by_value:
        return blackjack_value(cards[0]) == blackjack_value(cards[1])
    return rank(cards[0]) == rank(cards[1])
