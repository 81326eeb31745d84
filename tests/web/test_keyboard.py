"""The pages with a keyboard and a screen reader, in a real browser: a skip
link, focus kept across every live redraw and every step, the arrow keys,
Home and End stepping a coup, a new alert said through a live region."""

from __future__ import annotations

import re
import time

import pytest
from playwright.async_api import Page, expect

from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from tests.web.test_pages import serving, signed_in

pytestmark = pytest.mark.anyio


async def focused(page: Page) -> str:
    return str(await page.evaluate("document.activeElement.id"))


async def focus_is_on(page: Page, element: str) -> None:
    """The focus comes to ``element`` (by its id) once the swap has settled."""
    await page.wait_for_function("id => document.activeElement.id === id", arg=element, timeout=10_000)


async def test_the_keyboard_reaches_steps_and_keeps_its_place_and_alerts_are_said(nats_url: str) -> None:
    tables = {"B1": TableConfig("baccarat-000-methods", "method_a", currency="EUR"),
              "B2": TableConfig("baccarat-000-methods", "method_a", currency="EUR")}
    async with serving(nats_url, tables) as (casino, w, site):  # type: ignore[arg-type]
        await Simulator(casino.nc, tables, seed=51, patience=40).run(1)  # type: ignore[arg-type]
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        # The first Tab reaches the skip link, which takes the focus past the header.
        await page.keyboard.press("Tab")
        assert await focused(page) == "" and await page.evaluate("document.activeElement.className") == "skip"
        await page.keyboard.press("Enter")
        assert await focused(page) == "main"
        await expect(page.locator("#clock")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d UTC$"))

        # A tile redrawn live keeps the focus on the link it had.
        await page.focus("#tile-B1-table")
        await Simulator(casino.nc, tables, seed=52, patience=40).run(2)  # type: ignore[arg-type]
        await expect(page.locator("#tile-B1 .coup")).to_have_text("coup 3", timeout=30_000)
        assert await focused(page) == "tile-B1-table"
        # A tile alerted is said once through the live region, its table named.
        tile = site.floor.tiles["B2"]
        tile.finding, tile.finding_at, tile.finding_coup = "coup 3 failed verification", time.time(), 3
        site.floor._draw("B2")
        site.floor.tell({"B2"})
        await expect(page.locator("#announcer")).to_have_text("B2: coup 3 failed verification", timeout=10_000)
        # On its tile, with the time it came (UTC) and a link to its coup.
        alert = page.locator("#tile-B2 .alert")
        assert re.fullmatch(r"\d\d:\d\d:\d\d UTC", await alert.locator("time").inner_text())
        assert await alert.locator("a").get_attribute("href") == "/coup/B2/3"
        assert await page.locator("#announcer").get_attribute("role") == "alert"
        assert await focused(page) == "tile-B1-table"

        # A coup is stepped with the arrow keys, Home and End; a step taken keeps the focus on its link.
        await page.goto(f"{w.base}/coup/B1/2?step=0")
        steps = int(re.findall(r"of (\d+)", await page.inner_text("#step-now"))[0])
        now = page.locator("#step-now")
        for key, shown in (("ArrowRight", 1), ("ArrowRight", 2), ("ArrowLeft", 1), ("End", steps), ("Home", 0),
                           ("ArrowLeft", 0)):
            await page.keyboard.press(key)
            await expect(now).to_have_text(f"step {shown} of {steps}")
        await page.focus("#step-next")
        await page.keyboard.press("Enter")
        await expect(now).to_have_text(f"step 1 of {steps}")
        await focus_is_on(page, "step-next")
        await page.keyboard.press("End")
        await expect(now).to_have_text(f"step {steps} of {steps}")
        await focus_is_on(page, "step-last")
        await page.keyboard.press("ArrowLeft")
        await expect(now).to_have_text(f"step {steps - 1} of {steps}")
        await page.focus("#step-next")
        await page.keyboard.press("Enter")
        await expect(now).to_have_text(f"step {steps} of {steps}")
        await focus_is_on(page, "step-now")  # no next step: the focus on the step shown
