"""Replay speed: coups reconstructed and verified per second, against the raw
rate of reading the same events from the stream with an ordered consumer.

A simulated casino first deals the coups into a fresh store (four tables, one
per regulation; `make bench` deals 150 coups at each, some 10,000 messages:
what a verification pays once, forking, connecting and finding the tables,
weighs less on it than on a store of a few coups, and a casino's day is
larger still). Then each run times (a) reading every message of the stream
with an ordered consumer, doing nothing with it, (b) reading, decoding,
replaying and verifying every coup and shoe as ``casino verify`` does, one
process per core, each reading its share of the tables over its own
connection (connecting included), and (c) the same in one process. The
figure is the median of the runs.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import nats
from nats.js.api import DeliverPolicy
from services import runner

from bench.runs import span
from casino.audit.audits import verify_store
from casino.audit.parallel import cores
from casino.audit.replay import replay_coup
from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import Simulator
from casino.nats.provision import provision
from casino.nats.server import NatsServer
from casino.store import subjects
from casino.store.jetstream import STREAM


async def deal(url: str, coups_per_table: int) -> None:
    tables = default_tables(4, list(SHORT))
    nc = await nats.connect(url)
    await provision(nc)
    running = [await runner.start(kind, url, tables=tables) for kind in runner.KINDS]
    try:
        await Simulator(nc, tables, seed=1).run(coups_per_table)
    finally:
        await nc.close()
        for r in reversed(running):
            await r.stop()


async def raw_read(nc: Any, total: int) -> float:
    """Seconds to receive every message of the stream with an ordered consumer,
    each handed to a callback that does nothing with it (the way the store reads)."""
    js = nc.jetstream()
    received = 0
    done = asyncio.Event()

    async def count(msg: Any) -> None:
        nonlocal received
        received += 1
        if received == total:
            done.set()

    start = time.perf_counter()
    sub = await js.subscribe(f"{subjects.EVENTS}.>", stream=STREAM, cb=count, ordered_consumer=True,
                             deliver_policy=DeliverPolicy.ALL)
    await asyncio.wait_for(done.wait(), timeout=60)
    elapsed = time.perf_counter() - start
    await sub.unsubscribe()
    return elapsed


async def replay_and_verify(nc: Any, processes: int) -> tuple[float, int]:
    """Seconds to read, decode, replay and verify every coup and shoe the way
    ``casino verify`` does (the tables shared among ``processes``); coups."""
    start = time.perf_counter()
    report = await verify_store(nc, processes, each_coup=replay_coup)
    elapsed = time.perf_counter() - start
    assert not report.findings, report.findings[:3]
    return elapsed, report.coups


async def measure(coups_per_table: int = 150, runs: int = 5) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        await deal(server.url, coups_per_table)
        nc = await nats.connect(server.url)
        total = (await nc.jetstream().stream_info(STREAM)).state.messages
        raw, full, alone = [], [], []
        coups = 0
        for _ in range(runs):
            raw.append(await raw_read(nc, total))
            seconds, coups = await replay_and_verify(nc, cores())
            full.append(seconds)
            alone.append((await replay_and_verify(nc, 1))[0])
        await nc.close()
    raw_rate = coups / statistics.median(raw)
    rate, one = coups / statistics.median(full), coups / statistics.median(alone)
    return {"coups": coups, "messages": total, "runs": runs, "processes": cores(), "coups_per_s": rate,
            "raw_coups_per_s": raw_rate, "ratio": rate / raw_rate,
            "ratio_range": span(read / seconds for read, seconds in zip(raw, full, strict=True)),
            "one_process": {"coups_per_s": one, "ratio": one / raw_rate}}
