"""What the nats-server holds, and how long it takes to come back, once the
archiver has sealed every ended shoe: a history written as the services file
it (``bench.holding``: 16 tables, a coup's four subjects, a shoe's events
between coups), then for every shoe but each table's last two what the
archiver does: one seal appended to the archive (a shoe's coups' worth of
incompressible bytes, on a subject of the shoe's) and the shoe's subjects
purged from the live stream. The server is then killed and restarted, and
stopped and restarted: its live heap, resident memory and time to answer,
after a short history and after a long one, and their ratio. The archiver's
own work on dealt coups (sealing, verifying, removing) is tested in
tests/archive; this measures what its result leaves the server to hold."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import nats

from bench import holding
from bench.load import append_all
from casino.nats.provision import provision
from casino.store import subjects
from casino.store.jetstream import ARCHIVE_STREAM, STREAM

SEAL_BYTES_A_COUP = 1500  # a sealed coup, compressed (docs/benchmarks.md: the export's bytes a coup)
KEPT_SHOES = 2  # a table's shoe in play and the one before it, which waits for a settled coup in the next


async def one_run(coups: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "nats"
        server, prof_port = holding.profiled(store)
        server.start()
        try:
            nc = await nats.connect(server.url)
            await provision(nc)
            written = list(holding.history(coups))
            messages = await append_all(nc, ((s, b"x" * holding.BODY, None) for s in written))
            shoes: dict[str, list[str]] = {}
            for s in written:
                table, shoe, _, _ = subjects.tokens(s)
                if shoe != subjects.NO_COUP and shoe not in shoes.setdefault(table, []):
                    shoes[table].append(shoe)
            js = nc.jetstream()
            sealed = 0
            for table, names in shoes.items():
                for shoe in names[:-KEPT_SHOES]:
                    await js.publish(subjects.sealed(table, shoe), os.urandom(SEAL_BYTES_A_COUP * holding.COUPS_A_SHOE),
                                     stream=ARCHIVE_STREAM)
                    reply = json.loads((await nc.request(f"$JS.API.STREAM.PURGE.{STREAM}", json.dumps(
                        {"filter": subjects.shoe_filter(table, shoe)}).encode(), timeout=30)).data)
                    if "error" in reply:
                        raise RuntimeError(f"purging {shoe}: {reply['error']}")
                    sealed += 1
            live = (await js.stream_info(STREAM)).state.messages
            await nc.close()
            running = holding.live_heap_mib(prof_port)
        finally:
            server.kill()
        killed = await holding.restarted(store, live)
        clean = await holding.restarted(store, live)
    return {"coups": coups, "written": messages, "live_messages": live, "sealed_shoes": sealed,
            "running_heap_mib": running, **clean, **{f"killed_{k}": v for k, v in killed.items()}}


async def measure(short: int = 10000, long: int = 200000, runs: int = 1) -> dict[str, Any]:
    """The median of ``runs`` after ``short`` and after ``long`` coups, and
    each figure's ratio (long / short): 1 where nothing grows with the history."""
    out: dict[str, Any] = {"runs": runs, "tables": holding.TABLES, "coups_a_shoe": holding.COUPS_A_SHOE}
    for name, coups in (("short", short), ("long", long)):
        results = [await one_run(coups) for _ in range(runs)]
        out[name] = {k: statistics.median(r[k] for r in results) for k in results[0]}
    for figure in ("heap_mib", "rss_mib", "ready_s", "killed_ready_s", "killed_rss_mib"):
        out[f"{figure}_ratio"] = out["long"][figure] / max(out["short"][figure], 1e-9)
    return out


def summary(r: dict[str, Any]) -> str:
    short, long = r["short"], r["long"]
    return (f"bounded: once every shoe but each table's last two is sealed, after {long['coups']:,} coups against "
            f"{short['coups']:,} ({long['live_messages']:,} live messages against {short['live_messages']:,}), the "
            f"server's resident memory {long['rss_mib']:.0f} against {short['rss_mib']:.0f} MiB, ratio "
            f"{r['rss_mib_ratio']:.2f} (live heap {r['heap_mib_ratio']:.2f}); restarted in {long['ready_s']:.2f} "
            f"against {short['ready_s']:.2f} s, ratio {r['ready_s_ratio']:.2f}, after a kill {long['killed_ready_s']:.2f}"
            f" against {short['killed_ready_s']:.2f} s, ratio {r['killed_ready_s_ratio']:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.bounded")
    p.add_argument("--short", type=int, default=10000)
    p.add_argument("--long", type=int, default=200000)
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    r = asyncio.run(measure(args.short, args.long, args.runs))
    print(summary(r))
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
