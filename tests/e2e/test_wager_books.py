"""The wager service holds the book of each table's current coup, not of
every coup it has seen: a casino dealing for months would otherwise run out
of memory. A command for an earlier coup still finds that coup's book, read
back from the stream."""

from __future__ import annotations

import nats
import pytest
from services import runner

from casino import commands as c
from casino.launcher import default_tables
from casino.rules import wagerbook as W
from casino.service import Peer
from casino.simulator import Simulator
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore

pytestmark = pytest.mark.anyio
TABLES = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"])


async def test_the_wager_service_keeps_one_book_a_table_and_reads_an_earlier_one_back(nats_url: str) -> None:
    running = {kind: await runner.start(kind, nats_url, tables=TABLES) for kind in runner.KINDS}
    nc = await nats.connect(nats_url)
    try:
        await Simulator(nc, TABLES, seed=9, patience=40).run(6)
        books = running["wager"].service.books
        assert sorted(books) == sorted(f"{table}-000006" for table in TABLES)

        table = next(iter(TABLES))
        first = f"{table}-000001"
        stored = await JetStreamEventStore(nc).read(subjects.coup_filter(first))
        closed = [e.data for m in stored for e in m.batch.events if isinstance(e.data, W.BookClosed)]

        peer, wager = Peer(nc, timeout=10), subjects.command(table, "wager")
        again = await peer.ask(wager, c.CloseBook(id="late-close", table=table, coup=first))
        assert again.ok and again.wagers == closed[0].wagers
        late = await peer.ask(wager, c.PlaceWager(id="late-bet", table=table, coup=first, seat=1, bet="banker", amount=5000))
        assert not late.ok and "betting is closed" in late.reason
        assert len(await JetStreamEventStore(nc).read(subjects.coup_filter(first))) == len(stored)
    finally:
        await nc.close()
        for r in reversed(list(running.values())):
            await r.stop()
