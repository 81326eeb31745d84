"""The judged figures of a `make bench` run, one table: each figure as the
median of its runs with their range, its target and whether it is met.
`make bench` prints it; `python -m bench.report [FILE]` prints it in
Markdown from the JSON a run wrote (var/bench/latest.json), for the README."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from bench.appends import BASELINE as APPENDS_BASELINE
from bench.appends import MOST as APPENDS_MOST


class Row(NamedTuple):
    benchmark: str
    figure: str
    value: str
    range: str  # the runs' lowest and highest, or how a search brackets the figure
    target: str
    met: bool | None  # None: reported with no target


def _at_least(least: float) -> Callable[[float], bool]:
    return lambda v: v >= least


def _at_most(most: float) -> Callable[[float], bool]:
    return lambda v: v <= most


def _ratio(r: dict[str, Any], value: str, range_: str) -> tuple[float, str]:
    low, high = r[range_]
    return r[value], f"{low:.3f} to {high:.3f}"


def _ms(r: dict[str, Any], value: str, range_: str) -> tuple[float, str]:
    low, high = r[range_]
    return r[value], f"{low:.1f} to {high:.1f} ms"


def judged(results: dict[str, Any]) -> list[Row]:
    """Every judged figure of a run's results (``python -m bench``'s JSON)."""
    rows: list[Row] = []

    def row(benchmark: str, figure: str, value: float, shown: str, range_: str, target: str,
            meets: Callable[[float], bool] | None) -> None:
        rows.append(Row(benchmark, figure, shown, range_, target, None if meets is None else meets(value)))

    rules = results["rules"]
    v, rng = _ratio(rules, "same_events_ratio", "same_events_ratio_range")
    row("rules", "baccarat coups/s through the rules library against the straight-line deal making the same events",
        v, f"{v:.3f} ({rules['coups_per_s']:,.0f} against {rules['straight_with_events']['coups_per_s']:,.0f})",
        rng, "0.5 or more", _at_least(0.5))
    if "appends" in results:  # counted since issue 76's write path began
        for kind, f in results["appends"]["kinds"].items():
            row("appends", f"appends a {kind} coup beyond its wagers, a player's steps and its cards read (c7b9234: "
                f"{APPENDS_BASELINE[kind]:.2f})", f["appends"], f"{f['appends']:.2f} ({f['requests']:.1f} requests)",
                "one run", f"{APPENDS_MOST:.0f} or fewer", _at_most(APPENDS_MOST))
    latency = results["latency"]
    for load, share, most in (("tenth", "a tenth of", 10.0), ("half", "half", 25.0)):
        figures = latency[load]
        v, rng = _ms(figures, "command_p99_ms", "command_p99_ms_range")
        worst = max(figures["commands"], key=lambda k: figures["commands"][k]["p99_ms"])
        row("latency", f"every command's reply p99 (the slowest type) at {share} the flat-out rate", v,
            f"{v:.1f} ms ({worst})", rng, f"{most:.0f} ms or less", _at_most(most))
    v, rng = _ms(latency["half"], "close_to_settle_p99_ms", "close_to_settle_p99_ms_range")
    row("latency", "close of betting to settlement p99 at half the flat-out rate", v, f"{v:.0f} ms", rng,
        "25 ms or less", _at_most(25.0))
    flat = latency["flat"]
    row("latency", "flat out (the queue's): every command's reply p99; close of betting to settlement p99",
        flat["command_p99_ms"], f"{flat['command_p99_ms']:.0f}; {flat['close_to_settle_p99_ms']:.0f} ms",
        f"{flat['command_p99_ms_range'][0]:.0f} to {flat['command_p99_ms_range'][1]:.0f}; "
        f"{flat['close_to_settle_p99_ms_range'][0]:.0f} to {flat['close_to_settle_p99_ms_range'][1]:.0f} ms",
        "none", None)
    c = results["cost"]
    for mode, who in (("whole", "the whole casino (every process an operator runs, the nats-server and the web "
                                "with one floor connected; not the simulated tables)"),
                      ("four", "the four services that deal and the nats-server")):
        for load, what, most in (("flat", "flat out", 8.0), ("tenth", "at a tenth of the flat-out rate", 16.0)):
            v, rng = _ms(c[mode][load], "services_and_server_ms", "services_and_server_ms_range")
            row("cost", f"CPU of {who} a Method A coup, {c['tables']} tables {what}", v, f"{v:.1f} ms", rng,
                f"{most:.0f} ms or less", _at_most(most))
    side = c["read_side"]
    row("cost", f"CPU of the read side (the projections, the archiver, the web with one floor) a coup, "
        f"{c['tables']} tables flat out", side["ms"], f"{side['ms']:.2f} ms (archiver {side['archiver']:.2f}, "
        f"projections {side['projections']:.2f}, web {side['web']:.2f})", "medians", "3 ms or less", _at_most(3.0))
    row("cost", "CPU of the archiver a coup, the same runs", side["archiver"], f"{side['archiver']:.2f} ms", "median",
        "0.5 ms or less", _at_most(0.5))
    row("cost", "CPU of the web with no browser connected a coup, flat out", c["web_unwatched_ms"],
        f"{c['web_unwatched_ms']:.2f} ms", "median", "0.3 ms or less", _at_most(0.3))
    inst = c["instances"]
    v, rng = _ratio(inst, "cpu_ratio", "cpu_ratio_range")
    row("scale", f"CPU a coup with {inst['instances']} instances of every service against 1, the same tables and "
        f"coups", v, f"{v:.2f} ({inst['more']['services_and_server_ms']:.1f} against "
        f"{inst['one']['services_and_server_ms']:.1f} ms)", rng, "1.10 or less", _at_most(1.10))
    rd = results["reading"]
    v, rng = _ratio(rd, "cpu_ratio", "cpu_ratio_range")
    row("reading", f"CPU a Method A coup read from card-reading shoes against dealt from the shoe service's shuffle, "
        f"{rd['tables']} tables at the same {rd['offered_coups_per_s']:.0f} coups/s (flat out: "
        f"{rd['flat_coups_per_s']['read']:.0f} read, {rd['flat_coups_per_s']['shuffled']:.0f} shuffled)", v,
        f"{v:.2f} ({rd['read']['services_and_server_ms']:.1f} against {rd['shuffled']['services_and_server_ms']:.1f} ms)",
        rng, "1.3 or less", _at_most(1.3))
    v, rng = _ms(rd["report"], "p99_ms", "p99_ms_range")
    row("reading", f"a card's report to its record, p99 at a tenth of the read tables' flat-out rate, the worse of "
        f"{' and '.join(rd['report_by_tables'])} tables", v, f"{v:.1f} ms", rng, "10 ms or less", _at_most(10.0))
    wb = results["web"]
    v, rng = _ms(wb["live"], "p99_ms", "p99_ms_range")
    row("web", f"a coup's opening appended to its tile on a connected floor, p99, {wb['tables']} tables flat out", v,
        f"{v:.0f} ms", rng, "1 s or less", _at_most(1000.0))
    v, rng = _ratio(wb["cpu"], "ratio", "ratio_range")
    row("web", "the web service's CPU a coup with 100 floors connected against one", v,
        f"{v:.2f} ({wb['cpu']['hundred_ms']:.2f} against {wb['cpu']['one_ms']:.2f} ms)", rng, "1.5 or less",
        _at_most(1.5))
    v, rng = _ms(wb["sealed"], "p99_ms", "p99_ms_range")
    row("web", "a sealed coup's page, p99", v, f"{v:.1f} ms", rng, "200 ms or less", _at_most(200.0))
    if "search" in wb:  # measured since the search was bounded
        v = wb["search"]["p99_ms"]
        row("web", f"a search by player over a table's {wb['search']['coups']} coups, p99", v, f"{v:.0f} ms", "one run",
            "200 ms or less", _at_most(200.0))
    for key, who in (("capacity", ""), ("capacity_instances", ", two instances of every service")):
        cap = results[key]
        row("capacity", f"tables dealing a coup a minute each{who}, every command's p99 {cap['most_p99_ms']:.0f} ms "
            "or less", cap["tables"], f"{cap['tables']:,}",
            f"held at {cap['tables']:,}, not at {cap['not_held']:,}" if cap["not_held"] else "held at every step",
            "5,000 or more", _at_least(5000))
    pipe = results["pipeline"]
    v, rng = _ratio(pipe, "ratio", "ratio_range")
    row("pipeline", f"baccarat coups/s through the four services, {pipe['tables']} tables, against nats-py's "
        f"pipelined appends of the same events", v,
        f"{v:.2f} ({pipe['coups_per_s']:.1f} against {pipe['ceiling_coups_per_s']:.1f})", rng, "0.30 or more",
        _at_least(0.30))
    rep = results["replay"]
    v, rng = _ratio(rep, "ratio", "ratio_range")
    row("replay", f"coups read, replayed and verified per second as `casino verify` does ({rep['processes']} "
        f"processes), against an ordered consumer's read", v,
        f"{v:.2f} ({rep['coups_per_s']:,.0f} against {rep['raw_coups_per_s']:,.0f})", rng, "0.50 or more",
        _at_least(0.50))
    scale = results["scale"]
    counts = [k for k in scale if k.isdigit()]
    row("scale", f"coups/s flat out at {', '.join(counts)} tables", 0.0,
        ", ".join(f"{scale[k]['coups_per_s']:.1f}" for k in counts),
        "; ".join(f"{scale[k]['coups_per_s_range'][0]:.1f} to {scale[k]['coups_per_s_range'][1]:.1f}"
                  for k in counts), "none", None)
    arch = results["archive"]
    row("archive", "a sealed coup replayed, p99", arch["replay"]["p99_ms"], f"{arch['replay']['p99_ms']:.1f} ms",
        "one run", "under 50 ms", lambda v: v < 50)
    audit = arch["audit"]
    low, high = audit["verify_coups_per_s_range"]
    row("archive", "sealed shoes audited, one core: coups/s", audit["verify_coups_per_s"],
        f"{audit['verify_coups_per_s']:,.0f}", f"{low:,.0f} to {high:,.0f}", "5,000 or more", _at_least(5000))
    v, rng = _ratio(audit, "ratio", "ratio_range")
    row("archive", "the audit against reading and decoding the same seals", v, f"{v:.2f}", rng, "0.5 or more",
        _at_least(0.5))
    bounded = results["bounded"]
    for key, what in (("rss_mib_ratio", "resident memory"), ("ready_s_ratio", "restart"),
                      ("killed_ready_s_ratio", "restart after a kill")):
        row("bounded", f"the nats-server after {bounded['long']['coups']:,} coups against "
            f"{bounded['short']['coups']:,}, shoes sealed: {what}", bounded[key], f"{bounded[key]:.2f}", "one run",
            "1.2 or less", _at_most(1.2))
    m = results["metrics"]
    biggest = max(m["series_per_service"], key=lambda k: m["series_per_service"][k]["second"])
    most = m["series_per_service"][biggest]
    row("metrics", f"series a service's /metrics holds after {2 * m['coups_a_table']} coups a table against "
        f"{m['coups_a_table']}, the most added (the largest service)", m["most_added"],
        f"{m['most_added']} ({biggest}: {most['first']:,} then {most['second']:,})", "one run", "8 or fewer",
        _at_most(8))
    return rows


def _met(met: bool | None) -> str:
    return "" if met is None else "met" if met else "not met"


def text(rows: list[Row]) -> str:
    """The table as `make bench` prints it."""
    lines = ["judged figures (each the median of the runs; the range of the runs beside it):"]
    for r in rows:
        lines.append(f"  {r.benchmark:<9} {r.figure}: {r.value} (range {r.range}); target {r.target}"
                     + (f": {_met(r.met)}" if r.met is not None else ""))
    return "\n".join(lines)


def markdown(rows: list[Row]) -> str:
    """The table in Markdown, as the README quotes it."""
    lines = ["| benchmark | figure | median | range | target | |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.benchmark} | {r.figure} | {r.value} | {r.range} | {r.target} | {_met(r.met)} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.report")
    p.add_argument("file", nargs="?", default="var/bench/latest.json", help="a run's JSON (var/bench/latest.json)")
    args = p.parse_args()
    print(markdown(judged(json.loads(Path(args.file).read_text(encoding="utf-8")))))


if __name__ == "__main__":
    main()
