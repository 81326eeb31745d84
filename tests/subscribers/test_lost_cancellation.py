"""A task that loses a cancellation, as a nats-py subscription's loop does
under Python 3.11 when its callback's request is answered as the
cancellation comes (``asyncio.wait_for``), and then waits for a message that
never comes: the tests' runner would wait for it for ever as it closes the
loop. The tests' watch (``tests/conftest.recancelled``) cancels it again."""

from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.anyio


async def test_a_task_that_lost_its_cancellation_is_cancelled_again() -> None:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    swallowed = asyncio.Event()

    async def subscription_loop() -> None:
        try:
            await asyncio.sleep(30)  # a callback's request, answered as the cancellation comes
        except asyncio.CancelledError:
            swallowed.set()  # lost: the callback returns as if answered
        await queue.get()  # and the loop waits for the next message

    task = asyncio.create_task(subscription_loop())
    await asyncio.sleep(0)
    task.cancel()
    await swallowed.wait()
    assert not task.done() and task.cancelling() == 1
    done, _ = await asyncio.wait({task}, timeout=15)  # cancelled again within a few looks
    assert task in done and task.cancelled()
