"""The floor's console on a second `make run`: where each table stands, from
its latest coup, its shoe in play and the read models' takings, the same as
the whole history shows, without reading the history."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from casino.cli.console import Console, where_tables_stand
from casino.cli.run import APPROVALS
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.readmodels.projections import KvProjections, Takings
from casino.rules.shoe import RoundEnded
from casino.store import subjects
from tests.e2e.casino import Casino
from tests.e2e.test_bounded_start import reads_of, small_shoe

pytestmark = pytest.mark.anyio


async def test_a_second_run_shows_each_table_where_its_whole_history_leaves_it(nats_url: str, tmp_path: Path) -> None:
    tables = {"B-1": TableConfig(small_shoe(tmp_path, "baccarat-000-methods"), approvals=APPROVALS),
              "J-1": TableConfig(small_shoe(tmp_path, "blackjack-003-no-hole-card"))}
    async with Casino(nats_url, tables) as casino:
        await casino.start("projections")
        await Simulator(casino.nc, tables, seed=5, patience=40).run(20)
        for table in tables:
            await casino.recorded(f"{table}-000020", RoundEnded)
        kv = await KvProjections(casino.nc.jetstream()).open()
        last = (await casino.store.read(f"{subjects.EVENTS}.>"))[-1].seq
        while await kv.seq() < last:
            await asyncio.sleep(0.05)

        whole = Console(list(tables), live=False)
        for table in tables:
            for msg in await casino.store.read(subjects.table_filter(table)):
                whole.on_batch(msg.subject, msg.batch)
        assert all(v.settled == 20 and not v.shoe.endswith("-shoe-1") for v in whole.views.values())

        takings = {key: msgspec.json.decode(value, type=Takings)
                   for (_, key), value in (await kv.values(("takings", t) for t in tables)).items() if value}
        reads = reads_of(casino.store)
        seeded = Console(list(tables), live=False)
        await where_tables_stand(seeded, casino.store, takings)
        assert seeded.render() == whole.render()
        assert reads and all(subjects.tokens(f)[1] != "*" for f in reads)  # a coup or a shoe, not the history
