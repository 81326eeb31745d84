"""Each rule a card-reading shoe's card is held to as it leaves the shoe
(docs/readers.md), by its clause or house rule, on a real nats-server: a
card drawn unbidden by the holder (000 8.19, 8.28), the house rules for a
misdraw and a refused card (shoe.misdraw, shoe.refused), the shoe's
composition, a card the shoe could not read, and the cut card where it
actually came (002 (9), 003 7.8, 7.9)."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from casino.audit.audits import verify_history
from casino.cli.devices import Devices
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.rules import incidents, shoe
from casino.rules.incidents import CardIncident, CardKeyed, CoupRuled
from casino.store import subjects
from casino.store.envelope import Envelope
from casino.store.eventstore import Stored
from tests.e2e.casino import SUPERVISOR, Casino
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
TABLE = "RD-1"


def _table(ruleset: str, shuffle: str = "recognised") -> dict[str, TableConfig]:
    return {TABLE: TableConfig(ruleset, cards="read", shuffle=shuffle, supervisors=(SUPERVISOR,))}  # type: ignore[arg-type]


def _devices(casino: Casino, tables: dict[str, TableConfig]) -> Devices:
    config = tables[TABLE]
    return Devices(TABLE, config, rulesets.load(config.ruleset), casino.peer, casino.peer, random.Random(3))


async def _open(casino: Casino, devices: Devices, procedure: str = "") -> str:
    """A coup opened (by a supervisor where it names a procedure), the devices
    answering what the shoe asks of them first (the machine's order, the burn)."""
    for _ in range(30):  # the order, then the burn: a baccarat shoe's first card and as many as it counts
        opened = await (casino.supervise(TABLE, commands.OpenCoup, procedure=procedure) if procedure
                        else casino.ask(TABLE, "coup", commands.OpenCoup))
        if opened.ok:
            return opened.coup
        if opened.clause in commands.ASK_AGAIN:  # a supervisor's lane, a few a second
            await asyncio.sleep(0.3)
            continue
        assert await devices.answer_refusal(opened), opened
    raise AssertionError(opened)


async def _bet_and_close(casino: Casino, coup: str, bet: str = "box", amount: int = 1000) -> commands.Reply:
    await casino.patiently(TABLE, "wager", commands.Sit, coup=coup, seat=1, player="P1")
    await casino.patiently(TABLE, "wager", commands.PlaceWager, coup=coup, seat=1, bet=bet, amount=amount)
    return await casino.ask(TABLE, "coup", commands.CloseBetting, coup=coup)


async def _deal_out(casino: Casino, devices: Devices, coup: str, reply: commands.Reply) -> commands.Reply:
    """The coup dealt to its end: the shoe reads each card due, the player stands."""
    for _ in range(40):
        w = reply.waiting
        assert reply.ok and w is not None, reply
        if w.kind == "finished":
            return reply
        if w.kind == "read":
            reply = await devices.read()
        elif w.kind == "shuffle":  # the machine's order reported: the table says what it waits for now
            reply = await casino.ask(TABLE, "coup", commands.Status)
        elif w.kind == "decision":
            reply = await casino.ask(TABLE, "coup", commands.Decide, coup=coup, seat=w.seat, hand=w.box_hand,
                                     action="stand")
        else:
            raise AssertionError(w)
    raise AssertionError(reply)


async def _supervise(casino: Casino, command: type[commands.Command], **fields: object) -> commands.Reply:
    """A supervisor's direction, asked again while the supervisor's lane asks it to (a few a second)."""
    for _ in range(30):
        reply = await casino.supervise(TABLE, command, **fields)
        if reply.clause not in commands.ASK_AGAIN:
            return reply
        await asyncio.sleep(0.3)
    return reply


async def _report(casino: Casino, card: str, read: str = "") -> commands.Reply:
    """A card as the shoe reports it, asked again while the device's lane asks it to (a few a second)."""
    return await casino.again("read", commands.CardRead(read or f"r-{uuid.uuid4().hex[:12]}", TABLE, card))


@pytest.mark.parametrize(("procedure", "clause"), [("method_c", "000 8.19"), ("method_d", "000 8.28")])
async def test_000_8_19_8_28_a_card_out_of_the_shoe_with_no_instruction_to_draw_is_a_misdraw_that_holds_the_coup(
        nats_url: str, procedure: str, clause: str) -> None:
    """Where a player holds the shoe, a card is drawn "only at the instruction
    of the dealer": a card out while the coup is still taking wagers is
    recorded as misdrawn under that clause, to the discard rack, and the coup
    waits (nothing else is taken) until a supervisor rules by shoe.misdraw."""
    tables = _table("baccarat-000-methods")
    async with Casino(nats_url, tables) as casino:
        devices = _devices(casino, tables)
        coup = await _open(casino, devices, procedure)
        misdrawn = await devices.read(due=False)
        assert misdrawn.waiting is not None and (misdrawn.waiting.kind, misdrawn.waiting.incident) == (
            "ruling", "misdrawn"), misdrawn
        incident = await casino.recorded(coup, CardIncident)
        assert (incident.kind, incident.clause, incident.setting, incident.house_rule) == (
            "misdrawn", clause, "shoe.misdraw", "go_on")
        card = [e for _, e in await casino.events(subjects.event(TABLE, "*", coup, "shoe"))
                if isinstance(e, shoe.CardMisdrawn)]
        assert [(e.card, e.clause) for e in card] == [(incident.card, clause)]
        closing = await casino.ask(TABLE, "coup", commands.CloseBetting, coup=coup)
        assert (closing.ok, closing.clause) == (False, commands.HELD), closing
        ruled = await _supervise(casino, commands.Rule, coup=coup, ruling="go_on")
        assert ruled.ok and ruled.waiting is not None and ruled.waiting.kind == "close_betting", ruled
        assert (await casino.recorded(coup, CoupRuled)).supervisor == SUPERVISOR


async def test_setting_shoe_misdraw_void_a_misdraw_voids_the_coup_and_returns_every_stake(
        nats_url: str, tmp_path: Path) -> None:
    """The house rule set to ``void``: a ruling to deal on is refused naming
    the setting; the supervisor's ``void`` ends the coup with every stake
    returned, and the table goes on with its next coup."""
    tables = _table(ruleset_variant(tmp_path, "blackjack-002-hole-card", misdraw="void"))
    async with Casino(nats_url, tables) as casino:
        devices = _devices(casino, tables)
        coup = await _open(casino, devices)
        await casino.patiently(TABLE, "wager", commands.Sit, coup=coup, seat=1, player="P1")
        await casino.patiently(TABLE, "wager", commands.PlaceWager, coup=coup, seat=1, bet="box", amount=1000)
        wrong = await _supervise(casino, commands.Rule, coup=coup, ruling="void")
        assert (wrong.ok, wrong.clause) == (False, incidents.IN_TURN), wrong  # nothing to rule on yet
        held = await devices.read(due=False)
        assert held.waiting is not None and held.waiting.kind == "ruling", held
        refused = await _supervise(casino, commands.Rule, coup=coup, ruling="go_on")
        assert (refused.ok, refused.clause) == (False, "setting shoe.misdraw"), refused
        ruled = await _supervise(casino, commands.Rule, coup=coup, ruling="void")
        assert ruled.ok and ruled.waiting is not None and ruled.waiting.kind == "held", ruled
        settled = await casino.settled(coup)
        assert settled.staked == settled.returned == 1000
        assert await _open(casino, devices) != coup


async def test_shoe_composition_a_card_the_shoe_cannot_hold_is_refused_and_holds_the_coup_by_shoe_refused(
        nats_url: str, tmp_path: Path) -> None:
    """At a hand-shuffled one-deck table (no order known: the record says so,
    and the shoe commits to none), a second ace of spades cannot have come
    out of the shoe: refused under "shoe composition", the coup held, and
    voided by the house rule."""
    tables = _table(ruleset_variant(tmp_path, "blackjack-002-hole-card", decks=1, penetration=0.5), shuffle="hand")
    async with Casino(nats_url, tables) as casino:
        devices = _devices(casino, tables)
        coup = await _open(casino, devices)
        shuffled = [e for _, e in await casino.events(subjects.aggregate_filter("shoe", TABLE))
                    if isinstance(e, shoe.ShoeShuffled)]
        assert [(e.source, e.commitment) for e in shuffled] == [("hand", "")]
        closed = await _bet_and_close(casino, coup)
        assert closed.waiting is not None and closed.waiting.kind == "read", closed
        card = devices.cards.pop(0)
        assert (await _report(casino, card)).ok
        again = await _report(casino, card)  # the same card, in a new report: a copy the deck does not have
        assert again.waiting is not None and (again.waiting.kind, again.waiting.incident) == ("ruling", "refused")
        incident = await casino.recorded(coup, CardIncident)
        assert (incident.card, incident.clause, incident.setting, incident.house_rule) == (
            card, "shoe composition", "shoe.refused", "void")
        assert "has left it already" in incident.what
        ruled = await _supervise(casino, commands.Rule, coup=coup, ruling="void")
        assert ruled.ok, ruled


async def test_an_unread_card_is_keyed_in_by_the_dealer_and_confirmed_by_a_supervisor_on_their_own_credential(
        nats_url: str) -> None:
    """The shoe could not read a card drawn: the coup waits for the dealer
    to key it in (refused while nobody is signed in at the terminal: the
    record names who keyed it), then for a supervisor to confirm that card
    (not another, not from the terminal); confirmed, it is checked and drawn
    as the shoe's report would have been, its report named."""
    tables = _table("blackjack-002-hole-card")
    async with Casino(nats_url, tables) as casino:
        devices = _devices(casino, tables)
        coup = await _open(casino, devices)
        await _bet_and_close(casino, coup)
        card, read = devices.cards.pop(0), "unread-1"
        unread = await _report(casino, "", read)
        assert unread.waiting is not None and (unread.waiting.kind, unread.waiting.incident) == ("key", "unread")
        assert (await _report(casino, "", read)).waiting == unread.waiting  # sent again: the same report
        early = await _supervise(casino, commands.Rule, coup=coup, ruling="confirm", card=card)
        assert (early.ok, early.clause) == (False, "unread card"), early
        from_terminal = await casino.ask(TABLE, "coup", commands.Rule, coup=coup, ruling="confirm", card=card)
        assert (from_terminal.ok, from_terminal.clause) == (False, "protocol"), from_terminal  # not a terminal's
        assert "table.rule" in from_terminal.reason
        nobody = await casino.ask(TABLE, "coup", commands.KeyCard, coup=coup, card=card)
        assert (nobody.ok, nobody.clause) == (False, "unread card") and "no dealer is signed in" in nobody.reason
        keyed = await casino.ask(TABLE, "coup", commands.KeyCard, coup=coup, card=card, dealer="D-7")
        assert keyed.waiting is not None and (keyed.waiting.kind, keyed.waiting.incident) == ("ruling", "unread")
        other = next(c for c in ("AS", "KH") if c != card)
        mismatch = await _supervise(casino, commands.Rule, coup=coup, ruling="confirm", card=other)
        assert (mismatch.ok, mismatch.clause) == (False, "unread card") and card in mismatch.reason, mismatch
        void = await _supervise(casino, commands.Rule, coup=coup, ruling="void")
        assert (void.ok, void.clause) == (False, "unread card"), void
        confirmed = await _supervise(casino, commands.Rule, coup=coup, ruling="confirm", card=card)
        assert confirmed.ok and confirmed.waiting is not None and confirmed.waiting.kind == "read", confirmed
        events = [e for _, e in await casino.events(subjects.coup_filter(coup))]
        assert [(e.card, e.dealer) for e in events if isinstance(e, CardKeyed)] == [(card, "D-7")]
        assert [(e.ruling, e.supervisor, e.read) for e in events if isinstance(e, CoupRuled)] == [
            ("confirm", SUPERVISOR, read)]
        drawn = [e for e in events if isinstance(e, shoe.CardDrawn)]
        assert [(e.card, e.read) for e in drawn] == [(card, read)]
        assert len([e for e in events if isinstance(e, CardIncident)]) == 1
        await _deal_out(casino, devices, coup, confirmed)


@pytest.mark.parametrize("ruleset", ["blackjack-002-hole-card", "blackjack-003-no-hole-card"])
async def test_002_9_003_7_8_the_cut_card_is_judged_where_the_shoe_reports_it_and_the_round_completed_first(
        nats_url: str, ruleset: str, tmp_path: Path) -> None:
    """The cut card out in the middle of a round, within the tolerance of
    where the penetration puts it (a one-deck shoe cut at card 13, reported at
    card 2: 11 cards early, the tolerance set to 12): reached there (not where
    it would be reckoned), the round dealt to its end, then the reshuffle; the
    next coup waits for the machine's order of a new shoe."""
    tables = _table(ruleset_variant(tmp_path, ruleset, decks=1, penetration=0.25, cut_card_tolerance=12))
    async with Casino(nats_url, tables) as casino:
        devices = _devices(casino, tables)
        coup = await _open(casino, devices)
        assert (await _bet_and_close(casino, coup)).ok
        reply = await devices.read()
        assert (await devices.cut_card()).ok
        await _deal_out(casino, devices, coup, reply)
        events = [e for _, e in await casino.events(subjects.aggregate_filter("shoe", TABLE))]
        reached = [e for e in events if isinstance(e, shoe.CutCardReached)]
        clause = "002 (9)" if ruleset.startswith("blackjack-002") else "003 7.8"
        assert [(e.first_of_round, e.clause) for e in reached] == [(False, clause)]
        assert reached[0].position < rulesets.load(tables[TABLE].ruleset).shoe.cut_index  # type: ignore[operator]
        opened = await casino.ask(TABLE, "coup", commands.OpenCoup)
        assert (opened.ok, opened.clause) == (False, "shuffling machine"), opened
        required = [e for e in events + [e for _, e in await casino.events(subjects.aggregate_filter("shoe", TABLE))]
                    if isinstance(e, shoe.ReshuffleRequired)]
        assert required and required[0].when == "after_round" and required[0].clause == clause


async def test_003_7_9_the_cut_card_out_as_the_first_card_of_a_round_reshuffles_now(
        nats_url: str, tmp_path: Path) -> None:
    """Under 003 the cut card out before the round's first card (a one-deck
    shoe cut at card 13, within the tolerance): the cards are reshuffled now,
    and the table says it waits for its machine's order. The shoe in play
    ends (its order revealed), the next round is dealt from a new shoe filled
    with the machine's new order, and a card reported before the machine has
    reported it is refused."""
    tables = _table(ruleset_variant(tmp_path, "blackjack-003-no-hole-card", decks=1, penetration=0.25))
    async with Casino(nats_url, tables) as casino:
        devices = _devices(casino, tables)
        coup = await _open(casino, devices)
        await _deal_out(casino, devices, coup, await _bet_and_close(casino, coup))
        cut = await devices.cut_card()  # between rounds: before the next round's first card
        assert (cut.ok, cut.incident, cut.clause) == (True, "cut card", "003 7.9"), cut  # the device told so
        assert cut.waiting is not None and cut.waiting.kind == "shuffle", cut  # and the floor: the machine's order
        events = [e for _, e in await casino.events(subjects.aggregate_filter("shoe", TABLE))]
        reached = [e for e in events if isinstance(e, shoe.CutCardReached)]
        assert [(e.first_of_round, e.clause) for e in reached] == [(True, "003 7.9")]
        required = [e for e in events if isinstance(e, shoe.ReshuffleRequired)]
        assert [(e.when, e.clause) for e in required] == [("now", "003 7.9")]
        second = await _open(casino, devices)
        closed = await _bet_and_close(casino, second)
        early = await _report(casino, devices.cards[0])
        assert (early.ok, early.clause) == (False, "shuffling machine"), early  # its order not reported yet
        await devices.shuffle()
        await _deal_out(casino, devices, second, closed)
        events = [e for _, e in await casino.events(subjects.aggregate_filter("shoe", TABLE))]
        assert [e.shoe_id for e in events if isinstance(e, shoe.ShoeEnded)] == [f"{TABLE}-shoe-1"]
        assert [e.shoe_id for e in events if isinstance(e, shoe.ShoeShuffled)] == [f"{TABLE}-shoe-1", f"{TABLE}-shoe-2"]
        drawn = {e.shoe_id for e in events if isinstance(e, shoe.CardDrawn) and e.coup_id == second}
        assert drawn == {f"{TABLE}-shoe-2"}


async def test_verification_finds_a_misdraw_altered_into_a_dealt_card_and_a_keyed_card_altered(nats_url: str) -> None:
    """The record of a misdraw, ruled, and of a card keyed in and confirmed
    verifies clean; the same record with the misdrawn card turned into a
    card drawn for the coup, or with another card keyed in than the one
    drawn, is found by verification, naming the coup."""
    tables = _table("blackjack-002-hole-card")
    async with Casino(nats_url, tables) as casino:
        devices = _devices(casino, tables)
        coup = await _open(casino, devices)
        await casino.patiently(TABLE, "wager", commands.Sit, coup=coup, seat=1, player="P1")
        await casino.patiently(TABLE, "wager", commands.PlaceWager, coup=coup, seat=1, bet="box", amount=1000)
        await devices.read(due=False)
        await _supervise(casino, commands.Rule, coup=coup, ruling="go_on")
        closed = await casino.ask(TABLE, "coup", commands.CloseBetting, coup=coup)
        card = devices.cards.pop(0)
        await _report(casino, "", "unread-2")
        await casino.ask(TABLE, "coup", commands.KeyCard, coup=coup, card=card, dealer="D-7")
        confirmed = await _supervise(casino, commands.Rule, coup=coup, ruling="confirm", card=card)
        assert closed.ok and confirmed.ok, (closed, confirmed)
        await _deal_out(casino, devices, coup, confirmed)
        await casino.settled(coup)
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    assert verify_history(history).findings == []

    def altered(change: Callable[[Envelope], Envelope | None]) -> list[Stored]:
        out = []
        for m in history:
            events = tuple(e for e in (change(env) for env in m.batch.events) if e is not None)
            out.append(msgspec.structs.replace(m, batch=msgspec.structs.replace(m.batch, events=events)))
        return out

    def misdraw_dealt(env: Envelope) -> Envelope | None:
        e = env.data
        if isinstance(e, shoe.CardMisdrawn):
            return msgspec.structs.replace(env, type="shoe.card_drawn", data=shoe.CardDrawn(
                e.shoe_id, e.coup_id, e.position, e.card, e.read))
        if (isinstance(e, CardIncident) and e.kind == "misdrawn") or (isinstance(e, CoupRuled) and e.ruling == "go_on"):
            return None  # no incident and no ruling: as if the card had been dealt
        return env

    def keyed_other(env: Envelope) -> Envelope:
        if isinstance(env.data, CardKeyed):
            other = next(c for c in ("AS", "KH") if c != env.data.card)
            return msgspec.structs.replace(env, data=msgspec.structs.replace(env.data, card=other))
        return env

    for change in (misdraw_dealt, keyed_other):
        findings = verify_history(altered(change)).findings
        assert findings and all(f.coup == coup for f in findings), (change.__name__, findings)
