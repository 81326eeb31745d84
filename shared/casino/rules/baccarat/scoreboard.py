"""A baccarat shoe's scoreboard, to the convention every casino's display
follows: the bead plate, the big road, its three derived roads (big eye boy,
small road, cockroach pig), the shoe's counts, and the "ask" (what each
derived road would show after a banker or a player win).

One pure function (``scoreboard``) makes it all from the shoe's results in
turn, voided coups left out by the caller. Each road is a grid six rows high:

- **Bead plate**: every coup, ties included, top to bottom, then the next column.
- **Big road**: a column for each run of one hand's wins; the other hand's
  win starts the next column. A tie is marked on the cell of the win before
  it (ties before the shoe's first win, on its first cell). A run that meets
  the bottom row, or a cell taken already, turns right along its row: the
  dragon's tail.
- **Derived roads**: each win of the big road, from a starting cell on, is
  red where the big road repeats itself and blue where it does not, compared
  with the column 1 (big eye boy), 2 (small road) or 3 (cockroach pig) to the
  left: a win starting a column compares the two columns before it (red: as
  long as each other); a win down a column looks at the compared column's
  cell level with it (red: there is one, or the compared column stopped two
  or more rows above; blue: it stopped just above). The road starts at the
  big road's cell in column k, row 2, or, where that column has one win, at
  the first cell of column k + 1. Its colours are drawn as the big road's
  wins are, in runs down a column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from casino.rules.baccarat.messages import CoupResulted

ROWS = 6  # a road's height, as the casinos' scoreboards draw it
Result = Literal["B", "P", "T"]
Colour = Literal["red", "blue"]
DERIVED = {"big_eye_boy": 1, "small_road": 2, "cockroach_pig": 3}  # each road's column offset


class Coup(msgspec.Struct, frozen=True):
    """One coup's result as the scoreboard needs it."""

    result: Result
    banker_pair: bool = False
    player_pair: bool = False
    natural: bool = False  # either hand's first two cards made 8 or 9


def of_result(e: CoupResulted) -> Coup:
    """A coup's result as recorded (``baccarat.coup_resulted``), as the scoreboard needs it."""
    letter: Result = "B" if e.winner == "banker" else "P" if e.winner == "player" else "T"
    return Coup(letter, e.banker_pair, e.player_pair, e.natural)


def code(coup: Coup) -> str:
    """A coup's result in a few letters, as a read model keeps a shoe's: B, P
    or T, then b for a banker pair, p for a player pair, n for a natural."""
    return coup.result + "b" * coup.banker_pair + "p" * coup.player_pair + "n" * coup.natural


def decoded(text: str) -> Coup | None:
    """The coup ``code`` wrote (None: not one, read leniently)."""
    if not text or text[0] not in "BPT":
        return None
    letter: Result = "B" if text[0] == "B" else "P" if text[0] == "P" else "T"
    return Coup(letter, "b" in text[1:], "p" in text[1:], "n" in text[1:])


class Bead(msgspec.Struct, frozen=True):
    col: int
    row: int
    result: Result
    banker_pair: bool
    player_pair: bool


class Mark(msgspec.Struct, frozen=True):
    col: int
    row: int
    winner: Literal["B", "P"]
    ties: int
    banker_pair: bool
    player_pair: bool


class Dot(msgspec.Struct, frozen=True):
    col: int
    row: int
    colour: Colour


class Ask(msgspec.Struct, frozen=True):
    """What each derived road would show next (None: nothing yet)."""

    big_eye_boy: Colour | None
    small_road: Colour | None
    cockroach_pig: Colour | None


class Scoreboard(msgspec.Struct, frozen=True):
    results: list[Result]
    bead_plate: list[Bead]
    big_road: list[Mark]
    big_eye_boy: list[Dot]
    small_road: list[Dot]
    cockroach_pig: list[Dot]
    counts: dict[str, int]
    ask: dict[str, Ask]


def place(runs: Sequence[int]) -> list[tuple[int, int]]:
    """The cells of runs of ``runs[i]`` marks each, as a road draws them: each
    run from the top of the next column that is free at the top, down while
    the cell below is free and within the road, then right along its row
    (the dragon's tail)."""
    taken: set[tuple[int, int]] = set()
    cells: list[tuple[int, int]] = []
    start = -1
    for length in runs:
        start += 1
        while (start, 0) in taken:
            start += 1
        col, row, turned = start, 0, False
        for i in range(length):
            if i:
                if not turned and row + 1 < ROWS and (col, row + 1) not in taken:
                    row += 1
                else:
                    col, turned = col + 1, True
            taken.add((col, row))
            cells.append((col, row))
    return cells


def _runs(letters: Sequence[str]) -> list[int]:
    """The lengths of the runs of one letter in ``letters``."""
    runs: list[int] = []
    for i, letter in enumerate(letters):
        if i and letter == letters[i - 1]:
            runs[-1] += 1
        else:
            runs.append(1)
    return runs


def _colour(columns: Sequence[int], k: int) -> Colour | None:
    """The derived road's colour for the big road's latest win, where the
    big road's columns (by logical column: each run's length) are
    ``columns``, compared with the column ``k`` to the left; None before
    the road's starting cell."""
    c, r = len(columns) - 1, columns[-1] - 1
    if r == 0:
        if c < k + 1:
            return None
        return "red" if columns[c - 1] == columns[c - 1 - k] else "blue"
    if c < k:
        return None
    return "blue" if columns[c - k] == r else "red"


def _derived(wins: Sequence[str]) -> dict[str, list[Colour]]:
    """Each derived road's colours in turn, from the big road's wins in turn."""
    colours: dict[str, list[Colour]] = {name: [] for name in DERIVED}
    columns: list[int] = []
    for i, winner in enumerate(wins):
        if i and winner == wins[i - 1]:
            columns[-1] += 1
        else:
            columns.append(1)
        for name, k in DERIVED.items():
            if (colour := _colour(columns, k)) is not None:
                colours[name].append(colour)
    return colours


def _dots(colours: Sequence[Colour]) -> list[Dot]:
    return [Dot(col, row, colour) for (col, row), colour in zip(place(_runs(colours)), colours, strict=True)]


def big_road(coups: Sequence[Coup], columns: int | None = None) -> list[Mark]:
    """The shoe's big road from its coups in turn: each win a mark, the ties
    after it on it (those before the first win on the first); ``columns``:
    its latest columns only, the first of them drawn first, as a small
    display shows it."""
    wins = [c for c in coups if c.result != "T"]
    ties_after: list[int] = [0] * len(wins)
    leading, seen = 0, -1
    for c in coups:
        if c.result != "T":
            seen += 1
        elif seen < 0:
            leading += 1
        else:
            ties_after[seen] += 1
    if wins:
        ties_after[0] += leading
    marks = [Mark(col, row, "B" if c.result == "B" else "P", ties, c.banker_pair, c.player_pair)
             for (col, row), c, ties in zip(place(_runs([c.result for c in wins])), wins, ties_after, strict=True)]
    if columns is None or not marks:
        return marks
    first = max(m.col for m in marks) + 1 - columns
    return [msgspec.structs.replace(m, col=m.col - first) for m in marks if m.col >= first] if first > 0 else marks


def scoreboard(coups: Sequence[Coup]) -> Scoreboard:
    """The shoe's scoreboard from its coups in turn (voided coups left out)."""
    beads = [Bead(i // ROWS, i % ROWS, c.result, c.banker_pair, c.player_pair) for i, c in enumerate(coups)]
    letters = [c.result for c in coups if c.result != "T"]
    marks = big_road(coups)
    derived = _derived(letters)
    counts = {"coups": len(coups), "banker": sum(c.result == "B" for c in coups),
              "player": sum(c.result == "P" for c in coups), "tie": sum(c.result == "T" for c in coups),
              "banker_pair": sum(c.banker_pair for c in coups), "player_pair": sum(c.player_pair for c in coups),
              "natural": sum(c.natural for c in coups)}
    ask = {}
    for letter in ("B", "P"):
        after = _derived([*letters, letter])
        ask[letter] = Ask(*(after[name][-1] if len(after[name]) > len(derived[name]) else None for name in DERIVED))
    return Scoreboard([c.result for c in coups], beads, marks, _dots(derived["big_eye_boy"]),
                      _dots(derived["small_road"]), _dots(derived["cockroach_pig"]), counts, ask)


def _grid(cells: Sequence[tuple[int, int, str]], width: int = 2) -> list[str]:
    """Six lines drawing ``cells`` (column, row, text) at their places."""
    columns = max((c for c, _, _ in cells), default=-1) + 1
    lines = [[" " * width] * columns for _ in range(ROWS)]
    for col, row, text in cells:
        lines[row][col] = text.ljust(width)
    return ["".join(line).rstrip() for line in lines]


def text(board: Scoreboard) -> list[str]:
    """The scoreboard as lines of text (``casino replay roads``): B banker, P
    player, T tie; on the big road a tie's count beside the win it is marked
    on; on the derived roads r red and b blue."""
    out = ["Bead plate (B banker, P player, T tie):",
           *_grid([(b.col, b.row, b.result) for b in board.bead_plate]),
           "Big road (a digit: the ties marked on the win):",
           *_grid([(m.col, m.row, m.winner + (str(m.ties) if m.ties else "")) for m in board.big_road], 3)]
    for name in DERIVED:
        out += [f"{name.replace('_', ' ').capitalize()} (r red, b blue):",
                *_grid([(d.col, d.row, d.colour[0]) for d in getattr(board, name)])]
    counts = board.counts
    out.append(f"{counts['coups']} coups: banker {counts['banker']}, player {counts['player']}, tie {counts['tie']}; "
               f"banker pairs {counts['banker_pair']}, player pairs {counts['player_pair']}, "
               f"naturals {counts['natural']}")
    for letter, ask in board.ask.items():
        shown = ", ".join(f"{name.replace('_', ' ')} {getattr(ask, name) or '-'}" for name in DERIVED)
        out.append(f"Ask {'banker' if letter == 'B' else 'player'}: {shown}")
    return out
