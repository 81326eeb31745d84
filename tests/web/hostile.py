"""The web pages as a process of their own (``python -m services.web``, as
``casino run`` and the Kubernetes Deployment start it), over a casino on a
real nats-server, and a raw HTTP client to attack them with: every request
as sent on the wire, from any client address: behind the proxy the test
plays, in the X-Forwarded-For header (which the web believes of a proxy on
loopback alone); with no proxy, as the connection's own source address on
loopback (127.0.0.0/8)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import resource
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from services.web.accounts import write_accounts

from casino.config.tables import TableConfig, dump_tables
from casino.nats.server import free_port

TOKEN = re.compile(rb'name="csrf" value="([^"]+)"')


def more_files(wanted: int = 16384) -> None:
    """This process (and what it starts) allowed ``wanted`` open files, as far as the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class Answer:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]

    def header(self, name: str) -> str:
        return next((v for k, v in self.headers if k == name), "")

    def cookies(self) -> dict[str, str]:
        return {v.split("=", 1)[0]: v for k, v in self.headers if k == "set-cookie"}


class WebProcess:
    """``python -m services.web`` on a free port, its accounts in a file of its own,
    behind a proxy at ``proxy`` (the test, which says each client's address in X-Forwarded-For), or none."""

    def __init__(self, nats_url: str, tmp: Path, tables: dict[str, TableConfig], *extra: str,
                 accounts: Path | None = None, proxy: str = "127.0.0.1") -> None:
        self.nats_url, self.tmp, self.proxied = nats_url, tmp, bool(proxy)
        self.extra = (*extra, "--forwarded-allow-ips", proxy) if proxy else extra
        tmp.mkdir(parents=True, exist_ok=True)
        self.tables_file = tmp / "tables.toml"
        self.tables_file.write_text(dump_tables(tables))
        self.accounts = accounts or tmp / "web-accounts.json"
        if accounts is None:
            self.passwords = write_accounts(self.accounts, {"pit1": "pit", "comp1": "compliance"})
        self.port = free_port()
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> WebProcess:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.web", "--nats", self.nats_url, "--tables", str(self.tables_file),
            "--accounts", str(self.accounts), "--http-port", str(self.port), *self.extra,
            stdout=asyncio.subprocess.DEVNULL, stderr=(self.tmp / f"web-{self.port}.log").open("wb"))
        for _ in range(600):
            with contextlib.suppress(OSError, ValueError, IndexError):
                if (await self.ask("GET", "/readyz")).status == 200:
                    return self
            await asyncio.sleep(0.1)
        raise TimeoutError(f"the web did not start: see {self.tmp}")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await asyncio.wait_for(self.proc.wait(), 15)

    def rss_mib(self) -> float:
        assert self.proc is not None
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]

    async def ask(self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"",
                  client: str = "") -> Answer:
        """One request on a connection of its own, answered whole, from ``client`` (``connect``)."""
        reader, writer = await self.connect(client)
        try:
            head = {"Host": "127.0.0.1", "Connection": "close", **(headers or {})}
            if client and self.proxied:
                head["X-Forwarded-For"] = client
            if body or method == "POST":
                head.setdefault("Content-Type", "application/x-www-form-urlencoded")
                head["Content-Length"] = str(len(body))
            writer.write(f"{method} {path} HTTP/1.1\r\n".encode() +
                         "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n" + body)
            return Answer(await asyncio.wait_for(reader.read(), 30))
        finally:
            writer.close()

    async def connect(self, client: str = "") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the web: from ``client`` where there is no proxy (a loopback address), else from loopback."""
        local = (client, 0) if client and not self.proxied else None
        return await asyncio.open_connection("127.0.0.1", self.port, local_addr=local)

    async def form_token(self, client: str = "") -> tuple[str, str]:
        """A sign-in page's form token and the cookie that goes with it."""
        page = await self.ask("GET", "/signin", client=client)
        cookie = page.cookies()["casino_csrf"].split(";")[0]
        token = TOKEN.search(page.body)
        assert token is not None, page.body[:500]
        return token[1].decode(), cookie

    async def sign_in(self, user: str, password: str, client: str = "", token: tuple[str, str] | None = None,
                      headers: dict[str, str] | None = None) -> Answer:
        csrf, cookie = token or await self.form_token(client)
        return await self.ask("POST", "/signin", {"Cookie": cookie, **(headers or {})},
                              f"csrf={csrf}&user={user}&password={password}&then=/".encode(), client)

    async def session(self, user: str, client: str = "") -> str:
        """A signed-in session's cookies (its session and its form token)."""
        csrf, cookie = await self.form_token(client)
        answer = await self.sign_in(user, self.passwords[user], client, (csrf, cookie))
        assert answer.status == 303, (answer.status, answer.body[:300])
        return f"{cookie}; {answer.cookies()['casino_session'].split(';')[0]}"

    async def page_seconds(self, cookie: str, path: str = "/", asks: int = 200) -> list[float]:
        """Seconds to answer ``path`` to a signed-in browser, asked one after another."""
        seconds = []
        for _ in range(asks):
            started = time.perf_counter()
            answer = await self.ask("GET", path, {"Cookie": cookie})
            assert answer.status == 200, answer.status
            seconds.append(time.perf_counter() - started)
        return seconds


@contextlib.asynccontextmanager
async def web_process(nats_url: str, tmp: Path, tables: dict[str, TableConfig], *extra: str,
                      proxy: str = "127.0.0.1") -> AsyncIterator[WebProcess]:
    web = await WebProcess(nats_url, tmp, tables, *extra, proxy=proxy).start()
    try:
        yield web
    finally:
        await web.stop()


def p99(seconds: list[float]) -> float:
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
