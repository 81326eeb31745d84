"""An instance that folds a table from the stream (the shoe service on its
first command for the table, the dealer-policy when another instance wrote
while it decided) while a catch-up brings that table's latest event: the
catch-up waits for the fold, so the fold is not cut short by an event applied
ahead of the ones before it. Two instances may answer a table while it moves
from one to the other (services.ownership)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from services.dealer_policy.service import DealerPolicyService
from services.shoe.secrets import JetStreamSecrets
from services.shoe.service import ShoeService

from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules.shoe import RoundEnded
from casino.rules.wagers import Wager
from casino.store import subjects
from casino.store.eventstore import Stored
from casino.store.jetstream import JetStreamEventStore
from tests.e2e.casino import Casino
from tests.e2e.test_command_interface import SHOES
from tests.e2e.test_golden_coups import TABLES, drive
from tests.rules.stacking import Scripted

pytestmark = pytest.mark.anyio
TABLE = "BAC000"
BOOK = (Wager(2, "banker", 5000), Wager(3, "player", 5000))


async def fold_while_following(store: JetStreamEventStore, fold: Awaitable[Any],
                               follow: Callable[[Stored], Awaitable[None]], flt: str) -> None:
    """Run ``fold`` with its read of the stream held up until the follower has
    been handed the table's latest message."""
    latest = (await store.read(flt))[-1]
    read, gate = store.read, asyncio.Event()

    async def held(filter_: str, after: int = 0) -> list[Stored]:
        out = await read(filter_, after)
        await gate.wait()
        return out

    store.read = held  # type: ignore[method-assign]
    folding = asyncio.ensure_future(fold)
    await asyncio.sleep(0.1)  # the fold is in its read
    following = asyncio.ensure_future(follow(latest))
    await asyncio.sleep(0.1)
    gate.set()
    await asyncio.gather(folding, following)


async def test_a_shoe_folded_while_its_follower_brings_the_latest_event_is_whole(nats_url: str) -> None:
    async with Casino(nats_url, TABLES, {TABLE: list(SHOES[TABLE])}) as casino:
        coup = await drive(casino, TABLE, "method_a", BOOK, Scripted())
        await casino.recorded(coup, RoundEnded)
        running = casino.service("shoe").service
        other = ShoeService(JetStreamEventStore(casino.nc), JetStreamSecrets(casino.nc.jetstream()))
        asked = commands.StartRound(id="again", table=TABLE, coup=coup, ruleset=TABLES[TABLE].ruleset)
        await fold_while_following(
            other.store, other.handle(asked),  # type: ignore[arg-type]
            lambda m: other.observe(m.subject, m.seq, m.batch), subjects.aggregate_filter("shoe", TABLE))
        assert other.tables[TABLE].state == running.tables[TABLE].state
        assert other.tables[TABLE].order == running.tables[TABLE].order


async def test_a_coup_folded_while_its_follower_brings_the_latest_event_is_whole(nats_url: str) -> None:
    async with Casino(nats_url, TABLES, {TABLE: list(SHOES[TABLE])}) as casino:
        await drive(casino, TABLE, "method_a", BOOK, Scripted())
        running = casino.service("dealer-policy").service
        other = DealerPolicyService(JetStreamEventStore(casino.nc), Peer(casino.nc), TABLES)
        await fold_while_following(
            other.store, other.rebuild(TABLE),  # type: ignore[arg-type]
            lambda m: other.observe(m.subject, m.seq, m.batch), subjects.aggregate_filter("coup", TABLE))
        assert other.tables[TABLE].state is not None
        assert other.tables[TABLE].state == running.tables[TABLE].state
