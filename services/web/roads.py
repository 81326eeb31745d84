"""A baccarat shoe's results as the roads a player reads: the bead plate
(each coup in turn, six to a column) and the big road (a column for each run
of one hand's wins, a tie marked on the coup before it); and a shoe's facts
and coups from its records (``shoe_facts``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from casino.rules import shoe as dealing_shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.store import subjects
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import Stored

ROWS = 6  # a road's height, as the casinos' scoreboards draw it


@dataclass
class Bead:
    winner: str  # "banker", "player" or "tie"
    coup: int  # the coup's number at the table


@dataclass
class Mark:
    winner: str  # "banker" or "player"
    coup: int
    ties: int = 0  # ties since, marked on it
    pairs: tuple[bool, bool] = (False, False)


@dataclass
class Road:
    columns: list[list[Mark]] = field(default_factory=list)
    ties_first: int = 0  # ties before the shoe's first banker or player win


def bead_plate(results: list[Bead]) -> list[list[Bead]]:
    """The coups in turn, top to bottom and then the next column."""
    return [results[i:i + ROWS] for i in range(0, len(results), ROWS)]


def big_road(results: list[tuple[str, int, bool, bool]]) -> Road:
    """``results``: each coup's (winner, number, player pair, banker pair) in
    turn. A run of one hand's wins goes down a column; the other hand's win
    starts the next column; a tie is marked on the win before it."""
    road = Road()
    for winner, coup, player_pair, banker_pair in results:
        if winner == "tie":
            if road.columns:
                road.columns[-1][-1].ties += 1
            else:
                road.ties_first += 1
            continue
        mark = Mark(winner, coup, pairs=(player_pair, banker_pair))
        if road.columns and road.columns[-1][-1].winner == winner:
            road.columns[-1].append(mark)
        else:
            road.columns.append([mark])
    return road


def shoe_facts(stored: list[Stored]) -> dict[str, Any]:
    """A shoe's facts, its coups with their results, and its roads, from its records."""
    facts: dict[str, Any] = {"burned": 0, "ended": None, "shuffled": None}
    coups: dict[str, str] = {}  # coup -> its result, in turn
    beads: list[Bead] = []
    marks: list[tuple[str, int, bool, bool]] = []
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
                number = subjects.coup_number(coup) or 0
                coups[coup] = f"{e.winner} {e.player_points}-{e.banker_points}"
                beads.append(Bead(e.winner, number))
                marks.append((e.winner, number, e.player_pair, e.banker_pair))
            elif isinstance(e, blackjack_messages.CoupResulted):
                coups[coup] = f"dealer {'blackjack' if e.dealer_blackjack else e.dealer_total}"
    return {"facts": facts, "coups": list(coups.items())[::-1], "bead_plate": bead_plate(beads),
            "big_road": big_road(marks), "baccarat": bool(beads)}
