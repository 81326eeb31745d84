"""Pipeline speed: baccarat coups per second through all four services (as
processes) on one local nats-server, with simulated wagers, at 16 tables;
against the ceiling of nats-py appending the same events (same count, same
sizes, each event as its own message with its envelope) with acks, pipelined,
to the same kind of stream; with p50 and p99 from
the close of betting to settlement, flat out and at half and a tenth of that
load, in all and by the procedure each coup was opened under (Method A's
dealer deals alone; under B, C and D the simulated players answer offers and
expose hands between the close and the result). Beside them, the floor under
that latency on this machine: one table dealing alone, and what one hop of a
coup's chain (a request answered, a guarded append acknowledged) costs one
at a time."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats
from nats.js.api import StorageType, StreamConfig

from bench.holding import on_disk
from bench.load import Meter, casino, latency_percentiles, median_spent, process_ids, stop_players, warmed
from bench.runs import span
from casino.cli.run import APPROVALS
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.nats.provision import provision
from casino.nats.server import NatsServer
from casino.rules.baccarat import messages as baccarat_messages
from casino.store import envelope, subjects
from casino.store.eventstore import Stored
from casino.store.jetstream import COMPRESSION, STREAM, JetStreamEventStore

ONE_TABLE_EVERY = 0.2


def baccarat_tables(count: int) -> dict[str, TableConfig]:
    """``count`` tables of 000, each coup opened under a procedure the simulated table picks."""
    return {f"BAC-{i + 1}": TableConfig("baccarat-000-methods", approvals=APPROVALS) for i in range(count)}


def procedures(stored: list[Stored]) -> dict[str, str]:
    """The procedure each coup among ``stored`` was opened under."""
    return {e.coup: e.data.procedure for m in stored for e in m.batch.events if isinstance(e.data, baccarat_messages.CoupOpened)}


async def one_run(tables_count: int, seconds: float, every: float = 0.0, warm: float = 4.0) -> dict[str, Any]:
    """One run, flat out or (``every``) each table opening a coup every so many
    seconds, measured after ``warm`` seconds; the ceiling is measured after a flat-out run only."""
    tables = baccarat_tables(tables_count)
    async with casino(tables) as (nc, procs, server):
        sim = Simulator(nc, tables, seed=2, patience=40, every=every)
        task = asyncio.create_task(sim.run(None))
        await warmed(sim, warm)
        store = JetStreamEventStore(nc)
        first = (await nc.jetstream().stream_info("CASINO")).state.last_seq
        for t in sim.playing:
            t.close_to_settled, t.reply_times = {}, {}
        meter = Meter(process_ids(procs, server))
        start = time.perf_counter()
        await asyncio.sleep(seconds)
        elapsed = time.perf_counter() - start
        settled = {coup: s for t in sim.playing for coup, s in (t.close_to_settled or {}).items()}
        replies: dict[str, list[float]] = {}
        for t in sim.playing:
            for kind, times in (t.reply_times or {}).items():
                replies.setdefault(kind, []).extend(times)
        spent = meter.per_coup(len(settled))
        stop_players(sim, task)
        last = (await nc.jetstream().stream_info("CASINO")).state.last_seq
        stored = await store.read(f"{subjects.EVENTS}.>")  # from the first: coups open at the start included
        window = [m for m in stored if first < m.seq <= last]
        opened = procedures(stored)
        procs.stop_all()  # the ceiling has the server to itself
        kept = {"stored_bytes_per_coup": (await nc.jetstream().stream_info(STREAM)).state.bytes / len(opened),
                "disk_bytes_per_coup": on_disk(server, STREAM) / len(opened)}
        # The ceiling appends each event as its own message, with its envelope.
        sizes = [len(m.subject) + len(envelope.encode(envelope.Batch((e,)))) for m in window for e in m.batch.events]
        ceiling_s = await _ceiling(nc, sizes) if not every else 0.0
    by_procedure: dict[str, list[float]] = {}
    for coup, seconds in settled.items():
        by_procedure.setdefault(opened[coup], []).append(seconds)
    return {"coups": len(settled), "coups_per_s": len(settled) / elapsed, "messages": len(window),
            "events": len(sizes), "ceiling_coups_per_s": len(settled) / ceiling_s if ceiling_s else 0.0,
            **latency_percentiles(list(settled.values())), **spent, **kept,
            "by_procedure": {p: {"coups": len(x), **latency_percentiles(x)} for p, x in sorted(by_procedure.items())},
            "commands": {kind: {"count": len(x), **latency_percentiles(x)} for kind, x in sorted(replies.items())}}


async def _ceiling(nc: Any, sizes: list[int]) -> float:
    """Seconds for nats-py to append messages of these sizes, with acks, pipelined."""
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="CEILING", subjects=["ceiling.>"], storage=StorageType.FILE,
                                     duplicate_window=120, compression=COMPRESSION))
    payloads = [b"x" * max(1, s - 20) for s in sizes]
    start = time.perf_counter()
    window = 256
    for i in range(0, len(payloads), window):
        await asyncio.gather(*(js.publish(f"ceiling.t.s.c.{k % 4}", p, headers={"Nats-Msg-Id": f"m{i + k}"})
                               for k, p in enumerate(payloads[i:i + window])))
    return time.perf_counter() - start


# Answers every request on floor.ask, in a process of its own.
_ANSWERER = """
import asyncio, sys
import nats

async def main():
    nc = await nats.connect(sys.argv[1])
    async def answer(msg):
        await msg.respond(b"ok")
    await nc.subscribe("floor.ask", cb=answer)
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def round_trips(samples: int = 400, gap: float = 0.005, size: int = 600) -> dict[str, float]:
    """What one hop of a coup's chain costs on this machine at light load, one
    at a time with a pause before each (so each process waits for the message
    and is woken by it, as between a coup's steps): a request answered by
    another process, and a guarded append to the event stream (expected
    sequence and message id, as the services append) with its ack; p50 and p99
    in milliseconds."""
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        answerer = subprocess.Popen([sys.executable, "-c", _ANSWERER, server.url])
        nc = await nats.connect(server.url)
        try:
            for _ in range(100):  # until the answerer listens
                with contextlib.suppress(nats.errors.NoRespondersError, nats.errors.TimeoutError):
                    await nc.request("floor.ask", b"", timeout=1)
                    break
                await asyncio.sleep(0.1)
            js = nc.jetstream()
            await provision(nc)
            asks, appends = [], []
            for i in range(samples):
                await asyncio.sleep(gap)
                start = time.perf_counter()
                await nc.request("floor.ask", b"x" * 200, timeout=5)
                asks.append(time.perf_counter() - start)
                await asyncio.sleep(gap)
                start = time.perf_counter()
                await js.publish(subjects.event("FLOOR", "FLOOR-shoe-1", f"FLOOR-{i:06d}", "coup"), b"x" * size,
                                 stream=STREAM, headers={"Nats-Expected-Last-Subject-Sequence": "0",
                                                         "Nats-Msg-Id": f"floor-{i}"})
                appends.append(time.perf_counter() - start)
        finally:
            answerer.kill()
            answerer.wait()
            await nc.close()
    ask, append = latency_percentiles(asks), latency_percentiles(appends)
    return {"request_p50_ms": ask["p50_ms"], "request_p99_ms": ask["p99_ms"],
            "append_p50_ms": append["p50_ms"], "append_p99_ms": append["p99_ms"]}


async def measure(tables: int = 16, seconds: float = 20, runs: int = 3, warm: float = 4.0) -> dict[str, Any]:
    """Flat out (throughput, and latency with every table always busy), then
    latency at half and at a tenth of that load: each table opening a coup at a
    steady pace. Each run is measured after ``warm`` seconds of dealing."""
    results = [await one_run(tables, seconds, warm=warm) for _ in range(runs)]
    rate, ceiling = _median(results, "coups_per_s"), _median(results, "ceiling_coups_per_s")
    out = {"tables": tables, "seconds": seconds, "runs": runs, "coups_per_s": rate, "ceiling_coups_per_s": ceiling,
           "ratio": rate / ceiling if ceiling else 0.0,
           "ratio_range": span(r["coups_per_s"] / r["ceiling_coups_per_s"] for r in results),
           "p50_ms": _median(results, "p50_ms"), "p99_ms": _median(results, "p99_ms"), **ranges(results),
           **median_spent(results), "by_procedure": median_by_procedure(results),
           "commands": median_by_command(results),
           "stored_bytes_per_coup": _median(results, "stored_bytes_per_coup"),
           "disk_bytes_per_coup": _median(results, "disk_bytes_per_coup")}
    # At a tenth of the rate, twice as long: enough coups of each procedure for a p99.
    for key, share, longer in (("half_load", 2, 1), ("tenth_load", 10, 2)):
        every = tables / (rate / share)
        paced = [await one_run(tables, seconds * longer, every, warm) for _ in range(runs)]
        out[key] = {"offered_coups_per_s": tables / every, "coups_per_s": _median(paced, "coups_per_s"),
                    "p50_ms": _median(paced, "p50_ms"), "p99_ms": _median(paced, "p99_ms"), **ranges(paced),
                    **median_spent(paced),
                    "by_procedure": median_by_procedure(paced), "commands": median_by_command(paced)}
    # The floor: one table alone, a coup every 0.2 s (as long as the tenth-load runs), and one hop.
    alone = [await one_run(1, seconds * 2, ONE_TABLE_EVERY, warm) for _ in range(runs)]
    hops = [await round_trips() for _ in range(runs)]
    out["one_table"] = {"every_s": ONE_TABLE_EVERY, "coups_per_s": _median(alone, "coups_per_s"),
                        "p50_ms": _median(alone, "p50_ms"), "p99_ms": _median(alone, "p99_ms"),
                        "by_procedure": median_by_procedure(alone),
                        **{key: _median(hops, key) for key in hops[0]}}
    return out


def _median(results: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in results))


def ranges(results: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The range over the runs of the close of betting to settlement's p99, and
    of each run's worst command type's p99."""
    return {"p99_ms_range": span(r["p99_ms"] for r in results),
            "command_p99_ms_range": span(worst_p99(r["commands"]) for r in results)}


def worst_p99(commands: dict[str, dict[str, float]]) -> float:
    """The p99 of the command type answered slowest: the figure a terminal's latency is judged by."""
    return max((c["p99_ms"] for c in commands.values()), default=0.0)


def median_by_command(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """For each type of command the terminals sent: how many in all runs, and
    the median over the runs of its reply time's p50 and p99."""
    kinds = sorted({k for r in results for k in r["commands"]})
    sent = {k: [r["commands"][k] for r in results if k in r["commands"]] for k in kinds}
    return {k: {"count": sum(f["count"] for f in runs), "p50_ms": _median(runs, "p50_ms"),
                "p99_ms": _median(runs, "p99_ms")} for k, runs in sent.items()}


def latency(pipeline: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Latency as a terminal sees it, at each load the pipeline ran: every
    command's reply time (the worst type's p99 is the figure judged), and the
    close of betting to settlement."""
    loads = {"flat": pipeline, "half": pipeline["half_load"], "tenth": pipeline["tenth_load"]}
    return {name: {"offered_coups_per_s": figures.get("offered_coups_per_s", 0.0),
                   "command_p99_ms": worst_p99(figures["commands"]),
                   "command_p99_ms_range": figures["command_p99_ms_range"],
                   "close_to_settle_p50_ms": figures["p50_ms"], "close_to_settle_p99_ms": figures["p99_ms"],
                   "close_to_settle_p99_ms_range": figures["p99_ms_range"],
                   "commands": figures["commands"]} for name, figures in loads.items()}


def median_by_procedure(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """For each procedure coups were opened under: their number in all runs, and the
    median over the runs of their p50 and p99."""
    procedures = sorted({p for r in results for p in r["by_procedure"]})
    dealt = {p: [r["by_procedure"][p] for r in results if p in r["by_procedure"]] for p in procedures}
    return {p: {"coups": sum(f["coups"] for f in runs), "p50_ms": _median(runs, "p50_ms"),
                "p99_ms": _median(runs, "p99_ms")} for p, runs in dealt.items()}
