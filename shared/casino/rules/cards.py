"""Playing cards, decks and card values.

A card is a two-character code: rank (``A23456789TJQK``) then suit (``SHDC``),
e.g. ``"TS"`` for the ten of spades. Codes are what events record and what a
card-reading shoe reports.
"""

from __future__ import annotations

from collections.abc import Iterable

Card = str

RANKS = "A23456789TJQK"
SUITS = "SHDC"
DECK: tuple[Card, ...] = tuple(r + s for s in SUITS for r in RANKS)
# Where each card is in a deck: the index of its count in a shoe's tally.
DECK_INDEX: dict[Card, int] = {card: i for i, card in enumerate(DECK)}

BACCARAT_VALUE = {r: min(i + 1, 10) % 10 for i, r in enumerate(RANKS)}
_BLACKJACK_VALUE = {r: min(i + 1, 10) for i, r in enumerate(RANKS)}


def is_card(code: object) -> bool:
    """Whether ``code`` is a valid card code."""
    return isinstance(code, str) and code in DECK_INDEX


def rank(card: Card) -> str:
    """The rank character of a card."""
    return card[0]


def baccarat_value(card: Card) -> int:
    """Baccarat point value: ace 1, two to nine at face value, tens and pictures 0."""
    return BACCARAT_VALUE[card[0]]


def blackjack_value(card: Card) -> int:
    """Blackjack value counting an ace as 1 (the hand decides whether it is soft)."""
    return _BLACKJACK_VALUE[card[0]]


def full_set(decks: int) -> tuple[Card, ...]:
    """Every card of a shoe of ``decks`` decks, in new-deck order."""
    return DECK * decks


def same_cards(a: Iterable[Card], b: Iterable[Card]) -> bool:
    """Whether two collections hold exactly the same cards (as multisets)."""
    return sorted(a) == sorted(b)
