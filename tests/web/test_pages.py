"""The web pages in a real browser: Playwright driving Debian's chromium
(`make tools` installs it) against a casino dealing on a real nats-server.
The screenshots under docs/ are made here."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn
from playwright.async_api import Browser, Page, async_playwright
from services.web.accounts import Accounts
from services.web.clauses import Regulations
from services.web.site import Site, app

from casino.audit.archive import verify_export
from casino.audit.replay import replay_coup
from casino.cli.run import WEB_PASSWORDS, default_tables
from casino.cli.simulator import Simulator
from casino.nats.server import free_port
from casino.store import envelope, subjects
from tests.e2e.casino import Casino

pytestmark = pytest.mark.anyio
DOCS = Path(__file__).resolve().parents[2] / "docs"
# A breach of a hostile writer's: markup and a script in text the record holds.
MARKUP = '<script>window.injected = 1</script><img src="x" onerror="window.injected = 2"><b>bold</b>'


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is missing: `make test` installs it (Debian's chromium package, `make tools`)")
    return found


async def signed_in(browser: Browser, base: str, user: str, password: str) -> Page:
    page = await browser.new_page(viewport={"width": 1280, "height": 800})
    await page.goto(f"{base}/")
    assert page.url.startswith(f"{base}/signin")  # an unsigned browser is sent to sign in
    await page.fill("input[name=user]", user)
    await page.fill("input[name=password]", password)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{base}/")
    return page


class Web:
    def __init__(self, base: str, passwords: dict[str, str], browser: Browser) -> None:
        self.base, self.passwords, self.browser = base, passwords, browser


@pytest.fixture
async def web(nats_url: str) -> AsyncIterator[tuple[Casino, Web, dict[str, object]]]:
    tables = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)
    accounts, passwords = Accounts.made({"pit1": "pit", "comp1": "compliance"})
    async with Casino(nats_url, tables) as casino:
        for kind in ("projections", "archiver"):  # the read models the floor shows; shoes sealed
            await casino.start(kind)
        site = Site(casino.nc, {t: c.currency for t, c in tables.items()}, accounts, Regulations(DOCS / "regulations"))
        await site.start()
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app(site), host="127.0.0.1", port=port, log_level="warning",
                                               lifespan="off"))
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            try:
                yield casino, Web(f"http://127.0.0.1:{port}", passwords, browser), dict(tables)
            finally:
                await browser.close()
                server.should_exit = True
                await serving
                await site.floor.stop()


async def test_the_floor_shows_every_table_and_changes_as_coups_are_dealt(
        web: tuple[Casino, Web, dict[str, object]]) -> None:
    casino, w, tables = web
    page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
    assert await page.locator("section.tile").count() == len(tables)
    first = next(iter(tables))
    dealing = asyncio.create_task(Simulator(casino.nc, tables, seed=3, patience=40).run(3))  # type: ignore[arg-type]
    # Live, with no reload: the tile's coup moves on as the events arrive.
    await page.wait_for_selector(f"#tile-{first} .coup:has-text('coup 3')", timeout=60_000)
    await dealing
    await page.wait_for_timeout(500)
    await page.screenshot(path=str(DOCS / "web-floor.png"))
    assert "settled" in await page.inner_text(f"#tile-{first}")
    # The baccarat table's page: its shoe's results as a bead plate and a big road, each coup once.
    await page.goto(f"{w.base}/table/{first}")
    results = [e for m in await casino.store.read(subjects.table_filter(first)) for e in m.batch.events
               if e.type == "baccarat.coup_resulted"]
    assert await page.locator(".road.beads .bead").count() == len(results) == 3
    marks = await page.locator(".road.big .mark").count()
    assert marks == sum(1 for e in results if e.data.winner != "tie")  # type: ignore[union-attr]
    assert "commitment" in await page.inner_text(".shoe-facts")
    await page.screenshot(path=str(DOCS / "web-table.png"), full_page=True)


async def test_a_coup_page_shows_the_recorded_cards_and_an_altered_record_fails_with_its_markup_inert(
        web: tuple[Casino, Web, dict[str, object]]) -> None:
    casino, w, tables = web
    await Simulator(casino.nc, tables, seed=4, patience=40).run(2)  # type: ignore[arg-type]
    table = next(iter(tables))
    coup = f"{table}-000002"
    stored = await casino.store.read(subjects.coup_filter(coup, table))
    recorded = [c.card for c in replay_coup(stored).cards]
    page = await signed_in(w.browser, w.base, "comp1", w.passwords["comp1"])
    await page.goto(f"{w.base}/coup/{table}/2")
    shown = await page.locator("#cards svg.card").evaluate_all("cards => cards.map(c => c.getAttribute('aria-label'))")
    assert shown == recorded and recorded  # exactly the recorded cards, in dealing order
    assert (await page.inner_text(".verdict")).startswith("Verified")
    await page.screenshot(path=str(DOCS / "web-coup.png"), full_page=True)

    # A writer's credential appends an opening again, its text markup: verification fails, and it is text.
    opening = next(m for m in stored if any(e.type == "baccarat.coup_opened" for e in m.batch.events))
    raw = json.loads(envelope.encode(opening.batch))
    for e in raw["events"]:
        if e["type"] == "baccarat.coup_opened":
            e["data"]["approvals"] = [{"what": "method_b", "by": MARKUP, "reference": "INS-1"}]
    await casino.nc.jetstream().publish(opening.subject, json.dumps(raw).encode(),
                                        headers={"Nats-Msg-Id": "dealer-policy:forged-markup"})
    await page.goto(f"{w.base}/coup/{table}/2")
    assert (await page.inner_text(".verdict")).startswith("Verification failed")
    assert MARKUP in await page.inner_text("main")  # shown as the text it is
    assert await page.locator("main script, main img, main b").count() == 0
    assert await page.evaluate("window.injected === undefined")


async def test_nothing_but_health_is_served_without_signing_in(web: tuple[Casino, Web, dict[str, object]]) -> None:
    _, w, tables = web
    page = await w.browser.new_page()
    for path in ("/", f"/coup/{next(iter(tables))}/1"):
        await page.goto(f"{w.base}{path}")
        assert page.url.startswith(f"{w.base}/signin"), path
    events = await page.request.get(f"{w.base}/floor/events")
    assert events.status == 401
    assert (await page.request.get(f"{w.base}/healthz")).ok
    await page.fill("input[name=user]", "pit1")
    await page.fill("input[name=password]", "not the password")
    await page.click("button[type=submit]")
    assert "do not sign in" in await page.inner_text("main")


async def test_make_run_serves_the_pages_as_the_web_user_with_its_passwords_beside_the_nats_ones(
        tmp_path: Path) -> None:
    """`casino run` (what `make run` runs) starts the web pages, prints their
    address, and writes the users of each role with their passwords beside
    the NATS ones (owner-only); the pages read the secured server as the web
    user: a coup page verified from the record."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "casino.cli.main", "run", "--var", str(tmp_path), "--port", str(free_port()),
        "--pace", "0.5", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        address = ""
        while b"dealing at" not in (line := await asyncio.wait_for(proc.stdout.readline(), 60)):
            assert line, "casino run ended before dealing"
            if line.startswith(b"web "):
                address = line.split()[1].decode()
        assert address.startswith("http://127.0.0.1:"), address
        passwords = json.loads((tmp_path / WEB_PASSWORDS).read_text())
        assert set(passwords) == {"pit", "surveillance", "compliance"}
        assert (tmp_path / WEB_PASSWORDS).stat().st_mode & 0o077 == 0
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            page = await signed_in(browser, address.rstrip("/"), "compliance", passwords["compliance"])
            await page.wait_for_selector(".tile .coup:has-text('coup 2')", timeout=60_000)
            await page.goto(f"{address}coup/BAC000-1/1")
            assert (await page.inner_text(".verdict")).startswith("Verified"), await page.inner_text("main")
            await browser.close()
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0


async def test_compliance_exports_a_table_as_casino_export_writes_it_and_the_pit_may_not(
        web: tuple[Casino, Web, dict[str, object]]) -> None:
    casino, w, tables = web
    await Simulator(casino.nc, tables, seed=6, patience=40).run(2)  # type: ignore[arg-type]
    table = next(iter(tables))
    pit = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
    assert (await pit.goto(f"{w.base}/export?table={table}")).status == 403  # type: ignore[union-attr]
    page = await signed_in(w.browser, w.base, "comp1", w.passwords["comp1"])
    await page.goto(f"{w.base}/export")
    await page.select_option("select[name=table]", table)
    await page.click("button[type=submit]")
    shown = (await page.inner_text(".chain-end")).strip()
    async with page.expect_download() as downloading:
        await page.click("#download")
    path = await (await downloading.value).path()
    with open(path, "rb") as source:
        header, report = verify_export(source, None)
    assert header.table == table and header.last == shown and header.in_play  # the shoe in play, marked so
    assert report.coups >= 2 and report.findings == []
