"""Capacity in a casino's terms: the most tables this machine carries, each
dealing a coup a minute (the four rulesets in turn, the simulated players
answering as fast as they can), with every type of command a terminal sends
answered within 25 ms at the 99th percentile. Found by stepping the number of
tables up (doubling) until a step does not hold, or down (halving) until one
does, then halving the interval between the most tables that held and the
fewest that did not.

Each step is a fresh casino as an operator runs it: the four services, the
projections, the archiver and the web as processes on one local
nats-server, one floor connected to the web, the tables opening their first coups at even intervals over the
first minute. Those first coups fill each table's first shoe (a shuffle, the
burn) and seat its first players, what a casino does once a shoe: the step
measures every command sent once every table has dealt its first coup, for a
window after it.

`python -m bench.capacity [--start N] [--most N] [--window S] [--period S] [--cards read]`"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.floor import whole, whole_ids
from bench.load import Meter, latency_percentiles, stop_players
from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import Simulator

PERIOD = 60.0  # seconds between a table's coups: a coup a minute
MOST_P99_MS = 25.0  # every command type's p99 at most this


async def one_step(tables_count: int, period: float, window: float, grace: float = 120.0,
                   replicas: int = 1, cards: str = "shuffled") -> dict[str, Any]:
    """``tables_count`` tables, each opening a coup every ``period`` seconds:
    every command's reply time by type, sent in ``window`` seconds once every
    table has dealt its first coup. Tables still without one ``grace`` seconds
    after the first period are more than the machine carries: the step does
    not hold, and says how many. ``cards``: ``read``, every table's cards
    from a card-reading shoe (docs/readers.md), its devices simulated."""
    tables = default_tables(tables_count, list(SHORT), readers=tables_count if cards == "read" else 0)
    offered = {"tables": tables_count, "offered_coups_per_s": tables_count / period}
    async with whole(tables, replicas) as (nc, procs, server, webs):
        sim = Simulator(nc, tables, seed=3, patience=40, every=period)
        task = asyncio.create_task(sim.run(None))
        deadline = time.perf_counter() + period + grace
        while not sim.playing or any(t.coups < 1 for t in sim.playing):
            if task.done():
                task.result()  # a table refused: the step's failure, not a measurement
            if time.perf_counter() > deadline:  # more tables than the machine carries: the step does not hold
                behind = tables_count - sum(1 for t in sim.playing if t.coups >= 1)
                stop_players(sim, task)
                return {**offered, "coups_per_s": 0.0, "command_p99_ms": 0.0, "commands": {},
                        "first_coups_not_dealt": behind}
            await asyncio.sleep(0.2)
        for t in sim.playing:
            t.reply_times, t.coups = {}, 0
            if t.devices is not None:  # a card-reading shoe's reports are timed beside the terminal's commands
                t.devices.report_ms.clear()
        meter = Meter(whole_ids(procs, server, webs))
        start = time.perf_counter()
        await asyncio.sleep(window)
        elapsed = time.perf_counter() - start
        spent = meter.per_second(elapsed)
        replies: dict[str, list[float]] = {}
        for t in sim.playing:
            for kind, times in (t.reply_times or {}).items():
                replies.setdefault(kind, []).extend(times)
            if t.devices is not None:
                replies.setdefault("CardRead", []).extend(ms / 1000 for ms in t.devices.report_ms)  # in seconds
        dealt = sum(t.coups for t in sim.playing)
        stop_players(sim, task)
    commands = {kind: {"count": len(x), **latency_percentiles(x)} for kind, x in sorted(replies.items())}
    return {**offered, "coups_per_s": dealt / elapsed,
            "command_p99_ms": max((c["p99_ms"] for c in commands.values()), default=0.0), "commands": commands,
            **spent}


def holds(step: dict[str, Any]) -> bool:
    """Every command type answered within the target at the 99th percentile, and commands answered at all."""
    return bool(step["commands"]) and step["command_p99_ms"] <= MOST_P99_MS


async def search(step: Callable[[int], Awaitable[dict[str, Any]]], start: int, most: int,
                 halvings: int, most_steps: int = 12) -> dict[str, Any]:
    """The most tables for which ``step`` holds: from ``start`` tables,
    doubled while a step holds (up to ``most``) or halved while none has
    (down to one table), then ``halvings`` steps halving the interval between
    the most that held and the fewest that did not; ``most_steps`` steps in
    all at most (each takes minutes: the search is bounded in time, its
    bracket the figure). Every step's figures, in the order taken."""
    steps: list[dict[str, Any]] = []

    async def held(tables: int) -> bool:
        steps.append(await step(tables))
        return holds(steps[-1])

    last_held, not_held, tables = 0, 0, start
    while 1 <= tables <= most and len(steps) < most_steps:
        if await held(tables):
            last_held = tables
            if not_held:
                break
            tables *= 2
        else:
            not_held = tables
            if last_held:
                break
            tables //= 2
    for _ in range(halvings if last_held and not_held else 0):
        if len(steps) >= most_steps:
            break
        middle = (last_held + not_held) // 2
        if middle in (last_held, not_held):
            break
        if await held(middle):
            last_held = middle
        else:
            not_held = middle
    return {"tables": last_held, "not_held": not_held, "steps": steps}


async def measure(start: int = 250, most: int = 16000, period: float = PERIOD, window: float = 30.0,
                  halvings: int = 2, replicas: int = 1, cards: str = "shuffled", most_steps: int = 12) -> dict[str, Any]:
    """The search with a fresh casino at every step, ``replicas`` instances of
    every service; ``tables``, the most tables that held, and ``not_held``,
    the fewest that did not (0: none did not, up to ``most``): the capacity
    lies between them."""

    async def step(tables: int) -> dict[str, Any]:
        figures = await one_step(tables, period, window, replicas=replicas, cards=cards)
        print(f"capacity, {replicas} instance(s) of every service, a coup every {period:.0f} s a table: "
              f"{described(figures)}", file=sys.stderr, flush=True)  # the search's progress: its steps take minutes
        return figures

    found = await search(step, start, most, halvings, most_steps)
    return {**found, "period_s": period, "window_s": window, "most_p99_ms": MOST_P99_MS, "replicas": replicas,
            "cards": cards}


def described(step: dict[str, Any]) -> str:
    """One step: its tables, and its slowest command type's p99 or the tables that never dealt."""
    if "first_coups_not_dealt" in step:
        return f"{step['tables']:,} tables, {step['first_coups_not_dealt']:,} of them yet to deal a first coup (not held)"
    return f"{step['tables']:,} tables {step['command_p99_ms']:.1f} ms ({'held' if holds(step) else 'not held'})"


def summary(r: dict[str, Any]) -> str:
    """Each step of the search, in the order taken."""
    return "capacity, {} instance(s) of every service, tables dealing a coup every {:.0f} s each, every command's " \
        "p99 within {:.0f} ms: ".format(r.get("replicas", 1), r["period_s"], r["most_p99_ms"]) + "; ".join(
            described(s) for s in r["steps"])


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.capacity")
    p.add_argument("--start", type=int, default=250, help="tables at the first step (doubled at each)")
    p.add_argument("--most", type=int, default=16000, help="no step above this many tables")
    p.add_argument("--period", type=float, default=PERIOD, help="seconds between a table's coups")
    p.add_argument("--window", type=float, default=30.0, help="seconds measured at each step")
    p.add_argument("--replicas", type=int, default=1, help="instances of every service")
    p.add_argument("--cards", choices=("shuffled", "read"), default="shuffled",
                   help="read: every table's cards from a card-reading shoe")
    p.add_argument("--halvings", type=int, default=2, help="halvings of the interval between held and not held")
    args = p.parse_args()
    print(json.dumps(asyncio.run(measure(args.start, args.most, args.period, args.window, args.halvings,
                                         replicas=args.replicas, cards=args.cards)), indent=2))


if __name__ == "__main__":
    main()
