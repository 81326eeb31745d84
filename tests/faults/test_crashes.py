"""Kill -9 each service at random moments of a multi-table run and start it
again: every coup completes, the store holds no duplicate and no gap, and
every coup and ended shoe verifies. `make soak` runs the long version."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import nats
import pytest

from casino.audit.audits import verify_history, verify_store
from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import Simulator
from casino.nats.provision import provision
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore
from tests.faults.harness import SERVICES, Processes, audit, deal_through

pytestmark = pytest.mark.anyio
KILLS = int(os.environ.get("CASINO_SOAK_KILLS", "2"))  # per service
COUPS = int(os.environ.get("CASINO_SOAK_COUPS", "12"))  # per table


async def test_kill_minus_nine_any_service_at_any_moment_loses_and_duplicates_nothing(
    nats_url: str, tmp_path: Path
) -> None:
    tables = default_tables(4, list(SHORT))
    casino = Processes(nats_url, tmp_path / "procs", tables)
    nc = await nats.connect(nats_url)
    await provision(nc)
    casino.start_all()
    stop = asyncio.Event()
    try:
        chaos = asyncio.create_task(casino.chaos(KILLS, seed=int.from_bytes(os.urandom(2), "big"), stop=stop))
        simulator = Simulator(nc, tables, seed=21, patience=40)
        dealt = await deal_through(chaos, stop, lambda: simulator.run(COUPS), COUPS)
    finally:
        casino.stop_all()
    stored = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
    as_read = await verify_store(nc, 2)  # as `casino verify` does: each table verified as it is read
    await nc.close()
    print(f"kills: {dict(casino.kills)} over {4 * dealt} coups")
    assert casino.kills == {s: KILLS for s in SERVICES}  # every service killed as often as planned
    assert audit(stored, tables, dealt) == []
    report = verify_history(stored)
    assert report.findings == [] and report.coups == 4 * dealt
    assert (as_read.coups, as_read.shoes, as_read.findings) == (report.coups, report.shoes, [])


async def test_a_poison_event_goes_to_the_dead_letters_and_the_consumers_go_on(nats_url: str) -> None:
    from casino.protocol import commands
    from casino.store.jetstream import DLQ_STREAM
    from tests.e2e.casino import Casino
    from tests.e2e.test_command_interface import SHOES
    from tests.e2e.test_golden_coups import TABLES

    async with Casino(nats_url, TABLES, SHOES) as casino:
        poison = subjects.event("BAC000", "BAC000-shoe-1", "BAC000-000099", "coup")
        await casino.nc.jetstream().publish(poison, b"\x00 not an event batch")
        reply = await casino.ask("BAC000", "coup", commands.OpenCoup, procedure="method_a")  # the casino goes on
        coup = reply.coup
        await casino.ask("BAC000", "wager", commands.PlaceWager, coup=coup, seat=2, bet="banker", amount=5000)
        assert (await casino.ask("BAC000", "coup", commands.CloseBetting, coup=coup)).ok
        await casino.settled(coup, timeout=30)
        js = casino.nc.jetstream()
        for _ in range(200):  # until settlement's consumer has filed it (the dealer-policy, reading the table's
            count = (await js.stream_info(DLQ_STREAM)).state.messages  # coups to open the next, passed over it)
            dead = [await js.get_msg(DLQ_STREAM, seq) for seq in range(1, count + 1)]
            consumers = {m.subject.split(".")[-1].split("-")[0] for m in dead}
            if "settlement" in consumers:
                break
            await asyncio.sleep(0.1)
        assert "settlement" in consumers, consumers
        for m in dead:
            assert m.headers and m.headers["Casino-Original-Subject"] == poison and m.headers["Casino-Reason"]
        settlement = next(r for r in casino.running if r.kind == "settlement")
        assert settlement.metrics.dead_letters.labels("settlement")._value.get() == 1
