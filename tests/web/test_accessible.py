"""Every page read as a keyboard user and a screen reader read it: axe-core
(vendored, tests/web/vendor/axe.min.js, MPL-2.0) run in Chromium over each
page finds no serious or critical violation of WCAG 2.2 A and AA, on screen
and as printed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from tests.web.test_pages import serving, signed_in

pytestmark = pytest.mark.anyio
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]


async def violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations of the page as it is now."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.evaluate(f"() => {{ {AXE.read_text()}\n}}")  # as the browser's tools run it: the page's CSP stands
    found: list[dict[str, Any]] = await page.evaluate(
        "async tags => (await axe.run(document, {runOnly: {type: 'tag', values: tags}})).violations"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' ') + ': '"
        " + n.failureSummary)}))", WCAG)
    return [v for v in found if v["impact"] in ("serious", "critical")]


async def test_every_page_has_no_serious_or_critical_wcag_violation_on_screen_or_in_print(nats_url: str) -> None:
    tables = {"B1": TableConfig("baccarat-000-methods", "method_a", currency="EUR"),
              "J1": TableConfig("blackjack-002-hole-card", "standard", currency="EUR")}
    async with serving(nats_url, tables) as (casino, w, _):  # type: ignore[arg-type]
        await Simulator(casino.nc, tables, seed=41, patience=40).run(4)  # type: ignore[arg-type]
        unsigned = await w.browser.new_page()
        await unsigned.goto(f"{w.base}/signin")
        pages: dict[str, Page] = {"sign-in": unsigned}
        pit = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        comp = await signed_in(w.browser, w.base, "comp1", w.passwords["comp1"])
        # Every page's console and requests: no error, nothing missing (a favicon included).
        troubles: list[str] = []
        for page in (unsigned, pit, comp):
            page.on("console", lambda m: troubles.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("response", lambda r: troubles.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        found: dict[str, list[dict[str, Any]]] = {}
        for name, page, path in (
                ("floor", pit, "/"), ("compact floor", pit, "/?compact=1"), ("table", pit, "/table/B1"),
                ("pit display", pit, "/table/B1/board"), ("baccarat coup", pit, "/coup/B1/2"),
                ("baccarat coup at step 3", pit, "/coup/B1/2?step=3"), ("blackjack coup", pit, "/coup/J1/2"),
                ("shoe", pit, "/shoe/B1-shoe-1"), ("find", pit, "/coup"), ("found", pit, "/coup?table=B1"),
                ("clause", pit, "/clause/000/8.4"), ("export", comp, "/export"),
                ("export of a table", comp, "/export?table=B1")):
            answer = await page.goto(f"{w.base}{path}")
            assert answer is not None and answer.status == 200, (name, path)
            pages[name] = page
            found[name] = await violations(page)
            # Names as a person reads them: no setting's or procedure's identifier (method_a, go_on).
            shown = await page.inner_text("main")
            assert not re.findall(r"\b[a-z]+_[a-z_]+\b", shown), (name, re.findall(r"\b[a-z]+_[a-z_]+\b", shown))
            await page.emulate_media(media="print")
            found[f"{name}, printed"] = await violations(page)
            await page.emulate_media(media="screen")
        found["sign-in"] = await violations(unsigned)
        # Live pages stay clean as they change: a coup dealt while the table page and the display are open.
        await pit.goto(f"{w.base}/table/J1")
        await comp.goto(f"{w.base}/table/B1/board")
        await Simulator(casino.nc, tables, seed=42, patience=40).run(1)  # type: ignore[arg-type]
        await expect(pit.locator("#tile-J1 .coup")).to_have_text("coup 5", timeout=30_000)
        await expect(comp.locator("svg.road[aria-label^='bead plate'] g")).to_have_count(5, timeout=30_000)
        assert troubles == []
        # A blackjack shoe's coups say each hand's result beside the dealer's.
        assert re.search(r"dealer (\d+|blackjack); seat \d+ (hand \d )?(won|lost|pushed)",
                         await pit.inner_text(".recent")), await pit.inner_text(".recent")
        failed = [f"{name}: {v['id']} ({v['impact']}) at {node}" for name, vs in found.items() for v in vs
                  for node in v["nodes"]]
        assert failed == [], "\n".join(failed)
