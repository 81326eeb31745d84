"""`casino run` (what `make run` calls) outlives its nats-server and stops when
asked: the server killed with kill -9 is started again on the same store and
the casino deals on; Ctrl-C or SIGTERM stops every process within 10 s
whatever the broker is doing, the server away included."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from casino.nats import client as natsclient
from casino.nats import permissions as natsauth
from casino.nats.server import free_port
from casino.rules.settlement import CoupSettled
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore

pytestmark = pytest.mark.anyio
STOPS_WITHIN = 10.0


def descendants(pid: int) -> set[int]:
    """Every process started by ``pid`` and by those, in another session or not."""
    children: dict[int, set[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), set()).add(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


def server_of(pids: set[int]) -> int:
    return next(p for p in pids if b"nats-server" in Path(f"/proc/{p}/cmdline").read_bytes())


async def settled(var: Path) -> int:
    """How many coups the store holds settled (0 while its server is away)."""
    password = json.loads((var / natsauth.AUTH_FILE).read_text())["compliance"]
    url = natsauth.with_credentials((var / "nats.url").read_text().strip(), "compliance", password)
    try:
        nc = await natsclient.connect(url, connect_timeout=1, max_reconnect_attempts=0, allow_reconnect=False)
    except Exception:
        return 0
    try:
        stored = await JetStreamEventStore(nc).read(subjects.aggregate_filter("settle"))
        return sum(isinstance(e.data, CoupSettled) for m in stored for e in m.batch.events)
    except Exception:
        return 0
    finally:
        await nc.close()


async def dealing(var: Path) -> tuple[asyncio.subprocess.Process, set[int]]:
    """`casino run` dealing at its four tables: its process and every process it started."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "casino.cli.main", "run", "--var", str(var), "--port", str(free_port()), "--seed", "3",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    while b"dealing at" not in (line := await asyncio.wait_for(proc.stdout.readline(), 60)):
        assert line, "casino run ended before dealing"
    asyncio.get_running_loop().create_task(proc.stdout.read())  # what it prints meanwhile, not left to block it
    for _ in range(300):
        if await settled(var) >= 4:
            break
        await asyncio.sleep(0.1)
    return proc, descendants(proc.pid)


async def stopped_within(proc: asyncio.subprocess.Process, started: set[int], sig: signal.Signals) -> float:
    """Seconds from ``sig`` until the launcher and everything it started have ended."""
    asked = time.monotonic()
    proc.send_signal(sig)
    assert proc.stderr is not None
    await asyncio.wait_for(proc.wait(), 30)
    while alive(started) and time.monotonic() - asked < 30:
        await asyncio.sleep(0.05)
    took = time.monotonic() - asked
    print(f"{sig.name}: every process ended {took:.1f} s after it")
    assert alive(started) == set(), [Path(f"/proc/{p}/cmdline").read_bytes() for p in alive(started)]
    return took


async def test_the_launcher_starts_its_server_again_on_the_same_store_and_the_casino_deals_on(
        tmp_path: Path) -> None:
    proc, started = await dealing(tmp_path)
    before = await settled(tmp_path)
    os.kill(server_of(started), signal.SIGKILL)
    await asyncio.sleep(1.0)
    for _ in range(600):  # started again, its store read back, every service and table back at work
        if (now := await settled(tmp_path)) >= before + 8:
            break
        await asyncio.sleep(0.1)
    assert now >= before + 8, (before, now)
    print(f"nats-server killed: {now - before} coups settled since")
    assert proc.returncode is None  # the launcher went on throughout
    took = await stopped_within(proc, started | descendants(proc.pid), signal.SIGTERM)
    assert took < STOPS_WITHIN, took
    assert proc.stderr is not None
    err = (await proc.stderr.read()).decode()
    assert "Traceback" not in err and "started again" in err, err


async def test_ctrl_c_with_its_server_gone_ends_every_process_within_ten_seconds(tmp_path: Path) -> None:
    """Ctrl-C as the server is killed (the broker gone, or being started
    again: every service reconnecting, the tables asking again); a polite
    kill with the server up is the test above's."""
    proc, started = await dealing(tmp_path)
    os.kill(server_of(started), signal.SIGKILL)
    await asyncio.sleep(0.3)
    took = await stopped_within(proc, started | descendants(proc.pid), signal.SIGINT)
    assert took < STOPS_WITHIN, took
    assert proc.stderr is not None
    err = (await proc.stderr.read()).decode()
    assert "Traceback" not in err and "killed" not in err, err  # no service had to be killed either
