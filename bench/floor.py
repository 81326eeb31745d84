"""The casino as an operator runs it (``casino run``): the four services,
the projections, the archiver and the web pages, each a process of its own,
with one floor connected to the web as a pit boss's browser keeps it; the
simulated tables stay in the bench's own process, reported apart."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

from nats.aio.client import Client
from services.web.accounts import write_accounts
from tests.faults.harness import Processes

from bench.load import casino, process_ids
from casino.config.tables import TableConfig
from casino.nats.server import NatsServer, free_port

TILE = re.compile(rb'id="tile-([^"]+)".*?>coup (\d+)<')
READ_SIDE = ("projections", "archiver")  # the services beside the four that deal, besides the web


class WebProcess:
    """``python -m services.web`` over the casino's server, signed in as a pit boss."""

    def __init__(self, url: str, var: Path, tables_file: Path) -> None:
        self.port = free_port()
        accounts = var / f"web-accounts-{self.port}.json"  # each instance its own: a password is made anew
        self.password = write_accounts(accounts, {"pit": "pit"})["pit"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.web", "--nats", url, "--tables", str(tables_file), "--accounts",
             str(accounts), "--http-port", str(self.port), "--forwarded-allow-ips", "127.0.0.1"],  # floors' addresses
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.cookie = ""

    async def ready(self) -> None:
        for _ in range(600):
            try:
                await asyncio.to_thread(urllib.request.urlopen, f"http://127.0.0.1:{self.port}/readyz", timeout=2)
                break
            except OSError:
                await asyncio.sleep(0.1)
        self.cookie = await self.sign_in()

    async def sign_in(self, client: str = "") -> str:
        """A new session of the pit boss's, signed in from ``client`` (the
        address a proxy names, as behind the Ingress): its cookies."""
        via = f"X-Forwarded-For: {client}\r\n" if client else ""
        page = await self._ask(f"GET /signin HTTP/1.1\r\nHost: b\r\n{via}Connection: close\r\n\r\n".encode())
        csrf = re.search(rb"set-cookie: (casino_csrf=[^;]+)", page, re.I)[1].decode()  # type: ignore[index]
        token = re.search(rb'name="csrf" value="([^"]+)"', page)[1].decode()  # type: ignore[index]
        form = f"csrf={token}&user=pit&password={self.password}&then=/".encode()
        answer = await self._ask(b"POST /signin HTTP/1.1\r\nHost: b\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                                 + f"Cookie: {csrf}\r\n{via}Content-Length: {len(form)}\r\nConnection: close\r\n\r\n"
                                 .encode() + form)
        session = re.search(rb"set-cookie: (casino_session=[^;]+)", answer, re.I)[1].decode()  # type: ignore[index]
        return f"{csrf}; {session}"

    async def _ask(self, request: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(request)
        answer = await reader.read()
        writer.close()
        return answer

    async def floor(self, seen: dict[tuple[str, int], float] | None, stop: asyncio.Event, cookie: str) -> None:
        """One browser's live floor: each tile's coup as it first shows (``seen``, None: read and let go)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 22)
        writer.write(f"GET /floor/events HTTP/1.1\r\nHost: b\r\nCookie: {cookie}\r\n"
                     "Accept: text/event-stream\r\n\r\n".encode())
        pending = b""
        try:
            while not stop.is_set():
                chunk = await reader.read(1 << 16)
                if not chunk:
                    break
                if seen is not None:
                    *events, pending = (pending + chunk).split(b"\r\n\r\n")
                    for event in events:
                        for table, number in TILE.findall(event):
                            seen.setdefault((table.decode(), int(number)), time.monotonic())
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def get(self, path: str) -> float:
        """Seconds to fetch a page whole."""
        started = time.perf_counter()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", headers={"Cookie": self.cookie})
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            assert answer.status == 200, path
        return time.perf_counter() - started

    def stop(self) -> None:
        """Stop the web; one that has not ended 10 s after SIGTERM (a machine
        overloaded by a capacity step that did not hold) is killed, and said so."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            print(f"the web (pid {self.proc.pid}) had not ended 10 s after SIGTERM: killed", file=sys.stderr)
            self.proc.kill()
            self.proc.wait(10)



@contextlib.asynccontextmanager
async def whole(tables: dict[str, TableConfig],
                replicas: int = 1, floor: bool = True
                ) -> AsyncIterator[tuple[Client, Processes, NatsServer, list[WebProcess]]]:
    """The whole casino over ``tables``, ``replicas`` instances of every
    service and of the web, each web signed in as a pit boss, and (``floor``)
    one floor connected to the first web for as long as the casino runs (its
    tiles read and let go)."""
    async with casino(tables, replicas) as (nc, procs, server):
        for service in READ_SIDE:
            for instance in range(replicas):
                procs.start(service, instance)
        webs = [WebProcess(server.url, procs.var, procs.tables_file) for _ in range(replicas)]
        stop = asyncio.Event()
        try:
            for web in webs:
                await web.ready()
            watching = asyncio.create_task(webs[0].floor(None, stop, webs[0].cookie)) if floor else None
            yield nc, procs, server, webs
            stop.set()
            if watching is not None:
                watching.cancel()
        finally:
            for web in webs:
                web.stop()


def whole_ids(procs: Processes, server: NatsServer, webs: list[WebProcess]) -> dict[str, int]:
    """Every process's id: the services', the webs' (``web``, ``web-2``…), the server's and the simulated tables'."""
    return {**process_ids(procs, server), **{"web" if not i else f"web-{i + 1}": w.proc.pid for i, w in enumerate(webs)}}
