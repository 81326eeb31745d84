"""A bet slip on a real nats-server (``commands.PlaceWagers``): a table's
wagers placed by one command are one append of the coup's book, sent again
recorded once, with two wager instances answering; a slip with one wager
the rules refuse is refused whole, its line and rule named, and changes
nothing; the coup deals and settles on the slip's wagers."""

from __future__ import annotations

import nats
import pytest

from casino.audit.audits import verify_history
from casino.cli.run import default_tables
from casino.protocol import commands
from casino.rules import wagerbook
from casino.store import subjects
from tests.e2e.casino import Casino

pytestmark = pytest.mark.anyio
TABLES = default_tables(1, ["baccarat-000-methods"])
TABLE = next(iter(TABLES))


def _slip(coup: str, *lines: tuple[int, str, int], id: str = "slip-1", player: str = "") -> commands.PlaceWagers:
    return commands.PlaceWagers(id=id, table=TABLE, coup=coup,
                                wagers=tuple(commands.SlipLine(seat, bet, amount, player) for seat, bet, amount in lines))


async def test_a_slip_is_one_append_recorded_once_and_refused_whole_where_one_wager_is(nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        await casino.start("wager")  # a second instance: a slip sent again may reach either
        opened = await casino.patiently(TABLE, "coup", commands.OpenCoup)
        assert opened.ok, opened
        coup = opened.coup
        for seat, player in ((1, "ANN"), (2, "BOB")):
            assert (await casino.patiently(TABLE, "wager", commands.Sit, coup=coup, seat=seat, player=player)).ok
        book = subjects.event(TABLE, "*", coup, "wager")
        before = await casino.store.read(book)

        over = await casino.again("wager", _slip(coup, (1, "banker", 5000), (2, "tie", 10**9), id="slip-over"))
        assert (over.ok, over.clause) == (False, "ruleset limits"), over
        assert "line 2 of the slip (seat 2 tie)" in over.reason and "no wager on the slip is placed" in over.reason
        assert await casino.store.read(book) == before  # refused: nothing recorded

        slip = _slip(coup, (1, "banker", 5000), (1, "tie", 1000), (2, "player", 10000))
        assert (await casino.again("wager", slip)).ok
        for _ in range(3):  # sent again, to whichever instance answers: recorded once
            assert (await casino.again("wager", slip)).ok
        reused = await casino.again("wager", _slip(coup, (2, "banker", 5000)))
        assert not reused.ok and reused.clause == "command id", reused
        after = (await casino.store.read(book))[len(before):]
        assert [[type(e.data) for e in m.batch.events] for m in after] == [[wagerbook.WagerPlaced] * 3]

        closed = await casino.ask(TABLE, "coup", commands.CloseBetting, coup=coup)
        assert closed.ok, closed
        settled = await casino.settled(coup)
        assert sorted((p.seat, p.bet, p.stake) for p in settled.payouts) == [
            (1, "banker", 5000), (1, "tie", 1000), (2, "player", 10000)]
        report = verify_history(await casino.store.read(f"{subjects.EVENTS}.>"))
    assert report.findings == [] and report.coups == 1, report.findings


async def test_a_slip_past_its_length_or_with_a_malformed_line_is_refused_before_any_book_is_read(
        nats_url: str) -> None:
    """A hostile terminal's slip of more than ``SLIP_MOST`` wagers, none, or a
    line with a field unknown is refused as malformed, the rule named."""
    async with Casino(nats_url, TABLES) as casino:
        opened = await casino.patiently(TABLE, "coup", commands.OpenCoup)
        nc = await nats.connect(nats_url)
        try:
            line = b'{"seat":1,"bet":"banker","amount":5000}'
            for lines in (b",".join([line] * (commands.SLIP_MOST + 1)), b"",
                          b'{"seat":1,"bet":"banker","amount":5000,"odds":9}'):
                raw = (b'{"type":"table.place_wagers","id":"x","table":"%s","coup":"%s","wagers":[%s]}'
                       % (TABLE.encode(), opened.coup.encode(), lines))
                msg = await nc.request(subjects.command(TABLE, "wager"), raw, timeout=5)
                reply = commands.reply_decoder.decode(msg.data)
                assert not reply.ok and reply.clause == "protocol", reply
        finally:
            await nc.close()
        book = await casino.store.read(subjects.event(TABLE, "*", opened.coup, "wager"))
    assert book == []  # refused, each: not even the book's opening recorded
