"""The projections' writer follows the events from a pull consumer of its
own, claimed under a free one of the service's names, and taken in turns:
every message waiting handled together and acknowledged once (ack policy
all), nothing handled left pending for the server to send again
(tests/e2e/test_projections_instances.py follows the events through it).
Settlement and the archiver take the deliveries of a consumer their
instances share in turns too, one instance at a time (``Sole``), each
acknowledged on its own."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig
from prometheus_client import CollectorRegistry, Counter
from services import followers

from casino.nats.provision import provision
from casino.store import subjects
from casino.store.jetstream import STREAM

pytestmark = pytest.mark.anyio


class Metrics:
    """The one counter ``Turns`` keeps, as a registry of its own."""

    def __init__(self) -> None:
        self.deliveries_refused = Counter("refused", "", ["consumer"], registry=CollectorRegistry())


async def test_a_pull_consumer_is_taken_in_turns_of_every_message_waiting_and_acknowledged_once_a_turn(
        nats_url: str) -> None:
    """What waits when a fetch is asked is handed over in one turn, in
    stream order, and acknowledged by its last message (ack policy all);
    what comes later comes in the next turns; a message on the inbox that the
    consumer did not hand out is dropped and counted; once the consumer is
    gone, the turns end and the owner is told."""
    nc = await nats.connect(nats_url)
    await provision(nc)
    js = nc.jetstream()
    turns: list[list[int]] = []
    lost: list[BaseException] = []
    metrics = Metrics()
    try:
        for n in range(100):
            await js.publish(f"{subjects.EVENTS}.T1.-.-.test", str(n).encode())
        config = await followers.claim(nc, "projections", lambda name: followers.own_consumer(
            name, f"{subjects.EVENTS}.>"))
        name = config.name or ""

        async def handle(msgs: list[Msg]) -> None:
            turns.append([int(m.data) for m in msgs])

        taking = followers.Turns(nc, name, handle, lost.append, metrics)  # type: ignore[arg-type]
        await taking.start()
        for n in range(100, 110):
            await js.publish(f"{subjects.EVENTS}.T1.-.-.test", str(n).encode())
            await asyncio.sleep(0.01)
        for _ in range(100):
            if sum(map(len, turns)) == 110:
                break
            await asyncio.sleep(0.05)
        assert turns[0][:100] == list(range(100))  # every message waiting, in one turn
        assert [n for turn in turns for n in turn] == list(range(110)) and len(turns) < 110
        info = await js.consumer_info(STREAM, name)
        assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == info.delivered.stream_seq
        await nc.publish(taking.subscription.subject, b"999", reply="elsewhere")
        await asyncio.sleep(0.2)
        assert metrics.deliveries_refused.labels(name)._value.get() == 1
        assert 999 not in [n for turn in turns for n in turn]
        await js.delete_consumer(STREAM, name)
        for _ in range(200):
            if lost:
                break
            await asyncio.sleep(0.05)
        assert lost and isinstance(lost[0], followers.ConsumerLost)
        await taking.stop()
    finally:
        await nc.close()


class Taking(followers.Sole):
    """A shared consumer's deliveries as settlement's and the archiver's take them: each acknowledged once
    handled, but the first delivery of each of ``failing``, asked for again (as a settlement that failed)."""

    deliver, queue = "_INBOX.taking.events", "taking"

    def __init__(self, failing: set[int]) -> None:
        super().__init__()
        self.metrics = Metrics()  # type: ignore[assignment]
        self.failing, self.turns_taken = failing, []  # type: list[list[int]]

    async def on_turn(self, msgs: list[Msg]) -> None:
        self.turns_taken.append([int(m.data) for m in msgs])
        await asyncio.sleep(0.2)  # what comes meanwhile makes the next turn
        for m in msgs:
            if int(m.data) in self.failing:
                self.failing.discard(int(m.data))
                await m.nak(delay=0.5)
            else:
                await m.ack()


async def test_a_shared_consumer_is_taken_in_turns_by_its_sole_owner_each_delivery_acknowledged_on_its_own(
        nats_url: str) -> None:
    """What is delivered while a turn is handled is handed over together in
    the next, in stream order, to the instance that owns partition ``SOLE``
    (and nothing to one that does not); a delivery that failed comes again
    on its own, not the turn's others; let go, no more turns."""
    nc = await nats.connect(nats_url)
    await provision(nc)
    js = nc.jetstream()
    taking = Taking(failing={42})
    try:
        await followers.shared_consumer(nc, taking.queue, [f"{subjects.EVENTS}.*.-.-.test"], ConsumerConfig(
            durable_name=taking.queue, deliver_subject=taking.deliver, deliver_group=taking.queue, ack_wait=30.0))
        await taking.take(nc, {followers.SOLE + 1})  # not its partition: it stands by
        for n in range(100):
            await js.publish(f"{subjects.EVENTS}.T1.-.-.test", str(n).encode())
        await asyncio.sleep(0.5)
        assert taking.subscription is None and taking.turns_taken == []
        await taking.take(nc, {followers.SOLE})

        async def handled(count: int) -> list[int]:
            for _ in range(200):
                if sum(map(len, taking.turns_taken)) >= count:
                    break
                await asyncio.sleep(0.05)
            return [n for turn in taking.turns_taken for n in turn]

        assert await handled(101) == [*range(100), 42]  # in stream order; the failed one again, alone
        assert taking.turns_taken[-1] == [42] and len(taking.turns_taken) < 50  # many deliveries a turn
        await asyncio.sleep(0.5)
        info = await js.consumer_info(STREAM, taking.queue)
        assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 100
        await taking.release({followers.SOLE})
        await js.publish(f"{subjects.EVENTS}.T1.-.-.test", b"100")
        await asyncio.sleep(1.0)
        assert taking.subscription is None and 100 not in await handled(0)
    finally:
        await taking.stop()
        await nc.close()


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
        made = {c.name: (await nc.jetstream().consumer_info(STREAM, c.name or "")).created for c in held}
        await nc.jetstream().delete_consumer(STREAM, held[3].name or "")  # one lapses
        claimed = await asyncio.wait_for(waiting, 30)
        assert claimed.name == held[3].name
        for c in held:  # the other instances' consumers are theirs still, unchanged; the lapsed one is new
            created = (await nc.jetstream().consumer_info(STREAM, c.name or "")).created
            assert (created == made[c.name]) == (c.name != claimed.name)
    finally:
        await nc.close()
