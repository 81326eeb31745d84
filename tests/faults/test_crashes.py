"""Kill -9 each service at random moments of a multi-table run and start it
again: every coup completes, the store holds no duplicate and no gap, and
every coup and ended shoe verifies. `make soak` runs the long version."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import nats
import pytest

from casino.launcher import SHORT, default_tables
from casino.replaycli import verify_all
from casino.simulator import Simulator
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore, ensure_streams
from tests.faults.harness import SERVICES, Processes, audit

pytestmark = pytest.mark.anyio
KILLS = int(os.environ.get("CASINO_SOAK_KILLS", "2"))  # per service
COUPS = int(os.environ.get("CASINO_SOAK_COUPS", "12"))  # per table


async def test_kill_minus_nine_any_service_at_any_moment_loses_and_duplicates_nothing(
    nats_url: str, tmp_path: Path
) -> None:
    tables = default_tables(4, list(SHORT))
    casino = Processes(nats_url, tmp_path / "procs", tables)
    nc = await nats.connect(nats_url)
    await ensure_streams(nc.jetstream())
    casino.start_all()
    stop = asyncio.Event()
    try:
        chaos = asyncio.create_task(casino.chaos(KILLS, seed=int.from_bytes(os.urandom(2), "big"), stop=stop))
        await Simulator(nc, tables, seed=21, patience=40).run(COUPS)
        stop.set()
        await chaos
    finally:
        casino.stop_all()
    stored = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
    await nc.close()
    print(f"kills: {dict(casino.kills)}")
    assert sum(casino.kills.values()) >= len(SERVICES)  # every service was killed at least once
    assert audit(stored, tables, COUPS) == []
    report = verify_all(stored, [m for m in stored if subjects.tokens(m.subject)[3] == "shoe"])
    assert report.findings == [] and report.coups == 4 * COUPS
