"""The roads a baccarat player reads, drawn from a shoe's results."""

from __future__ import annotations

from services.web.roads import Bead, bead_plate, big_road


def test_the_bead_plate_fills_each_column_of_six_top_down_in_turn() -> None:
    beads = [Bead("banker" if i % 3 else "player", i + 1) for i in range(14)]
    columns = bead_plate(beads)
    assert [len(c) for c in columns] == [6, 6, 2]
    assert [b.coup for c in columns for b in c] == list(range(1, 15))


def test_the_big_road_runs_each_hands_wins_down_a_column_and_marks_ties_on_the_win_before() -> None:
    results = [("tie", 1, False, False), ("banker", 2, False, True), ("banker", 3, False, False),
               ("tie", 4, False, False), ("tie", 5, False, False), ("player", 6, True, False),
               ("banker", 7, False, False)]
    road = big_road(results)
    assert road.ties_first == 1
    assert [[m.coup for m in c] for c in road.columns] == [[2, 3], [6], [7]]
    assert [m.ties for m in road.columns[0]] == [0, 2]
    assert road.columns[0][0].pairs == (False, True) and road.columns[1][0].pairs == (True, False)
