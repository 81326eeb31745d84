"""Load: many tables dealing flat out for a bounded time, the services as
separate processes on one local nats-server. Reports coups per second, p50
and p99 coup latency (opening to settlement, as the table sees it), each
service's resident memory and how fast it grows, and what each process (the services, the
nats-server, the simulated tables) spends per coup on a core, waiting for one
and in the kernel; then audits and verifies every coup."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from tests.faults.harness import Processes

from casino.audit.audits import verify_history
from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import SimulatedTable, Simulator
from casino.config.tables import TableConfig
from casino.nats.provision import provision
from casino.nats.server import NatsServer
from casino.store import subjects
from casino.store.jetstream import STREAM, JetStreamEventStore


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def usage(pid: int) -> tuple[float, float, float]:
    """Seconds a process has so far spent on a core, waiting runnable for one
    (all its threads, from the scheduler's ``/proc/<pid>/task/*/schedstat``),
    and of its CPU time in the kernel (``/proc/<pid>/stat``)."""
    on_core = waiting = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that has just ended
            ran, waited, _ = (task / "schedstat").read_text().split()
            on_core, waiting = on_core + int(ran), waiting + int(waited)
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return on_core / 1e9, waiting / 1e9, int(fields[12]) / os.sysconf("SC_CLK_TCK")


async def append_all(nc: Client, messages: Iterable[tuple[str, bytes, dict[str, str] | None]],
                     window: int = 4000) -> int:
    """Append every (subject, data, headers) to the event stream, pipelined,
    each acknowledged; how many. A history is written this way, not dealt."""
    js, pending, count = nc.jetstream(), [], 0
    for subject, data, headers in messages:
        pending.append(await js.publish_async(subject, data, stream=STREAM, headers=headers))
        count += 1
        if len(pending) >= window:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)
    return count


MEASURES = ("cpu_ms_per_coup", "wait_ms_per_coup", "kernel_ms_per_coup")


class Meter:
    """What each process spends per coup over a window: CPU, time runnable but
    waiting for a core (the queue in front of the cores), and kernel time."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = {name: usage(pid) for name, pid in pids.items()}

    def spent(self) -> dict[str, list[float]]:
        """Seconds on a core, waiting for one and in the kernel since the meter started, by process."""
        return {name: [b - a for a, b in zip(self.start[name], usage(pid), strict=True)]
                for name, pid in self.pids.items()}

    def per_coup(self, coups: int) -> dict[str, dict[str, float]]:
        """Milliseconds per coup since the meter started, by process and measure."""
        spent = self.spent()
        return {measure: {name: round(1000 * spent[name][i] / max(coups, 1), 2) for name in self.pids}
                for i, measure in enumerate(MEASURES)}

    def per_second(self, elapsed: float) -> dict[str, dict[str, float]]:
        """Cores each process kept busy since the meter started (``cpu_cores``)
        and cores' worth of its threads waiting runnable for one (``wait_cores``)."""
        spent = self.spent()
        return {key: {name: round(spent[name][i] / elapsed, 3) for name in self.pids}
                for i, key in enumerate(("cpu_cores", "wait_cores"))}


def median_spent(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each process's median per-coup figures over several runs."""
    return {m: {name: statistics.median(r[m][name] for r in results) for name in results[0][m]} for m in MEASURES}


def latency_percentiles(seconds: list[float]) -> dict[str, float]:
    """p50 and p99, in milliseconds, of latencies in seconds."""
    ordered = sorted(seconds)
    return {"p50_ms": 1000 * statistics.median(ordered), "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))]}


def process_ids(procs: Processes, server: NatsServer) -> dict[str, int]:
    """The services', the nats-server's and this process's (the simulated tables) ids."""
    assert server.process is not None
    return {**procs.pids(), "nats-server": server.process.pid, "simulator": os.getpid()}


async def warmed(sim: Simulator, warm: float, most: float = 120.0) -> None:
    """Once the simulated tables have dealt a coup (the services have started,
    however busy the machine), ``warm`` seconds more: the run is measured after."""
    started = time.monotonic()
    while not any(t.coups for t in sim.playing):
        assert time.monotonic() - started < most, f"no coup was dealt in {most:.0f} s"
        await asyncio.sleep(0.05)
    await asyncio.sleep(warm)


def stop_players(sim: Simulator, task: asyncio.Task[None]) -> None:
    """Stop the simulated players: no table opens another coup (a table has
    been seen to go on dealing after its cancellation), and what is in hand is
    cancelled; a request in flight when the connection closes ends in an error
    that is no finding of the benchmark."""
    sim.stop()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    task.cancel()


@contextlib.asynccontextmanager
async def casino(tables: dict[str, TableConfig],
                 replicas: int = 1) -> AsyncIterator[tuple[Client, Processes, NatsServer]]:
    """A fresh local nats-server with the streams, the four services as
    processes, ``replicas`` of each (stopped however the run ends), a
    connection to it, and the server itself."""
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        nc = await nats.connect(server.url)
        await provision(nc)
        procs = Processes(server.url, Path(tmp) / "procs", tables, replicas)
        procs.start_all()
        try:
            yield nc, procs, server
        finally:
            procs.stop_all()
            await nc.close()


async def measure(tables_count: int, seconds: float, warm: float = 3.0) -> dict[str, Any]:
    tables = default_tables(tables_count, list(SHORT))
    async with casino(tables) as (nc, procs, server):
        latencies: list[float] = []
        original = SimulatedTable.one_coup

        async def timed(self: SimulatedTable) -> None:
            start = time.perf_counter()
            await original(self)
            latencies.append(time.perf_counter() - start)

        SimulatedTable.one_coup = timed  # type: ignore[method-assign]
        sim = Simulator(nc, tables, seed=1, patience=40)
        task = asyncio.create_task(sim.run(None))
        await warmed(sim, warm)
        for _ in range(300):  # and every table has dealt
            if len(latencies) >= tables_count:
                break
            await asyncio.sleep(0.1)
        latencies.clear()
        meter = Meter(process_ids(procs, server))
        start = time.perf_counter()
        await asyncio.sleep(seconds / 2)
        halfway, halfway_done = {name: rss_mib(pid) for name, pid in procs.pids().items()}, len(latencies)
        await asyncio.sleep(seconds / 2)
        memory = {name: rss_mib(pid) for name, pid in procs.pids().items()}
        done, elapsed = len(latencies), time.perf_counter() - start
        # Growth over the second half only: the first holds the services' warm-up.
        growth = {name: round(1024 * (memory[name] - halfway[name]) * 1000 / max(done - halfway_done, 1), 1)
                  for name in memory}
        spent = meter.per_coup(done)
        stop_players(sim, task)
        SimulatedTable.one_coup = original  # type: ignore[method-assign]
        await asyncio.sleep(3)  # let the last settlements land
        stored = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
        report = verify_history(stored)
    return {"tables": tables_count, "seconds": round(elapsed, 1), "coups": done,
            "coups_per_s": done / elapsed, **latency_percentiles(latencies),
            "rss_mib": {name: round(mib, 1) for name, mib in memory.items()},
            "rss_growth_kib_per_1000_coups": growth, **spent,
            "verified_coups": report.coups, "differences": len(report.findings)}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.load")
    p.add_argument("--tables", type=int, default=16)
    p.add_argument("--seconds", type=float, default=30)
    args = p.parse_args()
    r = asyncio.run(measure(args.tables, args.seconds))
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
