"""`make bench` end to end, every size small (``python -m bench --quick``):
every benchmark runs on real nats-servers and processes, the table is
printed, and the JSON has every figure, each beside its ceiling or baseline
with their ratio, the latency at each load and each scale's memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.cost import READ_SIDE
from bench.machine import REPOSITORY

SERVICES = {"shoe", "wager", "dealer_policy", "settlement"}


def test_the_whole_benchmark_runs_and_writes_every_figure_beside_its_ceiling(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--runs", "1", "--seconds", "1", "--out", str(out)],
                          cwd=REPOSITORY, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert figures["run"]["quick"] is True and figures["run"]["runs"] == 1 and figures["run"]["took_s"] > 0
    # Each benchmark's figures kept as it ended: a run that fails late keeps the ones before.
    kept = json.loads((tmp_path / "bench.partial.json").read_text(encoding="utf-8"))
    assert set(kept["took_s_each"]) == set(figures["run"]["took_s_each"]) and kept["rules"] == figures["rules"]

    for key, ceiling in (("rules", "baseline_coups_per_s"), ("replay", "raw_coups_per_s"),
                         ("pipeline", "ceiling_coups_per_s")):
        f = figures[key]
        assert f["coups_per_s"] > 0 and f[ceiling] > 0, key
        assert f["ratio"] == f["coups_per_s"] / f[ceiling], key
    for key, ranged in (("rules", "same_events_ratio"), ("replay", "ratio"), ("pipeline", "ratio")):
        low, high = figures[key][f"{ranged}_range"]  # the runs' lowest and highest beside the median
        assert 0 < low <= high, key
    assert figures["replay"]["coups"] == 4 * 5  # four tables, five coups each, every one verified
    assert figures["rules"]["fold_only"]["coups_per_s"] > 0 and figures["rules"]["events_only"]["events_per_coup"] > 0
    assert figures["rules"]["least_fold"]["coups_per_s"] > 0 and figures["rules"]["straight_with_events"]["coups_per_s"] > 0
    assert figures["rules"]["same_events_ratio"] == \
        figures["rules"]["coups_per_s"] / figures["rules"]["straight_with_events"]["coups_per_s"]

    pipeline = figures["pipeline"]
    for load in (pipeline, pipeline["half_load"], pipeline["tenth_load"], pipeline["one_table"]):
        assert load["by_procedure"] and all(p["coups"] > 0 for p in load["by_procedure"].values())
        # Three coups or more: the median is then no more than the 99th percentile as it is taken.
        assert sum(p["coups"] for p in load["by_procedure"].values()) >= 3
        assert 0 < load["p50_ms"] <= load["p99_ms"]
    assert set(pipeline["cpu_ms_per_coup"]) == SERVICES | {"nats-server", "simulator"}
    for name in ("flat", "half", "tenth"):  # every command a terminal sends, timed at each load
        latency = figures["latency"][name]
        assert {"OpenCoup", "PlaceWagers", "CloseBetting"} <= set(latency["commands"]), name
        assert all(c["count"] > 0 and c["p50_ms"] > 0 and c["p99_ms"] > 0 for c in latency["commands"].values()), name
        assert all(c["p50_ms"] <= c["p99_ms"] for c in latency["commands"].values() if c["count"] >= 3), name
        assert latency["command_p99_ms"] == max(c["p99_ms"] for c in latency["commands"].values())
        for ranged in ("command_p99_ms_range", "close_to_settle_p99_ms_range"):
            assert 0 < latency[ranged][0] <= latency[ranged][1], (name, ranged)
    assert figures["latency"]["half"]["close_to_settle_p99_ms"] == pipeline["half_load"]["p99_ms"]
    assert pipeline["stored_bytes_per_coup"] > 0 and pipeline["one_table"]["request_p50_ms"] > 0

    for tables in ("1", "4"):  # the quick run's sizes
        scale = figures["scale"][tables]
        assert scale["coups_per_s"] > 0 and scale["differences"] == 0, tables
        assert scale["coups_per_s_range"][0] <= scale["coups_per_s"] <= scale["coups_per_s_range"][1], tables
        assert set(scale["rss_mib"]) == SERVICES and all(mib > 0 for mib in scale["rss_mib"].values()), tables

    kinds = figures["appends"]["kinds"]  # every table kind's appends and requests a coup, beside c7b9234's
    assert set(kinds) == {"baccarat shuffled", "blackjack shuffled", "baccarat read", "blackjack read"}
    assert all(0 < k["appends"] < k["messages"] and k["requests"] > 0 for k in kinds.values()), kinds
    assert all(k["left_out"]["cards_reported"] > 0 for n, k in kinds.items() if n.endswith("read")), kinds
    assert figures["history"]["cpu_ratio"] > 0 and figures["holding"]["memory_ratio"] > 0
    assert figures["verifying"]["ratio"] > 0 and figures["verifying"]["listing"]["coups_listed"] == 2

    archived = figures["archive"]
    assert archived["sealed_shoes"] > 0 and 0 < archived["replay"]["p50_ms"] <= archived["replay"]["p99_ms"]
    assert archived["audit"]["ratio"] == archived["audit"]["verify_coups_per_s"] / \
        archived["audit"]["read_decode_coups_per_s"]
    bounded = figures["bounded"]
    assert bounded["long"]["sealed_shoes"] > bounded["short"]["sealed_shoes"] > 0
    assert bounded["rss_mib_ratio"] == bounded["long"]["rss_mib"] / bounded["short"]["rss_mib"]
    series = figures["metrics"]["series_per_service"]
    assert set(series) == {"shoe", "wager", "dealer-policy", "settlement", "projections", "archiver"}
    assert all(0 < s["first"] <= s["second"] for s in series.values()) and figures["metrics"]["most_added"] >= 0
    cost = figures["cost"]  # every process's CPU a Method A coup, the simulated tables' listed and left out
    whole = SERVICES | {"projections", "archiver", "web", "nats-server", "simulator"}
    for mode, loads, processes in (("whole", ("flat", "tenth"), whole), ("unwatched", ("flat",), whole),
                                   ("four", ("flat", "tenth"), SERVICES | {"nats-server", "simulator"})):
        for load in loads:
            figured = cost[mode][load]
            spent = figured["cpu_ms_per_coup"]
            assert figured["coups"] > 0 and set(spent) == processes, (mode, load)
            assert figured["services_and_server_ms"] == sum(ms for k, ms in spent.items() if k != "simulator"), mode
    side = cost["read_side"]  # the projections, the archiver and the web with one floor, from the whole casino's runs
    assert side["ms"] == round(sum(cost["whole"]["flat"]["cpu_ms_per_coup"][k] for k in READ_SIDE), 2)
    assert cost["web_unwatched_ms"] == cost["unwatched"]["flat"]["cpu_ms_per_coup"]["web"]
    instances = cost["instances"]  # the same coups dealt by one instance of every service, then by two
    assert instances["one"]["coups"] == instances["more"]["coups"] == 4 * 3
    assert {"shoe", "shoe-2", "dealer_policy-2"} <= set(instances["more"]["cpu_ms_per_coup"])
    assert instances["cpu_ratio"] == \
        instances["more"]["services_and_server_ms"] / instances["one"]["services_and_server_ms"]
    reading = figures["reading"]  # card-reading tables against shuffled ones, the same coups at the same rate
    assert reading["cpu_ratio_range"][0] <= reading["cpu_ratio"] <= reading["cpu_ratio_range"][1]
    assert reading["read"]["services_and_server_ms"] > 0 and reading["shuffled"]["services_and_server_ms"] > 0
    assert reading["offered_coups_per_s"] * 2 == reading["flat_coups_per_s"]["read"] > 0
    assert reading["flat_coups_per_s"]["shuffled"] > 0
    assert reading["report"] in reading["report_by_tables"].values() and list(reading["report_by_tables"]) == ["4"]
    assert reading["report"]["reports"] > 0 and 0 < reading["report"]["p50_ms"] <= reading["report"]["p99_ms"]
    web = figures["web"]  # the pages against a casino: openings seen on a floor, 100 floors' CPU, sealed pages
    assert web["live"]["shown"] > 0 and 0 < web["live"]["p50_ms"] <= web["live"]["p99_ms"]
    assert web["cpu"]["one_ms"] > 0 and web["cpu"]["ratio"] == web["cpu"]["hundred_ms"] / web["cpu"]["one_ms"]
    assert web["sealed"]["pages"] == 10 and 0 < web["sealed"]["p50_ms"] <= web["sealed"]["p99_ms"]
    capacity = figures["capacity"]  # a search at a few tables: each step a casino dealing a coup every 3 s a table
    for searched, replicas in ((capacity, 1), (figures["capacity_instances"], 2)):  # and with two of every service
        assert searched["replicas"] == replicas and searched["steps"]
        assert all(step["commands"] for step in searched["steps"])
        assert searched["tables"] in {0} | {step["tables"] for step in searched["steps"]}

    lines = done.stdout.splitlines()
    assert "not a measurement" in lines[0] and lines[1].startswith("measured on ")
    after = lines[lines.index("judged figures (each the median of the runs; the range of the runs beside it):") + 1:]
    judged = after[:next((i for i, line in enumerate(after) if not line.startswith("  ")), len(after))]
    for benchmark in ("rules", "latency", "cost", "reading", "web", "capacity", "pipeline", "replay", "scale", "archive",
                      "bounded", "metrics"):
        assert any(line.split()[0] == benchmark for line in judged), benchmark
    rules = next(line for line in judged if line.split()[0] == "rules")
    assert f"{figures['rules']['same_events_ratio']:.3f}" in rules and "target 0.5 or more" in rules, rules
    assert any(f"{capacity['tables']:,}" in line and "target 5,000 or more" in line
               for line in judged if line.split()[0] == "capacity")
    assert any("two instances of every service" in line for line in judged if line.split()[0] == "capacity")
    report = subprocess.run([sys.executable, "-m", "bench.report", str(out)], cwd=REPOSITORY, capture_output=True,
                            text=True, timeout=60)
    assert report.returncode == 0 and report.stdout.startswith("| benchmark | figure | median | range | target |")
    assert len(report.stdout.splitlines()) == 2 + len(judged), report.stdout  # one Markdown row a judged figure
