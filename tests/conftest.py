from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.natsfixture import nats_server

# Seconds between looks at the tests' event loops for a task that lost its cancellation (``recancelled``).
LOOK_EVERY = 2.0
_loops: list[asyncio.AbstractEventLoop] = []  # each async test's event loop, as its runner made it
_cancelling: dict[int, int] = {}  # id of a task seen cancelling and not done, and how many looks since


def _new_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    _loops[:] = [*(kept for kept in _loops if not kept.is_closed()), loop]
    return loop


def recancelled() -> None:
    """Cancel again, in the loop it runs in, every task that has stayed
    cancelling (cancelled, not done) for a few looks: Python 3.11 loses a
    cancellation that comes as a request is answered (``asyncio.wait_for``,
    deep in nats-py's ``request``), and a task that lost the one its test's
    runner gives each task as it closes the loop would be waited for ever
    (a subscription's loop then waits for its next message). The product
    guards its own loops with a flag beside their cancellation; this guards
    what the tests leave running. Looked at from a thread of its own."""
    for task in asyncio.all_tasks():
        if task.cancelling() and not task.done():
            looks = _cancelling[id(task)] = _cancelling.get(id(task), 0) + 1
            if looks >= 2:
                task.cancel()
        else:
            _cancelling.pop(id(task), None)


def _watch() -> None:
    while True:
        threading.Event().wait(LOOK_EVERY)
        for loop in list(_loops):
            if loop.is_running():
                loop.call_soon_threadsafe(recancelled)


threading.Thread(target=_watch, name="recancel", daemon=True).start()


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return "asyncio", {"loop_factory": _new_loop}


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    with nats_server(tmp_path / "nats") as url:
        yield url
