"""What a coup costs: the CPU a baccarat Method A coup costs the whole
casino as an operator runs it (``whole``: the four services, the
projections, the archiver, the web with one floor connected, and the
nats-server), at 16 tables flat out and at a tenth of that rate (``flat``,
``tenth``); the same with the four services that deal and the nats-server
alone (``four``); and what running more instances of every service costs
for the same tables and coups (``instances``: 3 of each against 1, their
CPU a coup as a ratio). Every process is listed; the simulated tables' own
CPU is reported apart and counted in no total.

``python -m bench.cost`` prints them; ``make bench`` judges them."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

from nats.aio.client import Client
from nats.js.errors import KeyNotFoundError
from services.ownership import read_assignment
from services.runner import KINDS

from bench import floor
from bench.load import Meter, casino, process_ids, stop_players, warmed
from bench.runs import span
from casino.cli.simulator import Habits, Simulator
from casino.config.tables import TableConfig
from casino.nats.permissions import OWNERS

# Every coup dealt by Method A, which needs no approval: the floor never changes it.
ONLY_METHOD_A = Habits(change_procedure=0.0)


def method_a_tables(count: int) -> dict[str, TableConfig]:
    return {f"BAC-{i + 1}": TableConfig("baccarat-000-methods", "method_a") for i in range(count)}


def services_and_server(cpu_ms_per_coup: dict[str, float]) -> float:
    """The CPU a coup of every service instance and of the nats-server, not the simulated tables'."""
    return sum(ms for name, ms in cpu_ms_per_coup.items() if name != "simulator")


# What runs in each measurement: the whole casino with one floor connected, the same with no browser
# connected to the web, and the four services that deal with the nats-server alone.
WATCHED, UNWATCHED, FOUR = "whole", "unwatched", "four"


@contextlib.asynccontextmanager
async def running(config: dict[str, TableConfig], mode: str) -> AsyncIterator[tuple[Client, dict[str, int]]]:
    """The casino over ``config`` as ``mode`` says, and every process's id."""
    if mode == FOUR:
        async with casino(config) as (nc, procs, server):
            yield nc, process_ids(procs, server)
    else:
        async with floor.whole(config, floor=mode == WATCHED) as (nc, procs, server, webs):
            yield nc, floor.whole_ids(procs, server, webs)


async def paced(tables: int, seconds: float, every: float = 0.0, mode: str = WATCHED,
                warm: float = 4.0) -> dict[str, Any]:
    """Tables dealing Method A for ``seconds`` after ``warm`` seconds, flat out or
    (``every``) each opening a coup every so many seconds, the casino run as
    ``mode`` says: the coups settled meanwhile, what each process spent a
    coup, and each coup's close of betting to its settlement (p50, p99)."""
    config = method_a_tables(tables)
    async with running(config, mode) as (nc, ids):
        sim = Simulator(nc, config, seed=5, patience=40, every=every, habits=ONLY_METHOD_A)
        task = asyncio.create_task(sim.run(None))
        await warmed(sim, warm)
        for t in sim.playing:
            t.close_to_settled = {}
        meter = Meter(ids)
        await asyncio.sleep(seconds)
        settled = sorted(s for t in sim.playing for s in (t.close_to_settled or {}).values())
        spent = meter.per_coup(len(settled))
        stop_players(sim, task)
    coups = len(settled)
    return {"coups": coups, "coups_per_s": coups / seconds, "cpu_ms_per_coup": spent["cpu_ms_per_coup"],
            "services_and_server_ms": services_and_server(spent["cpu_ms_per_coup"]),
            "close_to_settle_ms": {"p50": 1000 * settled[coups // 2], "p99": 1000 * settled[int(0.99 * coups)]}
            if coups else None}


def medians(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs' figures as one: the coups of them all, the median of each run's CPU a coup (and their range)."""
    ms = [r["services_and_server_ms"] for r in results]
    by_process = {name: statistics.median(r["cpu_ms_per_coup"][name] for r in results)
                  for name in results[0]["cpu_ms_per_coup"]}
    return {"coups": sum(r["coups"] for r in results), "services_and_server_ms": statistics.median(ms),
            "services_and_server_ms_range": span(ms), "cpu_ms_per_coup": by_process}


async def spread(nc: Client, replicas: int, within: float = 120.0) -> None:
    """Wait until ``replicas`` instances of every service have joined its
    assignment and its partitions are spread evenly among them."""
    kv = await nc.jetstream().key_value(OWNERS)
    deadline = time.monotonic() + within
    while True:
        loads = []
        for kind in KINDS:
            with contextlib.suppress(KeyNotFoundError):
                a = read_assignment((await kv.get(kind)).value)
                loads.append([a.owners.count(m) for m in set(a.owners)] if "" not in a.owners else [])
        if len(loads) == len(KINDS) and all(len(x) == replicas and max(x) - min(x) <= 1 for x in loads):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the services' partitions were not spread over {replicas} instances in {within:.0f} s")
        await asyncio.sleep(0.2)


async def dealt(tables: int, coups: int, replicas: int) -> dict[str, Any]:
    """``coups`` Method A coups at each of ``tables`` tables, dealt one after
    the other with ``replicas`` instances of every service: what every
    process spent a coup, from the first coup to the last settled."""
    config = method_a_tables(tables)
    async with casino(config, replicas) as (nc, procs, server):
        await spread(nc, replicas)  # every instance started, the tables shared out: no move in the window
        sim = Simulator(nc, config, seed=5, patience=40, habits=ONLY_METHOD_A)
        meter = Meter(process_ids(procs, server))
        await sim.run(coups)
        spent = meter.per_coup(tables * coups)
    return {"replicas": replicas, "coups": tables * coups, "cpu_ms_per_coup": spent["cpu_ms_per_coup"],
            "services_and_server_ms": services_and_server(spent["cpu_ms_per_coup"])}


async def measure(tables: int = 16, seconds: float = 20, runs: int = 3, coups: int = 40,
                  instances: int = 3, warm: float = 4.0) -> dict[str, Any]:
    rows = {}
    for mode in (WATCHED, FOUR):
        flat = [await paced(tables, seconds, mode=mode, warm=warm) for _ in range(runs)]
        rate = statistics.median(r["coups_per_s"] for r in flat)
        tenth = [await paced(tables, seconds * 2, every=tables / (rate / 10), mode=mode, warm=warm)
                 for _ in range(runs)]
        rows[mode] = {"flat": {**medians(flat), "coups_per_s": rate},
                      "tenth": {**medians(tenth), "offered_coups_per_s": rate / 10}}
    unwatched = [await paced(tables, seconds, mode=UNWATCHED, warm=warm) for _ in range(runs)]
    rows[UNWATCHED] = {"flat": {**medians(unwatched),
                                "coups_per_s": statistics.median(r["coups_per_s"] for r in unwatched)}}
    one = [await dealt(tables, coups, 1) for _ in range(runs)]
    more = [await dealt(tables, coups, instances) for _ in range(runs)]
    ratios = [m["services_and_server_ms"] / o["services_and_server_ms"] for o, m in zip(one, more, strict=True)]

    return {"tables": tables, "runs": runs, **rows, "read_side": read_side(rows[WATCHED]["flat"]),
            "web_unwatched_ms": rows[UNWATCHED]["flat"]["cpu_ms_per_coup"]["web"],
            "instances": {"instances": instances, "coups_a_table": coups, "one": medians(one),
                          "more": medians(more), "cpu_ratio": statistics.median(ratios),
                          "cpu_ratio_range": span(ratios)}}


READ_SIDE = ("projections", "archiver", "web")  # the processes beside those that deal


def read_side(figures: dict[str, Any]) -> dict[str, float]:
    """The read side's CPU a coup: each of its processes' and their sum (``ms``)."""
    ms = {name: figures["cpu_ms_per_coup"][name] for name in READ_SIDE}
    return {**ms, "ms": round(sum(ms.values()), 2)}


def processes(figures: dict[str, Any]) -> str:
    """Each process's CPU a coup, the simulated tables' apart."""
    ms = figures["cpu_ms_per_coup"]
    return ", ".join(f"{name} {ms[name]:.2f}" for name in ms if name != "simulator") + \
        f" (the simulated tables {ms.get('simulator', 0.0):.2f}, not counted)"


def summary(r: dict[str, Any]) -> str:
    inst = r["instances"]
    rows = "; ".join(
        f"{what}: flat out ({r[name]['flat']['coups_per_s']:.1f} coups/s) {r[name]['flat']['services_and_server_ms']:.1f}"
        f" ms [{processes(r[name]['flat'])}], at a tenth of that rate {r[name]['tenth']['services_and_server_ms']:.1f} "
        f"ms [{processes(r[name]['tenth'])}]"
        for name, what in ((WATCHED, "the whole casino (every process an operator runs, one floor connected)"),
                           (FOUR, "the four services that deal and the nats-server")))
    side = r["read_side"]
    return (f"cost, the CPU a Method A coup at {r['tables']} tables, {rows}; the read side flat out "
            f"{side['ms']:.2f} ms (projections {side['projections']:.2f}, archiver {side['archiver']:.2f}, web "
            f"{side['web']:.2f}); the web with no browser connected {r['web_unwatched_ms']:.2f} ms; "
            f"{inst['instances']} instances of every "
            f"service against one, {inst['coups_a_table']} coups a table: {inst['more']['services_and_server_ms']:.1f} "
            f"against {inst['one']['services_and_server_ms']:.1f} ms, ratio {inst['cpu_ratio']:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.cost")
    p.add_argument("--tables", type=int, default=16)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--coups", type=int, default=40, help="coups a table in each instances run")
    p.add_argument("--instances", type=int, default=3)
    args = p.parse_args()
    r = asyncio.run(measure(args.tables, args.seconds, args.runs, args.coups, args.instances))
    print(summary(r))
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
