"""The projections' writer follows the events from a durable consumer of
its own, claimed under a free one of the service's names. It acknowledges
what it handled (ack policy all) whenever nothing more is waiting and every 64
deliveries: one acknowledgement for many events, and nothing handled left
pending for the server to send again (tests/e2e/test_projections_instances.py
follows the events through it)."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.js.api import ConsumerConfig
from services import followers

from casino.nats.provision import provision
from casino.store import subjects
from casino.store.jetstream import STREAM

pytestmark = pytest.mark.anyio


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

    def own(name: str) -> ConsumerConfig:
        return followers.own_consumer(name, f"{subjects.EVENTS}.>")

    try:
        held = [await followers.claim(nc, "projections", own) for _ in range(followers.SLOTS)]
        assert sorted(c.name or "" for c in held) == sorted(followers.slot_names("projections"))
        waiting = asyncio.ensure_future(followers.claim(nc, "projections", own))
        await asyncio.sleep(1.0)
        assert not waiting.done()  # every name held: it waits
        for c in held:  # the other instances' deliveries go on to them, unchanged
            assert (await nc.jetstream().consumer_info(STREAM, c.name or "")).config.deliver_subject == c.deliver_subject
        await nc.jetstream().delete_consumer(STREAM, held[3].name or "")  # one lapses
        claimed = await asyncio.wait_for(waiting, 30)
        assert claimed.name == held[3].name and claimed.deliver_subject != held[3].deliver_subject
    finally:
        await nc.close()
