"""A simulated table times each coup from the close of betting to its
settlement only once a benchmark asks it to: kept for no one, the timings of a
casino dealing for days would grow without end."""

from __future__ import annotations

import asyncio

import nats
import pytest
from services import runner

from casino.launcher import default_tables
from casino.simulator import Simulator

pytestmark = pytest.mark.anyio
TABLES = default_tables(2, ["baccarat-000-methods"])


async def test_only_the_tables_asked_keep_each_coups_close_to_settlement_time(nats_url: str) -> None:
    running = [await runner.start(kind, nats_url, tables=TABLES) for kind in runner.KINDS]
    nc = await nats.connect(nats_url)
    try:
        sim = Simulator(nc, TABLES, seed=4, patience=40)
        dealing = asyncio.create_task(sim.run(3))
        while not sim.playing:  # the tables exist before any of them has closed its betting
            await asyncio.sleep(0)
        timed, untimed = sim.playing
        timed.close_to_settled = {}
        await asyncio.wait_for(dealing, 120)
    finally:
        await nc.close()
        for r in reversed(running):
            await r.stop()
    assert untimed.close_to_settled is None
    assert sorted(timed.close_to_settled) == [f"{timed.name}-{n:06d}" for n in (1, 2, 3)]
    assert all(0 < s < 60 for s in timed.close_to_settled.values())
