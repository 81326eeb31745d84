"""A shoe's facts, its coups and, at baccarat, its scoreboard, from its
records (``shoe_facts``): the scoreboard drawn by the one function that
draws every shoe's (casino.rules.baccarat.scoreboard)."""

from __future__ import annotations

from typing import Any

from casino.audit.history import shoe_results
from casino.rules import shoe as dealing_shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.baccarat import scoreboard
from casino.rules.blackjack import messages as blackjack_messages
from casino.store import subjects
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import Stored


def shoe_facts(stored: list[Stored]) -> dict[str, Any]:
    """A shoe's facts, its coups with their results, and its scoreboard (None: no baccarat coup), from its records."""
    facts: dict[str, Any] = {"burned": 0, "ended": None, "shuffled": None}
    coups: dict[str, str] = {}  # coup -> its result, in turn
    for m in stored:
        coup = subjects.tokens(m.subject)[2]
        for env in m.batch.events:
            e = env.data
            if isinstance(e, dealing_shoe.ShoeShuffled):
                facts["shuffled"] = e
            elif isinstance(e, dealing_shoe.CardBurned):
                facts["burned"] += 1
            elif isinstance(e, dealing_shoe.ShoeEnded):
                facts["ended"] = e
            elif isinstance(e, CoupConfigured):
                coups.setdefault(coup, "")
            elif isinstance(e, baccarat_messages.CoupResulted):
                coups[coup] = f"{e.winner} {e.player_points}-{e.banker_points}"
            elif isinstance(e, blackjack_messages.CoupResulted):
                coups[coup] = blackjack_result(e)
    results = shoe_results(stored)
    return {"facts": facts, "coups": list(coups.items())[::-1],
            "board": scoreboard.scoreboard(results) if results else None}


def blackjack_result(e: blackjack_messages.CoupResulted) -> str:
    """A blackjack coup's result in a line: the dealer's, then each hand's ("seat 2 won with 19")."""
    said = {"blackjack": "won with blackjack", "win": "won with {}", "push": "pushed at {}", "lose": "lost with {}"}
    hands = [f"seat {h.seat}{f' hand {h.hand + 1}' if h.hand else ''} {said[h.outcome].format(h.total)}"
             for h in e.hands]
    return "; ".join([f"dealer {'blackjack' if e.dealer_blackjack else e.dealer_total}", *hands])
