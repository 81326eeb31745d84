"""A simulator dealing for days keeps nothing per coup once the coup is
settled, except what a benchmark asks of a table: each coup's time from the
close of betting to its settlement."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.protocol import commands
from tests.e2e.casino import SUPERVISOR, Casino

pytestmark = pytest.mark.anyio
# The simulated floor's tables, with the test's own supervisor on the casino's roster beside the simulator's.
TABLES = {name: msgspec.structs.replace(config, supervisors=(*config.supervisors, SUPERVISOR))
          for name, config in default_tables(2, ["baccarat-000-methods"]).items()}


async def test_a_simulator_keeps_per_coup_only_the_timings_a_table_was_asked_for(nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        sim = Simulator(casino.nc, TABLES, seed=4, patience=40)
        dealing = asyncio.create_task(sim.run(3))
        while not sim.playing:  # the tables exist before any of them has closed its betting
            await asyncio.sleep(0)
        timed, untimed = sim.playing
        timed.close_to_settled = {}
        while not sim.waiting:  # a coup is open and waits for its settlement
            await asyncio.sleep(0.01)
        await asyncio.wait_for(dealing, 120)
    assert sim.waiting == {}
    assert untimed.close_to_settled is None
    assert sorted(timed.close_to_settled) == [f"{timed.name}-{n:06d}" for n in (1, 2, 3)]
    assert all(0 < s < 60 for s in timed.close_to_settled.values())


async def test_a_stopped_simulator_opens_no_more_coups_and_its_run_ends_by_itself(nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        sim = Simulator(casino.nc, TABLES, seed=4, patience=40)
        dealing = asyncio.create_task(sim.run(None))  # forever, until stopped
        while not sim.waiting:  # a coup is in hand
            await asyncio.sleep(0.01)
        sim.stop()
        dealt = {t.name: t.coups for t in sim.playing}
        await asyncio.wait_for(dealing, 60)  # not cancelled: each table ends its play
        assert all(t.coups - dealt[t.name] <= 1 for t in sim.playing)  # the coup in hand, no more
        assert sim.waiting == {}


@pytest.mark.parametrize("left", ["betting open", "betting closed"])
async def test_a_simulated_table_deals_the_coup_left_in_hand_to_its_end_first(nats_url: str, left: str) -> None:
    """The floor stopped in the middle of a coup (``make run`` interrupted) and
    started again: the table takes the coup up where it stands, then deals on."""
    tables = dict(list(TABLES.items())[:1])
    [table] = tables
    async with Casino(nats_url, tables) as casino:
        opened = await casino.supervise(table, commands.OpenCoup, procedure="method_b")
        assert opened.ok and opened.waiting is not None and opened.waiting.kind == "close_betting"
        if left == "betting closed":
            assert (await casino.ask(table, "wager", commands.PlaceWager, coup=opened.coup, seat=3, bet="banker",
                                     amount=5000)).ok
            closed = await casino.ask(table, "coup", commands.CloseBetting, coup=opened.coup)
            assert closed.ok and closed.waiting is not None and closed.waiting.kind == "answer"
        await asyncio.wait_for(Simulator(casino.nc, tables, seed=4, patience=40).run(2), 60)
        assert [(await casino.settled(f"{table}-{n:06d}")).coup_id for n in (1, 2)] == [opened.coup, f"{table}-000002"]
