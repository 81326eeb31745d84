"""Wagers as the coup sees them when betting closes, and the table-limit check."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from casino.rules.errors import RuleViolation
from casino.rules.ruleset import Limit
from casino.rules.table import Table


class Wager(msgspec.Struct, frozen=True, gc=False):
    """One stake on one bet on the box of one seat, in minor units. ``player``
    is who placed it (the seated player; empty where the table records no one
    seated there); ``back`` marks a back bet: a player not seated at that box
    wagering on it, who is never offered the cards, a role or the shoe."""

    seat: int
    bet: str
    amount: int
    player: str = ""
    back: bool = False


def check_wager(table: Table, limits: Mapping[Any, Limit], wager: Wager) -> None:
    """Refuse a wager on an unknown seat, an unoffered bet, or outside the limits."""
    table.check_seat(wager.seat)
    limit = limits.get(wager.bet)
    if limit is None:
        raise RuleViolation("ruleset limits", f"bet {wager.bet!r} is not offered at this table")
    if not isinstance(wager.amount, int) or isinstance(wager.amount, bool):
        raise RuleViolation("ruleset limits", "amounts are whole numbers of the minor unit")
    if wager.amount < limit.min:
        raise RuleViolation("ruleset limits", f"{wager.bet} wager {wager.amount} is under the table minimum {limit.min}")
    if wager.amount > limit.max:
        raise RuleViolation("ruleset limits", f"{wager.bet} wager {wager.amount} is over the table maximum {limit.max}")


def check_book(table: Table, limits: Mapping[Any, Limit], wagers: Iterable[Wager]) -> tuple[Wager, ...]:
    """Check every wager of a closed book; one wager per seat, bet and player."""
    seen: set[tuple[int, str, str]] = set()
    book = tuple(wagers)
    for w in book:
        check_wager(table, limits, w)
        if (w.seat, w.bet, w.player) in seen:
            raise RuleViolation("wager book", f"seat {w.seat} has two {w.bet} wagers by {w.player or 'its player'}; "
                                              f"the book holds one per bet and player")
        seen.add((w.seat, w.bet, w.player))
    return book


def own(wagers: Iterable[Wager]) -> list[Wager]:
    """The wagers of the players seated at their boxes (back bets left out): the
    wagers the offers of the cards, the roles and the shoe go by (000 8.5,
    8.15, 8.25; 001 8.9 "the seated player")."""
    return [w for w in wagers if not w.back]


def amount_on(wagers: Iterable[Wager], seat: int, bet: str) -> int:
    """What the player in ``seat`` staked on ``bet``."""
    return sum(w.amount for w in wagers if w.seat == seat and w.bet == bet)
