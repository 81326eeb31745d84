"""An acknowledged append is on disk: the server syncs each write before it
acknowledges it (casino.nats.server.SYNC), counted under strace. A kill -9
cannot show this (the page cache outlives the process); a power failure
would lose what was acknowledged but not synced."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from casino.nats import client as natsclient
from casino.nats.server import NatsServer

pytestmark = pytest.mark.anyio
APPENDS = 200


def strace() -> str:
    found = shutil.which("strace")
    if found is None:
        pytest.fail("strace is missing: `make tools` installs it (Debian's strace)")
    return found


def stop_traced(server: NatsServer) -> None:
    """Stop the nats-server under strace, so that strace writes its counts as it ends."""
    assert server.process is not None
    pid = server.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for child in children:
        os.kill(int(child), signal.SIGTERM)
    server.process.wait(10)


async def test_every_acknowledged_append_was_synced_to_disk_first(tmp_path: Path) -> None:
    counts = tmp_path / "syncs.txt"
    server = NatsServer(tmp_path / "nats", wrapper=(strace(), "-f", "-c", "-e", "trace=fsync,fdatasync",
                                                    "-o", str(counts))).start()
    try:
        nc = await natsclient.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="SYNCED", subjects=["synced.>"])
        for i in range(APPENDS):
            await js.publish("synced.append", str(i).encode())  # each acknowledged before the next
        await nc.close()
    finally:
        stop_traced(server)
        server.kill()
    calls = sum(int(fields[3]) for fields in map(str.split, counts.read_text().splitlines())
                if fields and fields[-1] in ("fsync", "fdatasync"))
    assert calls >= APPENDS, counts.read_text()
