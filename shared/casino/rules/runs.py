"""A run of cards drawn in one step: the cards certainly due, then each
further card a game's own rule calls for, known once the cards before it are
drawn (nobody is waited for). The rule travels as data, so that whoever
draws the cards (the shoe service) holds no game of its own: the game names
the run (``casino.games.Game.next_step``), the shoe draws it."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from casino.rules.baccarat import tableau
from casino.rules.blackjack import hand
from casino.rules.cards import Card


class TableauRun(msgspec.Struct, frozen=True, tag="tableau"):
    """Baccarat: each further card the tableau calls for (the third cards, and
    the initial deal where no player handles the cards)."""

    def end(self, layout: Sequence[Card], index: int, count: int) -> int:
        return tableau.drawn_on(layout, index + count)


class DealerRun(msgspec.Struct, frozen=True, tag="dealer"):
    """Blackjack, every player having acted: each further card the dealer's
    drawing rule calls for (002 (7), 003 7.6), from the dealer's cards so far."""

    dealer: tuple[Card, ...]
    hits_soft_17: bool

    def end(self, layout: Sequence[Card], index: int, count: int) -> int:
        return index + hand.dealer_drawn_on(self.dealer, layout[index:], count, self.hits_soft_17)


Run = TableauRun | DealerRun


def end_of(run: Run | None, layout: Sequence[Card], index: int, count: int) -> int:
    """One past the last card of a run of ``count`` cards from the round's
    ``index``-th, going on by ``run`` (None: those cards alone), where
    ``layout`` holds the round's cards drawn so far."""
    return index + count if run is None else run.end(layout, index, count)
