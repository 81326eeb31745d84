"""The pipeline benchmark's latency figures: percentiles of the coups' own
latencies, and per procedure, the coups of every run counted and the median
taken over the runs that dealt it; one hop of a coup's chain timed through a
real nats-server; a start timed both ways on a store left by dealing tables,
each way holding what the other does; a table given a history deals on
from it, timed beside a table with none; a table verified both ways, each in
a process of its own; a run's commit and machine; a coup's chain timed
command by command."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess

import pytest
from bench.chain import SETTLED
from bench.chain import measure as measure_chain
from bench.history import one_run as with_history
from bench.load import latency_percentiles
from bench.machine import REPOSITORY, describe, provenance
from bench.pipeline import median_by_procedure, round_trips
from bench.start import measure as measure_start
from bench.verifying import measure as measure_verifying


def test_percentiles_are_of_the_coups_latencies_in_milliseconds() -> None:
    seconds = [n / 1000 for n in range(100, 0, -1)]  # 1 to 100 ms, in any order
    figures = latency_percentiles(seconds)
    assert figures["p50_ms"] == 50.5
    assert round(figures["p99_ms"], 6) == 99.0


def test_a_procedure_counts_every_runs_coups_and_takes_the_median_of_the_runs_that_dealt_it() -> None:
    runs = [
        {"by_procedure": {"method_a": {"coups": 10, "p50_ms": 10.0, "p99_ms": 20.0},
                          "method_b": {"coups": 5, "p50_ms": 30.0, "p99_ms": 60.0}}},
        {"by_procedure": {"method_a": {"coups": 12, "p50_ms": 12.0, "p99_ms": 26.0}}},
        {"by_procedure": {"method_a": {"coups": 11, "p50_ms": 11.0, "p99_ms": 22.0},
                          "method_b": {"coups": 7, "p50_ms": 34.0, "p99_ms": 70.0}}},
    ]
    figures = median_by_procedure(runs)
    assert figures["method_a"] == {"coups": 33, "p50_ms": 11.0, "p99_ms": 22.0}
    assert figures["method_b"] == {"coups": 12, "p50_ms": 32.0, "p99_ms": 65.0}
    assert list(figures) == ["method_a", "method_b"]


@pytest.mark.anyio
async def test_a_hop_is_timed_through_a_real_server_and_another_process() -> None:
    figures = await round_trips(samples=20, gap=0.001)
    assert set(figures) == {"request_p50_ms", "request_p99_ms", "append_p50_ms", "append_p99_ms"}
    for hop in ("request", "append"):
        assert 0 < figures[f"{hop}_p50_ms"] <= figures[f"{hop}_p99_ms"] < 5000


@pytest.mark.anyio
async def test_a_start_is_timed_from_the_latest_coup_or_shoe_and_from_the_whole_history_holding_the_same() -> None:
    figures = await measure_start(tables_count=2, seconds=4, runs=1)
    assert figures["coups"] >= 4 and figures["messages"] > figures["coups"]  # as many as a busy machine deals
    assert figures["same_state"] is True
    for service in ("dealer_policy", "shoe"):
        f = figures[service]
        assert f["latest_s"] > 0 and f["whole_history_s"] > 0
        assert f["ratio"] == f["latest_s"] / f["whole_history_s"]
    f = figures["projections"]
    assert f["paged_s"] > 0 and f["whole_s"] > 0 and f["paged_peak_mib"] > 0 and f["whole_peak_mib"] > 0


@pytest.mark.anyio
async def test_a_table_given_a_history_deals_on_from_its_shoes_timed_and_costed() -> None:
    figures = await with_history(history=400, rounds=10)
    assert figures["history_coups"] == 400 and figures["rounds"] == 10
    shoe = figures["shoe_in_play"]
    assert int(shoe.rsplit("-", 1)[1]) >= 5  # 430 coups take several shoes: the history's, dealt on
    assert 0 < figures["p50_ms"] <= figures["p99_ms"] and figures["server_cpu_ms_per_round"] > 0
    # Taking the table up: the latest coup and shoe event, both ways (found the same, or the run fails).
    for aggregate in ("coup", "shoe"):
        assert figures[f"latest_{aggregate}_shoe_in_play_cpu_ms"] >= 0
        assert figures[f"latest_{aggregate}_whole_table_cpu_ms"] > 0


@pytest.mark.anyio
async def test_the_verification_memory_benchmark_verifies_the_table_both_ways_in_processes_of_their_own() -> None:
    """Each way in a fresh process (which refuses a report with a difference),
    the same coups verified, how far its memory rose measured from the kernel."""
    figures = await measure_verifying(coups_per_table=20, runs=1, window=2)
    assert figures["coups"] == 20 and figures["messages"] > 20 * 5  # about seven a coup, the shoe's steps carried
    assert figures["held_whole"]["risen_mib"] > 0 and figures["as_read"]["risen_mib"] >= 0
    assert figures["ratio"] == figures["as_read"]["risen_mib"] / figures["held_whole"]["risen_mib"]
    # And a window of its coups listed both ways (the same coups, else it raises) and verified.
    listing = figures["listing"]
    assert listing["coups_listed"] == 2 and listing["window_s"] > 0 and listing["one_pass_s"] > 0
    assert listing["ratio"] == listing["window_s"] / listing["one_pass_s"]
    assert listing["verify_window_s"] > 0 and listing["verify_window_shoes"] >= 0


def test_a_run_names_the_commit_and_the_machine_it_was_measured_on() -> None:
    figures = provenance()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True, check=True)
    assert figures["commit"] == head.stdout.strip()
    assert isinstance(figures["working_tree_changed"], bool)
    assert figures["cpus"] == os.cpu_count() and figures["memory_gib"] > 0 and figures["processor"]
    assert figures["python"] == platform.python_version()
    assert figures["nats_server"].startswith("v2.")
    assert datetime.datetime.fromisoformat(figures["started_utc"]).tzinfo is not None
    line = describe(figures)
    assert figures["commit"][:12] in line and figures["nats_server"] in line and f"{os.cpu_count()} cores" in line


@pytest.mark.anyio
async def test_a_coups_chain_is_timed_command_by_command_from_the_close_of_betting() -> None:
    """Every coup timed has its close of betting and its wait for the
    settlement once each; what it sent in between, by command."""
    figures = await measure_chain(tables_count=1, every=0.2, seconds=3)
    procedures = figures["by_procedure"]
    assert sum(f["coups"] for f in procedures.values()) >= 2  # as many as a busy machine deals in the time
    for f in procedures.values():
        assert f["steps"]["CloseBetting"]["per_coup"] == 1 and f["steps"][SETTLED]["per_coup"] == 1
        names = list(f["steps"])
        assert names[0] == "CloseBetting" and names[-1] == SETTLED
        # Each coup's close is within its own latency, one close a coup: so is each percentile.
        close = f["steps"]["CloseBetting"]
        assert 0 < close["p50_ms"] <= f["p50_ms"] and close["p99_ms"] <= f["p99_ms"]
        assert "OpenCoup" not in f["steps"] and "PlaceWagers" not in f["steps"]  # before the close: not on the chain
