"""The baccarat third-card table (the tableau), the standard rule behind 000 and 001.

Every question is answered from the point values of the cards by lookups in
tables built once here: the coup asks the tableau at every card, the shoe at
every card of a run it draws, and replay and verification again for each
recorded coup."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from casino.rules.baccarat.messages import Hand
from casino.rules.cards import BACCARAT_VALUE, DECK, Card, baccarat_value, rank

_POINTS = {card: BACCARAT_VALUE[card[0]] for card in DECK}


def banker_draws(banker_points: int, player_third: Card | None) -> bool:
    """Whether Banker's Hand draws, given its points and Player's third card.

    If Player stood, Banker draws on 0 to 5. Otherwise Banker draws on 0-2; on 3
    unless Player's third card is an 8; on 4 against 2-7; on 5 against 4-7; on 6
    against 6-7; and stands on 7.
    """
    if player_third is None:
        return banker_points <= 5
    return _BANKER_DRAWS[banker_points][baccarat_value(player_third)]


def _banker_draws_against(banker_points: int, third: int) -> bool:
    """The rule of ``banker_draws`` against the value ``third`` of Player's third card."""
    if banker_points <= 2:
        return True
    if banker_points == 3:
        return third != 8
    if banker_points == 4:
        return 2 <= third <= 7
    if banker_points == 5:
        return 4 <= third <= 7
    if banker_points == 6:
        return 6 <= third <= 7
    return False


# Banker's draw by its points (0-9) and the value of Player's third card (0-9).
_BANKER_DRAWS = tuple(tuple(_banker_draws_against(b, t) for t in range(10)) for b in range(10))


def points(cards: Sequence[Card]) -> int:
    """The point count of a hand: the sum of the card values, modulo ten."""
    total = 0
    for c in cards:  # two or three cards: a plain loop is the fastest way
        total += _POINTS[c]
    return total % 10


def is_natural(player: Sequence[Card], banker: Sequence[Card]) -> bool:
    """Either hand has 8 or 9 on its first two cards: both stand."""
    return ((_POINTS[player[0]] + _POINTS[player[1]]) % 10 >= 8
            or (_POINTS[banker[0]] + _POINTS[banker[1]]) % 10 >= 8)


def player_draws(player_points: int) -> bool:
    """Player's Hand draws on 0 to 5 and stands on 6 or 7."""
    return player_points <= 5


def next_hand_to_draw(player: Sequence[Card], banker: Sequence[Card]) -> Hand | None:
    """Which hand takes the next card: ``"player"``, ``"banker"`` or None.

    The initial order is Player, Banker, Player, Banker; then the tableau.
    """
    dealt_player, dealt_banker = len(player), len(banker)
    if dealt_player + dealt_banker < 4:
        return "player" if dealt_player == dealt_banker else "banker"
    player_two = (_POINTS[player[0]] + _POINTS[player[1]]) % 10
    banker_two = (_POINTS[banker[0]] + _POINTS[banker[1]]) % 10
    if player_two >= 8 or banker_two >= 8 or dealt_banker != 2:
        return None  # a natural: both stand; or Banker has drawn, the last card of a coup
    if dealt_player == 2:
        return "player" if player_two <= 5 else "banker" if banker_two <= 5 else None
    if dealt_player == 3 and _BANKER_DRAWS[banker_two][_POINTS[player[2]]]:
        return "banker"
    return None


def another_card(cards: Sequence[Card]) -> bool:
    """Whether the tableau calls for another card after a coup's cards, in the order drawn."""
    dealt = len(cards)
    if dealt < 4:
        return True
    if dealt > 5:
        return False
    player_two = (_POINTS[cards[0]] + _POINTS[cards[2]]) % 10
    banker_two = (_POINTS[cards[1]] + _POINTS[cards[3]]) % 10
    if player_two >= 8 or banker_two >= 8:
        return False
    if player_two <= 5:  # Player draws the fifth card; then the tableau decides Banker's
        return dealt == 4 or _BANKER_DRAWS[banker_two][_POINTS[cards[4]]]
    return dealt == 4 and banker_two <= 5  # Player stood: Banker draws on 0 to 5, and that is the last


def hands(cards: Sequence[Card]) -> tuple[tuple[Card, ...], tuple[Card, ...]]:
    """A coup's cards, in the order they were drawn, as Player's and Banker's hands."""
    for k, c in enumerate(cards):
        if not another_card(cards[:k]):
            raise ValueError(f"the tableau calls for no card after {tuple(cards[:k])}, not {c}")
    if len(cards) < 5:
        return tuple(cards[0:4:2]), tuple(cards[1:4:2])
    player, banker = tuple(cards[0:4:2]), tuple(cards[1:4:2])
    if points(player) <= 5:  # the fifth card is Player's third; a sixth is Banker's third
        return player + (cards[4],), banker + tuple(cards[5:])
    return player, banker + (cards[4],)


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
