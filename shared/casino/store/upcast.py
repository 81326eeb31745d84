"""Upcasters: how an event written under an older schema version reads today.

Each entry turns the JSON of ``(type, version)`` into that of ``version + 1``;
``upcast`` applies them in turn and converts the result to the current struct.
An event is never rewritten in the store: it is upcast every time it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _shoe_shuffled_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    # Version 1 burned only the first card (002 (3)); burning by the first
    # card's value came with version 2.
    return {**data, "burn_by_value": False}


def _empty(*fields: str) -> Upcaster:
    """The version before recorded none of ``fields`` (a step's clause, who held the shoe, who directed): they read empty."""
    return lambda data: {**data, **dict.fromkeys(fields, "")}


def _coup_configured_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    # Version 1 named no earlier openings: an opening asked again was known only in the latest coup.
    return {**data, "opened_before": []}


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("coup.configured", 1): _coup_configured_1_to_2,
    ("coup.configured", 2): _empty("currency"),
    ("coup.configured", 3): lambda data: {**data, "supervisors": []},  # no roster recorded before version 4
    ("coup.configured", 4): _empty("dealer", "dealer_before"),
    ("coup.configured", 5): lambda data: {**data, "voids_before": 0},  # no voids counted before version 6
    # Version 7 names the coup's shoe, and a shoe a ruling ended before it (voids counted across shoes since).
    ("coup.configured", 6): _empty("shoe", "ruled_ended"),
    ("coup.card_incident", 1): _empty("shoe"),  # the card's shoe, named since version 2
    ("shoe.shuffled", 1): _shoe_shuffled_1_to_2,
    ("shoe.shuffled", 2): _empty("source"),  # no card-reading shoes before version 3: the service shuffled
    ("shoe.card_drawn", 1): _empty("read"),
    ("shoe.card_burned", 2): _empty("read"),
    ("baccarat.card_dealt", 1): _empty("clause"),
    ("baccarat.cards_returned", 1): _empty("clause"),
    ("shoe.card_burned", 1): _empty("clause"),
    ("blackjack.decision_taken", 1): _empty("clause"),
    ("baccarat.holder_assigned", 1): _empty("player"),
    # Version 3 names the player a hand's cards went to too (version 2, the shoe's holder only): as it was.
    ("baccarat.holder_assigned", 2): lambda data: data,
    ("baccarat.shoe_given_up", 1): _empty("player"),
    # Version 2 names the player on a blackjack payout (baccarat's named them already): as it was.
    ("settlement.coup_settled", 1): lambda data: data,
    ("baccarat.coup_opened", 1): _empty("shoe_holder_player"),
    ("baccarat.coup_opened", 2): _empty("in_force", "supervisor"),
}


def upcast(event_type: str, version: int, current: int, data: dict[str, Any]) -> Any:
    """The current struct for ``data`` recorded as ``event_type`` at ``version``."""
    from casino.store.envelope import AnyEvent

    for v in range(version, current):
        step = UPCASTERS.get((event_type, v))
        if step is None:
            raise ValueError(f"no upcaster for {event_type} version {v}")
        data = step(data)
    return msgspec.convert(data, AnyEvent)
