"""Memory of verifying one table's history: ``casino verify --table`` reads it
in one pass and lets each coup go once the stream is two shoes on, against
the same verification holding the table's whole history while it verifies
it (as ``casino verify`` did before). Each in a fresh process of its own:
how far its resident memory rises while it verifies (the kernel's high-water
mark, reset once the process has imported and connected, less what it held
then); on a store where four simulated tables dealt ``coups`` each (as
``bench.replay`` deals them).

And on the same store, the time ``casino replay table --since --until`` takes to list
``window`` coups opened halfway through the table's history, by their
opening times: the coups found by halving over their numbers and read by
their own subjects, against the table read in one pass (as it was before);
and ``casino verify --table --since --until`` on the same coups, with the
shoes they were dealt from.

    python -m bench.verifying --coups 1200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

from bench.replay import deal
from casino.audit.audits import verify_history, verify_table, verify_window
from casino.audit.history import Bounds, listed_in_one_pass, opened_at, table_listing
from casino.nats.server import NatsServer
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore

TABLE = "BAC000-1"
WAYS = ("as_read", "held_whole")


def resident_kib(field: str) -> int:
    """``VmRSS`` or ``VmHWM`` of this process."""
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1])


async def verify_once(way: str, url: str) -> dict[str, Any]:
    """In the process this runs in: verify the table ``way``; its peak memory."""
    nc = await nats.connect(url)
    try:
        store = JetStreamEventStore(nc)
        Path("/proc/self/clear_refs").write_text("5")  # the high-water mark back to what is resident now
        before, start = resident_kib("VmRSS"), time.perf_counter()
        if way == "as_read":
            report, _ = await verify_table(store, TABLE, 0)
        else:
            report = verify_history(await store.read(subjects.table_filter(TABLE)))
        seconds = time.perf_counter() - start
        risen = resident_kib("VmHWM") - before
    finally:
        await nc.close()
    if report.findings:
        raise RuntimeError(f"{way}: {report.findings[:3]}")
    return {"risen_mib": risen / 1024, "seconds": seconds, "coups": report.coups}


def in_own_process(way: str, url: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench.verifying", "--way", way, "--nats", url],
                         capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


async def measure(coups_per_table: int = 600, runs: int = 3, window: int = 50) -> dict[str, Any]:
    if 2 * window > coups_per_table:
        raise ValueError(f"a window of {window} coups halfway through a table needs {2 * window} coups at it")
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        await deal(server.url, coups_per_table)
        nc = await nats.connect(server.url)
        messages = len(await JetStreamEventStore(nc).read(subjects.table_filter(TABLE)))
        listing = await listing_times(JetStreamEventStore(nc), coups_per_table, window, runs)
        await nc.close()
        results = {way: [in_own_process(way, server.url) for _ in range(runs)] for way in WAYS}
    if len({r["coups"] for rs in results.values() for r in rs}) != 1:
        raise RuntimeError(f"the two ways verified different coups: {results}")
    out: dict[str, Any] = {"table": TABLE, "coups": results["as_read"][0]["coups"], "messages": messages, "runs": runs}
    for way, rs in results.items():
        out[way] = {k: statistics.median(r[k] for r in rs) for k in ("risen_mib", "seconds")}
        out[way]["kib_per_coup"] = out[way]["risen_mib"] * 1024 / out["coups"]
    out["ratio"] = out["as_read"]["risen_mib"] / out["held_whole"]["risen_mib"]
    out["listing"] = listing
    return out


async def listing_times(store: JetStreamEventStore, coups: int, window: int, runs: int) -> dict[str, Any]:
    """Seconds to list ``window`` coups opened halfway through the table's
    history by their opening times, each way in turn ``runs`` times (the
    median); both must list the same coups. Then to verify them and the shoes
    they were dealt from (ended there, unlike the shoe in play)."""
    first = coups // 2

    bounds = Bounds(since=await opened_at(store, TABLE, first), until=await opened_at(store, TABLE, first + window))
    seconds: dict[str, list[float]] = {"window": [], "one_pass": []}
    listings = set()
    for _ in range(runs):
        for way, listed in (("window", table_listing), ("one_pass", listed_in_one_pass)):
            start = time.perf_counter()
            lines = await listed(store, TABLE, bounds)
            seconds[way].append(time.perf_counter() - start)
            listings.add(tuple(lines))
    if len(listings) != 1 or len(lines) != window:
        raise RuntimeError(f"the two ways listed different coups, or not {window}: {listings}")
    out: dict[str, Any] = {"coups_listed": window, "runs": runs}
    out.update({f"{way}_s": statistics.median(s) for way, s in seconds.items()})
    out["ratio"] = out["window_s"] / out["one_pass_s"]
    # ``casino verify --table --since --until``: the same coups and the shoes they were dealt from.
    verified, shoes = [], set()
    for _ in range(runs):
        start = time.perf_counter()
        report = await verify_window(store, TABLE, bounds)
        verified.append(time.perf_counter() - start)
        if report is None or report.coups != window or report.findings:
            raise RuntimeError(f"verifying {window} coups: {report}")
        shoes.add(report.shoes)
    out["verify_window_s"], out["verify_window_shoes"] = statistics.median(verified), shoes.pop()
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.verifying")
    p.add_argument("--coups", type=int, default=600, help="coups dealt at each of the four tables")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # one verification, in this process
    p.add_argument("--nats", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.way:
        print(json.dumps(asyncio.run(verify_once(args.way, args.nats))))
        return
    print(summary(asyncio.run(measure(args.coups, args.runs))))


def summary(r: dict[str, Any]) -> str:
    a, w = r["as_read"], r["held_whole"]
    return (f"verifying a table of {r['coups']:,} coups ({r['messages']:,} messages), resident memory risen "
            f"{a['risen_mib']:.1f} MiB read in one pass and let go, against {w['risen_mib']:.1f} holding its "
            f"whole history: {a['kib_per_coup']:.2f} against {w['kib_per_coup']:.2f} KiB a coup, ratio "
            f"{r['ratio']:.2f}; {a['seconds']:.2f} against {w['seconds']:.2f} s (median of {r['runs']} runs)\n"
            f"listing {r['listing']['coups_listed']} of its coups halfway through by opening time "
            f"(--since, --until): "
            f"{r['listing']['window_s']:.3f} s found by halving and read coup by coup, against "
            f"{r['listing']['one_pass_s']:.3f} s reading the table in one pass: ratio {r['listing']['ratio']:.3f}; "
            f"verifying them and the {r['listing']['verify_window_shoes']} ended shoes they were dealt from "
            f"(--table --since --until): {r['listing']['verify_window_s']:.3f} s, against {a['seconds']:.2f} s for the "
            f"whole table")


if __name__ == "__main__":
    main()
