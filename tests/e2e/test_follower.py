"""Each instance of the shoe, wager and dealer-policy services follows its
aggregate's events from a durable consumer of its own (what another instance
appends reaches it). It acknowledges what it handled by the last delivery of
each batch (ack policy all): one acknowledgement for many events, and nothing
handled left pending for the server to send again."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy
from services import followers

from casino.metrics import Metrics
from casino.provision import provision
from casino.rules.wagerbook import BookOpened
from casino.store import envelope, subjects
from casino.store.following import Delivery
from casino.store.jetstream import STREAM
from tests.store.test_eventstore_contract import batch

pytestmark = pytest.mark.anyio


class Observed:
    def __init__(self) -> None:
        self.seqs: list[int] = []

    async def observe(self, subject: str, seq: int, b: envelope.Batch) -> None:
        self.seqs.append(seq)


async def test_a_follower_acknowledges_each_batch_by_its_last_delivery(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await provision(nc)
    service = Observed()
    follower = await followers.follow(nc, service, "wager", Metrics("wager"))
    handled: list[int] = []
    on_batch = follower.on_batch

    async def counted(msgs: list[tuple[Msg, Delivery]]) -> None:
        handled.append(len(msgs))
        await on_batch(msgs)

    follower.on_batch = counted
    try:
        # Appended before the follower pulls: they come in batches of many.
        for n in range(40):
            coup = f"T1-{n:06d}"
            data = envelope.encode(batch(BookOpened(coup, "baccarat-000-methods"), coup=coup))
            await js.publish(subjects.event("T1", "T1-shoe-1", coup, "wager"), data, stream=STREAM)
        await follower.start(nc)
        for _ in range(100):
            if len(service.seqs) == 40:
                break
            await asyncio.sleep(0.05)
        info = await js.consumer_info(STREAM, follower.durable)
    finally:
        await follower.stop()
        await nc.close()
    assert service.seqs == sorted(service.seqs) and len(service.seqs) == 40
    assert max(handled) > 1  # several deliveries were handled, and acknowledged, at once
    assert info.config.ack_policy == AckPolicy.ALL
    assert info.num_ack_pending == 0 and info.delivered.stream_seq == info.ack_floor.stream_seq == service.seqs[-1]
