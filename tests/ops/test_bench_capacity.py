"""The capacity search: tables stepped up while every command holds its
target, down while none has, then the interval between the most that held
and the fewest that did not halved; a step's figures from a real casino."""

from __future__ import annotations

from typing import Any

import pytest
from bench.capacity import MOST_P99_MS, described, holds, one_step, search


def carried_up_to(most: int) -> Any:
    """A step that holds up to ``most`` tables, with the tables asked for recorded."""
    asked: list[int] = []

    async def step(tables: int) -> dict[str, Any]:
        asked.append(tables)
        p99 = MOST_P99_MS if tables <= most else MOST_P99_MS + 1
        return {"tables": tables, "command_p99_ms": p99, "commands": {"OpenCoup": {"p99_ms": p99}}}

    return step, asked


@pytest.mark.anyio
async def test_the_search_doubles_while_the_tables_hold_then_halves_the_interval() -> None:
    step, asked = carried_up_to(700)
    found = await search(step, start=250, most=16000, halvings=2)
    assert asked == [250, 500, 1000, 750, 625]
    assert (found["tables"], found["not_held"]) == (625, 750)
    assert [s["tables"] for s in found["steps"]] == asked


@pytest.mark.anyio
async def test_the_search_halves_down_from_a_start_that_does_not_hold() -> None:
    step, asked = carried_up_to(90)
    found = await search(step, start=250, most=16000, halvings=2)
    assert asked == [250, 125, 62, 93, 77]
    assert (found["tables"], found["not_held"]) == (77, 93)


@pytest.mark.anyio
async def test_the_search_stops_at_its_bounds() -> None:
    step, asked = carried_up_to(10**6)
    assert (await search(step, start=250, most=1000, halvings=2))["tables"] == 1000 and asked == [250, 500, 1000]
    step, asked = carried_up_to(0)
    found = await search(step, start=4, most=1000, halvings=2)
    assert (found["tables"], found["not_held"], asked) == (0, 1, [4, 2, 1])


@pytest.mark.anyio
async def test_the_search_takes_no_more_steps_than_it_is_given() -> None:
    """A search started near the last figure and bounded in steps, as `make bench` runs it: its bracket so far."""
    step, asked = carried_up_to(700)
    found = await search(step, start=1000, most=16000, halvings=2, most_steps=3)
    assert asked == [1000, 500, 750] and (found["tables"], found["not_held"]) == (500, 750)
    step, asked = carried_up_to(10**6)
    found = await search(step, start=250, most=16000, halvings=2, most_steps=2)
    assert asked == [250, 500] and (found["tables"], found["not_held"]) == (500, 0)


def test_a_step_holds_only_with_every_command_type_within_the_target() -> None:
    assert holds({"command_p99_ms": MOST_P99_MS, "commands": {"OpenCoup": {}}})
    assert not holds({"command_p99_ms": MOST_P99_MS + 0.1, "commands": {"OpenCoup": {}}})
    assert not holds({"command_p99_ms": 0.0, "commands": {}})  # nothing answered holds nothing


@pytest.mark.anyio
async def test_a_step_times_every_command_after_each_tables_first_coup() -> None:
    figures = await one_step(8, period=3.0, window=4.0)
    assert figures["tables"] == 8 and figures["offered_coups_per_s"] == 8 / 3.0
    assert figures["coups_per_s"] > 0
    assert {"OpenCoup", "PlaceWagers", "CloseBetting"} <= set(figures["commands"])
    assert figures["command_p99_ms"] == max(c["p99_ms"] for c in figures["commands"].values())


@pytest.mark.anyio
async def test_a_step_whose_tables_cannot_all_deal_a_first_coup_in_time_does_not_hold() -> None:
    figures = await one_step(4, period=3.0, window=1.0, grace=-3.0)  # the deadline passed as the step starts
    assert figures["first_coups_not_dealt"] == 4 and not holds(figures)
    assert "4 of them yet to deal a first coup (not held)" in described(figures)
