"""The floor's console on a second `make run`: where each table stands, from
its latest coup, its shoe in play and the read models' takings, the same as
the whole history shows, without reading the history."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from casino.cli.console import HEADER, LEGEND, WIDTH, Console, where_tables_stand
from casino.cli.run import APPROVALS
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.readmodels.projections import KvProjections, Takings
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.shoe import RoundEnded
from casino.rules.text import money
from casino.store import subjects
from tests.e2e.casino import Casino
from tests.e2e.test_bounded_start import reads_of, small_shoe

pytestmark = pytest.mark.anyio


async def test_a_second_run_shows_each_table_where_its_whole_history_leaves_it(nats_url: str, tmp_path: Path) -> None:
    tables = {"B-1": TableConfig(small_shoe(tmp_path, "baccarat-000-methods"), approvals=APPROVALS),
              "J-1": TableConfig(small_shoe(tmp_path, "blackjack-003-no-hole-card"))}
    async with Casino(nats_url, tables) as casino:
        await casino.start("projections")
        await Simulator(casino.nc, tables, seed=5, patience=40).run(20)
        for table in tables:
            await casino.recorded(f"{table}-000020", RoundEnded)
        kv = await KvProjections(casino.nc.jetstream()).open()
        last = (await casino.store.read(f"{subjects.EVENTS}.>"))[-1].seq
        while await kv.seq() < last:
            await asyncio.sleep(0.05)

        whole = Console(list(tables), live=False)
        for table in tables:
            for msg in await casino.store.read(subjects.table_filter(table)):
                whole.on_batch(msg.subject, msg.batch)
        assert all(v.settled == 20 and not v.shoe.endswith("-shoe-1") for v in whole.views.values())

        takings = {key: msgspec.json.decode(value, type=Takings)
                   for (_, key), value in (await kv.values(("takings", t) for t in tables)).items() if value}
        reads = reads_of(casino.store)
        seeded = Console(list(tables), live=False)
        await where_tables_stand(seeded, casino.store, takings)
        assert seeded.render() == whole.render()
        assert reads and all(subjects.tokens(f)[1] != "*" for f in reads)  # a coup or a shoe, not the history


async def test_a_tables_phase_cards_and_result_come_from_one_reading_of_its_record(nats_url: str,
                                                                                  tmp_path: Path) -> None:
    """What a tile shows of a coup agrees with itself after every message of
    the record: betting shows no card and no result; a result belongs to the
    coup shown, and the coup before's is labelled with its own number."""
    tables = {"B-1": TableConfig(small_shoe(tmp_path, "baccarat-000-methods"), approvals=APPROVALS),
              "J-1": TableConfig(small_shoe(tmp_path, "blackjack-002-hole-card"))}
    async with Casino(nats_url, tables) as casino:
        await Simulator(casino.nc, tables, seed=6, patience=40).run(6)
        seen: set[str] = set()
        for table in tables:
            console, phases = Console([table], live=False), set()
            view = console.views[table]
            for msg in await casino.store.read(subjects.table_filter(table)):
                console.on_batch(msg.subject, msg.batch)
                phases.add(view.phase)
                number = int(view.coup.rpartition("-")[2] or 0)
                if view.phase == "betting":
                    assert view.cards == {} and view.result == "", (msg.subject, view)
                if view.phase in ("finished", "settled"):
                    assert view.result, (msg.subject, view)
                if view.last:
                    assert view.last.startswith(f"coup {number - 1}: "), (msg.subject, view)
            assert {"betting", "finished", "settled"} <= phases, phases
            assert view.phase == "settled" and view.last.startswith("coup 5: ")
            seen |= phases
        assert "dealing" in seen  # blackjack waits for its players' decisions mid-deal


def test_a_line_a_table_with_its_legend_hands_counted_from_one_and_money_in_the_tables_currency() -> None:
    """Every line, the header and the legend fit the console's width; a
    blackjack box's hands are numbered as people count them (3, then 3/2
    after a split); the house's net is in the table's currency with its
    sign always shown (+: the house won)."""
    console = Console(["BJ-1"], {"BJ-1": "EUR"}, live=False)
    view = console.views["BJ-1"]
    for seat, hand, card in ((3, 0, "8H"), (3, 1, "8S"), (None, 0, "TC"), (3, 0, "2D")):
        console._apply(view, "BJ-1-000001", blackjack_messages.CardDealt(
            seat=seat, hand=hand, card=card, position=0, face_up=True, clause=""))
    assert list(view.cards) == ["3", "3/2", "D"] and view.cards["3"] == ["8H", "2D"]
    view.coup, view.house_net, view.settled = "BJ-1-000042", 123450, 7
    line = view.line()
    assert line.split()[:2] == ["BJ-1", "42"] and line.endswith("EUR +1,234.50"), line
    view.house_net = -5
    assert view.line().endswith("EUR -0.05") and money(0, "EUR", signed=True) == "EUR 0.00"
    view.cards = {str(seat): ["TC"] * 9 for seat in range(1, 8)}  # a full layout: cut, never wrapped
    assert max(len(view.line()), len(HEADER), len(LEGEND)) <= WIDTH
