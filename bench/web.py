"""The web pages (services.web) against a real casino: every service, the
read models and the archiver as processes, and the web service as a process
of its own.

- ``live``: from a coup's opening appended to the stream (heard by this
  process on the server at once) to its tile showing that coup on a
  connected floor, p99, with ``tables`` tables dealt flat out (1 s or less);
- ``cpu``: the web service's CPU a coup dealt with 100 floors connected
  against one, at the same offered rate (1.5 or less);
- ``sealed``: a page of a coup whose shoe is sealed in the archive, asked
  one after another, p99 (200 ms or less);
- ``search``: a search by player over one table's whole history (its
  shoes sealed), asked one after another, p99 (200 ms or less).

``python -m bench.web`` prints them; ``make bench`` judges them."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from nats.aio.client import Client
from tests.variants import ruleset_variant

from bench.floor import WebProcess, whole
from bench.load import latency_percentiles, stop_players, usage
from bench.runs import span
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.store import subjects
from casino.store.archive import SealStore


def tables_of(count: int) -> dict[str, TableConfig]:
    names = ["baccarat-000-methods", "blackjack-002-hole-card"]
    return {f"T{i + 1:03d}": TableConfig(names[i % 2]) for i in range(count)}


@contextlib.asynccontextmanager
async def served(tables: dict[str, TableConfig]) -> AsyncIterator[tuple[Client, WebProcess]]:
    """A casino dealing ``tables`` with its read models and archiver, and the web pages over it, signed in."""
    async with whole(tables, floor=False) as (nc, _, _, webs):
        yield nc, webs[0]


async def dealing(tables: dict[str, TableConfig], seconds: float, floors: int, every: float | None) -> dict[str, Any]:
    """``floors`` browsers on the floor for ``seconds`` while ``tables`` deal (every ``every``
    seconds a coup at each table; None: flat out): each coup's opening to its tile, and the web's CPU a coup."""
    async with served(tables) as (nc, web):
        appended: dict[tuple[str, int], float] = {}

        async def heard(msg: Any) -> None:
            if b'"coup.configured"' in msg.data:
                table, _, coup, _ = subjects.tokens(msg.subject)
                appended.setdefault((table, int(coup.rpartition("-")[2])), time.monotonic())

        await nc.subscribe(f"{subjects.EVENTS}.*.*.*.coup", cb=heard)
        seen: dict[tuple[str, int], float] = {}
        stop = asyncio.Event()
        # A browser a session (a session may watch the floor in a few windows only), each from its own address.
        cookies = [web.cookie] + [await web.sign_in(f"10.1.{i // 250}.{i % 250}") for i in range(1, floors)]
        browsers = [asyncio.create_task(web.floor(seen if i == 0 else None, stop, cookies[i])) for i in range(floors)]
        sim = Simulator(nc, tables, seed=9, patience=40, every=every or 0.0)
        task = asyncio.create_task(sim.run(None))
        await asyncio.sleep(min(5.0, seconds / 4))  # every process warm
        before, opened = usage(web.proc.pid)[0], len(appended)
        await asyncio.sleep(seconds)
        cpu, coups = usage(web.proc.pid)[0] - before, len(appended) - opened
        stop_players(sim, task)
        await asyncio.sleep(2)  # the last tiles arrive
        stop.set()
        for b in browsers:
            b.cancel()
        lags = [seen[k] - t for k, t in appended.items() if k in seen]
    return {"coups": coups, "coups_per_s": coups / seconds, "web_cpu_ms_per_coup": 1000 * cpu / max(coups, 1),
            "shown": len(lags), "opened": len(appended), **latency_percentiles(lags or [0.0])}


async def sealed_pages(asks: int, shoes: int) -> dict[str, Any]:
    """A one-deck blackjack table dealt until ``shoes`` shoes are sealed; their coups' pages asked one after another."""
    with tempfile.TemporaryDirectory() as tmp:
        tables = {"BJ1": TableConfig(ruleset_variant(Path(tmp), "blackjack-002-hole-card", decks=1, penetration=0.5))}
        async with served(tables) as (nc, web):
            sim = Simulator(nc, tables, seed=10, patience=40)
            seals = SealStore(nc)
            for _ in range(60):
                await sim.run(5)
                if await seals.get("BJ1", f"BJ1-shoe-{shoes}") is not None:
                    break
            kept = [k for s in range(1, shoes + 1) if (k := await seals.get("BJ1", f"BJ1-shoe-{s}")) is not None]
            numbers = [n for k in kept for n in range(k.first_coup, k.last_coup + 1)]
            assert numbers, "no shoe sealed"
            seconds = [await asyncio.to_thread(web.get, f"/coup/BJ1/{numbers[i % len(numbers)]}")
                       for i in range(asks)]
    return {"sealed_shoes": len(kept), "pages": asks, **latency_percentiles(seconds)}


async def search_pages(asks: int, coups: int) -> dict[str, Any]:
    """One baccarat table dealt ``coups`` coups (its shoes sealed and removed
    from the live stream as they end); a search by player over its whole
    history asked ``asks`` times one after another, for players picked at random."""
    tables = {"SRCH": TableConfig("baccarat-000-methods")}
    async with served(tables) as (nc, web):
        await Simulator(nc, tables, seed=11, patience=40).run(coups)
        pick = random.Random(5)
        seconds = [await asyncio.to_thread(web.get, f"/coup?table=SRCH&player=SRCH-P{pick.randint(1, 60)}")
                   for _ in range(asks)]
    return {"coups": coups, "asks": asks, **latency_percentiles(seconds)}


async def measure(tables: int = 64, seconds: float = 20, runs: int = 3, asks: int = 200,
                  shoes: int = 3, search_coups: int = 2000) -> dict[str, Any]:
    config = tables_of(tables)
    live = [await dealing(config, seconds, 1, None) for _ in range(runs)]
    rate = statistics.median(r["coups_per_s"] for r in live)
    every = tables / (rate / 2)  # half the flat-out rate: the same offered load with 1 floor and with 100
    ratios, ones, hundreds = [], [], []
    for _ in range(runs):
        ones.append(await dealing(config, seconds, 1, every))
        hundreds.append(await dealing(config, seconds, 100, every))
        ratios.append(hundreds[-1]["web_cpu_ms_per_coup"] / ones[-1]["web_cpu_ms_per_coup"])
    pages = [await sealed_pages(asks, shoes) for _ in range(runs)]
    search = await search_pages(asks, search_coups)
    p99s = [r["p99_ms"] for r in live]
    return {"tables": tables, "runs": runs,
            "live": {"coups_per_s": rate, "p50_ms": statistics.median(r["p50_ms"] for r in live),
                     "p99_ms": statistics.median(p99s), "p99_ms_range": span(p99s),
                     "shown": sum(r["shown"] for r in live), "opened": sum(r["opened"] for r in live)},
            "cpu": {"offered_coups_per_s": tables / every,
                    "one_ms": statistics.median(r["web_cpu_ms_per_coup"] for r in ones),
                    "hundred_ms": statistics.median(r["web_cpu_ms_per_coup"] for r in hundreds),
                    "ratio": statistics.median(ratios), "ratio_range": span(ratios)},
            "sealed": {"pages": asks, "shoes": shoes, "p50_ms": statistics.median(r["p50_ms"] for r in pages),
                       "p99_ms": statistics.median(r["p99_ms"] for r in pages),
                       "p99_ms_range": span([r["p99_ms"] for r in pages])},
            "search": search}


def summary(r: dict[str, Any]) -> str:
    live, cpu, sealed = r["live"], r["cpu"], r["sealed"]
    return (f"web pages: a coup's opening to its tile on a connected floor, {r['tables']} tables flat out "
            f"({live['coups_per_s']:.1f} coups/s, {live['shown']} of {live['opened']} openings seen): p50 "
            f"{live['p50_ms']:.0f} ms, p99 {live['p99_ms']:.0f} ms; the web's CPU a coup with 100 floors "
            f"{cpu['hundred_ms']:.2f} ms against one {cpu['one_ms']:.2f} ms at {cpu['offered_coups_per_s']:.1f} "
            f"coups/s, ratio {cpu['ratio']:.2f}; a sealed coup's page p99 {sealed['p99_ms']:.1f} ms "
            f"(p50 {sealed['p50_ms']:.1f}); a search by player over {r['search']['coups']} coups p99 "
            f"{r['search']['p99_ms']:.0f} ms (p50 {r['search']['p50_ms']:.0f})")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.web")
    p.add_argument("--tables", type=int, default=64)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--asks", type=int, default=200, help="sealed coups' pages asked in each run")
    p.add_argument("--search-coups", type=int, default=2000, help="coups dealt at the table searched by player")
    args = p.parse_args()
    r = asyncio.run(measure(args.tables, args.seconds, args.runs, args.asks, search_coups=args.search_coups))
    print(summary(r))
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
