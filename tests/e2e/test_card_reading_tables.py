"""Tables whose cards come from a card-reading shoe (docs/readers.md), on a
real nats-server: every card checked as it leaves the shoe, each outcome
recorded as what happened, a held coup going on only by a supervisor's
ruling, and the whole record verifying clean."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter

import msgspec
import pytest

from casino.audit.audits import verify_history
from casino.cli.console import Console
from casino.cli.devices import Devices
from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.protocol.service import LANE_BURST, LANE_RATE, Peer, Rate
from casino.rules import shoe
from casino.rules.incidents import CardIncident, CardKeyed, CoupRuled
from casino.store import subjects
from casino.store.envelope import CoupConfigured
from tests.e2e.casino import SUPERVISOR, Casino

pytestmark = pytest.mark.anyio


def _tables(count: int, rulesets_: list[str], readers: int) -> dict[str, object]:
    return {name: msgspec.structs.replace(config, supervisors=(*config.supervisors, SUPERVISOR))
            for name, config in default_tables(count, rulesets_, readers).items()}


async def test_simulated_card_reading_tables_with_faulty_devices_deal_and_the_record_verifies(nats_url: str) -> None:
    """``casino run --tables 6 --readers 3 --faults 0.1 --seed 2``, as the
    simulator deals it: three card-reading tables, shuffled by a recognised
    machine and by hand, their devices misbehaving at one card in ten among
    three that the shoe service shuffles. Every incident is recorded and
    ruled by its house rule, each card the shoe could not read is keyed in by
    the dealer and confirmed by a supervisor and then drawn as keyed, no
    table voids more than three coups in a row, and verification finds nothing."""
    tables = _tables(6, ["baccarat-000-methods", "baccarat-001-styles", "blackjack-002-hole-card",
                         "blackjack-003-no-hole-card"], readers=3)
    assert sorted(c.source for c in tables.values()) == ["", "", "", "hand", "recognised", "recognised"]  # type: ignore[attr-defined]
    async with Casino(nats_url, tables) as casino:  # type: ignore[arg-type]
        sim = Simulator(casino.nc, tables, seed=2, patience=40, faults=0.1)  # type: ignore[arg-type]
        await asyncio.wait_for(sim.run(12), 600)
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    events = [e.data for m in history for e in m.batch.events]
    report = verify_history(history)
    assert report.findings == [] and report.coups == 72, report.findings
    assert sum(t.refusals for t in sim.playing) == 0
    made = sum((t.devices.incidents for t in sim.playing if t.devices is not None), start=Counter())
    incidents = {e.read: e for e in events if isinstance(e, CardIncident)}
    rulings = {e.read: e for e in events if isinstance(e, CoupRuled)}
    assert made["misdraw"] + made["substitute"] > 0, made
    assert incidents and incidents.keys() == rulings.keys()  # every incident ruled
    assert all(r.ruling == incidents[read].house_rule or r.ruling == "end_shoe" for read, r in rulings.items())
    assert all(r.supervisor for r in rulings.values())
    keyed = {e.read: e.card for e in events if isinstance(e, CardKeyed)}
    unread = [i.read for i in incidents.values() if i.kind == "unread"]
    assert made["unread"] == len(unread) > 0 and set(unread) == set(keyed)  # each keyed in, and confirmed
    taken = (shoe.CardDrawn, shoe.CardBurned, shoe.CardMisdrawn)  # between coups, a keyed card is a burn or a misdraw
    assert {e.read: e.card for e in events if isinstance(e, taken) and e.read in keyed} == keyed
    drawn = [e for e in events if isinstance(e, shoe.CardDrawn) and e.shoe_id.startswith(("BAC001-2", "BJ002-2"))]
    assert drawn and all(e.read for e in drawn)  # every card dealt at a card-reading table is a read's, named
    assert max(e.voids_before for e in events if isinstance(e, CoupConfigured)) <= 3  # never a fourth void in a row
    shuffles = [e for e in events if isinstance(e, shoe.ShoeShuffled)]
    assert {e.source for e in shuffles} == {"", "recognised", "hand"}
    assert all(e.commitment == "" for e in shuffles if e.source == "hand")


async def test_one_tables_refusals_are_reported_and_the_rest_of_the_floor_deals_on(nats_url: str) -> None:
    """A table whose every opening is refused (here: one the dealer-policy is
    not configured for) is reported each time, goes on trying, and stops
    after ``give_up_after`` refusals in a row; the other tables deal their
    coups, and the run ends as it should, every coup of theirs settled."""
    tables = _tables(2, ["blackjack-002-hole-card"], readers=1)
    lost = {"NOWHERE-1": next(iter(tables.values()))}
    async with Casino(nats_url, tables) as casino:  # type: ignore[arg-type]
        console = Console([*tables, *lost], live=False)
        sim = Simulator(casino.nc, {**tables, **lost}, seed=3, patience=5, console=console,  # type: ignore[dict-item]
                        give_up_after=3)
        await asyncio.wait_for(sim.run(4), 300)
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    played = {t.name: t for t in sim.playing}
    assert played["NOWHERE-1"].refusals == 3 and played["NOWHERE-1"].coups == 0
    assert all(played[name].coups == 4 and played[name].refusals == 0 for name in tables)
    assert len(console.refusals) == 3 and all("NOWHERE-1" in line and "not configured" in line
                                              for line in console.refusals)
    assert verify_history(history).coups == 8


async def test_each_card_the_shoe_reads_is_checked_as_it_leaves_the_shoe(nats_url: str) -> None:
    """One report sent twice is one card; a card out when none is due is a
    misdraw that holds the coup (the next coup waits) until a supervisor
    rules by the house rule, and a ruling against it is refused naming the
    setting; a card that is not the machine's next is refused and holds the coup."""
    tables = _tables(1, ["blackjack-002-hole-card"], readers=1)
    [table] = tables
    config = tables[table]
    async with Casino(nats_url, tables) as casino:  # type: ignore[arg-type]
        devices = Devices(table, config, rulesets.load(config.ruleset), casino.peer, casino.peer,  # type: ignore[attr-defined]
                          random.Random(1))
        opened = await casino.ask(table, "coup", commands.OpenCoup)
        assert not opened.ok and opened.clause == "shuffling machine", opened  # the shoe waits for its order
        for _ in range(4):
            if opened.ok:
                break
            assert await devices.answer_refusal(opened), opened
            opened = await casino.ask(table, "coup", commands.OpenCoup)
        assert opened.ok, opened
        coup = opened.coup
        await casino.patiently(table, "wager", commands.Sit, coup=coup, seat=1, player="P1")
        await casino.patiently(table, "wager", commands.PlaceWager, coup=coup, seat=1, bet="box", amount=1000)
        closed = await casino.ask(table, "coup", commands.CloseBetting, coup=coup)
        assert closed.waiting is not None and closed.waiting.kind == "read", closed

        card = devices.cards.pop(0)
        report = commands.CardRead(f"card-{uuid.uuid4().hex[:8]}", table, card)
        first = await Peer(casino.nc).ask(subjects.command(table, "read"), report)
        again = await Peer(casino.nc).ask(subjects.command(table, "read"), report)
        assert first.ok and again.ok
        drawn = [e for _, e in await casino.events(subjects.coup_filter(coup)) if isinstance(e, shoe.CardDrawn)]
        assert [e.card for e in drawn] == [card] and drawn[0].read == report.id  # one card, its read named

        foreign = next(c for c in ("AS", "KH", "2C") if c != devices.cards[0])
        refused = await Peer(casino.nc).ask(subjects.command(table, "read"),
                                            commands.CardRead("sleeve-1", table, foreign))
        assert refused.waiting is not None and refused.waiting.kind == "ruling", refused
        assert refused.waiting.incident == "refused"
        held = await casino.ask(table, "coup", commands.OpenCoup)
        assert not held.ok and held.clause == commands.HELD  # the next coup waits for the ruling
        wrong = await casino.supervise(table, commands.Rule, coup=coup, ruling="go_on")
        assert not wrong.ok and wrong.clause == "setting shoe.refused", wrong
        ruled = await casino.supervise(table, commands.Rule, coup=coup, ruling="void")
        assert ruled.ok and ruled.waiting is not None and ruled.waiting.kind == "held", ruled
        settled = await casino.settled(coup)
        assert settled.staked == settled.returned == 1000  # void: every stake returned
        incident = await casino.recorded(coup, CardIncident)
        assert (incident.card, incident.clause, incident.setting) == (foreign, "committed order", "shoe.refused")
        refusal = [e for _, e in await casino.events(subjects.event(table, "*", coup, "shoe"))
                   if isinstance(e, shoe.CardRefused)]
        assert [e.card for e in refusal] == [foreign] and devices.cards[0] not in refusal[0].why  # the order stays secret

        # The next coup: a card out while it waits for the betting to close is a misdraw.
        opened = await casino.ask(table, "coup", commands.OpenCoup)
        assert opened.ok, opened
        misdrawn = await devices.read(due=False)
        assert misdrawn.waiting is not None and misdrawn.waiting.kind == "ruling", misdrawn
        incident = await casino.recorded(opened.coup, CardIncident)
        assert incident.kind == "misdrawn" and incident.house_rule == "go_on"
        ruled = await casino.supervise(table, commands.Rule, coup=opened.coup, ruling="go_on")
        assert ruled.ok and ruled.waiting is not None and ruled.waiting.kind == "close_betting", ruled
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    assert verify_history([m for m in history if subjects.tokens(m.subject)[2] == coup]).findings == []


class Lane:
    """The card-reading shoe's lane at the dealer-policy, as the command gate
    keeps it (``LANE_RATE`` a second, ``LANE_BURST`` at once): each report
    taken, or refused as ``rate limit``."""

    def __init__(self) -> None:
        self.rate, self.replies = Rate(LANE_RATE, LANE_BURST), []  # type: ignore[var-annotated]

    async def ask(self, subject: str, command: commands.Command) -> commands.Reply:
        taken = self.rate.take(subject)
        self.replies.append(commands.Reply(True) if taken else commands.refused("the lane is full", "rate limit"))
        return self.replies[-1]


async def test_a_simulated_shoe_reports_a_whole_deal_no_faster_than_its_lane_takes_it() -> None:
    """Twenty cards drawn one after the other, a blackjack deal at seven
    boxes and more, as fast as each report is answered: the dealer's hand
    paces them, and the lane refuses none. Before, every report past the
    lane's burst of 8 was refused and sent again half a second later: the
    506 ms p99 of a card's report in ``bench.capacity --cards read`` at
    every table count from 78 to 1,250."""
    table, ruleset = "BJ-1", "blackjack-002-hole-card"
    lane = Lane()
    devices = Devices(table, TableConfig(ruleset, cards="read", shuffle="hand"), rulesets.load(ruleset),
                      lane, lane, random.Random(1))  # type: ignore[arg-type]
    for _ in range(20):
        assert (await devices.read()).ok
    assert len(lane.replies) == 20 and all(r.ok for r in lane.replies)
