"""Each instance of the shoe, wager and dealer-policy services follows its
aggregate's events from a durable consumer of its own (what another instance
appends reaches it), in the order they were appended. It acknowledges
what it handled (ack policy all) whenever nothing more is waiting and every 64
deliveries: one acknowledgement for many events, and nothing handled left
pending for the server to send again."""

from __future__ import annotations

import asyncio

import nats
import pytest
from faststream.nats import NatsBroker
from nats.js.api import AckPolicy
from services import followers

from casino.metrics import Metrics
from casino.nats.provision import provision
from casino.rules.wagerbook import BookOpened
from casino.store import envelope, subjects
from casino.store.jetstream import STREAM
from tests.store.test_eventstore_contract import batch

pytestmark = pytest.mark.anyio


class Observed:
    def __init__(self) -> None:
        self.seqs: list[int] = []

    async def observe(self, subject: str, seq: int, b: envelope.Batch) -> None:
        self.seqs.append(seq)


async def test_a_follower_takes_its_deliveries_in_order_and_leaves_none_unacknowledged(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await provision(nc)
    service = Observed()
    broker = NatsBroker(nats_url)
    claimed = await followers.claim(await broker.connect(), "wager", followers.followed("wager"))
    config = followers.follow(broker, "wager", claimed, lambda: service, Metrics("wager"))
    await broker.start()
    try:
        for n in range(200):
            coup = f"T1-{n:06d}"
            data = envelope.encode(batch(BookOpened(coup, "baccarat-000-methods"), coup=coup))
            await js.publish(subjects.event("T1", "T1-shoe-1", coup, "wager"), data, stream=STREAM)
        for _ in range(100):
            if len(service.seqs) == 200:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        info = await js.consumer_info(STREAM, config.name or "")
    finally:
        await broker.stop()
        await nc.close()
    assert service.seqs == sorted(service.seqs) and len(service.seqs) == 200
    assert info.config.ack_policy == AckPolicy.ALL
    assert info.num_ack_pending == 0 and info.delivered.stream_seq == info.ack_floor.stream_seq == service.seqs[-1]


class Acked:
    def __init__(self) -> None:
        self.acks = 0

    async def ack(self) -> None:
        self.acks += 1


async def test_a_follower_acknowledges_once_nothing_more_is_waiting_or_every_64_deliveries() -> None:
    acks, msg = followers.Acks(), Acked()
    for pending in (*range(99, -1, -1), 5, 4, 3, 2, 1, 0):
        await acks.handled(msg, pending)  # type: ignore[arg-type]
    assert msg.acks == 3  # at the 64th of the hundred, at its last, and at the last of the five


async def test_an_instance_claims_a_free_consumer_name_and_waits_while_none_is(nats_url: str) -> None:
    """A service's instances hold at most ``SLOTS`` consumers of their own,
    under names of the service's: an instance never takes another's (it
    creates, never updates), and where every name is held it says so and asks
    again until one lapses, rather than stopping."""
    nc = await nats.connect(nats_url)
    await provision(nc)
    try:
        held = [await followers.claim(nc, "wager", followers.followed("wager")) for _ in range(followers.SLOTS)]
        assert sorted(c.name or "" for c in held) == sorted(followers.slot_names("wager"))
        waiting = asyncio.ensure_future(followers.claim(nc, "wager", followers.followed("wager")))
        await asyncio.sleep(1.0)
        assert not waiting.done()  # every name held: it waits
        for c in held:  # the other instances' deliveries go on to them, unchanged
            assert (await nc.jetstream().consumer_info(STREAM, c.name or "")).config.deliver_subject == c.deliver_subject
        await nc.jetstream().delete_consumer(STREAM, held[3].name or "")  # one lapses
        claimed = await asyncio.wait_for(waiting, 30)
        assert claimed.name == held[3].name and claimed.deliver_subject != held[3].deliver_subject
    finally:
        await nc.close()
