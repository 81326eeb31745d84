"""The NATS permission model on a real server: every service as its own user
deals coups; the wager service cannot publish a shoe event; a terminal of one
table cannot command another, not even by naming it in a command sent on its
own table's subject, nor open, close or add to a wager book (the dealer-policy
alone may); an anonymous client cannot connect."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest
from services import runner

from casino import commands as c
from casino import natsauth
from casino.natsserver import NatsServer
from casino.simulator import Simulator
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore, ensure_streams
from casino.tables import TableConfig
from casino.verify import verify_coup

pytestmark = pytest.mark.anyio
TABLES = {"BAC000-1": TableConfig("baccarat-000-methods"), "BJ003-1": TableConfig("blackjack-003-no-hole-card")}


async def test_each_service_as_its_own_user_and_nothing_more(tmp_path: Path) -> None:
    perms = natsauth.permissions(TABLES)
    pw = natsauth.passwords(perms)
    config = tmp_path / "nats.conf"
    config.write_text(natsauth.server_config(perms, pw))
    server = NatsServer(tmp_path / "nats", config=config).start()

    def url(user: str) -> str:
        return natsauth.with_credentials(server.url, user, pw[user])

    try:
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(server.url, max_reconnect_attempts=0, connect_timeout=2, allow_reconnect=False)

        admin = await nats.connect(url("admin"))
        await ensure_streams(admin.jetstream())
        running = [await runner.start(kind, url(kind.replace("_", "-")), tables=TABLES)
                   for kind in (*runner.KINDS, "projections")]
        floor = await nats.connect(url("floor"))
        await Simulator(floor, TABLES, seed=5).run(2)
        await floor.close()
        store = JetStreamEventStore(admin)
        for coup in ("BAC000-1-000002", "BJ003-1-000002"):
            assert verify_coup(await store.read(subjects.coup_filter(coup))) == []
        before = len(await store.read(f"{subjects.EVENTS}.>"))

        errors: list[str] = []

        async def on_error(e: Exception) -> None:
            errors.append(str(e))

        wager = await nats.connect(url("wager"), error_cb=on_error)
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await wager.jetstream().publish(subjects.event("BAC000-1", "BAC000-1-shoe-1", "-", "shoe"), b"{}",
                                            timeout=1)
        await wager.close()
        assert any("permissions violation" in e.lower() for e in errors), errors

        terminal = await nats.connect(url("terminal-BAC000-1"), error_cb=on_error)
        ok = await terminal.request(subjects.command("BAC000-1", "coup"),
                                    c.encoder.encode(c.Status(id="s", table="BAC000-1")), timeout=5)
        assert c.reply_decoder.decode(ok.data).ok
        errors.clear()
        other = c.OpenCoup(id="o", table="BJ003-1")
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await terminal.request(subjects.command("BJ003-1", "coup"), c.encoder.encode(other), timeout=1)
        await asyncio.sleep(0.2)
        assert any("permissions violation" in e.lower() for e in errors), errors
        for service, command in (("coup", other), ("wager", c.PlaceWager(
                id="w", table="BJ003-1", coup="BJ003-1-000003", seat=1, bet="box", amount=1000))):
            sent = await terminal.request(subjects.command("BAC000-1", service), c.encoder.encode(command), timeout=5)
            refused = c.reply_decoder.decode(sent.data)
            assert (refused.ok, refused.clause) == (False, "protocol"), refused
            assert "table BJ003-1 came on table BAC000-1's subject" in refused.reason
        # Books are the dealer-policy's: a terminal can neither send to their subject nor pass one as a wager.
        book = c.CloseBook(id="close", table="BAC000-1", coup="BAC000-1-000003")
        errors.clear()
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await terminal.request(subjects.command("BAC000-1", "book"), c.encoder.encode(book), timeout=1)
        await asyncio.sleep(0.2)
        assert any("permissions violation" in e.lower() for e in errors), errors
        sent = await terminal.request(subjects.command("BAC000-1", "wager"), c.encoder.encode(book), timeout=5)
        refused = c.reply_decoder.decode(sent.data)
        assert (refused.ok, refused.clause) == (False, "protocol") and "unknown" in refused.reason, refused
        await terminal.close()
        assert len(await store.read(f"{subjects.EVENTS}.>")) == before  # nothing was written
        for r in reversed(running):
            await r.stop()
        await admin.close()
    finally:
        server.stop()
