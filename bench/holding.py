"""What the nats-server holds in memory for the stream's history, and how
long a restarted server takes to answer. The server keeps an index entry in
memory for every subject the stream holds, and each coup is filed under
subjects of its own (``casino.ev.<table>.<shoe>.<coup>.<aggregate>``, one
for each service that writes to it), so that one filter finds a coup: its
memory grows with every coup the stream keeps. A history of so many coups is
written as the services file them, the server restarted on it (after a kill,
and after a clean stop), and its live heap (after a collection), its resident
memory and its time to answer measured; against an empty store, and against
the same messages filed without the coup's own subjects (each table's under
one subject per aggregate), which is what the messages themselves cost."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import nats

from bench.load import append_all, rss_mib
from casino.nats.provision import provision
from casino.nats.server import NatsServer, free_port
from casino.store import subjects
from casino.store.jetstream import STREAM

# A coup's subjects: one for each service that writes to it. The shoe's steps in a coup ride in the coup's
# messages (docs/architecture.md): a coup has a shoe subject of its own only where the shoe recorded a
# step itself (a reshuffle followed it), a few coups a shoe.
AGGREGATES = ("coup", "wager", "settle")
COUPS_A_SHOE = 70  # an eight-deck shoe deals about 70 coups of baccarat
TABLES = 16
# One message of this size on each subject: the index, what this measures, grows by
# subject. A dealt coup has about 8 messages on its three subjects (18 kB in all),
# so a real history's restart has more to read than this one; ``as_dealt`` writes
# those (``--as-dealt``).
BODY = 400
# Messages a subject and bytes a message (envelope and headers), as a run of
# Methods A to D filed them, the simulated players taking every path of the
# procedures (passing the shoe, breaches, changed wagers): about 4 coup messages
# a coup of 3,700 bytes (each step with the cards it calls for and the shoe's
# record of them), the wagers on one bet slip and the book opened with its
# first, about 3 wager messages a coup, and a shoe's events between coups
# (tests/ops/test_bench_holding.py keeps this current).
AS_DEALT = {"coup": (4, 3700), "wager": (3, 1100), "settle": (1, 860), "between": (1, 2400)}


def history(coups: int, own_subjects: bool = True) -> Iterator[str]:
    """The subject of each message of ``coups`` coups dealt round the tables,
    one message for each of a coup's aggregates, one for its shoe's events
    between coups and one for each table's ruleset; as the services file them, or (not ``own_subjects``) each
    table's under one subject per aggregate."""
    for n in range(coups):
        table = f"BAC-{n % TABLES + 1}"
        number = n // TABLES + 1
        shoe = subjects.shoe_id(table, (number - 1) // COUPS_A_SHOE + 1)
        coup = f"{table}-{number:06d}"
        if not own_subjects:
            shoe = coup = "all"
        if number == 1:  # the table's ruleset, recorded before its first coup
            yield subjects.event(table, "", "", "ruleset")
        if (number - 1) % COUPS_A_SHOE == 0:
            yield subjects.event(table, shoe, "", "shoe")
        for aggregate in AGGREGATES:
            yield subjects.event(table, shoe, coup, aggregate)


def bodies(size: int, count: int, rnd: random.Random) -> Iterator[bytes]:
    """``count`` messages of ``size`` bytes that compress as the services' JSON
    envelopes do (fields repeated from event to event, ids and times not)."""
    for _ in range(count):
        text = b""
        while len(text) < size:
            text += (b'{"id":"%032x/1","type":"baccarat.card_dealt","version":1,"table":"BAC-1",'
                     b'"shoe":"BAC-1-shoe-1","coup":"BAC-1-000001","causation":"%032x","producer":'
                     b'"dealer-policy","at":"2026-11-30T12:00:00.%06dZ","data":{"card":"KH","position":7}},'
                     % (rnd.getrandbits(128), rnd.getrandbits(128), rnd.randrange(10**6)))
        yield text[:size]


def kind(subject: str) -> str:
    """What a subject holds, as ``AS_DEALT`` names it: a coup's aggregate, or a shoe's events between coups."""
    _, _, coup, aggregate = subjects.tokens(subject)
    return "between" if coup == subjects.NO_COUP else aggregate


def as_dealt(written: Iterable[str], seed: int = 7) -> Iterator[tuple[str, bytes, None]]:
    """Each subject of a history with as many messages, of the sizes, as a dealt coup files on it."""
    rnd = random.Random(seed)
    for subject in written:
        count, size = AS_DEALT[kind(subject)]
        for body in bodies(size, count, rnd):
            yield subject, body, None


def on_disk(server: NatsServer, stream: str) -> int:
    """Bytes the server's store holds on disk for ``stream``."""
    folder = server.store_dir / "jetstream" / "$G" / "streams" / stream
    if not folder.is_dir():
        raise FileNotFoundError(f"no store for stream {stream} under {server.store_dir}")
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def live_heap_mib(prof_port: int) -> float:
    """The server's live heap after a collection, from its profiling port:
    what it holds, without the garbage a restart leaves for the collector
    (reading compressed blocks back leaves much of it)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{prof_port}/debug/pprof/heap?debug=1&gc=1", timeout=30) as r:
        found = re.search(r"# HeapAlloc = (\d+)", r.read().decode())
    if found is None:
        raise RuntimeError("the server's heap profile names no HeapAlloc")
    return int(found.group(1)) / 2**20


def profiled(store: Path) -> tuple[NatsServer, int]:
    """A server on ``store`` (not yet started) with a profiling port, and the port."""
    prof_port = free_port()
    config = store.parent / "profiling.conf"
    config.write_text(f"prof_port: {prof_port}\n")
    return NatsServer(store, config=config), prof_port


async def restarted(store: Path, messages: int) -> dict[str, float]:
    """The server started again on ``store``: seconds until the stream answers
    with all its messages, and a moment later its resident memory and its
    live heap."""
    server, prof_port = profiled(store)
    start = time.perf_counter()
    with server:
        assert server.process is not None
        nc = await nats.connect(server.url)
        try:
            info = await nc.jetstream().stream_info(STREAM)
            ready = time.perf_counter() - start
            if info.state.messages != messages:
                raise RuntimeError(f"the restarted stream holds {info.state.messages} messages, not {messages}")
            await asyncio.sleep(1)
            return {"ready_s": ready, "rss_mib": rss_mib(server.process.pid), "heap_mib": live_heap_mib(prof_port)}
        finally:
            await nc.close()


async def one_run(coups: int, own_subjects: bool = True, dealt: bool = False) -> dict[str, Any]:
    """A server given ``coups`` coups of history (its live heap then: what a
    running node holds), killed as it stands (a node that crashes leaves its
    index behind its last writes), restarted, then stopped cleanly and
    restarted again."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "nats"
        server, prof_port = profiled(store)
        server.start()
        try:
            nc = await nats.connect(server.url)
            await provision(nc)
            body = b"x" * BODY
            written = history(coups, own_subjects)
            messages = await append_all(nc, as_dealt(written) if dealt else ((s, body, None) for s in written))
            await nc.close()
            running = live_heap_mib(prof_port)
            disk = on_disk(server, STREAM)
        finally:
            server.kill()
        killed = await restarted(store, messages)
        clean = await restarted(store, messages)
    return {"coups": coups, "messages": messages, "disk_bytes": disk, "running_heap_mib": running, **clean,
            **{f"killed_{k}": v for k, v in killed.items()}}


async def measure(coups: int = 50000, runs: int = 3, dealt: bool = False) -> dict[str, Any]:
    """Each way the median of ``runs``: the history filed as the services file
    it, the same messages without the coups' own subjects, and no history;
    one message a subject, or (``dealt``) as many as a dealt coup has."""
    ways: dict[str, list[dict[str, Any]]] = {"coups_own_subjects": [], "same_messages": [], "empty": []}
    for _ in range(runs):
        ways["coups_own_subjects"].append(await one_run(coups, dealt=dealt))
        ways["same_messages"].append(await one_run(coups, own_subjects=False, dealt=dealt))
        ways["empty"].append(await one_run(0))
    out: dict[str, Any] = {"runs": runs, "tables": TABLES, "coups_a_shoe": COUPS_A_SHOE, "as_dealt": dealt}
    for way, results in ways.items():
        out[way] = {k: statistics.median(r[k] for r in results) for k in results[0]}
    empty, empty_running = out["empty"]["heap_mib"], out["empty"]["running_heap_mib"]
    for way in ("coups_own_subjects", "same_messages"):
        out[way]["kib_per_coup"] = 1024 * (out[way]["heap_mib"] - empty) / coups
        out[way]["running_kib_per_coup"] = 1024 * (out[way]["running_heap_mib"] - empty_running) / coups
    out["memory_ratio"] = (out["coups_own_subjects"]["heap_mib"] - empty) / max(
        out["same_messages"]["heap_mib"] - empty, 0.1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.holding")
    p.add_argument("--coups", type=int, default=50000, help="coups of history in the stream")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--as-dealt", action="store_true",
                   help="as many messages a subject, of the sizes, as a dealt coup has (not one of 400 bytes)")
    args = p.parse_args()
    print(json.dumps(asyncio.run(measure(args.coups, args.runs, args.as_dealt)), indent=2))


if __name__ == "__main__":
    main()
