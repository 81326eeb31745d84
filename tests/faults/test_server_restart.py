"""The nats-server restarted under a dealing casino: the tables deal on with
the patience `casino run` gives its simulated terminals, the services back
within a moment of the server."""

from __future__ import annotations

from pathlib import Path

import pytest
from services import runner

from casino.audit.audits import verify_history
from casino.cli.run import APPROVALS
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.nats import client as natsclient
from casino.nats.provision import provision
from casino.nats.server import NatsServer
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore

pytestmark = pytest.mark.anyio
TABLES = {"BAC000-1": TableConfig("baccarat-000-methods", approvals=APPROVALS),
          "BJ002-1": TableConfig("blackjack-002-hole-card")}


async def test_the_tables_deal_on_across_a_server_restart_with_the_patience_casino_run_gives(
        tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    running: list[runner.Running] = []
    try:
        nc = await natsclient.connect(server.url, max_reconnect_attempts=-1)
        await provision(nc)
        running = [await runner.start(kind, server.url, tables=TABLES) for kind in runner.KINDS]
        await Simulator(nc, TABLES, seed=4).run(2)
        server.stop()
        server = NatsServer(tmp_path / "nats", port=server.port, fixed_port=True).start()
        await Simulator(nc, TABLES, seed=5).run(2)  # the simulator's own patience, as `casino run` has it
        stored = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
        report = verify_history(stored)
        assert report.findings == [] and report.coups == 2 * 2 * len(TABLES)
        await nc.close()
    finally:
        for r in reversed(running):
            await r.stop()
        server.stop()
