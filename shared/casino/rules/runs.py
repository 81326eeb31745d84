"""A run of cards drawn in one step: the cards certainly due, then each
further card a game's own rule calls for, known once the cards before it are
drawn (nobody is waited for). The rule travels as data, so that whoever
draws the cards (the shoe service) holds no game of its own: the game names
the run (``casino.games.Game.next_step``), the shoe draws it.

A run draws the coup's last cards: nothing is dealt in the coup after it.
With its ``pickup`` (the order the round's cards are picked up in around
the cards it draws, as the game's rule has them) the shoe ends the round in
the same step as it draws them, the round's end recorded with its cards."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from casino.rules.baccarat import tableau
from casino.rules.blackjack import hand
from casino.rules.cards import Card


class Pickup(msgspec.Struct, frozen=True):
    """The round's cards in the order they are picked up (002 (8), 003 7.7):
    ``before`` the cards a run draws, those cards in the order drawn, then
    ``after``."""

    before: tuple[Card, ...] = ()
    after: tuple[Card, ...] = ()

    def around(self, drawn: Sequence[Card]) -> tuple[Card, ...]:
        return (*self.before, *drawn, *self.after)


RUN = "*"  # where a run's cards go in an order of the round's cards (``pickup_of``)


def pickup_of(order: Sequence[str]) -> Pickup:
    """The pickup around a run, from the game's pickup order with ``RUN``
    standing for the run's cards."""
    at = list(order).index(RUN)
    return Pickup(tuple(order[:at]), tuple(order[at + 1:]))


class TableauRun(msgspec.Struct, frozen=True, tag="tableau"):
    """Baccarat: each further card the tableau calls for (the third cards, and
    the initial deal where no player handles the cards)."""

    pickup: Pickup | None = None

    def end(self, layout: Sequence[Card], index: int, count: int) -> int:
        return tableau.drawn_on(layout, index + count)


class DealerRun(msgspec.Struct, frozen=True, tag="dealer"):
    """Blackjack, every player having acted: each further card the dealer's
    drawing rule calls for (002 (7), 003 7.6), from the dealer's cards so far."""

    dealer: tuple[Card, ...]
    hits_soft_17: bool
    pickup: Pickup | None = None

    def end(self, layout: Sequence[Card], index: int, count: int) -> int:
        return index + hand.dealer_drawn_on(self.dealer, layout[index:], count, self.hits_soft_17)


Run = TableauRun | DealerRun


def end_of(run: Run | None, layout: Sequence[Card], index: int, count: int) -> int:
    """One past the last card of a run of ``count`` cards from the round's
    ``index``-th, going on by ``run`` (None: those cards alone), where
    ``layout`` holds the round's cards drawn so far."""
    return index + count if run is None else run.end(layout, index, count)
