"""A card-reading table that no device, retry or fault can fool (docs/readers.md),
each attack replayed with the device's own credential on a secured casino: a
report sent again late, cards between coups, an order at a hand-shuffled
table, an order replaced, a shoe that has left its order, the cut card out
of place or missed, a card during betting, a second incident on a held coup.
Every card out of the shoe is accounted for, each incident is ruled by a
supervisor, the table never stalls for good, and the record verifies."""

from __future__ import annotations

from pathlib import Path

import pytest

from casino.protocol import commands
from casino.rules import incidents, shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.cards import DECK
from casino.rules.incidents import CardIncident, CoupRuled
from casino.rules.settlement import CoupSettled
from casino.store import subjects
from casino.store.envelope import CoupConfigured, CoupHeld
from tests.security.hostile_devices import SUPERVISOR, Table, read_table
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
BLACKJACK = "blackjack-002-hole-card"


def other_than(*cards: str) -> str:
    return next(c for c in DECK if c not in cards)


async def test_a_report_sent_again_after_the_next_coup_opened_is_answered_as_taken_and_deals_nothing(
        tmp_path: Path) -> None:
    """An honest shoe whose reply was lost sends its report again, with its
    id, once the next coup is open and waits for a card, and again between
    coups: it is answered with what it was taken as (the coup it was dealt
    in, the card, its position), nothing is dealt or recorded, and the table
    deals its next coups as if it had never come."""
    async with read_table(tmp_path, "RJ-1", BLACKJACK) as table:
        first = await table.open()
        closed = await table.bet_and_close(first)
        card = table.devices.cards.pop(0)
        taken = await table.report(card, "lost-reply-1")
        assert taken.ok and taken.cards == (card,) and taken.coup == first, taken
        await table.deal_out(first, taken)
        assert closed.ok
        between = await table.report(card, "lost-reply-1")  # between coups
        assert (between.ok, between.coup, between.cards, between.incident) == (True, first, (card,), ""), between
        second = await table.open()
        while_betting = await table.report(card, "lost-reply-1")
        assert (while_betting.ok, while_betting.coup, while_betting.cards) == (True, first, (card,)), while_betting
        waiting = await table.bet_and_close(second)
        assert waiting.waiting is not None and waiting.waiting.kind == "read", waiting
        again = await table.report(card, "lost-reply-1")
        assert (again.ok, again.coup, again.cards, again.positions) == (True, first, (card,), taken.positions), again
        assert again.waiting is not None and again.waiting.kind == "read"  # coup 2 still waits for its first card
        dealt = [e for e in await table.events(subjects.coup_filter(second, table.name))
                 if isinstance(e, blackjack_messages.CardDealt)]
        assert dealt == []
        await table.deal_out(second, again)
        await table.recorded(second, CoupSettled)
        assert (await table.ask(commands.Status)).ok
        third = await table.deal_coup()  # the table deals on: no opening refused, no round left unended
        drawn = [e for e in await table.events() if isinstance(e, shoe.CardDrawn)]
        assert [e.read for e in drawn].count("lost-reply-1") == 1
        report = await table.verified()
        assert report.findings == [] and report.coups == 3, report.findings
        assert third.endswith("-000003")


async def test_cards_out_between_coups_are_each_an_incident_that_holds_the_next_opening_until_ruled(
        tmp_path: Path) -> None:
    """Between coups the card-reading shoe reports the order's next card (a
    misdraw: it was not due) and two that are not (refused): each is an
    incident, counted for surveillance, recorded in the next coup's record
    before its opening, and the opening waits until a supervisor has ruled
    on each in turn. A reader that knows the order cannot discard the cards
    that set up the next coup without a supervisor's word on every one."""
    async with read_table(tmp_path, "RJ-2", BLACKJACK) as table:
        first = await table.deal_coup()
        nxt = table.devices.cards.pop(0)
        misdrawn = await table.report(nxt, "between-1")
        assert misdrawn.ok and misdrawn.incident == "misdrawn" and misdrawn.waiting is not None, misdrawn
        assert (misdrawn.waiting.kind, misdrawn.waiting.incident) == ("ruling", "misdrawn")
        second = subjects.coup_filter(f"{table.name}-000002", table.name)
        for n, card in enumerate((other_than(table.devices.cards[0]), other_than(table.devices.cards[0], "AS"))):
            refused = await table.report(card, f"between-refused-{n}")
            assert refused.ok and refused.incident == "refused", refused
        assert table.incidents("misdrawn") == 1 and table.incidents("refused") == 2
        held = await table.ask(commands.OpenCoup)
        assert (held.ok, held.clause) == (False, commands.HELD) and "between-1" in held.reason, held
        status = await table.ask(commands.Status)
        assert status.coup == first and status.waiting is not None, status  # the latest coup; held before the next
        assert (status.waiting.kind, status.waiting.incident, status.waiting.house_rule) == ("ruling", "misdrawn", "go_on")
        wrong = await table.supervise(commands.Rule, coup=status.coup, ruling="go_on", read="between-refused-0")
        assert (wrong.ok, wrong.clause) == (False, incidents.IN_TURN) and "each incident is ruled in turn" in wrong.reason
        void = await table.supervise(commands.Rule, coup=status.coup, ruling="void")
        assert (void.ok, void.clause) == (False, "setting shoe.misdraw"), void
        for read in ("between-1", "between-refused-0", "between-refused-1"):
            ruled = await table.supervise(commands.Rule, coup=status.coup, ruling="go_on", read=read)
            assert ruled.ok, (read, ruled)
        recorded = [e for e in await table.events(second) if isinstance(e, CardIncident)]
        assert [(i.kind, i.coup, i.house_rule) for i in recorded] == [
            ("misdrawn", "", "go_on"), ("refused", "", "go_on"), ("refused", "", "go_on")]
        coup = await table.open()
        assert coup == f"{table.name}-000002"
        # The card misdrawn left the shoe in its order; the two refused did not: coup 2 deals from the next.
        await table.deal_out(coup, await table.bet_and_close(coup))
        await table.recorded(coup, CoupSettled)
        record = [e for e in await table.events(second)]
        assert isinstance(record[0], CardIncident | shoe.CardMisdrawn)  # filed before the coup's opening
        assert [type(e).__name__ for e in record].index("CoupConfigured") > 5
        report = await table.verified()
        assert report.findings == [] and report.coups == 2, report.findings
        assert first.endswith("-000001")


async def test_a_hand_shuffled_table_takes_no_order_and_a_machines_order_is_replaced_only_before_its_first_card(
        tmp_path: Path) -> None:
    """At a table shuffled by hand, an order from the machine's credential is
    refused and binds nothing: the physical cards deal on. At a recognised
    table, an order may be replaced until the shoe's first card is drawn,
    each replacement recorded (``shoe.order_replaced``) and counted for
    surveillance; the shoe deals the order kept last, and a forged order
    first is put right by the real machine's."""
    full = sorted(DECK * 6)
    async with read_table(tmp_path / "hand", "RJ-3", BLACKJACK, shuffle="hand") as table:
        await table.deal_coup()
        forged = await table.order(full)
        assert (forged.ok, forged.clause) == (False, commands.SHUFFLING_MACHINE) and "by hand" in forged.reason
        await table.deal_coup()
        assert not [e for e in await table.events() if isinstance(e, shoe.CardRefused)]
        assert (await table.verified()).findings == []
    async with read_table(tmp_path / "recognised", "RJ-4", BLACKJACK) as table:
        opened = await table.ask(commands.OpenCoup)
        assert opened.clause == commands.SHUFFLING_MACHINE, opened
        assert (await table.order(full, "forged-1")).ok
        await table.devices.shuffle()  # the real machine, after: its order replaces the forged one
        events = await table.events()
        replaced = [e for e in events if isinstance(e, shoe.OrderReplaced)]
        ended = [e for e in events if isinstance(e, shoe.ShoeEnded)]
        assert len(replaced) == 1 and [e.order for e in ended] == [tuple(full)]  # the forged one revealed, unplayed
        assert table.counted("casino_shuffler_orders_replaced_total", "shoe", table=table.name) == 1
        await table.deal_coup()  # dealt from the machine's order: no card refused
        assert not [e for e in await table.events() if isinstance(e, shoe.CardRefused)]
        later = await table.order(full, "next-shoe")
        assert (later.ok, later.shoe, later.incident) == (True, f"{table.name}-shoe-3", "")  # the next shoe's order
        assert (await table.verified()).findings == []


async def _three_voids(table: Table) -> list[str]:
    """Cards that are not the committed order's next, one a coup: the house
    rule voids the first two coups, and the third is held for ``end_shoe``
    (the table's third void in a row), which the supervisor rules: the shoe
    is ended, its order revealed, and the floor told the table waits for its
    machine's order."""
    voided = []
    for n in range(3):
        coup = await table.open()
        closed = await table.bet_and_close(coup)
        assert closed.waiting is not None and closed.waiting.kind == "read", closed
        refused = await table.report(other_than(table.devices.cards[0]))
        assert refused.waiting is not None and refused.waiting.kind == "ruling", refused
        expected = "end_shoe" if n == 2 else "void"
        assert refused.waiting.house_rule == expected, (n, refused)
        ruled = await table.supervise(commands.Rule, coup=coup, ruling=expected)
        assert ruled.ok, ruled
        voided.append(coup)
    assert ruled.waiting is not None and ruled.waiting.kind == "shuffle", ruled  # the floor is told so
    settled = [await table.recorded(c, CoupSettled) for c in voided]
    assert all(s.staked == s.returned == 1000 for s in settled)
    assert table.counted("casino_reshuffles_total", "shoe", table=table.name, reason="setting shoe.refused") == 1
    await table.devices.shuffle()  # the cards out of the shoe, shuffled again, and the new order reported
    return voided


async def test_a_shoe_that_leaves_its_order_is_ended_and_the_next_that_does_too_closes_the_table_until_reopened(
        tmp_path: Path) -> None:
    """Three coups voided in a row end the shoe. The next shoe's burn cards
    reported three times in a row as cards it cannot have given would end a
    second shoe in a row: the table is closed instead (``setting
    shoe.end_shoe_after``), paging surveillance; it takes no ruling, opening
    or report (each counted, once) until a supervisor reopens it on their own
    credential, which the record names with the count. The table then deals
    on from a third shoe, its voids counted from none, and the record verifies."""
    async with read_table(tmp_path, "RJ-5", BLACKJACK) as table:
        await _three_voids(table)
        for n in range(3):  # the new shoe's burn card: three cards reported that are not it
            refused = await table.report(other_than(table.devices.cards[0]), f"burn-{n}")
            assert refused.incident == "refused" and refused.house_rule == ("end_shoe" if n == 2 else "go_on"), refused
        assert refused.waiting is not None and refused.waiting.kind == "closed", refused
        assert refused.waiting.reason is not None and f"{table.name}-shoe-1" in refused.waiting.reason
        status = await table.ask(commands.Status)
        assert status.waiting == refused.waiting, status
        assert table.counted("casino_table_closed", "dealer-policy", table=table.name) == 1
        assert table.counted("casino_tables_closed_total", "dealer-policy", table=table.name,
                             clause="setting shoe.end_shoe_after") == 1
        ruled = await table.supervise(commands.Rule, coup=f"{table.name}-000004", ruling="go_on", read="burn-0")
        opened = await table.ask(commands.OpenCoup)
        assert [(r.ok, r.clause) for r in (ruled, opened)] == [(False, incidents.CLOSED)] * 2, (ruled, opened)
        for _ in range(2):  # a report while closed, sent twice: counted once, taken never
            flood = await table.report(table.devices.cards[0], "while-closed")
            assert (flood.ok, flood.clause) == (False, incidents.CLOSED) and "counted" in flood.reason, flood
        from_terminal = await table.ask(commands.ReopenTable)
        assert (from_terminal.ok, from_terminal.clause) == (False, "protocol"), from_terminal
        reopened = await table.supervise(commands.ReopenTable)
        assert reopened.ok and reopened.waiting is not None and reopened.waiting.kind == "shuffle", reopened
        assert [e.shoe_id for e in await table.events() if isinstance(e, shoe.ShoeEnded)] == [
            f"{table.name}-shoe-1", f"{table.name}-shoe-2"]
        await table.devices.shuffle()
        fourth = await table.deal_coup()
        assert (await table.recorded(fourth, CoupConfigured)).voids_before == 0
        events = await table.events()
        closing = [e for e in events if isinstance(e, incidents.TableClosed)]
        assert [(e.coup, e.shoe, e.awaiting, e.ruled_ended) for e in closing] == [
            ("", f"{table.name}-shoe-2", 3, f"{table.name}-shoe-1")]
        assert [(e.supervisor, e.reported) for e in events if isinstance(e, incidents.TableReopened)] == [
            (SUPERVISOR, 1)]
        assert not [e for e in events if isinstance(e, shoe.CardBurned | shoe.CardMisdrawn) and e.read == "while-closed"]
        report = await table.verified()
        assert report.findings == [] and report.coups == 4, report.findings


async def test_no_table_voids_more_than_three_coups_in_a_row_across_shoes(tmp_path: Path) -> None:
    """Three coups voided in a row end the shoe; the first coup on the next
    shoe names the three before it. A card in it that the shoe cannot have
    given would void a fourth coup in a row: the table is closed instead, the
    coup held for compliance (its stakes for compliance to rule on), nothing
    voided. Reopened, the table deals on with its voids counted from none."""
    async with read_table(tmp_path, "RJ-9", BLACKJACK) as table:
        await _three_voids(table)
        fourth = await table.open()
        assert (await table.recorded(fourth, CoupConfigured)).voids_before == 3
        await table.bet_and_close(fourth)
        refused = await table.report(other_than(table.devices.cards[0]))
        assert refused.waiting is not None and refused.waiting.kind == "closed", refused
        events = [e for e in await table.events(subjects.coup_filter(fourth, table.name))]
        assert not [e for e in events if isinstance(e, CoupRuled)]  # nothing voided
        held = [e for e in events if isinstance(e, CoupHeld)]
        assert len(held) == 1 and "the table was closed" in held[0].reason
        assert (await table.supervise(commands.ReopenTable)).ok
        await table.devices.shuffle()
        fifth = await table.deal_coup()
        assert (await table.recorded(fifth, CoupConfigured)).voids_before == 0
        configured = [e for e in await table.events() if isinstance(e, CoupConfigured)]
        assert [e.voids_before for e in configured] == [0, 1, 2, 3, 0]
        report = await table.verified()
        assert [(f.coup, "held for compliance" in f.what) for f in report.findings] == [(fourth, True)], report.findings
        assert report.coups == 5


async def test_the_cut_card_counts_only_within_its_tolerance_and_out_early_late_or_missing_is_an_incident(
        tmp_path: Path) -> None:
    """A one-deck shoe cut at card 26, tolerance 4: the cut card out at card 1
    is an incident (``shoe.cut_card``), ruled go_on, and the cut card is then
    reckoned at card 26, the round completed and the cards reshuffled. In the
    next shoe the cut card is never reported: the card from behind card 30
    is an incident too, the cut card reckoned reached there; a cut card
    reported after that is refused (it came out already), recording nothing."""
    ruleset = ruleset_variant(tmp_path, BLACKJACK, decks=1, penetration=0.5, cut_card_tolerance=4)
    async with read_table(tmp_path, "RJ-6", ruleset) as table:
        coup = await table.open()
        await table.bet_and_close(coup)
        early = await table.send(commands.CutCardRead("cut-early", table.name))
        table.devices.physical.cut_out = True
        assert early.incident == "cut card misplaced" and early.waiting is not None, early
        assert (early.waiting.kind, early.waiting.incident) == ("ruling", "cut_card")
        assert table.incidents("cut_card") == 1
        ruled = await table.supervise(commands.Rule, coup=coup, ruling="go_on")
        await table.deal_out(coup, ruled)
        while not [e for e in await table.events() if isinstance(e, shoe.ReshuffleRequired)]:
            await table.deal_coup()
        reached = [e for e in await table.events() if isinstance(e, shoe.CutCardReached)]
        assert [(e.position, e.clause) for e in reached] == [(26, "002 (9)")]
        missed = None
        for _ in range(12):  # the next shoe, its cut card never reported
            coup = await table.open()
            reply = await table.bet_and_close(coup)
            while reply.waiting is not None and reply.waiting.kind in ("read", "decision"):
                table.devices.physical.cut_out = True
                reply = await table.devices.read() if reply.waiting.kind == "read" else await table.ask(
                    commands.Decide, coup=coup, seat=reply.waiting.seat, hand=reply.waiting.box_hand, action="stand")
            if reply.waiting is not None and reply.waiting.kind == "ruling":
                missed = reply
                break
        assert missed is not None and missed.waiting is not None and missed.waiting.incident == "cut_card", missed
        assert (await table.supervise(commands.Rule, coup=coup, ruling="go_on")).ok
        late = await table.send(commands.CutCardRead("cut-late", table.name))
        # refused as out already; or, where the ruling let the coup end the shoe's last round, as the shoe ended
        assert not late.ok and ("came out already" in late.reason or "shoe has ended" in late.reason), late
        misplaced = [e for e in await table.events() if isinstance(e, shoe.CutCardMisplaced)]
        assert [(e.reported, e.position) for e in misplaced] == [(True, 1), (False, 31)]
        assert table.incidents("cut_card") == 2


async def test_a_card_during_betting_is_an_incident_and_its_void_refunds_the_book_and_verifies_clean(
        tmp_path: Path) -> None:
    """A card out while betting is open, where the house rule voids the coup:
    the book is closed as the void is ruled, every stake placed is returned
    (a wager placed after the void is refused), and verification reads the
    record as it happened: no finding for a betting window that never closed."""
    ruleset = ruleset_variant(tmp_path, BLACKJACK, misdraw="void")
    async with read_table(tmp_path, "RJ-7", ruleset) as table:
        coup = await table.open()
        await table.wager(commands.Sit, coup=coup, seat=1, player="P1")
        await table.wager(commands.PlaceWager, coup=coup, seat=1, bet="box", amount=2500)
        held = await table.devices.read(due=False)
        assert held.waiting is not None and (held.waiting.kind, held.waiting.house_rule) == ("ruling", "void"), held
        assert (await table.supervise(commands.Rule, coup=coup, ruling="void")).ok
        late = await table.wager(commands.PlaceWager, coup=coup, seat=2, bet="box", amount=1000)
        assert not late.ok, late
        settled = await table.recorded(coup, CoupSettled)
        assert settled.staked == settled.returned == 2500
        await table.deal_coup()
        report = await table.verified()
        assert report.findings == [] and report.coups == 2, report.findings


async def test_a_second_incident_on_a_held_coup_is_recorded_and_ruled_and_one_report_is_one_card(
        tmp_path: Path) -> None:
    """While a coup waits for the dealer to key in a card its shoe could not
    read, the shoe reports another card out (not due): it is recorded as a
    second incident and ruled after the first. The unread report sent again
    with a card is the same report: one card, the one keyed in and confirmed."""
    async with read_table(tmp_path, "RJ-8", "blackjack-002-hole-card", shuffle="hand") as table:
        coup = await table.open()
        await table.bet_and_close(coup)
        unread_card = table.devices.cards.pop(0)
        unread = await table.report("", "unread-1")
        assert unread.waiting is not None and unread.waiting.kind == "key", unread
        second = await table.report(table.devices.cards.pop(0), "misdraw-2")
        assert second.ok and second.incident == "misdrawn", second
        assert (await table.report(unread_card, "unread-1")).cards == ()  # the same report: taken, as unread
        assert (await table.ask(commands.KeyCard, coup=coup, card=unread_card, dealer="D-1")).ok
        confirmed = await table.supervise(commands.Rule, coup=coup, ruling="confirm", card=unread_card)
        assert confirmed.waiting is not None and (confirmed.waiting.kind, confirmed.waiting.incident) == (
            "ruling", "misdrawn"), confirmed
        ruled = await table.supervise(commands.Rule, coup=coup, ruling="go_on")
        assert ruled.ok and ruled.waiting is not None and ruled.waiting.kind in ("read", "decision"), ruled
        await table.deal_out(coup, ruled)
        await table.recorded(coup, CoupSettled)
        events = await table.events()
        out = [(type(e).__name__, e.read) for e in events if isinstance(e, shoe.CardDrawn | shoe.CardMisdrawn)
               and e.read in ("unread-1", "misdraw-2")]
        assert sorted(out) == [("CardDrawn", "unread-1"), ("CardMisdrawn", "misdraw-2")]
        assert [e.ruling for e in events if isinstance(e, CoupRuled)] == ["confirm", "go_on"]
        assert (await table.verified()).findings == []
        assert not [e for e in events if isinstance(e, baccarat_messages.CardDealt)]


async def test_a_reader_flooding_reports_between_coups_closes_its_table_at_the_bound_and_is_counted_not_taken(
        tmp_path: Path) -> None:
    """Between coups the card-reading shoe reports card after card (each a
    misdraw: none is due). Ten await a ruling at once, as the ruleset allows
    (``setting shoe.most_awaiting``); the eleventh closes the table, its shoe
    ended, and the reports after it are refused, each counted once however
    often it is sent, nothing taken: the shoe's record holds the eleven cards
    and no more, and no supervisor rules on any of them. One reopening,
    which records the count, puts the table back in play."""
    async with read_table(tmp_path, "RJ-10", BLACKJACK) as table:
        await table.deal_coup()
        for n in range(11):
            misdrawn = await table.report(table.devices.cards.pop(0), f"flood-{n}")
            assert misdrawn.ok and misdrawn.incident == "misdrawn", (n, misdrawn)
        assert misdrawn.waiting is not None and misdrawn.waiting.kind == "closed", misdrawn
        assert misdrawn.waiting.reason is not None and "11 incidents await a ruling" in misdrawn.waiting.reason
        for n in range(30):  # the flood goes on, a report now and then sent twice
            refused = await table.report(table.devices.cards[0], f"more-{n // 2 if n % 3 == 0 else n}")
            assert (refused.ok, refused.clause) == (False, incidents.CLOSED), refused
        ruled = await table.supervise(commands.Rule, coup=f"{table.name}-000002", ruling="go_on", read="flood-0")
        assert (ruled.ok, ruled.clause) == (False, incidents.CLOSED), ruled
        assert table.counted("casino_tables_closed_total", "dealer-policy", table=table.name,
                             clause="setting shoe.most_awaiting") == 1
        taken = [e for e in await table.events() if isinstance(e, shoe.CardMisdrawn)]
        assert [e.read for e in taken] == [f"flood-{n}" for n in range(11)]
        distinct = len({n // 2 if n % 3 == 0 else n for n in range(30)})
        reopened = await table.supervise(commands.ReopenTable)
        assert reopened.ok, reopened
        events = await table.events()
        assert [e.reported for e in events if isinstance(e, incidents.TableReopened)] == [distinct]
        assert [e.awaiting for e in events if isinstance(e, incidents.TableClosed)] == [11]
        assert not [e for e in events if isinstance(e, CoupRuled)]
        await table.devices.shuffle()
        await table.deal_coup()
        report = await table.verified()
        assert report.findings == [] and report.coups == 2, report.findings


async def test_a_coup_ruled_void_is_dealt_no_further_whatever_is_queued_behind_it(tmp_path: Path) -> None:
    """An honest misread, then the card read again: the misread card is not
    the order's next (refused, held for ``void``), and the card read again,
    reported while the coup is held, is a second incident (a misdraw, held
    for ``go_on``). A ruling on the first in other words than the house rule
    is refused, naming each ruling it takes once; ruled void, the coup stays
    void when the misdraw behind it is ruled to deal on: no card is dealt or
    drawn for it after the void, its stakes are returned, and the record verifies."""
    async with read_table(tmp_path, "RJ-11", BLACKJACK) as table:
        coup = await table.open()
        closed = await table.bet_and_close(coup)
        assert closed.waiting is not None and closed.waiting.kind == "read", closed
        misread = await table.report(other_than(table.devices.cards[0]), "misread")
        assert misread.incident == "refused" and misread.house_rule == "void", misread
        again = await table.report(table.devices.cards.pop(0), "read-again")
        assert again.incident == "misdrawn" and again.house_rule == "go_on", again
        wrong = await table.supervise(commands.Rule, coup=coup, ruling="go_on")
        assert (wrong.ok, wrong.clause) == (False, "setting shoe.refused"), wrong
        assert "'void' or 'end_shoe'" in wrong.reason and wrong.reason.count("'void'") == 1, wrong.reason
        assert (await table.supervise(commands.Rule, coup=coup, ruling="void")).ok
        ruled = await table.supervise(commands.Rule, coup=coup, ruling="go_on", read="read-again")
        assert ruled.ok and ruled.waiting is not None and ruled.waiting.kind == "held", ruled
        settled = await table.recorded(coup, CoupSettled)
        assert settled.staked == settled.returned == 1000
        await table.deal_coup()
        record = await table.history(subjects.coup_filter(coup, table.name))
        void_at = next(m.seq for m in record for e in m.batch.events
                       if isinstance(e.data, CoupRuled) and e.data.ruling == "void")
        after = [type(e.data).__name__ for m in record if m.seq > void_at for e in m.batch.events
                 if isinstance(e.data, blackjack_messages.CardDealt | shoe.CardDrawn
                               | blackjack_messages.CoupResulted)]
        assert after == [], after
        report = await table.verified()
        assert report.findings == [] and report.coups == 2, report.findings


async def test_a_blackjack_card_during_betting_before_any_wager_is_ruled_void_and_the_table_deals_on(
        tmp_path: Path) -> None:
    """A card the shoe cannot have given, reported while betting is open and
    no wager is placed yet (003 7.3(a) deals no box without a wager): it has a
    ruling a supervisor may give, its house rule's ``void``: the coup is void
    with nothing staked, settled as such, and the next coup deals."""
    async with read_table(tmp_path, "RJ-12", "blackjack-003-no-hole-card") as table:
        coup = await table.open()
        refused = await table.report(other_than(table.devices.cards[0]), "during-betting")
        assert refused.waiting is not None and (refused.waiting.kind, refused.waiting.house_rule) == (
            "ruling", "void"), refused
        ruled = await table.supervise(commands.Rule, coup=coup, ruling="void")
        assert ruled.ok, ruled
        settled = await table.recorded(coup, CoupSettled)
        assert settled.staked == settled.returned == 0
        await table.deal_coup()
        report = await table.verified()
        assert report.findings == [] and report.coups == 2, report.findings
