"""`make bench`: each figure beside the ceiling or baseline it is judged
against, as a ratio, in one run on one machine; the same as JSON in
var/bench/latest.json."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    appends,
    archive,
    bounded,
    capacity,
    cost,
    history,
    holding,
    load,
    machine,
    pipeline,
    reading,
    replay,
    report,
    rules,
    series,
    verifying,
    web,
)
from bench.runs import span


async def scale(counts: list[int], seconds: float, runs: int, warm: float) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": runs, "seconds": seconds}
    for n in counts:
        results = [await load.measure(n, seconds, warm) for _ in range(runs)]
        out[str(n)] = {
            "coups_per_s": statistics.median(r["coups_per_s"] for r in results),
            "coups_per_s_range": span(r["coups_per_s"] for r in results),
            "p99_ms": statistics.median(r["p99_ms"] for r in results),
            "rss_mib": {s: statistics.median(r["rss_mib"][s] for r in results) for s in results[0]["rss_mib"]},
            **load.median_spent(results),
            "differences": sum(r["differences"] for r in results),
        }
    return out


def spent(figures: dict[str, Any]) -> str:
    """Each process's milliseconds per coup on a core (of them in the kernel) and waiting for one."""
    cpu, kernel, wait = (figures[m] for m in ("cpu_ms_per_coup", "kernel_ms_per_coup", "wait_ms_per_coup"))
    return "; ".join(f"{k} {cpu[k]:.1f} ms on a core ({kernel[k]:.1f} in the kernel), {wait[k]:.1f} waiting"
                     for k in cpu)


def by_procedure(figures: dict[str, Any]) -> str:
    """p50 and p99 of the coups opened under each procedure."""
    return "by procedure opened, p50/p99: " + "; ".join(
        f"{p} {f['p50_ms']:.0f}/{f['p99_ms']:.0f} ms ({f['coups']} coups)" for p, f in figures["by_procedure"].items())


# The sizes every figure is measured at. ``--quick`` shrinks each of them, to
# check in seconds that the whole benchmark runs and writes every figure: what
# it gives is not a measurement.
SIZES: dict[str, Any] = {"rules_coups": 2000, "replay_coups_a_table": 150, "verifying_coups": 1200, "window": 50,
                         "pipeline_tables": 16, "scale_tables": [1, 4, 16, 64, 256], "history_coups": 20000,
                         "history_rounds": 300, "holding_coups": 50000, "archive_coups": 150,
                         # runs at most of the benchmarks whose runs are minutes long, and whose figures the
                         # runs agree on (scale's five sizes; holding's 50,000 coups dealt three ways)
                         "scale_runs": 2, "holding_runs": 2,
                         "bounded_coups": (10000, 200000), "series_coups": 200, "appends_coups": 30,
                         # seconds the casino deals before a run's window opens (the services started and warm)
                         "warm": 4.0,
                         # the instances run: 3 of every service against 1, this many coups a table
                         "cost": {"tables": 16, "coups": 40, "instances": 3, "runs": 3},
                         # card-reading tables against shuffled ones: this many tables, coups a table in each CPU run,
                         # a card's report timed at these table counts for this many seconds
                         "reading": {"tables": 16, "coups": 20, "latency_tables": (16, 64), "seconds": 20.0,
                                     "runs": 3},
                         # the web pages: tables flat out; sealed coups' pages asked in each run, from this many shoes
                         # and a search by player over one table's history of this many coups
                         "web": {"tables": 64, "asks": 200, "shoes": 3, "search_coups": 2000, "runs": 3},
                         # the whole casino, each table a coup a minute, every step measured for 30 s, from near
                         # the last figure (one instance of every service, 3 steps at most, then two, 2 at most)
                         "capacity": {"start": 2000, "period": capacity.PERIOD, "window": 30.0, "halvings": 1,
                                      "most_steps": 3},
                         "capacity_instances": {"start": 2000, "period": capacity.PERIOD, "window": 30.0,
                                                "halvings": 1, "most_steps": 2}}
QUICK: dict[str, Any] = {**SIZES, "rules_coups": 100, "scale_tables": [1, 4], "warm": 1.0, "replay_coups_a_table": 5, "verifying_coups": 20, "window": 2,
                         "history_coups": 200, "history_rounds": 20, "holding_coups": 200, "archive_coups": 12,
                         "bounded_coups": (2400, 4800), "series_coups": 4, "appends_coups": 3,
                         "cost": {"tables": 4, "coups": 3, "instances": 2},
                         "reading": {"tables": 4, "coups": 3, "latency_tables": (4,), "seconds": 2.0},
                         "web": {"tables": 4, "asks": 10, "shoes": 1, "search_coups": 20},
                         "capacity": {"start": 4, "most": 8, "period": 3.0, "window": 3.0, "halvings": 0,
                                      "most_steps": 1},
                         "capacity_instances": {"start": 4, "most": 8, "period": 3.0, "window": 3.0, "halvings": 0,
                                                "most_steps": 1}}


def measure_all(sizes: dict[str, Any], runs: int, seconds: float,
                kept: Path | None = None) -> tuple[dict[str, Any], dict[str, int]]:
    """Every benchmark in turn, and the seconds each took. A size's ``runs``
    bounds that benchmark's runs below the run's (its steps are minutes long).
    Each benchmark's figures are written to ``kept`` as it ends, so that a run
    that fails late keeps what it measured before."""
    def within(name: str) -> dict[str, Any]:
        return {"runs": min(runs, sizes[name].get("runs", runs)), **{k: v for k, v in sizes[name].items() if k != "runs"}}

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("rules", lambda: rules.measure(sizes["rules_coups"], runs)),
        ("appends", lambda: asyncio.run(appends.measure(sizes["appends_coups"]))),  # counts: one run
        ("replay", lambda: asyncio.run(replay.measure(sizes["replay_coups_a_table"], runs))),
        ("verifying", lambda: asyncio.run(verifying.measure(sizes["verifying_coups"], runs, sizes["window"]))),
        ("pipeline", lambda: asyncio.run(pipeline.measure(sizes["pipeline_tables"], seconds, runs, sizes["warm"]))),
        ("cost", lambda: asyncio.run(cost.measure(seconds=seconds, warm=sizes["warm"], **within("cost")))),
        ("reading", lambda: asyncio.run(reading.measure(**within("reading")))),
        ("web", lambda: asyncio.run(web.measure(seconds=max(seconds, 2.0), **within("web")))),
        ("scale", lambda: asyncio.run(scale(sizes["scale_tables"], seconds / 2, min(runs, sizes["scale_runs"]),
                                            sizes["warm"]))),
        ("history", lambda: asyncio.run(history.measure(sizes["history_coups"], sizes["history_rounds"], runs))),
        ("holding", lambda: asyncio.run(holding.measure(sizes["holding_coups"], min(runs, sizes["holding_runs"])))),
        ("archive", lambda: asyncio.run(archive.measure(sizes["archive_coups"], runs))),
        ("bounded", lambda: asyncio.run(bounded.measure(*sizes["bounded_coups"]))),
        ("metrics", lambda: asyncio.run(series.measure(sizes["series_coups"]))),  # one run: minutes at the long size
        # one search each, from near its last figure: its steps bracket the figure (the most tables that held,
        # the fewest that did not); then with two instances of every service, sharing the tables
        ("capacity", lambda: asyncio.run(capacity.measure(**sizes["capacity"]))),
        ("capacity_instances", lambda: asyncio.run(capacity.measure(**sizes["capacity_instances"], replicas=2))),
    ]
    results, took = {}, {}
    for name, measure in steps:
        started = time.perf_counter()
        results[name] = measure()
        took[name] = round(time.perf_counter() - started)
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps({"took_s_each": took, **results}, indent=2) + "\n", encoding="utf-8")
    return results, took


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("--runs", type=int, default=3, help="runs per figure; the median is reported, the range beside it")
    p.add_argument("--seconds", type=float, default=15, help="seconds of dealing per pipeline or scale run")
    p.add_argument("--quick", action="store_true",
                   help="every size small: checks that the benchmark runs and writes every figure, measures nothing")
    p.add_argument("--out", help="where the JSON goes (var/bench/latest.json, or var/bench/quick.json with --quick)")
    args = p.parse_args()
    out = Path(args.out or ("var/bench/quick.json" if args.quick else "var/bench/latest.json"))
    run = {**machine.provenance(), "runs": args.runs, "seconds": args.seconds, "quick": args.quick}
    start = time.perf_counter()
    results, run["took_s_each"] = measure_all(QUICK if args.quick else SIZES, args.runs, args.seconds,
                                              out.with_suffix(".partial.json"))
    run["took_s"] = round(time.perf_counter() - start)
    results = {"run": run, **results, "latency": pipeline.latency(results["pipeline"])}
    if args.quick:
        print("a quick check of the benchmark at small sizes: not a measurement")
    print(machine.describe(run))
    r, rp, pl = results["rules"], results["replay"], results["pipeline"]
    print(f"rules floors, only folding each coup's events (coup and shoe) into the library's states: "
          f"{r['fold_only']['coups_per_s']:.1f} coups/s, ratio {r['fold_only']['ratio']:.3f}; only making those "
          f"events ({r['events_only']['events_per_coup']:.1f} a coup) again from their fields: "
          f"{r['events_only']['coups_per_s']:.1f} coups/s, ratio {r['events_only']['ratio']:.3f}; making them and "
          f"applying each to a state in place, one lookup and one store (the least fold): "
          f"{r['least_fold']['coups_per_s']:.1f} coups/s, ratio {r['least_fold']['ratio']:.3f}")
    print(f"rules: the library {r['coups_per_s']:.1f} coups/s; the straight-line dealer with no events "
          f"{r['baseline_coups_per_s']:.1f}, ratio {r['ratio']:.3f}; the straight-line dealer making the library's "
          f"events with its checks, Method A alone: {r['straight_with_events']['coups_per_s']:.1f} coups/s, ratio "
          f"{r['straight_with_events']['ratio']:.3f}; the library against it: ratio {r['same_events_ratio']:.3f}")
    print(f"replay in one process: {rp['one_process']['coups_per_s']:.1f} coups/s, "
          f"ratio {rp['one_process']['ratio']:.3f}")
    print(verifying.summary(results["verifying"]))
    print(f"pipeline latency, close of betting to settlement, 16 tables flat out: p50 {pl['p50_ms']:.0f} ms, "
          f"p99 {pl['p99_ms']:.0f} ms (no target: every table always busy, the figure is the queue's)")
    print(f"  {by_procedure(pl)}")
    print(f"  per coup: {spent(pl)}")
    for key, share in (("half_load", "half"), ("tenth_load", "a tenth of")):
        paced = pl[key]
        print(f"  at {share} that load ({paced['offered_coups_per_s']:.1f} coups/s offered, each table at a steady "
              f"pace): p50 {paced['p50_ms']:.0f} ms, p99 {paced['p99_ms']:.0f} ms")
        print(f"  {by_procedure(paced)}")
        print(f"  per coup: {spent(paced)}")
    for key, at in (("tenth", "a tenth of the flat-out rate"), ("half", "half the flat-out rate"), ("flat", "flat out")):
        lat = results["latency"][key]
        print(f"latency as a terminal sees it, {at}: every command's p99 at most {lat['command_p99_ms']:.1f} ms; "
              + ", ".join(f"{k} {c['p50_ms']:.1f}/{c['p99_ms']:.1f}" for k, c in lat["commands"].items())
              + " ms p50/p99")
    alone = pl["one_table"]
    print(f"  the floor: one table alone, a coup every {alone['every_s']} s: p50 {alone['p50_ms']:.0f} ms, "
          f"p99 {alone['p99_ms']:.0f} ms; {by_procedure(alone)}")
    print(f"  one hop at a time on this machine: a request answered p50 {alone['request_p50_ms']:.2f} / p99 "
          f"{alone['request_p99_ms']:.2f} ms, a guarded append acknowledged p50 {alone['append_p50_ms']:.2f} / "
          f"p99 {alone['append_p99_ms']:.2f} ms")
    print("scale (tables: coups/s, p99 coup ms, resident MiB per service; per coup, each process):")
    for n in (k for k in results["scale"] if k.isdigit()):
        s = results["scale"][n]
        mem = ", ".join(f"{k} {v:.0f}" for k, v in s["rss_mib"].items())
        print(f"  {n:>3}: {s['coups_per_s']:7.1f}  {s['p99_ms']:8.0f}  {mem}")
        print(f"       {spent(s)}")
    h, bare = results["history"]["with_history"], results["history"]["baseline"]
    print(f"history: the shoe's rounds at a table with {h['history_coups']:,} coups behind it, against a table with "
          f"none: the server's CPU {h['server_cpu_ms_per_round']:.2f} against {bare['server_cpu_ms_per_round']:.2f} "
          f"ms a round, ratio {results['history']['cpu_ratio']:.2f}; p50/p99 {h['p50_ms']:.1f}/{h['p99_ms']:.1f} "
          f"against {bare['p50_ms']:.1f}/{bare['p99_ms']:.1f} ms (target: flat, a ratio about 1)")
    print(f"  taking up that table at a start, the server's CPU: the latest coup "
          f"{h['latest_coup_shoe_in_play_cpu_ms']:.2f} ms found in the shoe in play against "
          f"{h['latest_coup_whole_table_cpu_ms']:.2f} over the whole table, the latest shoe event "
          f"{h['latest_shoe_shoe_in_play_cpu_ms']:.2f} against {h['latest_shoe_whole_table_cpu_ms']:.2f} ms")
    print(f"what the stream's history costs the server: {pl['stored_bytes_per_coup']:,.0f} bytes of messages a coup "
          f"(16 tables flat out), {pl['disk_bytes_per_coup']:,.0f} on disk compressed")
    ho, own, same, empty = results["holding"], *(results["holding"][k] for k in
                                                 ("coups_own_subjects", "same_messages", "empty"))
    print(f"  after a restart on {own['coups']:,} coups, each under its own subjects, the server's live heap "
          f"{own['heap_mib']:.0f} MiB ({own['rss_mib']:.0f} resident) against {same['heap_mib']:.0f} "
          f"({same['rss_mib']:.0f}) for the same messages under a few subjects and {empty['heap_mib']:.0f} "
          f"({empty['rss_mib']:.0f}) empty: {own['kib_per_coup']:.2f} against {same['kib_per_coup']:.2f} KiB a coup, "
          f"ratio {ho['memory_ratio']:.1f}; it answers in {own['ready_s']:.2f} s ({own['killed_ready_s']:.2f} after "
          f"a kill) against {same['ready_s']:.2f} ({same['killed_ready_s']:.2f}); the server that wrote them, "
          f"running: {own['running_kib_per_coup']:.2f} against {same['running_kib_per_coup']:.2f} KiB a coup")
    print(appends.summary(results["appends"]))
    print(archive.summary(results["archive"]))
    print(bounded.summary(results["bounded"]))
    print(cost.summary(results["cost"]))
    print(reading.summary(results["reading"]))
    print(web.summary(results["web"]))
    print(capacity.summary(results["capacity"]))
    print(capacity.summary(results["capacity_instances"]))
    print(series.summary(results["metrics"]))
    print(report.text(report.judged(results)))
    print(f"each figure is the median of {args.runs} runs (of fewer where a size says so); the whole took "
          f"{run['took_s'] / 60:.1f} minutes: " + ", ".join(f"{k} {v / 60:.1f}" for k, v in run["took_s_each"].items()))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written to {out}")


main()
