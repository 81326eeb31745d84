"""A coup opens in one durable step, on a real nats-server: the opening
answered once its record is appended, with no request between the services
on its way (the shoe's round was started as the coup before ended, and the
wager book follows from the coup's record: the wager service records its
opening with the book's first fact, in the same append); a refused wager
records nothing, not even the book's opening; with two wager instances the
book is opened once."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.msg import Msg

from casino.audit.audits import verify_history
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.rules import shoe, wagerbook
from casino.store import subjects
from tests.e2e.casino import Casino

pytestmark = pytest.mark.anyio
TABLE = "BAC000-1"
TABLES = {TABLE: TableConfig("baccarat-000-methods", "method_a")}


async def _deal(casino: Casino, coup: str) -> None:
    slip = commands.SlipLine(1, "banker", 5000), commands.SlipLine(1, "tie", 1000)
    assert (await casino.again("wager", commands.PlaceWagers(id=f"{coup}:slip", table=TABLE, coup=coup,
                                                            wagers=slip))).ok
    assert (await casino.ask(TABLE, "coup", commands.CloseBetting, coup=coup)).ok
    await casino.settled(coup)


async def test_an_opening_is_one_request_and_one_append_and_its_book_follows_from_the_record(
        nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        await casino.start("wager")  # two wager instances
        first = await casino.patiently(TABLE, "coup", commands.OpenCoup)
        await _deal(casino, first.coup)
        second = f"{TABLE}-000002"
        await casino.recorded(first.coup, shoe.RoundEnded)  # the next round started in the same message
        await asyncio.sleep(0.5)  # and nothing else in flight
        asked: list[str] = []

        async def tapped(msg: Msg) -> None:
            asked.append(msg.subject.split(".")[3])  # casino.cmd.<table>.<service>.<partition>

        info = await casino.nc.jetstream().stream_info("CASINO")
        tap = await casino.nc.subscribe(f"{subjects.COMMANDS}.{TABLE}.>", cb=tapped)
        opened = await casino.ask(TABLE, "coup", commands.OpenCoup, procedure="method_a", number=2)
        await casino.nc.flush()
        await tap.unsubscribe()
        assert opened.ok and opened.coup == second, opened
        assert asked == ["coup"], asked  # the opening alone: no request to the shoe or the wager service
        after = await casino.nc.jetstream().stream_info("CASINO")
        assert after.state.last_seq - info.state.last_seq == 1  # one append: the coup's opening

        wager = subjects.event(TABLE, "*", second, "wager")
        refused = await casino.ask(TABLE, "wager", commands.PlaceWager, coup=second, seat=1, bet="banker", amount=1)
        assert (refused.ok, refused.clause) == (False, "ruleset limits"), refused
        assert await casino.store.read(wager) == []  # refused: not even the book's opening recorded
        await _deal(casino, second)
        book = await casino.store.read(wager)
        assert [[type(e.data) for e in m.batch.events] for m in book] == [
            [wagerbook.BookOpened, wagerbook.WagerPlaced, wagerbook.WagerPlaced], [wagerbook.BookClosed]]
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    report = verify_history(history)
    assert report.findings == [] and report.coups == 2, report.findings


async def test_a_coup_closed_with_no_wager_records_its_book_opened_and_closed_in_one_append(nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        opened = await casino.patiently(TABLE, "coup", commands.OpenCoup)
        assert (await casino.ask(TABLE, "coup", commands.CloseBetting, coup=opened.coup)).ok
        await casino.settled(opened.coup)
        book = await casino.store.read(subjects.event(TABLE, "*", opened.coup, "wager"))
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    assert [[type(e.data) for e in m.batch.events] for m in book] == [[wagerbook.BookOpened, wagerbook.BookClosed]]
    assert verify_history(history).findings == []
