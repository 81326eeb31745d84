"""Two shoe instances shuffling the same table's new shoe at once: the order
kept in the secrets' stream is the one both deal from and the one committed."""

from __future__ import annotations

import asyncio

import nats
import pytest
from services.shoe.secrets import JetStreamSecrets, Order, secure_shuffle
from services.shoe.service import ShoeService

from casino.protocol import commands
from casino.rules import shoe as dealing_shoe
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore

pytestmark = pytest.mark.anyio
TABLES = [f"BAC-{i}" for i in range(8)]


class SlowAfterKeeping:
    """The secrets' store, with a pause after an order is kept: the instance
    that kept its order first is the last to record its shuffle."""

    def __init__(self, inner: JetStreamSecrets) -> None:
        self.inner = inner

    async def put(self, table: str, shoe: str, order: Order) -> Order:
        kept = await self.inner.put(table, shoe, order)
        await asyncio.sleep(0.2)
        return kept

    async def get(self, table: str, shoe: str) -> Order | None:
        return await self.inner.get(table, shoe)


async def test_two_instances_shuffling_at_once_deal_from_and_commit_the_order_kept(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    store, secrets = JetStreamEventStore(nc), JetStreamSecrets(nc.jetstream())
    instances = [ShoeService(store, SlowAfterKeeping(secrets), secure_shuffle), ShoeService(store, secrets, secure_shuffle)]
    for table in TABLES:
        starts = [s.handle(commands.StartRound(id=f"{table}-1:start", table=table, coup=f"{table}-000001",
                                        ruleset="baccarat-000-methods")) for s in instances]
        replies = await asyncio.gather(*starts, return_exceptions=True)
        assert any(isinstance(r, commands.Reply) and r.ok for r in replies), replies
    for table in TABLES:
        shoe = subjects.shoe_id(table, 1)
        kept = await secrets.get(table, shoe)
        assert kept is not None
        shuffled = [e.data for m in await store.read(subjects.shoe_filter(table, shoe)) for e in m.batch.events
                    if isinstance(e.data, dealing_shoe.ShoeShuffled)]
        assert [e.commitment for e in shuffled] == [dealing_shoe.commitment(*kept)], table  # the order committed is the one kept
        for s in instances:
            await s.reload(commands.StartRound(id="r", table=table, coup=f"{table}-000001", ruleset="baccarat-000-methods"))
            assert s.tables[table].order == kept, table  # and each instance deals from it
    await nc.close()
