"""The pit display: a baccarat table's scoreboard on a 1920 by 1080 screen
on the pit wall, in a real browser, read from 3 m: every road's cells at
least 28 px, the whole board on the screen, the ask as its red and blue
glyphs, live as each result is recorded."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from casino.audit.history import shoe_results
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.rules.baccarat.scoreboard import DERIVED, scoreboard
from casino.store import subjects
from tests.web.test_pages import DOCS, serving, signed_in

pytestmark = pytest.mark.anyio
ROADS = ("bead plate", "big road", "big eye boy", "small road", "cockroach pig")


async def test_a_tables_pit_display_shows_its_five_roads_readable_across_the_pit_and_live(nats_url: str) -> None:
    tables = {"B1": TableConfig("baccarat-000-methods", "method_a", currency="EUR"),
              "J1": TableConfig("blackjack-002-hole-card", "standard", currency="EUR")}
    async with serving(nats_url, tables) as (casino, w, _):  # type: ignore[arg-type]
        await Simulator(casino.nc, {"B1": tables["B1"]}, seed=31, patience=40).run(30)
        await Simulator(casino.nc, {"J1": tables["J1"]}, seed=31, patience=40).run(1)
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        # The floor's tile links to its table's display; a blackjack table keeps no scoreboard.
        assert await page.locator("#tile-J1 a[href='/table/J1/board']").count() == 0
        missing = await page.goto(f"{w.base}/table/J1/board")
        assert missing is not None and missing.status == 404
        await page.goto(f"{w.base}/")
        road = await page.locator("#tile-B1 .small-road svg.road").bounding_box()  # the tile's own, at 1280 wide
        assert road is not None and road["height"] / 6 >= 18, road
        await page.set_viewport_size({"width": 1920, "height": 1080})
        await page.click("#tile-B1 a[href='/table/B1/board']")
        await page.wait_for_url(f"{w.base}/table/B1/board")

        stored = await casino.store.read(subjects.table_filter("B1"))
        board = scoreboard(shoe_results(stored))
        beads = page.locator("svg.road[aria-label^='bead plate'] g text")
        assert await beads.all_text_contents() == board.results
        # Every road on the screen at once, its cells at least 28 px, its text form beside it.
        for label in ROADS:
            road = page.locator(f".board svg.road[aria-label^='{label}']")
            box = await road.bounding_box()
            assert box is not None, label
            assert box["height"] / 6 >= 28, (label, box)
            assert box["x"] >= 0 and box["x"] + box["width"] <= 1920 and box["y"] + box["height"] <= 1080, (label, box)
            assert await page.locator(f".board table.road-text caption:text-is('{label.capitalize()}, column by "
                                      "column from the top')").count() == 1
        assert await page.evaluate("document.documentElement.scrollWidth") <= 1920
        # The counts, and the ask as each derived road's own glyph in the colour the rules give.
        assert f"{board.counts['coups']} coups: banker {board.counts['banker']}" in await page.inner_text(".counts")
        for letter, who in (("B", "banker"), ("P", "player")):
            row = page.locator(f".board table.ask tr:has(th.{who})")
            for i, name in enumerate(DERIVED):
                colour = getattr(board.ask[letter], name)
                cell = row.locator("td").nth(i)
                assert await cell.locator(f"svg.glyph .{colour}").count() == (1 if colour else 0), (who, name)
        await page.screenshot(path=str(DOCS / "web-board.png"))
        # Live, with no reload: the next coup's result is on the display as it is recorded.
        await Simulator(casino.nc, {"B1": tables["B1"]}, seed=32, patience=40).run(1)
        await expect(beads).to_have_count(len(board.results) + 1, timeout=30_000)
