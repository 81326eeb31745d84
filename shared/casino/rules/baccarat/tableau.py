"""The baccarat third-card table (the tableau), the standard rule behind 000 and 001."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from casino.rules.cards import BACCARAT_VALUE, DECK, Card, baccarat_value, rank

_POINTS = {card: BACCARAT_VALUE[card[0]] for card in DECK}


def points(cards: Sequence[Card]) -> int:
    """The point count of a hand: the sum of the card values, modulo ten."""
    total = 0
    for c in cards:  # two or three cards: a plain loop is the fastest way
        total += _POINTS[c]
    return total % 10


def is_natural(player: Sequence[Card], banker: Sequence[Card]) -> bool:
    """Either hand has 8 or 9 on its first two cards: both stand."""
    return points(player[:2]) >= 8 or points(banker[:2]) >= 8


def player_draws(player_points: int) -> bool:
    """Player's Hand draws on 0 to 5 and stands on 6 or 7."""
    return player_points <= 5


def banker_draws(banker_points: int, player_third: Card | None) -> bool:
    """Whether Banker's Hand draws, given its points and Player's third card.

    If Player stood, Banker draws on 0 to 5. Otherwise Banker draws on 0-2; on 3
    unless Player's third card is an 8; on 4 against 2-7; on 5 against 4-7; on 6
    against 6-7; and stands on 7.
    """
    if player_third is None:
        return banker_points <= 5
    t = baccarat_value(player_third)
    if banker_points <= 2:
        return True
    if banker_points == 3:
        return t != 8
    if banker_points == 4:
        return 2 <= t <= 7
    if banker_points == 5:
        return 4 <= t <= 7
    if banker_points == 6:
        return 6 <= t <= 7
    return False


def next_hand_to_draw(player: Sequence[Card], banker: Sequence[Card]) -> str | None:
    """Which hand takes the next card: ``"player"``, ``"banker"`` or None.

    The initial order is Player, Banker, Player, Banker; then the tableau.
    """
    if len(player) + len(banker) < 4:
        return "player" if len(player) == len(banker) else "banker"
    if is_natural(player, banker):
        return None
    if len(player) == 2 and len(banker) == 2 and player_draws(points(player)):
        return "player"
    if len(banker) == 2:
        third = player[2] if len(player) == 3 else None
        if banker_draws(points(banker), third):
            return "banker"
    return None


def hands(cards: Sequence[Card]) -> tuple[tuple[Card, ...], tuple[Card, ...]]:
    """A coup's cards, in the order they were drawn, as Player's and Banker's hands."""
    player: tuple[Card, ...] = ()
    banker: tuple[Card, ...] = ()
    for c in cards:
        due = next_hand_to_draw(player, banker)
        if due is None:
            raise ValueError(f"the tableau calls for no card after {player} and {banker}, not {c}")
        if due == "player":
            player += (c,)
        else:
            banker += (c,)
    return player, banker


def another_card(cards: Sequence[Card]) -> bool:
    """Whether the tableau calls for another card after a coup's cards, in the order drawn."""
    return next_hand_to_draw(*hands(cards)) is not None


def drawn_on(cards: Sequence[Card], end: int) -> int:
    """One past the last card of a run the tableau alone decides: from card
    ``end`` on, each further card the tableau calls for, known once the cards
    before it (``cards``, in the order drawn) are."""
    while len(cards) >= end and another_card(cards[:end]):
        end += 1
    return end


def winner(player: Sequence[Card], banker: Sequence[Card]) -> Literal["player", "banker", "tie"]:
    """``"player"``, ``"banker"`` or ``"tie"``."""
    p, b = points(player), points(banker)
    return "player" if p > b else "banker" if b > p else "tie"


def is_pair(cards: Sequence[Card]) -> bool:
    """The first two cards of a hand are of the same rank."""
    return len(cards) >= 2 and rank(cards[0]) == rank(cards[1])
