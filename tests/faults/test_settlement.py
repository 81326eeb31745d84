"""Settlement pays from the events it followed as they passed, and reads a
coup back from the stream whenever what it followed may not be whole: both
ways give the same payouts, and a gap never gives a payout from half a coup."""

from __future__ import annotations

import asyncio
import copy

import nats
import pytest
from nats.js.api import ConsumerConfig
from services import runner
from services.projections import service as projections_service
from services.settlement.consumer import SETTLEMENT_DELIVERY
from services.settlement.service import FOLLOWED, SettlementService

from casino.metrics import Metrics
from casino.nats.provision import provision
from casino.rules.settlement import CoupSettled
from casino.store import subjects
from casino.store.eventstore import InMemoryEventStore, Stored
from casino.store.following import Delivery
from casino.store.jetstream import STREAM
from tests.faults.test_hostile_commands import deal_in_memory


class CountingStore(InMemoryEventStore):
    def __init__(self, source: InMemoryEventStore) -> None:
        super().__init__()
        self.messages, self.ids = copy.deepcopy(source.messages), dict(source.ids)
        self.reads: list[str] = []

    async def read(self, filter_: str, after: int = 0) -> list[Stored]:
        self.reads.append(filter_)
        return await super().read(filter_, after)


async def _settle(source: InMemoryEventStore, how: str) -> tuple[list[CoupSettled], CountingStore]:
    """Feed every event in stream order, as the consumer would, and return
    what was settled and the store settled in (with the filters each coup was
    read back with)."""
    store = CountingStore(source)
    service = SettlementService(store)
    # What the consumer delivers: the coup and wager messages (or, filtered as an
    # older consumer was, the coup messages only), in order, numbered by it.
    filtered = ("coup",) if how == "coup events only" else FOLLOWED
    delivered = [m for m in await InMemoryEventStore.read(store, f"{subjects.EVENTS}.>")
                 if subjects.tokens(m.subject)[3] in filtered]
    for n, msg in enumerate(delivered, start=1):
        if how == "gap before each result" and any(e.type.endswith("coup_resulted") for e in msg.batch.events):
            await service.on_coup_events(msg, Delivery(msg.seq, n + 1, 1, 0))  # a delivery went elsewhere
        else:
            await service.on_coup_events(msg, Delivery(msg.seq, n, 2 if how == "redelivered" else 1, 0))
    settled = [e.data for m in await InMemoryEventStore.read(store, f"{subjects.EVENTS}.*.*.*.settle")
               for e in m.batch.events]
    return [s for s in settled if isinstance(s, CoupSettled)], store


def test_settlement_pays_the_same_from_what_it_followed_as_from_the_stream() -> None:
    source = asyncio.run(deal_in_memory(6))
    followed, store = asyncio.run(_settle(source, "in order"))
    assert len(followed) == 12 and store.reads == []  # every coup paid from what passed, none read back
    assert any(p.returned for s in followed for p in s.payouts)
    for how in ("gap before each result", "redelivered", "coup events only"):
        again, store = asyncio.run(_settle(source, how))
        reads = store.reads
        assert len(reads) == 12, how  # each coup read back from the stream, none paid from half of it
        # by its table and shoe: a wildcard before the coup's token has the server match every shoe ever held
        assert all("*" not in f for f in reads), reads
        assert again == followed, how


@pytest.mark.anyio
async def test_settlement_gives_an_older_consumer_the_wager_events_and_keeps_its_settings(nats_url: str) -> None:
    """A settlement consumer declared before it followed wager events (an older
    release, or the cluster's manifests) is given the wager filter at start,
    keeping the limits the operator set."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await provision(nc)
    await js.add_consumer(STREAM, ConsumerConfig(
        durable_name="settlement", filter_subject="casino.ev.*.*.*.coup", ack_wait=30.0, max_deliver=10,
        deliver_subject=SETTLEMENT_DELIVERY, deliver_group="settlement"))
    running = await runner.start("settlement", nats_url)
    try:
        config = (await js.consumer_info(STREAM, "settlement")).config
    finally:
        await running.stop()
        await nc.close()
    assert sorted(config.filter_subjects or []) == ["casino.ev.*.*.*.coup", "casino.ev.*.*.*.wager"]
    assert (config.ack_wait, config.max_deliver) == (30.0, 10)


@pytest.mark.anyio
async def test_a_settlement_pull_consumer_of_an_earlier_release_stops_the_start_with_what_to_do(
        nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    await provision(nc)
    await nc.jetstream().add_consumer(STREAM, ConsumerConfig(durable_name="settlement",
                                                             filter_subject="casino.ev.*.*.*.coup"))
    await nc.close()
    with pytest.raises(RuntimeError, match="pull consumer of an earlier release: delete it"):
        await runner.start("settlement", nats_url)


@pytest.mark.anyio
async def test_a_coup_not_followed_whole_is_verified_on_its_record_read_back_from_its_tables_shoes() -> None:
    """The projections verify each settled coup; one not followed whole is
    read back by its table (a round may go on into a new shoe), not from
    every table the stream has ever held."""
    _, store = await _settle(await deal_in_memory(2), "in order")
    metrics = Metrics("projections")
    for table, coup in (("B", "B-000001"), ("J", "J-000002")):
        await projections_service.verify_settled(store, table, coup, None, metrics)
    assert store.reads == [subjects.coup_filter("B-000001", "B"), subjects.coup_filter("J-000002", "J")]
    for table in ("B", "J"):
        assert metrics.registry.get_sample_value("casino_coups_verified_total", {"table": table}) == 1
        assert metrics.registry.get_sample_value("casino_verification_failures_total", {"table": table}) == 0  # at zero, seen from the start
