"""The scoreboard of a shoe, against shoes worked by hand: the big road's
dragon's tail (and a run turned by an earlier tail), ties before the first
hand, each derived road's first entry, the counts and the ask."""

from __future__ import annotations

from typing import Any

import msgspec

from casino.rules.baccarat.scoreboard import Ask, Coup, big_road, scoreboard


def shoe(letters: str, **marks: set[int]) -> list[Coup]:
    """Coups from letters (B, P, T); ``marks``: the indices with a banker
    pair, a player pair, a natural."""
    return [Coup(letter, i in marks.get("banker_pair", set()), i in marks.get("player_pair", set()),
                 i in marks.get("natural", set())) for i, letter in enumerate(letters)]


def cells(road: list[Any]) -> list[tuple[int, int]]:
    return [(m.col, m.row) for m in road]


def test_a_run_that_meets_the_bottom_turns_right_along_it() -> None:
    board = scoreboard(shoe("BBBBBBBBPP"))
    assert cells(board.big_road) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 5), (2, 5), (1, 0), (1, 1)]
    assert [m.winner for m in board.big_road] == list("BBBBBBBBPP")
    assert max(m.row for m in board.big_road) == 5  # six rows, never a seventh


def test_a_run_that_meets_an_earlier_tail_turns_right_above_it() -> None:
    board = scoreboard(shoe("BBBBBBBPPPPPP"))
    assert cells(board.big_road)[7:] == [(1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (2, 4)]


def test_ties_are_marked_on_the_win_before_them_and_those_before_the_first_win_on_the_first() -> None:
    board = scoreboard(shoe("TTBTPT"))
    assert [(m.col, m.row, m.winner, m.ties) for m in board.big_road] == [(0, 0, "B", 3), (1, 0, "P", 1)]
    assert [(b.col, b.row, b.result) for b in board.bead_plate] == [
        (0, 0, "T"), (0, 1, "T"), (0, 2, "B"), (0, 3, "T"), (0, 4, "P"), (0, 5, "T")]
    assert scoreboard(shoe("TTTTTTT")).bead_plate[6].col == 1  # the seventh coup tops the second column
    assert scoreboard(shoe("TT")).big_road == []


def test_each_derived_roads_first_entry() -> None:
    # Big eye boy: from the big road's column 2, row 2 (B P P: blue, the column before stopped just above) ...
    assert [(d.col, d.row, d.colour) for d in scoreboard(shoe("BPP")).big_eye_boy] == [(0, 0, "blue")]
    # ... or, where column 2 has one win, from column 3's first (B P B: red, columns 1 and 2 as long).
    assert [d.colour for d in scoreboard(shoe("BPB")).big_eye_boy] == ["red"]
    assert scoreboard(shoe("BP")).big_eye_boy == []
    # Small road: from column 3, row 2, or column 4's first (B P B P: columns 3 and 1 compared, red).
    assert scoreboard(shoe("BPB")).small_road == []
    assert [d.colour for d in scoreboard(shoe("BPBP")).small_road] == ["red"]
    assert [d.colour for d in scoreboard(shoe("BPBB")).small_road] == ["blue"]
    # Cockroach pig: from column 4, row 2, or column 5's first.
    assert scoreboard(shoe("BPBP")).cockroach_pig == []
    assert [d.colour for d in scoreboard(shoe("BPBPB")).cockroach_pig] == ["red"]
    assert scoreboard(shoe("BBPBBP")).cockroach_pig == []
    # Column 4, row 2 (B B P B B P P): column 1 has a second row: red.
    assert [(d.col, d.row, d.colour) for d in scoreboard(shoe("BBPBBPP")).cockroach_pig] == [(0, 0, "red")]


def test_a_worked_shoe_its_derived_roads_drawn_in_runs() -> None:
    """B B P B B B P P B T P: big road columns of 2, 1, 3, 2, 1 and 1 wins,
    the tie on the fifth column's B. Worked by hand (columns from 0): the big
    eye boy starts at column 2's first, column 1 having one win. B (2, 0):
    columns 1 and 0, 1 against 2: blue; B (2, 1): column 1 stopped just
    above: blue; B (2, 2): column 1 stopped two rows above: red; P (3, 0):
    columns 2 and 1, 3 against 1: blue; P (3, 1): column 2 has row 1: red;
    B (4, 0): 2 against 3: blue; P (5, 0): 1 against 2: blue."""
    board = scoreboard(shoe("BBPBBBPPBTP"))
    assert [c.col for c in board.big_road] == [0, 0, 1, 2, 2, 2, 3, 3, 4, 5]
    assert [d.colour for d in board.big_eye_boy] == ["blue", "blue", "red", "blue", "red", "blue", "blue"]
    # Drawn as runs: blue blue | red | blue | red | blue blue.
    assert [(d.col, d.row) for d in board.big_eye_boy] == [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0), (4, 0), (4, 1)]
    assert board.big_road[8].ties == 1


def test_counts_and_the_ask() -> None:
    board = scoreboard(shoe("BPBTB", banker_pair={0}, player_pair={1, 3}, natural={2}))
    assert board.counts == {"coups": 5, "banker": 3, "player": 1, "tie": 1, "banker_pair": 1, "player_pair": 2,
                            "natural": 1}
    assert board.results == ["B", "P", "B", "T", "B"]
    # After B P B B: another B goes down column 3 (row 2), looking at column 2 (one win): red;
    # a P starts column 4, comparing columns 3 and 2 (2 vs 1): blue.
    assert board.ask["B"].big_eye_boy == "red" and board.ask["P"].big_eye_boy == "blue"
    assert scoreboard(shoe("B")).ask == {"B": Ask(None, None, None), "P": Ask(None, None, None)}


def test_a_small_display_shows_the_big_roads_latest_columns_from_the_left() -> None:
    """18 columns, one with a dragon's tail: the latest 12 shown, each mark
    where the whole road has it, 6 columns to the left (the tail's last cells
    among them); a road within 12 columns, whole."""
    coups = shoe("BPBPBPBBBBBBBBPBPBPBPBPBP", banker_pair={7})  # runs of one, and a run of eight whose tail turns right
    whole = scoreboard(coups).big_road
    assert max(m.col for m in whole) == 17 and [(m.col, m.row) for m in whole if m.row == 5] == [(6, 5), (7, 5), (8, 5)]
    latest = big_road(coups, 12)
    assert latest == [msgspec.structs.replace(m, col=m.col - 6) for m in whole if m.col >= 6]
    assert latest[0] == msgspec.structs.replace(whole[6], col=0) and latest[1].banker_pair  # the run of eight, shown whole
    assert big_road(coups[:8], 12) == scoreboard(coups[:8]).big_road == big_road(coups[:8])
