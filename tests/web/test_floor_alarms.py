"""The floor's verification alarm in a real browser: raised for a coup
whose record fails verification, never for a coup the floor began to follow
in the middle (the floor sleeps while nobody looks, and wakes mid-deal)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from playwright.async_api import expect
from services.web import floor as floor_module

from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.store import envelope, subjects
from tests.e2e.casino import Casino
from tests.web.test_pages import serving, signed_in

pytestmark = pytest.mark.anyio


async def coups_in_play(casino: Casino) -> int:
    """Coups opened and not yet settled, from one reading's order: the settlements read before the openings."""
    store = casino.store
    settled = {subjects.tokens(m.subject)[2] for m in await store.read(f"{subjects.EVENTS}.*.*.*.settle")}
    return len({subjects.tokens(m.subject)[2] for m in await store.read(f"{subjects.EVENTS}.*.*.*.coup")} - settled)


async def test_a_floor_woken_mid_deal_raises_no_false_alarm_and_a_forged_coup_raises_one_at_its_settlement(
        nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty tables deal twelve coups each while the pit's page comes and goes:
    each time it comes back the floor wakes with coups in play, takes each
    table up from its latest coup and follows them from the middle. No tile
    is alarmed, on the page or on the floor. Then a coup is forged before
    its settlement: its tile is alarmed within a second of the settlement's
    record, as verified from the coup read whole."""
    monkeypatch.setattr(floor_module, "IDLE", 1.0)  # the floor sleeps a second after its last page
    tables = default_tables(20, ["baccarat-000-methods", "blackjack-002-hole-card"], readers=0)
    async with serving(nats_url, tables) as (casino, w, site):
        page = await signed_in(w.browser, w.base, "pit1", w.passwords["pit1"])
        # Three spells of dealing, each table a coup a second, and the floor
        # asleep at the start of each: it wakes among coups in play.
        wakes, in_play = 0, 0
        for spell in range(3):
            await page.goto("about:blank")  # nobody looks: the floor goes to sleep
            while site.floor.awake:
                await asyncio.sleep(0.1)
            dealing = asyncio.create_task(
                Simulator(casino.nc, tables, seed=21 + spell, patience=40, every=1.0).run(4))  # type: ignore[arg-type]
            await asyncio.sleep(1.5)  # coups go on meanwhile, unread
            deadline = time.monotonic() + 30
            while not (playing := await coups_in_play(casino)):  # however slowly the simulator starts
                assert time.monotonic() < deadline, "no coup in play"
                await asyncio.sleep(0.1)
            await page.goto(f"{w.base}/")  # and the floor wakes in the middle of them
            deadline = time.monotonic() + 30
            while not site.floor.watchers:  # its live stream open (which wakes it again if it dozed meanwhile)
                assert time.monotonic() < deadline, "the floor's page opened no live stream"
                await asyncio.sleep(0.05)
            assert site.floor.awake
            wakes += 1
            in_play += playing
            await dealing
            await asyncio.sleep(1.0)
            assert await page.locator("section.tile.alerted").count() == 0
        await asyncio.sleep(1.0)
        settled = [m for m in await casino.store.read(f"{subjects.EVENTS}.*.*.*.settle")]
        assert len(settled) >= 200 and wakes >= 3 and in_play > 0, (len(settled), wakes, in_play)
        print(f"{len(settled)} coups settled at {len(tables)} tables, the floor woken {wakes} times among "
              f"{in_play} coups in play: {sum(1 for t in site.floor.tiles.values() if t.finding)} alarms")
        assert [t.finding for t in site.floor.tiles.values() if t.finding] == []
        assert await page.locator("section.tile.alerted").count() == 0

        # A writer's credential alters a coup's opening before its settlement.
        table = next(iter(tables))
        coup = f"{table}-000013"
        await casino.stop("settlement")
        one = asyncio.create_task(Simulator(casino.nc, {table: tables[table]}, seed=22, patience=40).run(1))
        deadline = time.monotonic() + 60
        while not any(e.type == "baccarat.coup_resulted"
                      for m in await casino.store.read(subjects.coup_filter(coup, table)) for e in m.batch.events):
            assert time.monotonic() < deadline, "the coup was not dealt to its result"
            await asyncio.sleep(0.2)
        stored = await casino.store.read(subjects.coup_filter(coup, table))
        opening = next(m for m in stored if any(e.type == "baccarat.coup_opened" for e in m.batch.events))
        raw = json.loads(envelope.encode(opening.batch))
        for e in raw["events"]:
            if e["type"] == "baccarat.coup_opened":
                e["data"]["approvals"] = [{"what": "method_b", "by": "SUP-FORGED", "reference": "INS-9"}]
        await casino.nc.jetstream().publish(opening.subject, json.dumps(raw).encode(),
                                            headers={"Nats-Msg-Id": "dealer-policy:forged-approval"})
        await casino.start("settlement")
        while not site.floor.tiles[table].finding:
            assert time.monotonic() < deadline + 60, "no alarm for the forged coup"
            await asyncio.sleep(0.02)
        raised = time.time()
        await one
        [settlement] = [e for m in await casino.store.read(subjects.event(table, "*", coup, "settle"))
                        for e in m.batch.events]
        assert raised - settlement.at.timestamp() <= 1.0
        assert site.floor.tiles[table].finding == "coup 13 failed verification"
        await expect(page.locator(f"#tile-{table}.alerted")).to_have_count(1, timeout=10_000)
        assert await page.locator("section.tile.alerted").count() == 1
