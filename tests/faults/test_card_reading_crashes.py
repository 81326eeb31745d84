"""Card-reading tables (docs/readers.md) with two instances of every
service, the shoe and the dealer-policy killed with kill -9 in the middle
of read coups while the simulated devices misbehave: every coup completes
once (dealt to its result, or void by a supervisor's ruling), no report is
lost or taken twice, and the whole record verifies."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

import nats
import pytest

from casino.audit.audits import verify_history
from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.nats.provision import provision
from casino.rules import shoe
from casino.rules.incidents import CardIncident, CoupRuled
from casino.store import subjects
from casino.store.envelope import CoupConfigured
from casino.store.jetstream import JetStreamEventStore
from tests.faults.harness import Processes, audit, deal_through

pytestmark = pytest.mark.anyio
COUPS = int(os.environ.get("CASINO_SOAK_READING_COUPS", "15"))  # per table
KILLED = ("shoe", "dealer_policy")
KILLS = int(os.environ.get("CASINO_SOAK_READING_KILLS", "2"))  # per killed service


async def test_kill_minus_nine_of_the_shoe_and_the_dealer_policy_in_read_coups_loses_and_doubles_nothing(
        nats_url: str, tmp_path: Path) -> None:
    tables = default_tables(3, ["baccarat-000-methods", "blackjack-002-hole-card", "blackjack-003-no-hole-card"],
                            readers=2)
    assert sorted(c.source for c in tables.values()) == ["", "hand", "recognised"]
    casino = Processes(nats_url, tmp_path / "procs", tables, replicas=2)
    nc = await nats.connect(nats_url)
    await provision(nc)
    casino.start_all()
    stop = asyncio.Event()
    try:
        chaos = asyncio.create_task(casino.chaos(KILLS, int.from_bytes(os.urandom(2), "big"), stop, KILLED))
        simulator = Simulator(nc, tables, seed=5, patience=60, faults=0.1, physical=tmp_path / "devices")
        dealt = await deal_through(chaos, stop, lambda: asyncio.wait_for(simulator.run(COUPS), 600), COUPS)
    finally:
        casino.stop_all()
    stored = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
    await nc.close()
    print(f"kills: {dict(casino.kills)} over {len(tables) * dealt} coups")
    assert casino.kills == {s: KILLS for s in KILLED}
    assert audit(stored, tables, dealt) == []
    events = [e.data for m in stored for e in m.batch.events]
    reads = Counter(e.read for e in events if isinstance(e, shoe.CardDrawn | shoe.CardMisdrawn | shoe.CardBurned)
                    and e.read)
    assert reads and max(reads.values()) == 1  # each report one card, however often it was sent
    incidents = {e.read: e.kind for e in events if isinstance(e, CardIncident)}
    rulings = Counter(f"{incidents[e.read]} {e.ruling}" for e in events if isinstance(e, CoupRuled))
    assert sum(rulings.values()) == len(incidents) > 0  # every incident ruled, once
    print(f"incidents ruled: {dict(sorted(rulings.items()))}; the most coups voided in a row before a coup: "
          f"{max(e.voids_before for e in events if isinstance(e, CoupConfigured))}")
    report = verify_history(stored)
    assert report.findings == [] and report.coups == len(tables) * dealt
