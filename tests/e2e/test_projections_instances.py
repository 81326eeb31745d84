"""Two projections instances: one writes the read models at a time (a lease),
so they never go back, and they end equal to the stream folded again."""

from __future__ import annotations

import asyncio

import pytest
from services import runner

from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import Simulator
from casino.readmodels.projections import META, KvProjections, Projector
from casino.store import subjects
from tests.e2e.casino import Casino

pytestmark = pytest.mark.anyio


async def test_two_projections_instances_write_read_models_that_never_go_back(nats_url: str) -> None:
    tables = default_tables(4, list(SHORT))
    async with Casino(nats_url, tables) as casino:
        instances = [await runner.start("projections", nats_url) for _ in range(2)]
        kv = await KvProjections(casino.nc.jetstream()).open()
        seen: list[int] = []
        watcher = await kv.kv[META].watch("seq")

        async def watch() -> None:
            async for entry in watcher:
                if entry is not None and entry.value:
                    seen.append(int(entry.value))

        watching = asyncio.create_task(watch())
        try:
            await Simulator(casino.nc, tables, seed=3).run(8)
            for _ in range(100):  # the rounds' ends at the shoe may still be coming in
                last = await casino.store.last(f"{subjects.EVENTS}.>")
                assert last is not None
                if await kv.seq() == last.seq:
                    break
                await asyncio.sleep(0.1)
            assert await kv.seq() == last.seq
        finally:
            watching.cancel()
            await watcher.stop()
            for r in instances:
                await r.stop()
        # The stream sequence they are written up to, as they go (the keys changed gathered for up to
        # a turn of services.followers.Turns before each write), never going back.
        assert len(seen) > 3 and seen == sorted(seen), seen
        folded = Projector()
        folded.fold(await casino.store.read(f"{subjects.EVENTS}.>"))
        live = await kv.values(folded.everything())
        assert live == folded.everything()


async def test_a_standby_folds_nothing_and_takes_over_from_the_checkpoint_when_the_writer_stops(
        nats_url: str) -> None:
    """One instance writes; the other stands by with no consumer and nothing
    folded (no work done twice). Once the writer stops, the standby becomes
    the writer from the checkpoint and the stream since, and the read models
    end equal to the stream folded again."""
    tables = default_tables(4, list(SHORT))
    async with Casino(nats_url, tables) as casino:
        instances = [await runner.start("projections", nats_url) for _ in range(2)]
        kv = await KvProjections(casino.nc.jetstream()).open()
        try:
            await Simulator(casino.nc, tables, seed=3).run(4)
            [writer] = [r for r in instances if r.wiring.projections.wrote]
            [standby] = [r for r in instances if r is not writer]
            assert standby.wiring.projections.subscription is None
            assert standby.wiring.projections.projector.seq == 0 and standby.durables == []
            handled = "casino_event_handling_seconds_count"
            assert standby.metrics.registry.get_sample_value(handled, {"service": "projections"}) is None
            await writer.stop()
            instances.remove(writer)
            await Simulator(casino.nc, tables, seed=4).run(8)
            for _ in range(200):
                last = await casino.store.last(f"{subjects.EVENTS}.>")
                assert last is not None
                if await kv.seq() == last.seq:
                    break
                await asyncio.sleep(0.1)
            assert await kv.seq() == last.seq and standby.wiring.projections.wrote
        finally:
            for r in instances:
                await r.stop()
        folded = Projector()
        folded.fold(await casino.store.read(f"{subjects.EVENTS}.>"))
        assert await kv.values(folded.everything()) == folded.everything()
