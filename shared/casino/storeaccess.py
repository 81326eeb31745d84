"""Opening the event store for the command line: a NATS URL, or the store that
`make run` leaves under ``var/`` (through its server if it is running, else
through an embedded server started on it for the duration)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import nats
from nats.aio.client import Client

from casino.natsserver import NatsServer
from casino.store.jetstream import JetStreamEventStore, ensure_streams

URL_FILE = "nats.url"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nats", help="NATS URL of the event store (default: the store under --var)")
    p.add_argument("--var", default="var", help="data directory `make run` uses (default ./var)")


@contextlib.asynccontextmanager
async def open_store(args: argparse.Namespace) -> AsyncIterator[tuple[JetStreamEventStore, Client]]:
    """The event store the arguments name, and its connection."""
    url: str | None = args.nats
    server: NatsServer | None = None
    if url is None:
        running = Path(args.var) / URL_FILE
        if running.exists():
            with contextlib.suppress(Exception):
                nc = await nats.connect(running.read_text().strip(), connect_timeout=1, max_reconnect_attempts=0)
                await nc.close()
                url = running.read_text().strip()
        if url is None:
            store_dir = Path(args.var) / "nats"
            if not store_dir.exists():
                raise FileNotFoundError(f"no event store under {store_dir}: run `make run` first, or give --nats")
            server = NatsServer(store_dir, log_file=Path(args.var) / "nats-replay.log").start()
            url = server.url
    nc = await nats.connect(url)
    try:
        await ensure_streams(nc.jetstream())
        yield JetStreamEventStore(nc), nc
    finally:
        await nc.close()
        if server:
            server.stop()
