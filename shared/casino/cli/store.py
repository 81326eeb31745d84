"""Opening the event store for the command line: a NATS URL, or the store that
`make run` leaves under ``var/`` (through its server if it is running, else
through an embedded server started on it for the duration)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

from nats.aio.client import Client

from casino.audit.archive import history
from casino.nats import client as natsclient
from casino.nats import permissions as natsauth
from casino.nats.server import NatsServer
from casino.store.eventstore import EventStore
from casino.store.jetstream import JetStreamEventStore

URL_FILE = "nats.url"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nats", default=os.environ.get("CASINO_NATS_URL"),
                   help="NATS URL of the event store (default: $CASINO_NATS_URL, else the store under --var)")
    p.add_argument("--var", default="var", help="data directory `make run` uses (default ./var)")


@contextlib.asynccontextmanager
async def open_store(args: argparse.Namespace, user: str = "compliance", archived: bool = False,
                     ) -> AsyncIterator[tuple[EventStore, Client]]:
    """The event store the arguments name, and its connection: under
    ``--var``, as ``user`` (compliance reads; the projections alone write the
    read models); with ``archived``, the whole history, live and sealed."""
    url: str | None = args.nats
    server: NatsServer | None = None
    var = Path(args.var)
    auth = var / natsauth.AUTH_FILE
    password = json.loads(auth.read_text()).get(user, "") if auth.exists() else ""

    def as_compliance(u: str) -> str:
        return natsauth.with_credentials(u, user, password) if password else u

    if url is None:
        running = var / URL_FILE
        if running.exists():
            with contextlib.suppress(Exception):
                candidate = as_compliance(running.read_text().strip())
                nc = await natsclient.connect(candidate, connect_timeout=1, max_reconnect_attempts=0)
                await nc.close()
                url = candidate
        if url is None:
            store_dir = var / "nats"
            if not store_dir.exists():
                raise FileNotFoundError(f"no event store under {store_dir}: run `make run` first, or give --nats")
            config = var / natsauth.CONFIG_FILE
            server = NatsServer(store_dir, config=config if config.exists() else None,
                                log_file=var / "nats-replay.log").start()
            url = as_compliance(server.url)
    nc = await natsclient.connect(url)
    try:
        yield (history(nc) if archived else JetStreamEventStore(nc)), nc
    finally:
        await nc.close()
        if server:
            server.stop()
