"""The web pages against hostile browsers, each on a real nats-server with
the web as a process of its own: guessed passwords, stolen cookies, forms
from elsewhere, framing, floods of live streams and of requests that never
finish, and malformed addresses."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from playwright.async_api import async_playwright
from services.web.accounts import Accounts, write_accounts
from services.web.connections import CONNECTIONS_MOST, CONNECTIONS_PER_ADDRESS
from services.web.guard import CSP, HEAD_WITHIN, SignInLimits
from services.web.sessions import AccountsFile, Sessions
from services.web.streams import STREAMS_MOST, STREAMS_PER_SESSION

from casino.cli.run import default_tables
from tests.e2e.casino import Casino
from tests.web.hostile import WebProcess, more_files, p99, web_process
from tests.web.test_pages import chromium

pytestmark = pytest.mark.anyio
TABLES = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)


async def ended(reader: asyncio.StreamReader) -> bool:
    """Whether a live stream's answer has ended (its last chunk come), from what it sent within half a second."""
    seen = b""
    with contextlib.suppress(TimeoutError):
        while chunk := await asyncio.wait_for(reader.read(65536), 0.5):
            seen += chunk
    return seen.endswith(b"\r\n0\r\n\r\n") or reader.at_eof()


def metric(text: bytes, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$".encode(), text, re.M)
    assert found is not None, (name, text[:2000])
    return float(found[1])


async def test_sign_in_is_paced_and_locked_by_address_and_by_address_and_user_never_by_user_alone(
        nats_url: str, tmp_path: Path) -> None:
    async with Casino(nats_url, TABLES), web_process(nats_url, tmp_path, TABLES) as web:
        right = web.passwords["pit1"]
        # One address guessing: 5 wrong, then even the right password is refused while the lock lasts.
        for _ in range(5):
            assert (await web.sign_in("pit1", "guess", "10.0.0.1")).status == 401
        locked = await web.sign_in("pit1", right, "10.0.0.1")
        assert locked.status == 429 and b"too many wrong sign-ins" in locked.body and "casino_session" not in \
            locked.cookies()
        assert (await web.sign_in("pit1", right, "10.0.0.2")).status == 303  # the user, from elsewhere
        # One user guessed at from many addresses: each guesser locks out itself, never the user.
        for k in range(10):
            for _ in range(2):
                assert (await web.sign_in("comp1", "guess", f"10.0.1.{k}")).status == 401
        assert (await web.sign_in("comp1", web.passwords["comp1"], "10.0.2.1")).status == 303
        # Two addresses guess at the pit boss all along, 10 a minute: every one of the pit boss's sign-ins opens.
        opened = []
        for k in range(14):
            for guesser in ("10.0.4.1", "10.0.4.2"):
                await web.sign_in("pit1", "guess", guesser)
            opened.append((await web.sign_in("pit1", right, f"10.0.5.{k % 4}")).status)
        assert opened == [303] * 14
        # A shared address: others' guesses there lock it, but not for a user who signed in from it before.
        assert (await web.sign_in("pit1", right, "10.0.6.1")).status == 303
        await asyncio.sleep(1.5)  # the address's pace back to its burst: the guesses below are each looked at
        for _ in range(5):
            assert (await web.sign_in("comp1", "guess", "10.0.6.1")).status == 401
        await asyncio.sleep(1.5)
        locked = await web.sign_in("comp1", web.passwords["comp1"], "10.0.6.1")
        assert locked.status == 429 and b"too many wrong sign-ins" in locked.body
        assert (await web.sign_in("pit1", right, "10.0.6.1")).status == 303
        # Right or wrong, sign-ins from one address are paced (a user known there, on that user's own pace).
        token = await web.form_token("10.0.3.1")
        paced = [(await web.sign_in("pit1", right, "10.0.3.1", token)).status for _ in range(12)]
        assert paced[:5] == [303] * 5 and 429 in paced[5:], paced
        metrics = (await web.ask("GET", "/metrics/")).body
        assert metric(metrics, 'casino_web_signin_locked{by="client"}') >= 3
        assert metric(metrics, 'casino_web_signin_locked{by="client_and_user"}') >= 3
        assert metric(metrics, 'casino_web_signins_total{outcome="locked"}') >= 2
        assert metric(metrics, 'casino_web_signins_total{outcome="paced"}') >= 1


async def test_a_forwarded_address_is_believed_from_a_configured_proxy_alone(nats_url: str, tmp_path: Path) -> None:
    """As `make run` serves the pages, no proxy is configured: a client that
    says another address in X-Forwarded-For is counted under its own, so
    that it cannot guess on under a new address at each try."""
    async with Casino(nats_url, TABLES), web_process(nats_url, tmp_path, TABLES, proxy="") as web:
        for k in range(5):  # each from loopback, saying another address
            assert (await web.sign_in("pit1", "guess", headers={"X-Forwarded-For": f"10.9.0.{k}"})).status == 401
        assert (await web.sign_in("pit1", web.passwords["pit1"], headers={"X-Forwarded-For": "10.9.1.1"})).status == 429


def test_a_sign_in_lock_lasts_as_long_as_the_guessing_and_a_window_more() -> None:
    from prometheus_client import CollectorRegistry

    now = [1000.0]
    limits = SignInLimits(CollectorRegistry(), client_failures=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert limits.refusal("a", "u") == ""
        limits.failed("a", "u")
        now[0] += 10
    assert limits.refusal("a", "u")  # locked
    now[0] += 25  # 55 s after the first failure: still three within the window
    assert limits.refusal("a", "u")
    now[0] += 10  # the first failure left the window
    assert limits.refusal("a", "u") == ""


async def test_a_session_lives_on_the_server_ended_by_sign_out_everywhere_and_by_a_new_password(
        nats_url: str, tmp_path: Path) -> None:
    async with Casino(nats_url, TABLES), web_process(nats_url, tmp_path / "a", TABLES) as one:
        two = await WebProcess(nats_url, tmp_path / "b", TABLES, accounts=one.accounts).start()
        two.passwords = one.passwords
        try:
            copied = await one.session("pit1")
            assert (await two.ask("GET", "/", {"Cookie": copied})).status == 200  # any instance knows it
            assert (await one.ask("GET", "/signout", {"Cookie": copied})).status == 405  # no sign-out by GET
            csrf = re.search(rb'name="csrf" value="([^"]+)"', (await one.ask("GET", "/", {"Cookie": copied})).body)
            assert csrf is not None
            forged = await one.ask("POST", "/signout", {"Cookie": copied}, b"csrf=not-the-token")
            assert forged.status == 403 and (await two.ask("GET", "/", {"Cookie": copied})).status == 200
            out = await one.ask("POST", "/signout", {"Cookie": copied}, b"csrf=" + csrf[1])
            assert out.status == 303 and "Max-Age=0" in out.cookies()["casino_session"]
            for web in (one, two):  # the copy of the cookie, kept from before: signed out everywhere
                refused = await web.ask("GET", "/", {"Cookie": copied})
                assert refused.status == 303 and refused.header("location").startswith("/signin"), refused.status

            kept = await two.session("comp1")
            assert (await one.ask("GET", "/", {"Cookie": kept})).status == 200
            write_accounts(one.accounts, {"pit1": "pit", "comp1": "compliance"})  # the administrator: new passwords
            for web in (one, two):
                assert (await web.ask("GET", "/", {"Cookie": kept})).status == 303
        finally:
            await two.stop()


async def test_every_answer_carries_the_security_headers_a_form_needs_its_token_and_no_page_is_framed(
        nats_url: str, tmp_path: Path) -> None:
    async with Casino(nats_url, TABLES), web_process(nats_url, tmp_path, TABLES) as web:
        cookie = await web.session("pit1")
        for path in ("/signin", "/", "/coup", "/static/site.css", "/healthz", "/table/nowhere", "/metrics/"):
            answer = await web.ask("GET", path, {"Cookie": cookie})
            assert answer.header("content-security-policy") == CSP, path
            assert "frame-ancestors 'none'" in CSP and "script-src 'self';" in CSP
            assert (answer.header("x-content-type-options"), answer.header("referrer-policy"),
                    answer.header("x-frame-options")) == ("nosniff", "no-referrer", "DENY"), path
        plain = (await web.ask("GET", "/signin")).cookies()["casino_csrf"]
        assert "HttpOnly" in plain and "SameSite=Strict" in plain and "Secure" not in plain
        behind_tls = await web.sign_in("pit1", web.passwords["pit1"], headers={"X-Forwarded-Proto": "https"})
        assert behind_tls.status == 303 and "; Secure" in behind_tls.cookies()["casino_session"]
        assert behind_tls.header("strict-transport-security").startswith("max-age=")
        _, csrf_cookie = await web.form_token()
        no_token = await web.ask("POST", "/signin", {"Cookie": csrf_cookie},
                                 f"user=pit1&password={web.passwords['pit1']}".encode())
        assert no_token.status == 403 and "casino_session" not in no_token.cookies()

        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            try:
                page = await browser.new_page()
                refused: list[str] = []
                page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
                await page.goto(f"http://127.0.0.1:{web.port}/signin")
                await page.fill("input[name=user]", "pit1")
                await page.fill("input[name=password]", web.passwords["pit1"])
                await page.click("main button[type=submit]")
                await page.wait_for_url(f"http://127.0.0.1:{web.port}/")
                await page.wait_for_timeout(1500)  # htmx and the live stream at work under the policy
                assert refused == [], refused  # the site's own pages break none of its rules
                framing = await browser.new_page()
                await framing.set_content(f'<iframe src="http://127.0.0.1:{web.port}/signin"></iframe>')
                await framing.wait_for_timeout(1500)
                framed = framing.frames[1]
                assert await framed.locator("input[name=password]").count() == 0  # the page is not shown framed
            finally:
                await browser.close()


async def test_idle_streams_and_unfinished_requests_leave_the_pages_answering(nats_url: str, tmp_path: Path) -> None:
    """3,000 live floor streams asked for by one session, and 3,000
    connections that never finish their request's head: the session holds
    its few streams, the instance its bound (a stream beyond it ends the
    oldest of the address holding the most: each keeps its fair share), each unfinished
    request is dropped after its deadline, and the pages answer throughout."""
    more_files()
    async with Casino(nats_url, TABLES), web_process(nats_url, tmp_path, TABLES, "--streams", "40") as web:
        cookie = await web.session("pit1")
        calm = p99(await web.page_seconds(cookie))
        rss_before = web.rss_mib()

        streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        live: list[asyncio.StreamReader] = []  # those answered 200, in turn
        statuses: dict[int, int] = {}

        async def stream(cookie_: str, client: str = "") -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", web.port)
            forwarded = f"X-Forwarded-For: {client}\r\n" if client else ""
            writer.write(f"GET /floor/events HTTP/1.1\r\nHost: x\r\nCookie: {cookie_}\r\n{forwarded}"
                         "Accept: text/event-stream\r\n\r\n".encode())
            line = await asyncio.wait_for(reader.readline(), 30)
            status = int(line.split()[1])
            statuses[status] = statuses.get(status, 0) + 1
            streams.append((reader, writer))
            if status == 200:
                live.append(reader)

        await asyncio.gather(*(stream(cookie) for _ in range(3000)))
        assert statuses == {200: STREAMS_PER_SESSION, 429: 3000 - STREAMS_PER_SESSION}, statuses
        others = [(await web.session("pit1", f"10.9.0.{k}"), f"10.9.0.{k}") for k in range(12)]
        for c, client in others:
            await asyncio.gather(*(stream(c, client) for _ in range(STREAMS_PER_SESSION)))
        assert statuses[200] == 13 * STREAMS_PER_SESSION, statuses  # each answered: the bound made room
        await asyncio.sleep(1)
        assert metric((await web.ask("GET", "/metrics/")).body, "casino_web_streams") == 40
        # The room made from the holders of the most, each left its fair share: the first session too.
        first = [await ended(r) for r in live[:STREAMS_PER_SESSION]]
        assert STREAMS_PER_SESSION - sum(first) >= 40 // 13, first
        assert sum(first) + sum([await ended(r) for r in live[STREAMS_PER_SESSION:]]) == 12
        with_streams = p99(await web.page_seconds(cookie))
        rss_streams = web.rss_mib()

        unfinished: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        for _ in range(3000):
            reader, writer = await asyncio.open_connection("127.0.0.1", web.port)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never finished
            unfinished.append((reader, writer))
        at = time.monotonic()
        with_unfinished = p99(await web.page_seconds(cookie))
        dropped = await asyncio.gather(*(asyncio.wait_for(r.read(), HEAD_WITHIN + 30) for r, _ in unfinished))
        took = time.monotonic() - at
        assert all(d == b"" for d in dropped)  # each closed by the web, with no answer
        for w in [w for _, w in streams] + [w for _, w in unfinished]:
            w.close()
        await asyncio.sleep(2)
        rss_after = web.rss_mib()
        print(f"page p99: {1000 * calm:.1f} ms calm, {1000 * with_streams:.1f} ms with 3,000 streams asked "
              f"({statuses}), {1000 * with_unfinished:.1f} ms with 3,000 unfinished requests (all dropped "
              f"{took:.1f} s after they began); RSS {rss_before:.0f} -> {rss_streams:.0f} -> {rss_after:.0f} MiB")
        assert max(with_streams, with_unfinished) < max(1.0, 20 * calm)
        assert rss_after - rss_before < 100


async def test_floods_of_idle_connections_and_of_one_accounts_streams_never_shut_out_the_pit(
        nats_url: str, tmp_path: Path) -> None:
    """With no proxy and the instance's own bounds: one address's 400 idle
    connections keep 256 (its bound, the oldest closed first); 8,200 from
    41 addresses keep the instance's 8,000, idle ones closed to make room;
    and throughout, /healthz and the pit boss's floor answer every time.
    Then one account's sessions from 130 addresses ask for 520 live streams
    (the instance holds 500): the pit boss's stream opens all the same."""
    more_files(20000)
    # Each head given two minutes: the flood's first connections are not closed by the head's deadline
    # before its last are made, however busy the machine (a test of the bounds alone).
    async with Casino(nats_url, TABLES), web_process(nats_url, tmp_path, TABLES, "--head-within", "120",
                                                     proxy="") as web:
        cookie = await web.session("pit1")  # the pit boss, from 127.0.0.1
        flood: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

        async def idle(client: str, count: int) -> list[asyncio.StreamReader]:
            made = [await web.connect(client) for _ in range(count)]
            flood.extend(made)
            return [r for r, _ in made]

        async def still_open(readers: list[asyncio.StreamReader]) -> int:
            await asyncio.sleep(1)  # the web's closings come in
            return sum(not r.at_eof() for r in readers)

        async def answering() -> None:
            assert [(await web.ask("GET", "/healthz")).status for _ in range(20)] == [200] * 20
            assert len(await web.page_seconds(cookie, asks=20)) == 20  # each answered 200

        try:
            one = await idle("127.0.0.2", 400)
            assert await still_open(one) == CONNECTIONS_PER_ADDRESS
            await answering()
            many = [r for k in range(41) for r in await idle(f"127.0.1.{k + 1}", 200)]
            await answering()
            open_now = await still_open(one + many)
            assert CONNECTIONS_MOST - 100 <= open_now <= CONNECTIONS_MOST, open_now  # the pit's own beside them
        finally:
            for _, w in flood:
                w.close()
        await asyncio.sleep(2)

        streams: list[asyncio.StreamWriter] = []

        async def stream(cookie_: str, client: str) -> int:
            reader, writer = await web.connect(client)
            writer.write(f"GET /floor/events HTTP/1.1\r\nHost: x\r\nCookie: {cookie_}\r\n"
                         "Accept: text/event-stream\r\n\r\n".encode())
            streams.append(writer)
            return int((await asyncio.wait_for(reader.readline(), 30)).split()[1])

        try:
            sessions = [(await web.session("pit1", f"127.0.2.{k + 1}"), f"127.0.2.{k + 1}") for k in range(130)]
            asked = [await stream(c, client) for c, client in sessions for _ in range(STREAMS_PER_SESSION)]
            assert asked == [200] * 520  # each answered: the oldest of the biggest holder ended for it
            assert metric((await web.ask("GET", "/metrics/")).body, "casino_web_streams") == STREAMS_MOST
            assert await stream(cookie, "127.0.0.1") == 200  # the pit boss's floor
            assert (await web.ask("GET", "/healthz")).status == 200
        finally:
            for w in streams:
                w.close()


async def test_bad_addresses_get_a_4xx_that_says_what_is_wrong(nats_url: str, tmp_path: Path) -> None:
    async with Casino(nats_url, TABLES), web_process(nats_url, tmp_path, TABLES) as web:
        cookie = await web.session("pit1")
        table = next(iter(TABLES))
        clause = await web.ask("GET", "/clause/000/(" + "9" * 5000, {"Cookie": cookie})
        assert clause.status == 400 and b"a clause is numbered as" in clause.body
        far = await web.ask("GET", f"/coup?table={table}&at=9999-12-31T23:59:59.999999", {"Cookie": cookie})
        assert far.status == 400 and b"before the year 9999" in far.body
        garbled = await web.ask("GET", f"/coup?table={table}&at=yesterday", {"Cookie": cookie})
        assert garbled.status == 400 and b"a time is written as" in garbled.body
        for number in ("abc", "-1", "9" * 30):
            named = await web.ask("GET", f"/coup?table={table}&number={number}", {"Cookie": cookie})
            assert named.status == 400 and b"a coup is found by its number" in named.body, number
        big = await web.ask("POST", "/signin", body=b"user=" + b"x" * 10_000)
        assert big.status == 413 and b"a sign-in is a user and a password" in big.body
        for path in ("/coup/" + table + "/" + "9" * 30, "/shoe/..%2f..%2fetc", "/table/%00"):
            assert (await web.ask("GET", path, {"Cookie": cookie})).status in (400, 404), path


class CountedReads:
    """A key-value bucket (nats-py's) whose reads are counted."""

    def __init__(self, kv: Any) -> None:
        self.kv, self.reads = kv, 0

    async def get(self, key: str) -> Any:
        self.reads += 1
        return await self.kv.get(key)

    async def put(self, key: str, value: bytes) -> Any:
        return await self.kv.put(key, value)

    async def purge(self, key: str) -> Any:
        return await self.kv.purge(key)


async def test_requests_bearing_one_cookie_at_once_share_one_read_of_its_session(nats_url: str) -> None:
    """3,000 requests bearing one session's cookie at once read its entry in
    the sessions bucket once between them, not once each: a flood of one
    cookie is refused by the web's own bounds, not by the bucket's timeouts
    (which answered 500 on a busy machine). A read that comes after a
    sign-out finds the session ended."""
    nc = await nats.connect(nats_url)
    try:
        kv = CountedReads(await nc.jetstream().create_key_value(bucket="sessions-counted"))
        accounts, _ = Accounts.made({"pit1": "pit"})
        sessions = Sessions(kv, AccountsFile(accounts=accounts))
        token = await sessions.begin("pit1", "pit")
        answers = await asyncio.gather(*(sessions.who(token) for _ in range(3000)))
        assert set(answers) == {("pit1", "pit")} and kv.reads == 1, kv.reads
        await sessions.end(token)
        assert await sessions.who(token) is None and kv.reads == 2
    finally:
        await nc.close()
