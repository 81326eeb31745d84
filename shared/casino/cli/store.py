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
from urllib.parse import urlsplit

import nats.errors
from nats.aio.client import Client

from casino.audit.archive import history
from casino.audit.history import Absent, Record
from casino.nats import client as natsclient
from casino.nats import permissions as natsauth
from casino.nats.server import NatsServer
from casino.store.jetstream import STREAM, JetStreamEventStore

URL_FILE = "nats.url"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nats", default=os.environ.get("CASINO_NATS_URL"),
                   help="NATS URL of the event store (default: $CASINO_NATS_URL, else the store under --var)")
    p.add_argument("--var", default="var", help="data directory `make run` uses (default ./var)")


@contextlib.asynccontextmanager
async def open_store(args: argparse.Namespace, user: str = "compliance", archived: bool = False,
                     ) -> AsyncIterator[tuple[Record, Client]]:
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
            if not (store_dir / "jetstream").is_dir():
                raise Absent(f"no event store under {store_dir}: run `make run` first, or give --nats")
            config = var / natsauth.CONFIG_FILE
            if missing := [str(f) for f in (config, auth) if not f.exists()]:
                raise Absent(f"the store under {store_dir} is missing {' and '.join(missing)} beside it (its "
                             "accounts and users): copy them with the store")
            server = NatsServer(store_dir, config=config, log_file=var / "nats-replay.log").start()
            url = as_compliance(server.url)
    try:
        try:
            nc = await natsclient.connect(url, connect_timeout=3, max_reconnect_attempts=3, reconnect_time_wait=1,
                                          error_cb=natsclient.unheard)
        except (nats.errors.Error, OSError) as exc:
            raise Absent(f"no event store answers at {shown(url)}: {exc or type(exc).__name__}") from None
        try:
            await nc.jetstream().stream_info(STREAM)
        except nats.errors.Error as exc:
            raise Absent(f"no event store at {shown(url)} for user {user}: {exc or type(exc).__name__}") from None
        try:
            yield (history(nc) if archived else JetStreamEventStore(nc)), nc
        finally:
            await nc.close()
    finally:
        if server:
            server.stop()


def shown(url: str) -> str:
    """A NATS URL as a message shows it: without its password."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
