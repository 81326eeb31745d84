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


def process_of(pids: set[int], module: str) -> int:
    """The pid among ``pids`` running ``python -m <module>``."""
    return next(p for p in alive(pids) if f"-m\0{module}\0".encode() in Path(f"/proc/{p}/cmdline").read_bytes())


def listens(port: int) -> bool:
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        return True
    except OSError:
        return False


async def test_the_launcher_starts_again_every_service_it_started_and_its_web(tmp_path: Path) -> None:
    """kill -9 of the dealer-policy, then of the web: each is started again
    (its backoff, 0.5 s, then as long as it takes to start), the tables
    deal on, and the web answers again on its address."""
    proc, started = await dealing(tmp_path)
    web = process_of(started, "services.web")
    port = int(Path(f"/proc/{web}/cmdline").read_bytes().split(b"\0")[-2])
    for module in ("services.dealer_policy", "services.web"):
        killed = process_of(started, module)
        before = await settled(tmp_path)
        at = time.monotonic()
        os.kill(killed, signal.SIGKILL)
        for _ in range(600):
            now = descendants(proc.pid)
            if (again := [p for p in alive(now) if p != killed and f"-m\0{module}\0".encode() in
                          Path(f"/proc/{p}/cmdline").read_bytes()]) and \
                    (module != "services.web" or listens(port)) and await settled(tmp_path) >= before + 4:
                break
            await asyncio.sleep(0.1)
        assert again, f"{module} was not started again"
        print(f"{module} killed with -9: started again and dealing on within {time.monotonic() - at:.1f} s")
        started |= set(again)
    assert proc.returncode is None
    took = await stopped_within(proc, started | descendants(proc.pid), signal.SIGTERM)
    assert took < STOPS_WITHIN, took
    assert proc.stderr is not None
    err = (await proc.stderr.read()).decode()
    assert "dealer-policy exited (status -9)" in err and "web exited (status -9)" in err, err


async def test_the_launchers_children_end_with_it_and_its_store_is_run_by_one_server_at_a_time(
        tmp_path: Path) -> None:
    """A second launcher on a running store is refused in one line naming
    the server that runs it, and leaves the store's files as they were; kill
    -9 of the launcher ends every process it started (a parent-death signal),
    and the store is then free for the next launcher, which deals on."""
    proc, started = await dealing(tmp_path)
    server = server_of(started)
    auth = (tmp_path / natsauth.AUTH_FILE).read_bytes()
    second = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "casino.cli.main", "run", "--var", str(tmp_path), "--port", str(free_port()),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(second.communicate(), 60)
    refusal = err.decode().strip()
    assert second.returncode == 2 and len(refusal.splitlines()) == 1, (out, err)
    assert f"nats-server pid {server}" in refusal and "one store, one server" in refusal, refusal
    assert (tmp_path / natsauth.AUTH_FILE).read_bytes() == auth
    assert alive({server}) == {server}

    at = time.monotonic()
    proc.kill()
    await proc.wait()
    while alive(started) and time.monotonic() - at < 30:
        await asyncio.sleep(0.05)
    print(f"launcher killed with -9: its {len(started)} processes ended within {time.monotonic() - at:.1f} s")
    assert alive(started) == set(), [Path(f"/proc/{p}/cmdline").read_bytes() for p in alive(started)]

    again, _ = await dealing(tmp_path)  # the store is free: the next launcher runs it
    assert await settled(tmp_path) >= 4
    again.send_signal(signal.SIGTERM)
    await asyncio.wait_for(again.wait(), 30)
