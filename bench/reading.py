"""Card-reading tables (docs/readers.md): each kind's flat-out rate; the CPU
the services and the nats-server spend on a baccarat Method A coup whose
every card comes from a card-reading shoe, against the same coups dealt from
the shoe service's own shuffle at the same offered rate (``cpu_ratio``: 1.3
or less); and the time from a card's report to its record (the report
answered once the card is recorded) at a tenth of the read tables' flat-out
rate, at 16 and at 64 tables (``report``, the worse: p99 10 ms or less). The
simulated devices' CPU, like the simulated tables', is left out.

``python -m bench.reading`` prints them; ``make bench`` judges them."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cost import ONLY_METHOD_A, medians, services_and_server
from bench.load import Meter, casino, process_ids, stop_players
from bench.runs import span
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig


def tables_of(count: int, cards: str) -> dict[str, TableConfig]:
    return {f"BAC-{i + 1}": TableConfig("baccarat-000-methods", "method_a", cards=cards)  # type: ignore[arg-type]
            for i in range(count)}


async def dealt(tables: int, coups: int, cards: str, every: float | None = None) -> dict[str, Any]:
    """``coups`` Method A coups at each of ``tables`` tables whose cards are
    ``cards`` (shuffled or read), flat out, or each table opening a coup
    every ``every`` seconds: what every process spent a coup."""
    config = tables_of(tables, cards)
    async with casino(config) as (nc, procs, server):
        with tempfile.TemporaryDirectory() as physical:  # the devices' shoes, from the first run to the second
            sim = Simulator(nc, config, seed=5, patience=40, habits=ONLY_METHOD_A, physical=Path(physical))
            await sim.run(1)  # every service warm, every table's first shoe filled
            if every is not None:
                sim = Simulator(nc, config, seed=6, patience=40, habits=ONLY_METHOD_A, physical=Path(physical),
                                every=every)
            meter, started = Meter(process_ids(procs, server)), time.perf_counter()
            await sim.run(coups + 1)
            elapsed, spent = time.perf_counter() - started, meter.per_coup(tables * coups)
    return {"coups": tables * coups, "coups_per_s": tables * coups / elapsed,
            "cpu_ms_per_coup": spent["cpu_ms_per_coup"],
            "services_and_server_ms": services_and_server(spent["cpu_ms_per_coup"])}


async def reports(tables: int, seconds: float, every: float) -> list[float]:
    """Each card's report answered, in milliseconds, over ``seconds``, each
    read table opening a coup every ``every`` seconds, from once every table
    has dealt its first coup: its first shoe filled and its burn cards read,
    a burst the simulated shoe reads at once, faster than a dealer draws them
    (the device's lane is limited to 20 reports a second after the first 8,
    and the rest are asked again half a second later), as a casino burns once
    a shoe."""
    config = tables_of(tables, "read")
    async with casino(config) as (nc, _, _):
        sim = Simulator(nc, config, seed=5, patience=40, every=every, habits=ONLY_METHOD_A)
        task = asyncio.create_task(sim.run(None))
        while not sim.playing or any(t.coups < 1 for t in sim.playing):
            if task.done():
                task.result()  # a table refused: the run's failure, not a measurement
            await asyncio.sleep(0.2)
        for t in sim.playing:
            assert t.devices is not None
            t.devices.report_ms.clear()
        await asyncio.sleep(seconds)
        ms = [x for t in sim.playing if t.devices is not None for x in t.devices.report_ms]
        stop_players(sim, task)
    return ms


def _p(ms: list[float], q: float) -> float:
    return sorted(ms)[min(len(ms) - 1, int(q * len(ms)))] if ms else 0.0


async def measure(tables: int = 16, coups: int = 20, seconds: float = 20, runs: int = 3,
                  latency_tables: tuple[int, ...] = (16, 64)) -> dict[str, Any]:
    """Each kind's flat-out rate at ``tables`` tables; then the CPU a coup of
    each at the same offered rate, half the read tables' flat-out rate (each
    kind dealing its coups at the pace the other does: a coup costs more the
    fewer are dealt at once); then, at each of ``latency_tables``, a card's
    report to its record at a tenth of the read tables' flat-out rate there,
    over ``seconds``."""
    flat: dict[str, list[float]] = {"shuffled": [], "read": []}
    for _ in range(runs):  # one after the other in each run: the machine's speed moves over an hour
        for cards in flat:
            flat[cards].append((await dealt(tables, coups, cards))["coups_per_s"])
    offered = statistics.median(flat["read"]) / 2
    shuffled, read, ratios = [], [], []
    for _ in range(runs):
        shuffled.append(await dealt(tables, coups, "shuffled", every=tables / offered))
        read.append(await dealt(tables, coups, "read", every=tables / offered))
        ratios.append(read[-1]["services_and_server_ms"] / shuffled[-1]["services_and_server_ms"])
    by_tables = {}
    for n in latency_tables:
        rate = offered * 2 if n == tables else statistics.median(
            [(await dealt(n, max(1, coups * tables // n), "read"))["coups_per_s"] for _ in range(runs)])
        paced = [await reports(n, seconds, n / (rate / 10)) for _ in range(runs)]
        p99s = [_p(ms, 0.99) for ms in paced]
        by_tables[str(n)] = {"tables": n, "flat_coups_per_s": rate, "offered_coups_per_s": rate / 10,
                             "seconds": seconds, "reports": sum(len(ms) for ms in paced),
                             "p50_ms": statistics.median(_p(ms, 0.5) for ms in paced),
                             "p99_ms": statistics.median(p99s), "p99_ms_range": span(p99s)}

    def runs_of(results: list[dict[str, Any]]) -> dict[str, Any]:
        return {**medians(results), "coups_per_s": statistics.median(r["coups_per_s"] for r in results)}

    return {"tables": tables, "coups_a_table": coups, "runs": runs,
            "flat_coups_per_s": {cards: statistics.median(rates) for cards, rates in flat.items()},
            "offered_coups_per_s": offered, "shuffled": runs_of(shuffled), "read": runs_of(read),
            "cpu_ratio": statistics.median(ratios), "cpu_ratio_range": span(ratios),
            # the worst of the table counts, and each
            "report": max(by_tables.values(), key=lambda r: r["p99_ms"]), "report_by_tables": by_tables}


def summary(r: dict[str, Any]) -> str:
    rd, sh, flat = r["read"], r["shuffled"], r["flat_coups_per_s"]
    reports = "; ".join(f"{rep['tables']} tables at {rep['offered_coups_per_s']:.1f} coups/s ({rep['reports']} "
                        f"reports): p50 {rep['p50_ms']:.1f} ms, p99 {rep['p99_ms']:.1f} ms"
                        for rep in r["report_by_tables"].values())
    return (f"card-reading tables, {r['tables']} tables of Method A, flat out {flat['read']:.1f} coups/s read from "
            f"card-reading shoes, {flat['shuffled']:.1f} dealt from the shoe service's shuffle; at the same offered "
            f"rate, {r['offered_coups_per_s']:.1f} coups/s, the services and the nats-server's CPU "
            f"{rd['services_and_server_ms']:.1f} ms a read coup against {sh['services_and_server_ms']:.1f}, ratio "
            f"{r['cpu_ratio']:.2f}; a card's report to its record at a tenth of the read tables' flat-out rate, "
            f"{reports}")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.reading")
    p.add_argument("--tables", type=int, default=16)
    p.add_argument("--coups", type=int, default=20, help="coups a table in each CPU run")
    p.add_argument("--seconds", type=float, default=20, help="seconds of paced dealing in each latency run")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--latency-tables", type=int, nargs="+", default=[16, 64],
                   help="table counts a card's report to its record is timed at")
    args = p.parse_args()
    r = asyncio.run(measure(args.tables, args.coups, args.seconds, args.runs, tuple(args.latency_tables)))
    print(summary(r))
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
