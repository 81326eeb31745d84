"""A baccarat shoe's results as the roads a player reads: the bead plate
(each coup in turn, six to a column) and the big road (a column for each run
of one hand's wins, a tie marked on the coup before it)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
