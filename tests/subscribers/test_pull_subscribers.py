"""faststream 0.7.8's JetStream pull subscribers, as the services would use
them, on a real nats-server: why the services' consumers push instead
(docs/architecture.md, "faststream's pull subscribers"). Each test reproduces
one behaviour; if a release of faststream changes it, the test fails and the
choice is to be made again."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest
from faststream.nats import JStream, NatsBroker, NatsMessage, PullSub
from nats.js.api import ConsumerConfig

pytestmark = pytest.mark.anyio

STREAM = "REPRO"


async def stream(url: str) -> nats.js.JetStreamContext:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name=STREAM, subjects=["repro.>"])
    return js


async def test_a_batch_pull_subscriber_holds_a_lone_message_until_its_batch_fills_or_times_out(
        nats_url: str) -> None:
    js = await stream(nats_url)
    broker = NatsBroker(nats_url, logger=None)
    arrived: list[float] = []

    @broker.subscriber("repro.>", stream=JStream(STREAM, declare=False), durable="batch",
                       config=ConsumerConfig(ack_wait=2.0),
                       pull_sub=PullSub(batch_size=64, timeout=3.0, batch=True))
    async def handle(body: list[int]) -> None:
        arrived.append(time.monotonic())

    await broker.start()
    try:
        # The subscriber's loop is waiting on an empty stream, half way through its
        # first fetch (a fetch finds what is there at once: the message is sent
        # once it waits, and mid-fetch, however busy the machine, not as one ends).
        await asyncio.sleep(1.5)
        sent = time.monotonic()
        await js.publish("repro.one", b"1")
        while not arrived and time.monotonic() < sent + 10:
            await asyncio.sleep(0.01)
    finally:
        await broker.stop()
    # Held until the batch times out, or, when the fetch ends on asyncio's
    # TimeoutError (the next test), dropped and sent again after the ack wait:
    # late either way, and a coup's result would wait with it at every hop.
    assert arrived and arrived[0] - sent > 0.5


async def test_a_batch_pull_subscriber_with_a_short_timeout_drops_fetched_messages_until_their_ack_wait(
        nats_url: str) -> None:
    """nats-py 2.16's fetch ends on asyncio's own TimeoutError when the time
    runs out between its requests; faststream's loop catches nats-py's
    TimeoutError only, so the loop ends with the messages it had fetched, and
    restarts: they come again after the ack wait, behind later ones."""
    js = await stream(nats_url)
    broker = NatsBroker(nats_url, logger=None)
    seen: list[int] = []

    @broker.subscriber("repro.>", stream=JStream(STREAM, declare=False), durable="short",
                       config=ConsumerConfig(ack_wait=2.0),
                       pull_sub=PullSub(batch_size=64, timeout=0.01, batch=True))
    async def handle(body: list[int]) -> None:
        seen.extend(body)

    await broker.start()
    try:
        for n in range(3000):
            await js.publish("repro.n", str(n).encode())
            if n % 50 == 0:
                await asyncio.sleep(0.003)
        deadline = time.monotonic() + 10
        while len(set(seen)) < 3000 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        await broker.stop()
    assert set(seen) == set(range(3000))
    assert seen != sorted(seen)  # some came again only after the ack wait, behind later ones


async def test_a_pull_subscriber_handles_the_messages_of_one_fetch_at_once(nats_url: str) -> None:
    js = await stream(nats_url)
    for n in range(64):
        await js.publish("repro.n", str(n).encode())
    broker = NatsBroker(nats_url, logger=None)
    running, most, done = 0, 0, []

    @broker.subscriber("repro.>", stream=JStream(STREAM, declare=False), durable="each",
                       pull_sub=PullSub(batch_size=64, timeout=1.0))
    async def handle(msg: NatsMessage) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001 * (int(msg.body) % 3))
        done.append(int(msg.body))
        running -= 1

    await broker.start()
    try:
        deadline = time.monotonic() + 10
        while len(done) < 64 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    finally:
        await broker.stop()
    assert sorted(done) == list(range(64))
    assert most > 1 and done != sorted(done)  # a fold over them could not take them in stream order
