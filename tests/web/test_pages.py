"""The web pages in a real browser: Playwright driving Debian's chromium
(`make tools` installs it) against a casino dealing on a real nats-server.
The screenshots under docs/ are made here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect
from services.web import floor as floor_module
from services.web import liveness, words
from services.web.accounts import Accounts
from services.web.clauses import Regulations
from services.web.dispute import INCIDENTS, as_of
from services.web.guard import server as web_server
from services.web.site import Site, app

from casino.audit.archive import verify_export
from casino.audit.replay import replay_coup
from casino.cli.run import WEB_PASSWORDS, default_tables
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.nats.server import free_port
from casino.store import envelope, subjects
from tests.e2e.casino import Casino
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
DOCS = Path(__file__).resolve().parents[2] / "docs"
# A breach of a hostile writer's: markup and a script in text the record holds.
MARKUP = '<script>window.injected = 1</script><img src="x" onerror="window.injected = 2"><b>bold</b>'


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is missing: `make test` installs it (Debian's chromium package, `make tools`)")
    return found


async def signed_in(browser: Browser, base: str, user: str, password: str, asked: list[str] | None = None) -> Page:
    """A new browser signed in as ``user``; every address it asks for, from
    the first, put in ``asked``."""
    page = await browser.new_page(viewport={"width": 1280, "height": 800})
    if asked is not None:
        page.on("request", lambda request: asked.append(request.url))
    await page.goto(f"{base}/")
    assert page.url.startswith(f"{base}/signin")  # an unsigned browser is sent to sign in
    await page.fill("input[name=user]", user)
    await page.fill("input[name=password]", password)
    await page.click("main button[type=submit]")
    await page.wait_for_url(f"{base}/")
    return page


class Web:
    """The web pages served (``server``, and ``serving`` it), and a browser."""

    def __init__(self, base: str, passwords: dict[str, str], browser: Browser, site: Site) -> None:
        self.base, self.passwords, self.browser, self.site = base, passwords, browser, site
        self.server: Any = None
        self.serving: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        """Serve the pages on ``base``'s port (again, once stopped)."""
        self.server = web_server(app(self.site), "127.0.0.1", int(self.base.rpartition(":")[2]))
        self.serving = asyncio.create_task(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.serving is not None:
            await self.serving


@contextlib.asynccontextmanager
async def serving(nats_url: str, tables: dict[str, TableConfig],
                  **settings: int) -> AsyncIterator[tuple[Casino, Web, Site]]:
    """A casino dealing ``tables`` (every service, the read models and the
    archiver too), the web pages served over it, and a browser."""
    accounts, passwords = Accounts.made({"pit1": "pit", "comp1": "compliance"})
    async with Casino(nats_url, tables) as casino:
        for kind in ("projections", "archiver"):  # the read models the floor shows; shoes sealed
            await casino.start(kind)
        site = Site(casino.nc, {t: c.currency for t, c in tables.items()}, accounts, Regulations(DOCS / "regulations"),
                    **settings)
        await site.start()
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            w = Web(f"http://127.0.0.1:{free_port()}", passwords, browser, site)
            await w.serve()
            try:
                yield casino, w, site
            finally:
                await browser.close()
                await w.stop()
                await site.floor.stop()


@pytest.fixture
async def web(nats_url: str) -> AsyncIterator[tuple[Casino, Web, dict[str, object]]]:
    tables = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)
    async with serving(nats_url, tables) as (casino, w, _):
        yield casino, w, dict(tables)


async def test_the_floor_shows_every_table_and_changes_as_coups_are_dealt(
        web: tuple[Casino, Web, dict[str, object]]) -> None:
    casino, w, tables = web
    asked: list[str] = []
    page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"], asked)
    assert await page.locator("section.tile").count() == len(tables)
    first = next(iter(tables))
    dealing = asyncio.create_task(Simulator(casino.nc, tables, seed=3, patience=40).run(3))  # type: ignore[arg-type]
    # Live, with no reload: the tile's coup moves on as the events arrive.
    await page.wait_for_selector(f"#tile-{first} .coup:has-text('coup 3')", timeout=60_000)
    await dealing
    await page.wait_for_timeout(500)
    await page.screenshot(path=str(DOCS / "web-floor.png"))
    assert "settled" in await page.inner_text(f"#tile-{first}")
    # The baccarat table's page: its shoe's scoreboard, each coup once on the bead plate, each win on the big road.
    await page.goto(f"{w.base}/table/{first}")

    async def resulted() -> list[str]:
        return [e.data.winner[0].upper() for m in await casino.store.read(subjects.table_filter(first))  # type: ignore[union-attr]
                for e in m.batch.events if e.type == "baccarat.coup_resulted"]

    beads, big = "svg.road[aria-label='bead plate'] g", "svg.road[aria-label='big road'] g"
    results = await resulted()
    assert len(results) == 3 and await page.locator(f".scoreboard {beads}").count() == 3
    assert await page.locator(f".scoreboard {beads} text").all_text_contents() == results
    assert await page.locator(f".scoreboard {big}").count() == sum(r != "T" for r in results)
    await expect(page.locator(f"#tile-{first} .small-road {big}")).to_have_count(sum(r != "T" for r in results),
                                                                                timeout=30_000)
    assert "commitment" in await page.inner_text(".shoe-facts")
    # Live, with no reload: the scoreboard and the tile's road take each coup's result as it is recorded.
    await Simulator(casino.nc, tables, seed=5, patience=40).run(2)  # type: ignore[arg-type]
    results = await resulted()
    await expect(page.locator(f".scoreboard {beads}")).to_have_count(len(results), timeout=30_000)
    assert await page.locator(f".scoreboard {beads} text").all_text_contents() == results
    await expect(page.locator(f"#tile-{first} .small-road {big}")).to_have_count(sum(r != "T" for r in results),
                                                                                timeout=30_000)
    await page.screenshot(path=str(DOCS / "web-table.png"), full_page=True)
    # A casino's network is closed: the pages ask for nothing but the web's own, htmx and its SSE extension too.
    assert {f"{w.base}/static/htmx.min.js", f"{w.base}/static/sse.min.js"} <= set(asked)
    assert all(url.startswith(f"{w.base}/") for url in asked), [u for u in asked if not u.startswith(f"{w.base}/")]


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
    assert shown == [words.card(c) for c in recorded] and recorded  # exactly the recorded cards, in dealing order
    assert shown[0] == words.card(recorded[0]) != recorded[0]  # each said in words: "five of clubs"
    assert (await page.inner_text(".verdict")).startswith("Verified")
    await page.screenshot(path=str(DOCS / "web-coup.png"), full_page=True)
    # A coup the house neither won nor lost says so, not "won EUR 0.00" (the same page, its net made nought).
    r = replay_coup(stored)
    assert r.payouts and r.settled
    even = w.site.render("coup.html", who=("comp1", "compliance"), r=msgspec.structs.replace(r, house_net=0),
                         findings=[], coup=coup, number=2, step=len(r.steps), now=as_of(r, len(r.steps)),
                         sealed=None, incidents=INCIDENTS, printed=datetime.now(UTC), named=w.site.named)
    assert "The house broke even." in even and "EUR 0.00." not in even

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
    await page.click("main button[type=submit]")
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


async def test_casino_web_serves_the_pages_read_only_over_the_store_a_bounded_run_left(tmp_path: Path) -> None:
    """`casino run --coups N` stops its web with the run; `casino web --var`
    serves the store it left, with nothing dealing: the floor shows the last
    coups, a coup page verifies from the record, and Ctrl-C stops it and its
    nats-server, the store free for the next."""
    run = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "casino.cli.main", "run", "--var", str(tmp_path), "--port", str(free_port()),
        "--coups", "2", "--tables", "2", "--readers", "0", stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)
    assert await asyncio.wait_for(run.wait(), 180) == 0

    async def serve() -> tuple[asyncio.subprocess.Process, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "casino.cli.main", "web", "--var", str(tmp_path), "--port", str(free_port()),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.startswith(b"web http://127.0.0.1:"), line
        return proc, line.split()[1].decode()

    proc, address = await serve()
    try:
        passwords = json.loads((tmp_path / WEB_PASSWORDS).read_text())
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            page = await signed_in(browser, address.rstrip("/"), "compliance", passwords["compliance"])
            await expect(page.locator("#tile-BAC000-1 .coup")).to_have_text("coup 2", timeout=30_000)
            await page.goto(f"{address}coup/BAC000-1/2")
            assert (await page.inner_text(".verdict")).startswith("Verified"), await page.inner_text("main")
            await browser.close()
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    again, _ = await serve()  # the store let go: served again
    again.send_signal(signal.SIGINT)
    await asyncio.wait_for(again.communicate(), 60)
    assert again.returncode == 0


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
    await page.click("main button[type=submit]")
    shown = (await page.inner_text(".chain-end")).strip()
    async with page.expect_download() as downloading:
        await page.click("#download")
    download = await downloading.value
    path = await download.path()
    with open(path, "rb") as source:
        header, report = verify_export(source, None)
    assert header.table == table and header.last == shown and header.in_play  # the shoe in play, marked so
    assert report.coups >= 2 and report.findings == []
    # The check the page gives names the file downloaded, and says why it exits 3: the shoe in play.
    said = await page.inner_text("section.export")
    assert f"casino verify --file {download.suggested_filename} --expect {shown}" in said, said
    assert "exits 3" in said and header.in_play[0] in said, said


async def test_a_coup_is_stepped_through_card_by_card_each_step_with_its_cause_and_its_clause_text(
        web: tuple[Casino, Web, dict[str, object]]) -> None:
    casino, w, tables = web
    await Simulator(casino.nc, tables, seed=5, patience=40).run(2)  # type: ignore[arg-type]
    table = next(iter(tables))
    r = replay_coup(await casino.store.read(subjects.coup_filter(f"{table}-000002", table)))
    page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
    await page.goto(f"{w.base}/coup/{table}/2?step=0")
    faces = "cards => cards.map(c => c.getAttribute('aria-label'))"
    assert await page.locator("#cards svg.card").evaluate_all(faces) == []  # nothing dealt yet
    first = next(i for i, s in enumerate(r.steps) if s.type.endswith(".card_dealt"))
    for i in range(first + 1):  # step by step, as a person clicks: each step shown before the next click
        await page.click("a[rel=next]")
        await page.wait_for_selector(f".stepper:has-text('step {i + 1} of')")
    assert await page.locator("#cards svg.card").evaluate_all(faces) == [words.card(r.cards[0].card)]
    assert await page.locator(".steps li").count() == first + 1  # as of the step: no later step's text
    assert await page.locator("text=Payouts").count() == 0 and "The house" not in await page.inner_text("main")
    now = await page.inner_text(".steps li.now")
    assert r.steps[first].text in now and "dealer-policy" in now
    wager = next(i for i, s in enumerate(r.steps) if s.type == "wager.placed")
    assert "terminal" in await page.locator(".steps li").nth(wager).inner_text()  # the terminal's command caused it
    # Each clause links to its text, as the regulation says it.
    clause = r.steps[first].clause.split()[1]
    await page.locator(".steps li.now a.clause").first.click()
    await page.wait_for_selector("pre.regulation")
    regulation = next((DOCS / "regulations").glob("000-*.txt")).read_text(encoding="utf-8")
    text = await page.inner_text("pre.regulation")
    assert text.startswith(clause) and text.strip() in regulation


async def test_a_hole_card_stays_face_down_until_the_record_turns_it_and_every_step_is_dated_and_credited(
        web: tuple[Casino, Web, dict[str, object]]) -> None:
    """002 (6): stepping through a blackjack coup, the dealer's hole card is
    face down from the step that deals it to the step that turns it. Each
    step is dated in UTC and credited to whoever caused it: the result to
    the service that decided it, never to the terminal whose command came
    before. The print is dated, its verdict readable, and it prints."""
    casino, w, tables = web
    await Simulator(casino.nc, tables, seed=6, patience=40).run(3)  # type: ignore[arg-type]
    table = list(tables)[1]
    for number in (1, 2, 3):
        r = replay_coup(await casino.store.read(subjects.coup_filter(f"{table}-{number:06d}", table)))
        turned = next((i for i, s in enumerate(r.steps) if s.type == "blackjack.hole_card_turned"), None)
        if turned is not None:
            break
    assert turned is not None, "no coup turned its hole card"
    hole = next(i for i, c in enumerate(r.cards) if not c.face_up)
    dealt = [i for i, s in enumerate(r.steps) if s.type.endswith(".card_dealt")][hole]
    page = await signed_in(w.browser, w.base, "comp1", w.passwords["comp1"])
    faces = "cards => cards.map(c => c.getAttribute('aria-label'))"
    hidden = r.cards[hole].card
    for step, face in ((dealt + 1, "??"), (turned, "??"), (turned + 1, hidden)):
        await page.goto(f"{w.base}/coup/{table}/{number}?step={step}")
        assert (await page.locator("#cards svg.card").evaluate_all(faces))[hole] == words.card(face), (step, face)
        # As of the step: the hole card named in no step while it is face down, and nothing settled yet.
        steps = await page.locator(".steps li").all_inner_texts()
        said = [t.split(" UTC ", 1)[1] for t, s in zip(steps, r.steps, strict=False)  # past its time: "UTC" holds "TC"
                if getattr(s.data, "position", None) == r.cards[hole].position]
        assert said and all((hidden in t) == (face != "??") for t in said), (step, said)
        assert len(steps) == step and await page.locator("text=Payouts").count() == 0
        await page.emulate_media(media="print")
        printed = await page.inner_text("main")
        assert f"as of step {step} of {len(r.steps)}" in printed and "The house" not in printed
        await page.emulate_media(media="screen")
    await page.goto(f"{w.base}/coup/{table}/{number}")
    times = await page.locator(".steps time").all_inner_texts()
    assert len(times) == len(r.steps) and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", t) for t in times)
    result = next(i for i, s in enumerate(r.steps) if s.type == "blackjack.coup_resulted")
    assert (await page.locator(".steps li .by").nth(result).inner_text()) == "dealer-policy"
    await page.emulate_media(media="print")
    assert re.search(r"Printed by comp1 \(compliance\) on \d{4}-\d\d-\d\d at \d\d:\d\d:\d\d UTC",
                     await page.inner_text(".print-only"))
    colour = await page.locator(".verdict").evaluate("v => getComputedStyle(v).color")
    assert contrast(colour, "rgb(255, 255, 255)") >= 4.5, colour
    pdf = await page.pdf()
    assert pdf.startswith(b"%PDF") and len(pdf) > 5_000


def contrast(fore: str, back: str) -> float:
    """The WCAG contrast ratio of two CSS ``rgb(...)`` colours."""
    def luminance(colour: str) -> float:
        channels = [int(x) / 255 for x in re.findall(r"\d+", colour)[:3]]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(fore), luminance(back)), reverse=True)
    return (high + 0.05) / (low + 0.05)


async def test_a_coup_is_found_by_the_time_it_was_in_play_and_by_a_player(
        web: tuple[Casino, Web, dict[str, object]]) -> None:
    casino, w, tables = web
    await Simulator(casino.nc, tables, seed=7, patience=40).run(3)  # type: ignore[arg-type]
    table = next(iter(tables))
    stored = await casino.store.read(subjects.coup_filter(f"{table}-000002", table))
    opened = next(e.at for m in stored for e in m.batch.events if e.type == "coup.configured")
    player = next(p for m in stored for e in m.batch.events for _, p in getattr(e.data, "seated", ()))
    page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
    at = opened.replace(tzinfo=None).isoformat()  # as the form sends it; UTC
    await page.goto(f"{w.base}/coup?table={table}&at={at}")
    assert page.url == f"{w.base}/coup/{table}/2"  # the coup in play then: the last opened at or before it
    await page.goto(f"{w.base}/coup?table={table}&player={player}")
    found = await page.locator("ol.found a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert f"/coup/{table}/2" in found
    named = {subjects.coup_number(subjects.tokens(m.subject)[2]) for m in await casino.store.read(subjects.table_filter(table))
             for e in m.batch.events if player in {*(p for _, p in getattr(e.data, "seated", ())), getattr(e.data, "player", "")}}
    assert found == [f"/coup/{table}/{n}" for n in sorted(named)]


async def test_a_search_by_player_reads_the_latest_coups_of_its_window_alone_and_says_which(nats_url: str) -> None:
    """A search reads a bounded number of coups, the latest of its window,
    however long the history: the page names the coups it searched, and how
    to search earlier ones."""
    tables = default_tables(1, ["baccarat-000-methods"], readers=0)
    async with serving(nats_url, tables, searched_most=3) as (casino, w, _):
        table = next(iter(tables))
        await Simulator(casino.nc, tables, seed=7, patience=40).run(6)  # type: ignore[arg-type]
        seated = [{p for m in await casino.store.read(subjects.coup_filter(f"{table}-{n:06d}", table))
                   for e in m.batch.events for _, p in getattr(e.data, "seated", ())} for n in range(1, 7)]
        player = next(iter(set.intersection(*seated[1:])))  # seated from coup 2 to 6
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        await page.goto(f"{w.base}/coup?table={table}&player={player}")
        found = await page.locator("ol.found a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert found == [f"/coup/{table}/{n}" for n in (4, 5, 6)], found
        said = await page.inner_text("p.searched")
        assert "Searched coups 4 to 6" in said and "reads the latest 3 coups" in said, said


async def test_a_sealed_shoe_shows_its_seal_and_its_coups_replay_from_the_archive(nats_url: str,
                                                                                    tmp_path: Path) -> None:
    """A one-deck shoe dealt to its end and sealed by the archiver: its page
    shows the seal and the order revealed, and its coups' pages are verified
    from the seal once the live stream no longer holds them."""
    ruleset = ruleset_variant(tmp_path, "blackjack-002-hole-card", decks=1, penetration=0.5)
    tables = {"BJ1": TableConfig(ruleset, currency="EUR")}
    async with serving(nats_url, tables) as (casino, w, site):  # type: ignore[arg-type]
        shoe = "BJ1-shoe-1"
        simulator = Simulator(casino.nc, tables, seed=8, patience=40)  # type: ignore[arg-type]
        for _ in range(40):
            await simulator.run(2)
            if await site.store.seals.get("BJ1", shoe) is not None:
                break
        kept = await site.store.seals.get("BJ1", shoe)
        assert kept is not None, "the archiver sealed no shoe"
        page = await signed_in(w.browser, w.base, "comp1", w.passwords["comp1"])
        await page.goto(f"{w.base}/shoe/{shoe}")
        assert kept.hash in await page.inner_text(".seal")
        assert "it hashes to the commitment" in await page.inner_text("pre.shoe-record")
        assert await page.locator(".shoe-facts .order").count() == 1
        await page.goto(f"{w.base}/coup/BJ1/{kept.first_coup}")
        assert kept.hash in await page.inner_text("main")
        assert (await page.inner_text(".verdict")).startswith("Verified")
        # A search by player reads the sealed shoe's wager books from its seal.
        first = await site.store.read(subjects.coup_filter(f"BJ1-{kept.first_coup:06d}", "BJ1"))
        player = next(p for m in first for e in m.batch.events if (p := getattr(e.data, "player", "")))
        await page.goto(f"{w.base}/coup?table=BJ1&player={player}")
        found = await page.locator("ol.found a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert f"/coup/BJ1/{kept.first_coup}" in found


async def test_an_ended_baccarat_shoes_page_draws_its_scoreboard_from_its_coups(nats_url: str,
                                                                                tmp_path: Path) -> None:
    """A one-deck baccarat shoe dealt to its end: its page holds its
    scoreboard, one bead for each of its coups' results in the order dealt,
    as `casino replay roads` draws it."""
    ruleset = ruleset_variant(tmp_path, "baccarat-000-methods", decks=1, penetration=0.5)
    tables = {"B1": TableConfig(ruleset, "method_a", currency="EUR")}
    async with serving(nats_url, tables) as (casino, w, _):  # type: ignore[arg-type]
        shoe = "B1-shoe-1"
        simulator = Simulator(casino.nc, tables, seed=9, patience=40)  # type: ignore[arg-type]
        for _ in range(20):
            await simulator.run(2)
            if await casino.store.first(subjects.event("B1", "B1-shoe-2", "*", "shoe")) is not None:
                break
        stored = await casino.store.read(subjects.shoe_filter("B1", shoe))
        results = [{"banker": "B", "player": "P", "tie": "T"}[e.data.winner]  # type: ignore[union-attr]
                   for m in stored for e in m.batch.events if e.type == "baccarat.coup_resulted"]
        assert any(e.type == "shoe.ended" for m in stored for e in m.batch.events), "the shoe did not end"
        page = await signed_in(w.browser, w.base, "comp1", w.passwords["comp1"])
        await page.goto(f"{w.base}/shoe/{shoe}")
        beads = page.locator(".scoreboard svg.road[aria-label='bead plate'] g text")
        assert results and await beads.all_text_contents() == results
        assert f"{len(results)} coups" in await page.inner_text(".scoreboard .counts")


async def test_the_floor_at_a_glance_alerted_tables_first_a_summary_a_compact_view_and_its_connection(
        nats_url: str) -> None:
    """Six tables: the summary counts them and the house's takings; a table
    alerted moves to the first place, live; the compact view drops the
    cards; and a page whose web is gone says so, then reconnects by itself
    and shows what changed meanwhile."""
    tables = default_tables(6, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)
    async with serving(nats_url, tables) as (casino, w, site):
        await Simulator(casino.nc, tables, seed=10, patience=40).run(2)  # type: ignore[arg-type]
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        summary = await page.inner_text("#summary")
        assert "6 tables" in summary and "0 held" in summary and "the house " in summary, summary
        last = list(tables)[-1]
        tile = site.floor.tiles[last]
        tile.finding = "coup 2 failed verification"  # as the floor marks a coup its verification fails
        site.floor._draw(last)
        site.floor.tell({last})
        await expect(page.locator(f"#tile-{last}.alerted")).to_have_count(1, timeout=10_000)
        first = await page.locator("section.tile").first.bounding_box()
        alerted = await page.locator(f"#tile-{last}").bounding_box()
        assert first is not None and alerted is not None and (alerted["y"], alerted["x"]) <= (first["y"], first["x"])
        assert "1 alerted" in await page.inner_text("#summary")
        full = await page.locator(".floor").bounding_box()
        await page.goto(f"{w.base}/?compact=1")
        compact = await page.locator(".floor").bounding_box()
        assert await page.locator(".tile .hand").first.is_hidden()
        assert full is not None and compact is not None and compact["height"] < full["height"]
        # The web goes away: the page says so; back on the same address, the page reconnects by itself
        # and is sent every tile again (a coup dealt meanwhile shown).
        await expect(page.locator("#connection")).to_be_hidden()
        await w.stop()
        await expect(page.locator("#connection")).to_be_visible(timeout=30_000)
        await Simulator(casino.nc, tables, seed=11, patience=40).run(3)  # type: ignore[arg-type]
        await w.serve()
        await expect(page.locator("#connection")).to_be_hidden(timeout=60_000)
        await expect(page.locator(f"#tile-{last} .coup")).to_have_text("coup 5", timeout=30_000)  # 2 and 3 dealt


async def test_the_floor_says_a_service_has_no_live_instance_and_when_it_is_back(
        web: tuple[Casino, Web, dict[str, object]]) -> None:
    casino, w, _ = web
    page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
    assert await page.inner_text("#down") == ""
    await casino.stop("settlement")
    await page.wait_for_selector("#down:has-text('No live instance of settlement')", timeout=30_000)
    await casino.start("settlement")
    await page.wait_for_selector("#down:has-text('settlement')", state="detached", timeout=30_000)
    metrics = await page.request.get(f"{w.base}/metrics")  # served without signing in, as /healthz is
    assert metrics.ok and 'casino_web_requests_total{page="floor"}' in await metrics.text()
    assert "casino_web_streams 1.0" in await metrics.text()


async def test_the_floor_says_a_service_keeps_dying_and_counts_its_starts(
        nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service started again and again (as a launcher or Kubernetes does
    with one that keeps dying) is a new instance each time: the floor's
    banner names it once it has started ``RESTARTS_MOST`` times within
    ``RESTARTS_WITHIN`` seconds, the web counts its starts, and the banner
    goes once it stays up. The instances live at the web's start are not
    starts."""
    monkeypatch.setattr(floor_module, "LIVENESS", 0.25)
    monkeypatch.setattr(liveness, "RESTARTS_WITHIN", 15.0)
    tables = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)
    async with serving(nats_url, tables) as (casino, w, site):
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        for k in range(liveness.RESTARTS_MOST):
            await casino.stop("settlement")
            await casino.start("settlement")
            deadline = time.monotonic() + 10
            while len(site.floor.services.started.get("settlement", {})) < k + 1:  # each start seen before the next
                assert time.monotonic() < deadline, site.floor.services.started
                await asyncio.sleep(0.1)
        await page.wait_for_selector("#down:has-text('settlement keeps dying')", timeout=10_000)
        metrics = await (await page.request.get(f"{w.base}/metrics")).text()
        assert 'casino_web_service_instances_started_total{service="settlement"} 4.0' in metrics
        assert 'casino_web_service_instances_started_total{service="shoe"} 0.0' in metrics
        assert "casino_web_services_restarting 1.0" in metrics
        await page.wait_for_selector("#down:has-text('keeps dying')", state="detached", timeout=30_000)


async def test_the_floor_reads_the_stream_a_turn_at_a_time_however_many_messages_come(
        nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Awake, the floor reads what was appended since its last turn once a
    turn, every table's at once: the reads it makes follow the clock, not
    the messages, and the tiles show the latest coup all the same."""
    monkeypatch.setattr(floor_module, "REFRESH", 0.5)
    tables = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)
    async with serving(nats_url, tables) as (casino, w, site):
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        assert site.floor.awake
        turns: list[int] = []
        reading = site.floor.store.read

        async def read(filter_: str, after: int = 0, limit: int | None = None) -> Any:
            got = await reading(filter_, after, limit)
            if filter_ == f"{subjects.EVENTS}.>":
                turns.append(len(got))
            return got

        monkeypatch.setattr(site.floor.store, "read", read)
        began = time.monotonic()
        await Simulator(casino.nc, tables, seed=15, patience=40).run(6)  # type: ignore[arg-type]
        first = next(iter(tables))
        await expect(page.locator(f"#tile-{first} .coup")).to_have_text("coup 6", timeout=10_000)
        took = time.monotonic() - began
        assert len(turns) <= took / 0.5 + 2, (len(turns), took)  # one read a turn
        assert sum(turns) >= 6 * 2 * 4 and sum(turns) > 2 * sum(1 for n in turns if n)  # many messages a read
        await page.close()


async def test_a_tile_catches_up_with_read_models_written_after_its_record_was_read(nats_url: str) -> None:
    """The projections write the read models a moment after the record the
    floor reads: a tile whose status lags its record is read again, turn
    after turn (ever more seldom), until the read models catch up, whether
    or not anything more is dealt. Here they are stopped while two coups are
    dealt and started again once the tables are quiet."""
    tables = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)
    async with serving(nats_url, tables) as (casino, w, site):
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        first = next(iter(tables))
        await casino.stop("projections")
        await Simulator(casino.nc, tables, seed=16, patience=40).run(2)  # type: ignore[arg-type]
        await expect(page.locator(f"#tile-{first} .coup")).to_have_text("coup 2", timeout=10_000)  # from the record
        assert site.floor.tiles[first].status.coups < 2 and first in site.floor.lagging
        await casino.start("projections")
        deadline = time.monotonic() + 60
        while site.floor.tiles[first].status.coups < 2 or site.floor.lagging:
            assert time.monotonic() < deadline, (site.floor.tiles[first].status, site.floor.lagging)
            await asyncio.sleep(0.25)
        await page.close()


async def test_the_floor_is_read_only_while_someone_looks_at_it(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nobody looking, the web reads nothing of the record: no turn, no
    tile drawn. The first page wakes the floor, each table taken up from its
    latest coup; the last page gone, the floor sleeps ``IDLE`` seconds later,
    and the next page shows what was dealt meanwhile."""
    monkeypatch.setattr(floor_module, "IDLE", 1.0)
    tables = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)
    async with serving(nats_url, tables) as (casino, w, site):
        await Simulator(casino.nc, tables, seed=12, patience=40).run(2)  # type: ignore[arg-type]
        assert not site.floor.awake and site.metrics.drawn._value.get() == 0
        assert set(site.floor.read_to.values()) == {0}
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        assert site.floor.awake
        first = next(iter(tables))
        await expect(page.locator(f"#tile-{first} .coup")).to_have_text("coup 2", timeout=10_000)
        await page.close()
        deadline = time.monotonic() + 30
        while site.floor.awake:
            assert time.monotonic() < deadline, "the floor still read 30 s after its last page closed"
            await asyncio.sleep(0.2)
        read, drawn = dict(site.floor.read_to), site.metrics.drawn._value.get()
        await Simulator(casino.nc, tables, seed=13, patience=40).run(2)  # type: ignore[arg-type]
        await asyncio.sleep(1.0)
        assert site.floor.read_to == read and site.metrics.drawn._value.get() == drawn  # nothing read, nothing drawn
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        await expect(page.locator(f"#tile-{first} .coup")).to_have_text("coup 4", timeout=10_000)
        await Simulator(casino.nc, tables, seed=14, patience=40).run(1)  # type: ignore[arg-type]
        await expect(page.locator(f"#tile-{first} .coup")).to_have_text("coup 5", timeout=10_000)  # live again
