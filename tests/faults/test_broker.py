"""Broker faults: a 3-node JetStream cluster with the stream replicated three
times. Stop one node in the middle of a run: dealing goes on with nothing
lost; start it again: it catches up. Stop the whole cluster and start it
again: the services reconnect and resume by themselves."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import nats
import pytest
from services import runner

from casino.audit.audits import verify_history
from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import Simulator
from casino.nats.provision import provision
from casino.nats.server import NatsCluster
from casino.store import subjects
from casino.store.eventstore import Stored
from casino.store.jetstream import STREAM, JetStreamEventStore
from tests.faults.harness import audit

pytestmark = pytest.mark.anyio
COUPS = int(os.environ.get("CASINO_SOAK_COUPS", "12"))


async def stream_last(url: str) -> int:
    nc = await nats.connect(url)
    try:
        return (await nc.jetstream().stream_info(STREAM)).state.last_seq
    finally:
        await nc.close()


async def test_a_node_lost_and_the_whole_cluster_restarted_lose_nothing(tmp_path: Path) -> None:
    cluster = NatsCluster(tmp_path / "cluster").start()
    tables = default_tables(4, list(SHORT))
    try:
        nc = await nats.connect(servers=cluster.url.split(","), max_reconnect_attempts=-1)
        for _ in range(50):  # the cluster elects a JetStream leader
            try:
                await provision(nc, replicas=3)
                break
            except Exception:
                await asyncio.sleep(0.2)
        running = [await runner.start(kind, cluster.url, tables=tables) for kind in runner.KINDS]
        sim = asyncio.create_task(Simulator(nc, tables, seed=8, patience=60).run(COUPS))

        async def read(filter_: str) -> list[Stored]:
            while True:  # the test's own reads wait out the outage too
                try:
                    return await JetStreamEventStore(nc).read(filter_)
                except (nats.errors.Error, TimeoutError):
                    await asyncio.sleep(0.5)

        async def settled() -> int:
            return len(await read(subjects.aggregate_filter("settle")))

        async def until_settled(count: int, why: str) -> None:  # a stall fails the test, never hangs it
            count = min(count, 4 * COUPS)  # dealing may be further on than the step asks
            async def wait() -> None:
                while await settled() < count:
                    await asyncio.sleep(0.2)
            try:
                await asyncio.wait_for(wait(), timeout=120)
            except TimeoutError:
                pytest.fail(f"dealing stalled {why}: fewer than {count} coups settled in 120 s")

        await until_settled(8, "before the fault")
        mark = await settled()
        cluster.stop_node(1)  # one node down in the middle of the run
        await until_settled(mark + 8, "with a node lost")  # dealing goes on
        cluster.start_node(1)
        await until_settled(mark + 16, "after the node came back")
        cluster.stop()  # the whole cluster down ...
        await asyncio.sleep(1.0)
        cluster.start()  # ... and back: the services reconnect by themselves
        await asyncio.wait_for(sim, timeout=300)
        # A table sees its coup settled on the live event, which can precede the
        # append's acknowledgement while the cluster comes back; an append that
        # was not acknowledged is made again, so the stream ends with every one.
        await until_settled(4 * COUPS, "after the cluster came back")

        last = max(m.seq for m in await read(subjects.aggregate_filter("settle")))
        for i in range(3):  # every node, the restarted one too, holds the whole stream
            for _ in range(100):
                if await stream_last(f"nats://127.0.0.1:{cluster.client_ports[i]}") >= last:
                    break
                await asyncio.sleep(0.2)
            assert await stream_last(f"nats://127.0.0.1:{cluster.client_ports[i]}") >= last
        # Read once every node holds it: a direct get may be answered by any replica.
        stored = await read(f"{subjects.EVENTS}.>")
        for r in reversed(running):
            await r.stop()
        await nc.close()
    finally:
        cluster.stop()
    assert audit(stored, tables, COUPS) == []
    report = verify_history(stored)
    assert report.findings == [] and report.coups == 4 * COUPS
