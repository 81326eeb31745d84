"""A hostile terminal's commands on real NATS: each is refused naming the rule
and changes nothing, and the table deals on (and no other table waits)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from nats.js.api import DiscardPolicy

from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.rules.baccarat.messages import Approval
from casino.rules.shoe import RoundEnded
from casino.store import subjects
from tests.e2e.casino import Casino

pytestmark = pytest.mark.anyio
BLACKJACK = {"BJ002-1": TableConfig("blackjack-002-hole-card"), "BJ003-1": TableConfig("blackjack-003-no-hole-card")}
BACCARAT = {"BAC000-1": TableConfig("baccarat-000-methods"), "BAC000-2": TableConfig("baccarat-000-methods")}


async def count(casino: Casino) -> int:
    return len(await casino.store.read(f"{subjects.EVENTS}.>"))


@pytest.mark.parametrize("table,clause", [("BJ002-1", "002 (4)(a)"), ("BJ003-1", "003 7.3(a)")])
async def test_002_4_a_003_7_3_a_a_close_with_no_wager_is_refused_and_leaves_betting_open(
        nats_url: str, table: str, clause: str) -> None:
    async with Casino(nats_url, BLACKJACK) as casino:
        opened = await casino.ask(table, "coup", commands.OpenCoup)
        before = await count(casino)
        for _ in range(2):  # refused, and refused again the same way: nothing has changed
            refused = await casino.ask(table, "coup", commands.CloseBetting, coup=opened.coup)
            assert (refused.ok, refused.clause) == (False, clause), refused
        assert await count(casino) == before
        placed = await casino.ask(table, "wager", commands.PlaceWager, coup=opened.coup, seat=1, bet="box", amount=1000)
        assert placed.ok, placed  # betting is still open
        closed = await casino.ask(table, "coup", commands.CloseBetting, coup=opened.coup)
        assert closed.ok and closed.waiting is not None and closed.waiting.kind != "close_betting", closed


async def test_a_command_id_used_again_for_another_command_is_refused_and_records_nothing(nats_url: str) -> None:
    async with Casino(nats_url, BACCARAT) as casino:
        opened = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_a")
        coup = opened.coup
        first = commands.PlaceWager(id="w-1", table="BAC000-1", coup=coup, seat=1, bet="banker", amount=5000)
        assert (await casino.peer.ask(subjects.command("BAC000-1", "wager"), first)).ok
        assert (await casino.peer.ask(subjects.command("BAC000-1", "wager"), first)).ok  # a retry: answered, once
        before = await count(casino)
        for other in (commands.PlaceWager(id="w-1", table="BAC000-1", coup=coup, seat=2, bet="banker", amount=5000),
                      commands.CancelWager(id="w-1", table="BAC000-1", coup=coup, seat=1, bet="banker")):
            refused = await casino.peer.ask(subjects.command("BAC000-1", "wager"), other)
            assert (refused.ok, refused.clause) == (False, "command id") and "w-1" in refused.reason, refused
        assert await count(casino) == before
        close = commands.CloseBetting(id="x-1", table="BAC000-1", coup=coup)
        assert (await casino.peer.ask(subjects.command("BAC000-1", "coup"), close)).ok
        await casino.settled(coup)  # and the round's end at the shoe, asked as the terminal is answered:
        await casino.recorded(coup, RoundEnded)  # what the close causes is all recorded
        after = await count(casino)
        other = commands.ReturnCards(id="x-1", table="BAC000-1", coup=coup, seat=1, hand="banker")
        refused = await casino.peer.ask(subjects.command("BAC000-1", "coup"), other)
        assert (refused.ok, refused.clause) == (False, "command id"), refused
        assert (await casino.peer.ask(subjects.command("BAC000-1", "coup"), close)).ok  # the retry, answered
        assert await count(casino) == after
        wagers = [e for _, e in await casino.events(subjects.coup_filter(coup)) if type(e).__name__ == "WagerPlaced"]
        assert [(w.wager.seat, w.wager.amount) for w in wagers] == [(1, 5000)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("field,value", [("coup", "*"), ("coup", ">"), ("coup", "BAC000-1.000001"),
                                         ("coup", "BAC000-1 000001"), ("table", "BAC000-1.x"), ("id", "a\r\nb")])
async def test_every_identifier_that_becomes_a_subject_token_or_a_header_is_validated(
        nats_url: str, field: str, value: str) -> None:
    async with Casino(nats_url, BACCARAT) as casino:
        opened = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_a")
        before = await count(casino)
        fields = {"id": "w-1", "table": "BAC000-1", "coup": opened.coup, "seat": 1, "bet": "banker", "amount": 5000}
        body = commands.encoder.encode({"type": "table.place_wager", **fields, field: value})
        reply = commands.reply_decoder.decode((await casino.nc.request(
            subjects.command("BAC000-1", "wager"), body, timeout=5)).data)
        assert (reply.ok, reply.clause) == (False, "protocol") and "malformed" in reply.reason, reply
        assert await count(casino) == before


ESCAPES = "\x1b[2J\x1b[HVERIFIED OK"


@pytest.mark.parametrize("service,command", [
    ("coup", {"type": "table.report_handling_breach", "seat": 1, "hand": "player", "note": ESCAPES}),
    ("coup", {"type": "table.report_handling_breach", "seat": 1, "hand": "player", "note": "ok \u202e evil"}),
    ("coup", {"type": "table.report_handling_breach", "seat": 1, "hand": "player", "note": "x" * 201}),
    ("coup", {"type": "table.forfeit_shoe", "seat": 1, "supervisor": ESCAPES}),
    ("wager", {"type": "table.place_wager", "seat": 1, "bet": ESCAPES, "amount": 5000}),
    ("wager", {"type": "table.cancel_wager", "seat": 1, "bet": "banker\r\n"}),
    ("coup", {"type": "table.open_coup", "procedure": "method_a\x1b[2J"}),
    ("coup", {"type": "table.open_coup", "approvals": [{"what": "method_b", "by": "inspector", "reference": ESCAPES}]}),
])
async def test_every_text_a_terminal_supplies_is_printable_and_bounded(
        nats_url: str, service: str, command: dict[str, object]) -> None:
    """A note, a supervisor's name, a bet, a procedure, an approval's
    reference: a control character, a bidirectional override or an overlong
    text is refused as malformed, and nothing is recorded."""
    async with Casino(nats_url, BACCARAT) as casino:
        opened = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_a")
        before = await count(casino)
        coup = {} if command["type"] == "table.open_coup" else {"coup": opened.coup}  # the next coup's to open
        body = commands.encoder.encode({"id": "t-1", "table": "BAC000-1", **coup, **command})
        reply = commands.reply_decoder.decode((await casino.nc.request(
            subjects.command("BAC000-1", service), body, timeout=5)).data)
        assert (reply.ok, reply.clause) == (False, "protocol") and "malformed" in reply.reason, reply
        assert reply.reason.isprintable(), reply.reason
        assert await count(casino) == before


async def test_an_approval_comes_from_the_casinos_configuration_never_from_a_terminal(nats_url: str) -> None:
    async with Casino(nats_url, BACCARAT) as casino:
        forged = (Approval("method_b", "inspector", "FORGED-BY-TERMINAL"),)
        refused = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_b", approvals=forged)
        assert (refused.ok, refused.clause) == (False, "approvals") and "FORGED-BY-TERMINAL" in refused.reason
        assert await count(casino) == 0


async def test_a_table_configured_with_an_unknown_ruleset_is_refused_with_the_reason(nats_url: str) -> None:
    async with Casino(nats_url, {"X-1": TableConfig("no-such-ruleset")}) as casino:
        refused = await casino.ask("X-1", "coup", commands.OpenCoup)
        assert (refused.ok, refused.clause) == (False, "ruleset") and "no-such-ruleset" in refused.reason, refused


async def test_one_terminal_flooding_its_table_is_refused_at_once_and_another_table_is_answered(
        nats_url: str, tmp_path: Path) -> None:
    async with Casino(nats_url, BACCARAT) as casino:
        opened = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_a")
        await casino.ask("BAC000-1", "wager", commands.PlaceWager, coup=opened.coup, seat=1, bet="banker", amount=5000)
        await casino.ask("BAC000-1", "coup", commands.CloseBetting, coup=opened.coup)
        # Wagers on a closed book: each refused only after the book is read again from the stream.
        flood = [commands.encoder.encode(commands.PlaceWager(id=f"f-{i}", table="BAC000-1", coup=opened.coup, seat=2,
                                               bet="player", amount=5000)) for i in range(400)]
        flooding = [asyncio.ensure_future(casino.nc.request(subjects.command("BAC000-1", "wager"), body, timeout=30))
                    for body in flood]
        waits = []
        for _ in range(10):  # the other table, meanwhile
            started = time.perf_counter()
            status = await casino.ask("BAC000-2", "coup", commands.Status)
            waits.append(time.perf_counter() - started)
            assert status.ok
        replies = [commands.reply_decoder.decode(m.data) for m in await asyncio.gather(*flooding)]
        assert not any(r.ok for r in replies)
        assert sum(r.clause == "rate limit" for r in replies) > len(flood) // 2
        assert max(waits) < 2.0, waits  # not queued behind the flood (each wager refused after a read)


async def test_a_write_the_full_store_refuses_is_answered_with_its_reason_and_nothing_is_recorded(
        nats_url: str) -> None:
    async with Casino(nats_url, BACCARAT) as casino:
        opened = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_a")
        js = casino.nc.jetstream()
        info = await js.stream_info("CASINO")
        info.config.max_bytes, info.config.discard = info.state.bytes + 64, DiscardPolicy.NEW
        await js.update_stream(info.config)  # the store full, as a node whose volume has filled
        before = await count(casino)
        refused = await casino.ask("BAC000-1", "wager", commands.PlaceWager, coup=opened.coup, seat=1, bet="banker",
                                   amount=5000)
        assert (refused.ok, refused.clause) == (False, "event store") and "nothing was recorded" in refused.reason
        assert "maximum bytes" in refused.reason, refused
        assert await count(casino) == before


@pytest.mark.parametrize("number", [5, 1])
async def test_a_round_for_a_coup_that_cannot_be_the_next_is_refused_at_the_shoe(nats_url: str, number: int) -> None:
    """Whoever holds the dealer-policy's credential asks the shoe to start a
    round for a coup that does not exist (ahead of the table) or was dealt
    already: refused, naming why, nothing recorded, and the table opens its
    next coup as ever (a round started for nothing would hold the shoe)."""
    from casino.cli.simulator import Simulator

    async with Casino(nats_url, BACCARAT) as casino:
        await Simulator(casino.nc, {"BAC000-1": BACCARAT["BAC000-1"]}, seed=1).run(2)
        before = await count(casino)
        ahead = commands.StartRound(id="forged", table="BAC000-1", coup=f"BAC000-1-{number:06d}",
                                    ruleset="baccarat-000-methods")
        refused = await casino.peer.ask(subjects.command("BAC000-1", "shoe"), ahead)
        # The next coup's round is started already, as the last one ended (docs/clauses.md): no other round is.
        why = "round BAC000-1-000003 has not ended"
        assert (refused.ok, refused.clause) == (False, "shoe") and why in refused.reason, refused
        assert await count(casino) == before
        opened = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_a")
        assert opened.ok and opened.coup == "BAC000-1-000003", opened


async def test_000_8_2_a_change_of_procedure_is_directed_on_a_supervisors_own_credential_and_records_who(
        nats_url: str) -> None:
    """The casino chooses the method (000 8.2), not the table's terminal: a
    terminal asking for another than the one in force is refused, whatever
    supervisor it names, and writes nothing; a supervisor's opening, on the
    subject only that supervisor's credential may publish on, records the
    method it replaced and that supervisor; the terminal then deals by the
    new method, and verification holds the record to all of it."""
    from casino.audit.audits import verify_history
    from casino.rules.baccarat.messages import CoupOpened

    async with Casino(nats_url, BACCARAT) as casino:
        before = await count(casino)
        for named in ("", "SUP-7"):
            refused = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_d", supervisor=named)
            assert (refused.ok, refused.clause) == (False, "000 8.2") and "supervisor" in refused.reason, refused
        assert await count(casino) == before
        directed = commands.OpenCoup(id="sup-open", table="BAC000-1", procedure="method_d", supervisor="made-up",
                                     number=1)
        first = await casino.peer.ask(subjects.supervise("BAC000-1", "SUP-7"), directed)
        assert first.ok, first
        opened = await casino.recorded(first.coup, CoupOpened)
        assert (opened.procedure, opened.in_force, opened.supervisor) == ("method_d", "method_a", "SUP-7")
        assert (await casino.ask("BAC000-1", "coup", commands.CloseBetting, coup=first.coup)).ok  # nobody wagered
        await casino.settled(first.coup)
        second = await casino.ask("BAC000-1", "coup", commands.OpenCoup)  # by the method in force
        assert second.ok, second
        opened = await casino.recorded(second.coup, CoupOpened)
        assert (opened.procedure, opened.in_force, opened.supervisor) == ("method_d", "method_d", "")
        back = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_a")  # the coup is open
        assert not back.ok
        assert (await casino.ask("BAC000-1", "coup", commands.CloseBetting, coup=second.coup)).ok
        await casino.settled(second.coup)
        report = verify_history(await casino.store.read(f"{subjects.EVENTS}.>"))
        assert report.findings == [] and report.coups == 2, report


async def test_000_8_20_a_forfeit_is_directed_on_a_supervisors_own_credential_and_records_who(nats_url: str) -> None:
    """A table's terminal asking for a forfeit is refused (000 8.20), naming
    whom it would have named; a supervisor's forfeit, on the subject only
    that supervisor's credential may publish on, is recorded with that
    supervisor's name, whatever name the command carries."""
    from casino.rules.baccarat.messages import ShoeGivenUp

    async with Casino(nats_url, BACCARAT) as casino:
        holder = None
        for n in range(40):  # Method C coups, the holder's own wager on Banker, until he keeps the shoe
            coup = (await (casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_c") if n else
                           casino.supervise("BAC000-1", commands.OpenCoup, procedure="method_c"))).coup
            await casino.ask("BAC000-1", "wager", commands.PlaceWager, coup=coup, seat=1, bet="banker", amount=5000)
            waiting = (await casino.ask("BAC000-1", "coup", commands.CloseBetting, coup=coup)).waiting
            while waiting is not None and waiting.kind != "finished":
                if waiting.kind == "answer":
                    reply = await casino.ask("BAC000-1", "coup", commands.AnswerOffer, coup=coup, seat=waiting.seat,
                                             accept=True)
                else:
                    assert waiting.kind == "expose" and waiting.hand in ("player", "banker"), waiting
                    reply = await casino.ask("BAC000-1", "coup", commands.ExposeHand, coup=coup, seat=waiting.seat,
                                             hand=waiting.hand)
                waiting = reply.waiting
            await casino.settled(coup)
            if waiting is not None and (holder := waiting.shoe_holder) is not None:
                break
        assert holder == 1
        opened = await casino.ask("BAC000-1", "coup", commands.OpenCoup, procedure="method_c")
        assert opened.ok, opened
        before = await count(casino)
        for supervisor in ("", "SUP-7"):
            refused = await casino.ask("BAC000-1", "coup", commands.ForfeitShoe, coup=opened.coup, seat=holder,
                                       supervisor=supervisor)
            assert (refused.ok, refused.clause) == (False, "000 8.20") and "supervisor" in refused.reason, refused
        assert await count(casino) == before
        forfeit = commands.ForfeitShoe(id="sup-1", table="BAC000-1", coup=opened.coup, seat=holder, supervisor="made-up")
        directed = await casino.peer.ask(subjects.supervise("BAC000-1", "SUP-7"), forfeit)
        assert directed.ok, directed
        given = await casino.recorded(opened.coup, ShoeGivenUp)
        assert (given.reason, given.clause, given.supervisor) == ("forfeited", "000 8.20", "SUP-7")
