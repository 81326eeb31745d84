"""The command interface on real NATS: bad input is refused with the rule that
refuses it and writes nothing; a retried command is applied once; the services
rebuild from the stream after a restart and carry on."""

from __future__ import annotations

import msgspec
import nats
import pytest

from casino.audit.audits import verify_history
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules import wagerbook
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.shoe import RoundEnded
from casino.store import envelope, subjects
from casino.store.envelope import OPENINGS_KEPT, CoupConfigured
from casino.store.eventstore import Stored
from tests.e2e.casino import SUPERVISOR, Casino, order_of
from tests.e2e.test_golden_coups import TABLES
from tests.rules.stacking import baccarat, blackjack, burn_cards, order

pytestmark = pytest.mark.anyio
BAC = baccarat("baccarat-000-methods")
BJ = blackjack("blackjack-002-hole-card")
SHOES = {"BAC000": [order_of(order(8, ["2S", "3H", "4D", "5C"], burn_cards(BAC.shoe)))],
         "BJ002": [order_of(order(6, ["TS", "9S", "5S", "6D", "8H", "7H", "6C", "6H"], burn_cards(BJ.shoe)))]}


async def count(casino: Casino) -> int:
    return len(await casino.store.read(f"{subjects.EVENTS}.>"))


@pytest.mark.parametrize("service", ["coup", "wager", "shoe"])
@pytest.mark.parametrize("payload,why", [(b"\x00\xff not json", "malformed"), (b'{"type": "table.steal_chips"}', "unknown"),
                                         (b'{"type": "table.open_coup", "table": "BAC000"}', "malformed")])
async def test_malformed_or_unknown_commands_are_refused_and_write_nothing(
    nats_url: str, service: str, payload: bytes, why: str
) -> None:
    async with Casino(nats_url, TABLES, SHOES) as casino:
        msg = await casino.nc.request(subjects.command("BAC000", service), payload, timeout=5)
        reply = commands.reply_decoder.decode(msg.data)
        assert (reply.ok, reply.clause) == (False, "protocol") and why in reply.reason
        assert await count(casino) == 0


async def test_wagers_out_of_limits_after_the_close_or_on_no_seat_are_refused_with_the_rule(nats_url: str) -> None:
    async with Casino(nats_url, TABLES, SHOES) as casino:
        coup = (await casino.ask("BAC000", "coup", commands.OpenCoup, procedure="method_a")).coup
        before = await count(casino)
        for seat, bet, amount, clause in [(2, "banker", 10, "ruleset limits"), (2, "banker", 10**9, "ruleset limits"),
                                          (2, "banker", -5, "ruleset limits"), (4, "banker", 5000, "ruleset seats"),
                                          (2, "dragon", 5000, "ruleset limits")]:
            reply = await casino.ask("BAC000", "wager", commands.PlaceWager, coup=coup, seat=seat, bet=bet, amount=amount)
            assert (reply.ok, reply.clause) == (False, clause), reply
        assert await count(casino) == before
        assert (await casino.ask("BAC000", "wager", commands.PlaceWager, coup=coup, seat=2, bet="banker", amount=5000)).ok
        assert (await casino.ask("BAC000", "coup", commands.CloseBetting, coup=coup)).ok
        late = await casino.ask("BAC000", "wager", commands.PlaceWager, coup=coup, seat=3, bet="player", amount=5000)
        assert (late.ok, late.clause, late.reason) == (False, "wager book", "betting is closed for this coup")
        busy = await casino.ask("BAC000", "coup", commands.OpenCoup, procedure="method_a")
        assert busy.ok  # the coup finished (Method A needs no answers), so the next may open


async def test_out_of_turn_and_second_answers_are_refused_and_a_retry_is_applied_once(nats_url: str) -> None:
    async with Casino(nats_url, TABLES, SHOES) as casino:
        coup = (await casino.supervise("BAC000", commands.OpenCoup, procedure="method_d")).coup
        for seat in (2, 3):
            await casino.ask("BAC000", "wager", commands.PlaceWager, coup=coup, seat=seat, bet="banker", amount=5000)
        waiting = (await casino.ask("BAC000", "coup", commands.CloseBetting, coup=coup)).waiting
        assert waiting is not None and (waiting.kind, waiting.seat, waiting.offer) == ("answer", 2, "shoe")
        wrong = await casino.ask("BAC000", "coup", commands.AnswerOffer, coup=coup, seat=3, accept=True)
        assert (wrong.ok, wrong.clause) == (False, "000 8.25")
        refuse = commands.AnswerOffer(id="terminal-7", table="BAC000", coup=coup, seat=2, accept=False)
        first = await casino.peer.ask(subjects.command("BAC000", "coup"), refuse)
        before = await count(casino)
        again = await casino.peer.ask(subjects.command("BAC000", "coup"), refuse)  # the same command, retried
        assert first == again and await count(casino) == before
        other = await casino.ask("BAC000", "coup", commands.AnswerOffer, coup=coup, seat=2, accept=True)
        assert (other.ok, other.clause) == (False, "000 8.25")  # a second answer to an offer already answered
        busy = await casino.ask("BAC000", "coup", commands.OpenCoup)
        assert (busy.ok, busy.clause) == (False, "coup")


async def test_an_opening_asked_again_is_answered_with_the_coup_it_opened_even_once_that_coup_is_dealt(
        nats_url: str) -> None:
    """A terminal asks its opening again (refused for a moment, or its answer lost) while another
    terminal deals the coup it opened to its end: answered with that coup, never by opening the next."""
    async with Casino(nats_url, TABLES, SHOES) as casino:
        opening = commands.OpenCoup(id="terminal-open-1", table="BAC000", number=1)
        first = await casino.peer.ask(subjects.command("BAC000", "coup"), opening)
        assert first.ok and first.coup == "BAC000-000001", first
        await casino.ask("BAC000", "wager", commands.PlaceWager, coup=first.coup, seat=2, bet="banker", amount=5000)
        dealt = await casino.ask("BAC000", "coup", commands.CloseBetting, coup=first.coup)  # the other terminal
        assert dealt.waiting is not None and dealt.waiting.kind == "finished", dealt
        again = await casino.peer.ask(subjects.command("BAC000", "coup"), opening)
        assert (again.ok, again.coup) == (True, first.coup) and again.waiting == dealt.waiting, again
        assert await casino.store.read(subjects.event("BAC000", "*", "BAC000-000002", "coup")) == []  # none opened
        assert (await casino.ask("BAC000", "coup", commands.OpenCoup)).coup == "BAC000-000002"


async def deal_method_a(casino: Casino, table: str, opening: commands.OpenCoup | None = None) -> str:
    """One Method A coup dealt to its end (opened by ``opening`` where given): its id."""
    reply = await (casino.peer.ask(subjects.command(table, "coup"), opening) if opening is not None
                   else casino.ask(table, "coup", commands.OpenCoup))
    assert reply.ok, reply
    await casino.ask(table, "wager", commands.PlaceWager, coup=reply.coup, seat=2, bet="banker", amount=5000)
    dealt = await casino.ask(table, "coup", commands.CloseBetting, coup=reply.coup)
    assert dealt.waiting is not None and dealt.waiting.kind == "finished", dealt
    return reply.coup


async def test_an_opening_asked_again_once_later_coups_have_opened_is_refused_naming_the_coup_it_opened(
        nats_url: str) -> None:
    """A command id is applied once, whenever it is asked again: an opening
    asked after later coups have opened is refused naming the coup it opened
    and writes nothing, from the table's record (each coup's record names
    the openings before it), after a restart too; an opening names the
    number of the coup it opens, and is refused whenever the table is past
    that number (beyond the openings a record names, minutes later), before
    anything is written; one that names no number is refused in one line,
    naming the table's next."""
    table = "BAC-1"
    async with Casino(nats_url, {table: TableConfig("baccarat-000-methods")}) as casino:
        nameless = await casino.peer.ask(subjects.command(table, "coup"),
                                         commands.OpenCoup(id="terminal-open-0", table=table))
        assert (nameless.ok, nameless.clause) == (False, "protocol") and "next is 1" in nameless.reason, nameless
        opening = commands.OpenCoup(id="terminal-open-A", table=table, number=1)
        assert await deal_method_a(casino, table, opening) == f"{table}-000001"
        numbered = commands.OpenCoup(id="terminal-open-B", table=table, number=2)
        second = await deal_method_a(casino, table, numbered)
        assert second == f"{table}-000002"
        await casino.settled(second)  # and its round's end at the shoe, asked as the terminal is answered:
        await casino.recorded(second, RoundEnded)  # all the second coup causes is recorded
        before = await count(casino)
        for restarted in (False, True):
            if restarted:  # nothing held in memory: the refusal comes from the record
                await casino.stop("dealer-policy")
                await casino.start("dealer-policy")
            again = await casino.peer.ask(subjects.command(table, "coup"), opening)
            assert (again.ok, again.clause) == (False, "command id") and f"{table}-000001" in again.reason, again
        assert await count(casino) == before  # nothing written, no coup opened
        assert await casino.store.read(subjects.coup_filter(f"{table}-000003", table)) == []
        for _ in range(OPENINGS_KEPT):
            await deal_method_a(casino, table)
        again = await casino.peer.ask(subjects.command(table, "coup"), opening)
        assert (again.ok, again.clause) == (False, "coup") and "opens coup number 1" in again.reason, again
        before = await count(casino)
        again = await casino.peer.ask(subjects.command(table, "coup"), numbered)  # named: refused whenever
        assert (again.ok, again.clause) == (False, "coup") and "opens coup number 2" in again.reason, again
        ahead = await casino.peer.ask(subjects.command(table, "coup"), commands.OpenCoup(
            id="terminal-open-C", table=table, number=OPENINGS_KEPT + 9))
        assert (ahead.ok, ahead.clause) == (False, "coup") and f"next is {OPENINGS_KEPT + 3}" in ahead.reason, ahead
        assert await count(casino) == before
        assert (await casino.ask(table, "coup", commands.OpenCoup)).coup == f"{table}-{OPENINGS_KEPT + 3:06d}"
        history = await casino.store.read(subjects.table_filter(table))
    report = verify_history(history)
    assert report.findings == [] and report.coups == OPENINGS_KEPT + 2, report


async def first_decision(casino: Casino) -> tuple[str, commands.Waiting]:
    """A blackjack coup with boxes 1, 3 and 5, dealt up to its first decision (box 1's)."""
    coup = (await casino.ask("BJ002", "coup", commands.OpenCoup)).coup
    for seat in (1, 3, 5):
        await casino.ask("BJ002", "wager", commands.PlaceWager, coup=coup, seat=seat, bet="box", amount=2000)
    waiting = (await casino.ask("BJ002", "coup", commands.CloseBetting, coup=coup)).waiting
    assert waiting is not None and (waiting.kind, waiting.seat) == ("decision", 1)
    return coup, waiting


async def test_a_decision_out_of_turn_is_refused_naming_the_clause(nats_url: str) -> None:
    async with Casino(nats_url, TABLES, SHOES) as casino:
        coup, waiting = await first_decision(casino)
        assert waiting.cards == ("TS", "8H") and waiting.dealer == ("6D",) and "split" not in waiting.options
        reply = await casino.ask("BJ002", "coup", commands.Decide, coup=coup, seat=3, hand=0, action="hit")
        assert (reply.ok, reply.clause) == (False, "002 (5)")


async def test_after_a_restart_the_services_rebuild_from_the_stream_and_finish_the_coup(nats_url: str) -> None:
    async with Casino(nats_url, TABLES, SHOES) as casino:
        coup = (await casino.supervise("BAC000", commands.OpenCoup, procedure="method_c")).coup
        await casino.ask("BAC000", "wager", commands.PlaceWager, coup=coup, seat=2, bet="banker", amount=5000)
        waiting = (await casino.ask("BAC000", "coup", commands.CloseBetting, coup=coup)).waiting
        assert waiting is not None and waiting.kind == "answer"
    async with Casino(nats_url, TABLES, {}) as casino:  # four new processes' worth of state, from the stream
        status = await casino.ask("BAC000", "coup", commands.Status)
        assert status.coup == coup and status.waiting is not None and status.waiting.kind == "answer"
        reply = await casino.ask("BAC000", "coup", commands.AnswerOffer, coup=coup, seat=2, accept=True)
        while reply.waiting is not None and reply.waiting.kind == "expose":
            reply = await casino.ask("BAC000", "coup", commands.ExposeHand, coup=coup, seat=2, hand=reply.waiting.hand)
        assert reply.ok and reply.waiting is not None and reply.waiting.kind == "finished"
        settled = await casino.settled(coup)
        assert [p.returned for p in settled.payouts] == [5000 + 4750]  # Banker 8 beats Player 6
        assert reply.waiting.shoe_holder == 2  # 000 8.18: his wager won, he keeps the shoe
        refused = await casino.supervise("BAC000", commands.OpenCoup, procedure="method_a")
        assert (refused.ok, refused.clause) == (False, "000 8.18")
        assert (await casino.ask("BAC000", "coup", commands.OpenCoup, procedure="method_c")).coup == "BAC000-000002"


async def test_no_responders_when_no_service_runs(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    with pytest.raises(nats.errors.NoRespondersError):
        await nc.request(subjects.command("BAC000", "coup"), b"{}", timeout=1)
    await nc.close()


async def test_two_instances_of_every_service_deal_the_golden_coup(nats_url: str) -> None:
    from casino.audit.verify import verify_coup
    from casino.rules import play
    from casino.rules.baccarat import messages as baccarat_messages
    from tests.e2e.test_golden_coups import drive, recorded, with_next_round
    from tests.rules.stacking import Scripted

    book = (baccarat_messages.Wager(2, "banker", 5000), baccarat_messages.Wager(3, "player", 5000), baccarat_messages.Wager(5, "banker", 7500))
    players = Scripted({("shoe", 5): False})
    async with Casino(nats_url, TABLES, SHOES) as one, Casino(nats_url, TABLES, SHOES):
        coups = [await drive(one, "BAC000", "method_d", book, players, directed=not i) for i in range(8)]
        got = [await recorded(one, "BAC000", coup) for coup in coups]
        stored = {coup: await one.store.read(subjects.coup_filter(coup)) for coup in coups}
    golden_shoe = play.Shoe(BAC.shoe, list(SHOES["BAC000"]), prefix="BAC000-shoe-")
    for coup, (coup_events, _, settled) in zip(coups, got, strict=True):
        opening = baccarat_messages.OpenCoup(coup, "method_d", TABLES["BAC000"].approvals, in_force="method_a"
                                             if coup == coups[0] else "method_d", supervisor=SUPERVISOR if coup == coups[0] else "")
        golden = play.play_baccarat(BAC, golden_shoe, opening, book, Scripted({("shoe", 5): False}))
        assert coup_events == golden.events
        assert settled.payouts == golden.payouts  # type: ignore[attr-defined]
    assert got[-1][1] == with_next_round(golden_shoe.events, "BAC000", coups[-1])
    for coup in coups:  # none handled twice, none lost, every one verifiable
        assert verify_coup(stored[coup]) == []
        events = [e.data for m in stored[coup] for e in m.batch.events]
        assert sum(type(e).__name__ == "CoupSettled" for e in events) == 1
        assert sum(type(e).__name__ == "CoupResulted" for e in events) == 1


async def test_the_next_coups_round_starts_as_the_last_ends_and_its_opening_asks_the_shoe_nothing(
        nats_url: str) -> None:
    """Opening a coup takes one request and one synced append fewer: the shoe
    starts the next coup's round in the same message that ends the last one's
    (docs/clauses.md, "The next round"), and the opening deals from it."""
    from casino.audit.audits import verify_history
    from casino.rules.baccarat import messages as baccarat_messages
    from casino.rules.shoe import CardDrawn, RoundEnded, RoundStarted, ShoeEvent
    from casino.store.envelope import CoupConfigured
    from tests.e2e.test_golden_coups import drive
    from tests.rules.stacking import Scripted

    book = (baccarat_messages.Wager(2, "banker", 5000),)
    async with Casino(nats_url, TABLES, SHOES) as casino:
        first = await drive(casino, "BAC000", "method_a", book, Scripted({}))
        await casino.recorded(first, RoundEnded)
        (ending,) = [m for m in await casino.store.read(subjects.coup_filter(first))
                     if any(isinstance(e.data, RoundEnded) for e in m.batch.events)]
        second = f"BAC000-{(subjects.coup_number(first) or 0) + 1:06d}"
        # Method A's run drew the coup's last cards, and ended its round in the same message: the coup's, which
        # carries the shoe's record of them with the cards dealt.
        assert ending.subject.endswith(".coup")
        kinds = [type(e.data) for e in ending.batch.events if isinstance(e.data, ShoeEvent)]
        assert kinds[-2:] == [RoundEnded, RoundStarted] and set(kinds[:-2]) == {CardDrawn}, kinds
        assert [e.data.coup_id for e in ending.batch.events if isinstance(e.data, RoundStarted)] == [second]

        def asked() -> float:
            return casino.service("shoe").metrics.registry.get_sample_value(
                "casino_command_seconds_count", {"service": "shoe"}) or 0.0

        before = asked()
        opened = await casino.ask("BAC000", "coup", commands.OpenCoup, procedure="method_a")
        assert opened.ok and opened.coup == second and opened.shoe == subjects.tokens(ending.subject)[1]
        assert asked() == before  # the opening asked the shoe nothing
        configured = [e for _, e in await casino.events(subjects.coup_filter(second)) if isinstance(e, CoupConfigured)]
        assert len(configured) == 1
        await casino.ask("BAC000", "wager", commands.PlaceWager, coup=second, seat=2, bet="banker", amount=5000)
        assert (await casino.ask("BAC000", "coup", commands.CloseBetting, coup=second)).ok
        await casino.settled(second)
        report = verify_history(await casino.store.read(f"{subjects.EVENTS}.>"))
    assert report.findings == [] and report.coups == 2, report


async def test_a_dealers_step_left_half_taken_is_taken_once_a_status_finds_it(nats_url: str) -> None:
    """A choice is recorded with its card: with the shoe away a hit and a
    double are refused, and nothing is recorded. A double whose dealer's
    cards settle the coup is recorded with its card, then its extra stake
    booked, then the dealer's cards and the result: the wager book holds
    every stake before the result. With the wager book away the booking
    fails, and the coup waits on the dealer's own step, which no player's
    command will take (a table that moved between instances as it stepped is
    left the same way). A terminal's look at the table (a status) has the
    dealer-policy take it as soon as the book answers."""
    async with Casino(nats_url, TABLES, SHOES) as casino:
        coup, _ = await first_decision(casino)
        dealer = casino.service("dealer-policy").service
        patient, dealer.peer = dealer.peer, Peer(casino.nc, timeout=1, attempts=2)  # the others asked briefly
        await casino.stop("shoe")
        before = await casino.store.read(subjects.coup_filter(coup))
        for action in ("hit", "double"):
            refused = await casino.ask("BJ002", "coup", commands.Decide, coup=coup, seat=1, hand=0, action=action)
            assert not refused.ok and await casino.store.read(subjects.coup_filter(coup)) == before, (action, refused)
        await casino.start("shoe")
        for seat in (1, 3):
            assert (await casino.ask("BJ002", "coup", commands.Decide, coup=coup, seat=seat, hand=0,
                                     action="stand")).ok
        await casino.stop("wager")
        double = await casino.ask("BJ002", "coup", commands.Decide, coup=coup, seat=5, hand=0, action="double")
        assert not double.ok and double.clause != "protocol", double  # recorded, its stake not booked
        last = (await casino.store.read(subjects.coup_filter(coup)))[-1]
        recorded = [type(e.data) for e in last.batch.events]
        assert recorded[0] is blackjack_messages.DecisionTaken and blackjack_messages.CardDealt in recorded
        assert blackjack_messages.CoupResulted not in recorded
        status = await casino.ask("BJ002", "coup", commands.Status)
        assert status.waiting is not None and (status.waiting.kind, status.waiting.seat) == ("card", None)
        dealer.peer = patient
        await casino.start("wager")
        await casino.ask("BJ002", "coup", commands.Status)
        await casino.settled(coup)
        history = await casino.store.read(f"{subjects.EVENTS}.>")
        seq_of = {type(e.data): m.seq for m in history for e in m.batch.events if subjects.tokens(m.subject)[2] == coup}
        assert seq_of[wagerbook.ExtraPlaced] < seq_of[blackjack_messages.CoupResulted]
        report = verify_history(history)
        assert report.findings == [], report


async def test_a_direction_from_a_supervisor_not_on_the_casinos_roster_is_refused_and_the_roster_is_recorded(
        nats_url: str) -> None:
    """The tables file's roster is each table's: a name not on it directs
    nothing there (refused, clause ``roster``, nothing written), and every
    coup records the roster it was opened under."""
    on_roster = {"BAC-1": TableConfig("baccarat-000-methods", supervisors=(SUPERVISOR,)),
                 "BAC-2": TableConfig("baccarat-000-methods", supervisors=("SUP-9",))}
    async with Casino(nats_url, on_roster) as casino:
        before = await count(casino)
        refused = await casino.supervise("BAC-2", commands.OpenCoup, procedure="method_a")
        assert (refused.ok, refused.clause) == (False, "roster") and "SUP-9" in refused.reason, refused
        assert await count(casino) == before
        opened = await casino.supervise("BAC-1", commands.OpenCoup, procedure="method_a")
        assert opened.ok, opened
        configured = await casino.recorded(opened.coup, CoupConfigured)
        assert configured.supervisors == (SUPERVISOR,)


async def test_every_coup_records_who_dealt_it_and_a_change_of_dealer(nats_url: str) -> None:
    """A dealer signs in at the table's terminal, which names them with each
    opening: the coup records who dealt it and who dealt the coup before, so
    that a change of dealer is in the record; an opening naming nobody is
    dealt by the dealer signed in, after a restart too; verification holds
    each coup to the one before."""
    table = "BAC-1"
    async with Casino(nats_url, {table: TableConfig("baccarat-000-methods")}) as casino:
        dealt = []
        for n, dealer in enumerate(("D-ANN", "D-ANN", "D-BOB", ""), start=1):
            if n == 4:
                await casino.stop("dealer-policy")
                await casino.start("dealer-policy")
            coup = await deal_method_a(casino, table, commands.OpenCoup(id=f"dealt-{n}", table=table, dealer=dealer,
                                                                          number=n))
            configured = await casino.recorded(coup, CoupConfigured)
            dealt.append((configured.dealer, configured.dealer_before))
        assert dealt == [("D-ANN", ""), ("D-ANN", "D-ANN"), ("D-BOB", "D-ANN"), ("D-BOB", "D-BOB")]
        await casino.settled(f"{table}-000004")
        history = await casino.store.read(subjects.table_filter(table))
    assert verify_history(history).findings == []
    forged = [Stored(m.seq, m.subject, envelope.Batch(tuple(
        msgspec.structs.replace(e, data=msgspec.structs.replace(e.data, dealer_before="D-EVE"))
        if isinstance(e.data, CoupConfigured) and e.data.coup_number == 3 else e for e in m.batch.events)), m.msg_id)
        for m in history]
    findings = verify_history(forged).findings
    assert [f.coup for f in findings] == [f"{table}-000003"] and "D-EVE" in findings[0].what, findings
