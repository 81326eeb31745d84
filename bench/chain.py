"""Where a coup's latency goes, command by command: baccarat tables dealing at
a steady pace through the four services (as processes) on one local
nats-server, each command the simulated table sends between the close of
betting and the result timed from the table, and then the wait for the
settlement; by the procedure each coup was opened under.

`python -m bench.chain [--tables N] [--every S] [--seconds S]`"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench.load import casino, latency_percentiles, stop_players
from bench.pipeline import baccarat_tables, procedures
from casino.cli.simulator import SimulatedTable, Simulator
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore

SETTLED = "(settlement)"  # from the last command's reply to the settlement seen


class Steps:
    """Each coup's commands from the close of betting on, with how long each
    took, and its wait for the settlement, timed from the simulated table."""

    def __init__(self) -> None:
        self.coups: dict[str, list[tuple[str, float]]] = defaultdict(list)  # only coups timed from their close

    def time(self, table: SimulatedTable) -> None:
        """Time ``table``'s commands and its waits for settlement from now on."""
        ask, settlement = table.ask, table.settlement

        async def timed_ask(service: str, command: type, **fields: object) -> Any:
            start = time.perf_counter()
            reply = await ask(service, command, **fields)
            self._took(str(fields.get("coup") or reply.coup), command.__name__, start)
            return reply

        async def timed_settlement(coup: str, done: asyncio.Event, timeout: float = 300) -> None:
            start = time.perf_counter()
            await settlement(coup, done, timeout)
            self._took(coup, SETTLED, start)

        table.ask = timed_ask  # type: ignore[method-assign]
        table.settlement = timed_settlement  # type: ignore[method-assign]

    def _took(self, coup: str, step: str, start: float) -> None:
        if step == "CloseBetting" or coup in self.coups:
            self.coups[coup].append((step, time.perf_counter() - start))


async def measure(tables_count: int = 1, every: float = 0.2, seconds: float = 40) -> dict[str, Any]:
    """Per procedure: the coups, their p50 and p99 from the close of betting to
    settlement, and for each command (and the wait for the settlement) how many
    a coup sends, and their p50 and p99 in milliseconds."""
    tables = baccarat_tables(tables_count)
    async with casino(tables) as (nc, _, _):
        sim = Simulator(nc, tables, seed=3, patience=40, every=every)
        task = asyncio.create_task(sim.run(None))
        await asyncio.sleep(4)  # the services start and warm up
        steps = Steps()
        for t in sim.playing:
            t.close_to_settled = {}
            steps.time(t)
        await asyncio.sleep(seconds)
        # A coup whose betting closed before the timing began is left out.
        settled = {coup: s for t in sim.playing for coup, s in (t.close_to_settled or {}).items()
                   if coup in steps.coups}
        stop_players(sim, task)
        stored = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
    opened = procedures(stored)
    by_procedure: dict[str, list[str]] = defaultdict(list)
    for coup in settled:
        by_procedure[opened[coup]].append(coup)
    return {"tables": tables_count, "every_s": every, "seconds": seconds,
            "by_procedure": {p: _figures(coups, settled, steps.coups) for p, coups in sorted(by_procedure.items())}}


def _figures(coups: list[str], settled: dict[str, float], steps: dict[str, list[tuple[str, float]]],
             ) -> dict[str, Any]:
    kinds: dict[str, list[float]] = defaultdict(list)
    for coup in coups:
        for name, seconds in steps[coup]:
            kinds[name].append(seconds)
    return {"coups": len(coups), **latency_percentiles([settled[c] for c in coups]),
            "steps": {name: {"per_coup": len(times) / len(coups), **latency_percentiles(times)}
                      for name, times in sorted(kinds.items(), key=lambda kind: kind[0] == SETTLED)}}


def summary(figures: dict[str, Any], line: Callable[[str], None] = print) -> None:
    line(f"{figures['tables']} table(s), a coup every {figures['every_s']} s each, {figures['seconds']:.0f} s: "
         "close of betting to settlement, and each step of it, from the table (ms)")
    for procedure, f in figures["by_procedure"].items():
        line(f"{procedure}: {f['coups']} coups, p50 {f['p50_ms']:.1f}, p99 {f['p99_ms']:.1f}")
        for name, s in f["steps"].items():
            line(f"  {name:<18} {s['per_coup']:4.1f} a coup, p50 {s['p50_ms']:5.1f}, p99 {s['p99_ms']:5.1f}")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.chain")
    p.add_argument("--tables", type=int, default=1)
    p.add_argument("--every", type=float, default=0.2, help="seconds between a table's coups")
    p.add_argument("--seconds", type=float, default=40)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    figures = asyncio.run(measure(args.tables, args.every, args.seconds))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        summary(figures)


if __name__ == "__main__":
    main()
