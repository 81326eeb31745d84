"""Where a card-reading table's record files each incident (docs/readers.md),
on a real nats-server: a card out between coups under the shoe it came from,
whatever the moment (during a new shoe's burn, after a ruling ended the
shoe, with two instances racing for one table), each coup counted once by
every verification, a card keyed in naming who keyed it, no card out of the
shoe for a coup before its betting closed is recorded; and records that
break these rules named by verification, still read."""

from __future__ import annotations

import asyncio
import io
import json
import random
import uuid
from collections.abc import Callable

import msgspec
import pytest
from nats.aio.client import Client
from services.dealer_policy.service import DealerPolicyService

from casino import games
from casino.audit import archive
from casino.audit.audits import verify_history
from casino.audit.replay import replay_coup
from casino.cli.devices import Devices
from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.protocol.service import Peer, decide
from casino.rules import shoe
from casino.rules.cards import DECK
from casino.rules.incidents import CardIncident, CardKeyed, CoupRuled
from casino.store import envelope, subjects
from casino.store.envelope import CARRIED, Batch, CoupConfigured, RulesetRecorded
from casino.store.eventstore import Stored
from casino.store.jetstream import JetStreamEventStore
from tests.e2e.casino import SUPERVISOR, Casino

pytestmark = pytest.mark.anyio
TABLE = "RD-1"
BLACKJACK = "blackjack-002-hole-card"


def _tables(ruleset: str = BLACKJACK) -> dict[str, TableConfig]:
    return {TABLE: TableConfig(ruleset, cards="read", shuffle="recognised", supervisors=(SUPERVISOR,))}


class Reading:
    """One card-reading table, its devices and its people, on the casino's connection."""

    def __init__(self, casino: Casino) -> None:
        config = casino.tables[TABLE]
        self.casino = casino
        self.devices = Devices(TABLE, config, rulesets.load(config.ruleset), casino.peer, casino.peer,
                               random.Random(5))

    async def report(self, card: str, read: str) -> commands.Reply:
        return await self.casino.again("read", commands.CardRead(read, TABLE, card))

    async def supervise(self, command: type[commands.Command], **fields: object) -> commands.Reply:
        for _ in range(30):  # the supervisor's lane takes a few a second
            reply = await self.casino.supervise(TABLE, command, **fields)
            if reply.clause not in commands.ASK_AGAIN:
                return reply
            await asyncio.sleep(0.3)
        return reply

    async def open(self, dealer: str = "D-1") -> str:
        for _ in range(30):  # the machine's order, then the burn
            opened = await self.casino.ask(TABLE, "coup", commands.OpenCoup, dealer=dealer)
            if opened.ok:
                return opened.coup
            assert await self.devices.answer_refusal(opened), opened
        raise AssertionError(opened)

    async def deal(self, dealer: str = "D-1") -> str:
        """A coup opened and dealt to its settlement: the shoe reads each card due, the player stands."""
        coup = await self.open(dealer)
        await self.casino.patiently(TABLE, "wager", commands.Sit, coup=coup, seat=1, player="P1")
        await self.casino.patiently(TABLE, "wager", commands.PlaceWager, coup=coup, seat=1, bet="box", amount=1000)
        reply = await self.casino.ask(TABLE, "coup", commands.CloseBetting, coup=coup)
        for _ in range(40):
            w = reply.waiting
            assert reply.ok and w is not None, reply
            if w.kind == "finished":
                break
            reply = await self.devices.read() if w.kind == "read" else await self.casino.ask(
                TABLE, "coup", commands.Decide, coup=coup, seat=w.seat, hand=w.box_hand, action="stand")
        await self.casino.settled(coup)
        return coup

    def wrong(self) -> str:
        """A card that is not the committed order's next."""
        return next(c for c in DECK if c != self.devices.cards[0])


def incidents_filed(history: list[Stored]) -> list[tuple[str, str, str, str]]:
    """(report, subject's shoe, envelope's shoe, incident's shoe) of every card incident recorded."""
    return [(env.data.read, subjects.tokens(m.subject)[1], env.shoe, env.data.shoe) for m in history
            for env in m.batch.events if isinstance(env.data, CardIncident)]


def shoe_of_report(history: list[Stored]) -> dict[str, str]:
    """The shoe each report's card was taken in, as the shoe's record has it."""
    return {env.causation.removeprefix(envelope.READ): env.data.shoe_id for m in history for env in m.batch.events
            if env.causation.startswith(envelope.READ) and isinstance(env.data, shoe.ShoeEvent)}


async def _between_coups_across_a_shoe_ended_by_a_ruling(reading: Reading) -> None:
    """Coup 1 dealt; between coups, three cards refused in a row from shoe 1
    (the third ends it, by the supervisor's ruling); shoe 2 filled with the
    machine's order, and a card refused as its burn card before the real one:
    coup 2's record before its opening holds cards of both shoes."""
    await reading.deal()
    for n in range(3):
        refused = await reading.report(reading.wrong(), f"s1-{n}")
        assert refused.incident == "refused" and refused.house_rule == ("end_shoe" if n == 2 else "go_on"), refused
    for n in range(3):
        ruled = await reading.supervise(commands.Rule, coup=f"{TABLE}-000002", ruling="end_shoe" if n == 2
                                        else "go_on", read=f"s1-{n}")
        assert ruled.ok, ruled
    await reading.devices.shuffle()  # shoe 2's order
    burn = await reading.report(reading.wrong(), "s2-burn")
    assert burn.incident == "refused" and burn.shoe == f"{TABLE}-shoe-2", burn
    assert (await reading.supervise(commands.Rule, coup=f"{TABLE}-000002", ruling="go_on", read="s2-burn")).ok
    assert await reading.deal() == f"{TABLE}-000002"


async def test_a_card_out_between_coups_during_a_new_shoes_burn_is_filed_under_the_shoe_it_came_from(
        nats_url: str) -> None:
    """Every incident between coups is filed under the shoe its card came
    from (subject, envelope and incident agree with the shoe's record of the
    report), the cards of shoe 1 under shoe 1 after coup 1 and shoe 2's burn
    card under shoe 2, both in coup 2's record before its opening; coup 2 is
    configured on shoe 2. Shoe 1's seal claims coup 1 alone, and an export of
    the table (shoe 1 sealed, shoe 2 in play) verifies 2 coups for the 2
    dealt: each coup counted once, live and offline."""
    async with Casino(nats_url, _tables()) as casino:
        reading = Reading(casino)
        await _between_coups_across_a_shoe_ended_by_a_ruling(reading)
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    filed = incidents_filed(history)
    taken_in = shoe_of_report(history)
    shoe_1, shoe_2 = f"{TABLE}-shoe-1", f"{TABLE}-shoe-2"
    assert [(read, subject) for read, subject, _, _ in filed] == [
        ("s1-0", shoe_1), ("s1-1", shoe_1), ("s1-2", shoe_1), ("s2-burn", shoe_2)]
    assert all(subject == env == card == taken_in[read] for read, subject, env, card in filed), filed
    coup_2 = [m for m in history if subjects.tokens(m.subject)[2] == f"{TABLE}-000002"
              and subjects.tokens(m.subject)[3] == "coup"]
    opening = next(e.data for m in coup_2 for e in m.batch.events if isinstance(e.data, CoupConfigured))
    assert (opening.shoe, subjects.tokens(next(m for m in coup_2 if any(
        isinstance(e.data, CoupConfigured) for e in m.batch.events)).subject)[1]) == (shoe_2, shoe_2)
    report = verify_history(history)
    assert report.findings == [] and report.coups == 2, report.findings

    recorded = [m for m in history if any(isinstance(e.data, RulesetRecorded) for e in m.batch.events)]
    own_1 = [m for m in history if subjects.tokens(m.subject)[1] == shoe_1]
    assert archive.sealable(own_1)
    sealed = archive.seal_shoe(TABLE, shoe_1, archive.GENESIS, own_1, [], recorded)
    assert (sealed.first_coup, sealed.last_coup) == (1, 1)
    own_2 = [m for m in history if subjects.tokens(m.subject)[1] == shoe_2]
    unsealed = archive.seal(TABLE, shoe_2, "", [*own_2, *recorded])
    out = io.BytesIO()
    archive.write_export(out, archive.Header(TABLE, archive.GENESIS, sealed.sealed.hash, 1, in_play=(shoe_2,)),
                         [sealed.sealed], [unsealed])
    _, offline = archive.verify_export(io.BytesIO(out.getvalue()), expect=sealed.sealed.hash)
    assert offline.findings == [] and offline.coups == 2, offline.findings


class Second:
    """A second dealer-policy instance at the same table, on the same record,
    answering what it is asked as the services answer (a conflict read back
    and decided again): nothing shares its view of the table."""

    def __init__(self, nc: Client, tables: dict[str, TableConfig]) -> None:
        self.service = DealerPolicyService(JetStreamEventStore(nc), Peer(nc, timeout=5, attempts=2), tables)

    async def ask(self, command: commands.Command) -> commands.Reply:
        return await decide(command, self.service.handle, self.service.reload, command.table)


async def test_with_two_instances_racing_each_incident_is_filed_under_the_shoe_its_card_came_from(
        nats_url: str) -> None:
    """A second dealer-policy, which has never asked the shoe service
    anything, takes the table's first burn card, which the shoe could not
    read, before the table's first coup; the first instance has the dealer
    key it in, the second has the supervisor confirm it; between coups 1 and
    2 the second takes a misdraw the first has ruled. Every incident, card
    keyed in and ruling is filed under shoe 1, the shoe in play, by subject
    and envelope, and the record verifies."""
    async with Casino(nats_url, _tables()) as casino:
        reading = Reading(casino)
        second = Second(casino.nc, casino.tables)
        waiting = await casino.ask(TABLE, "coup", commands.OpenCoup, dealer="D-1")
        assert waiting.clause == commands.SHUFFLING_MACHINE, waiting
        await reading.devices.shuffle()
        burn = reading.devices.cards.pop(0)
        unread = await second.ask(commands.CardRead("unread-burn", TABLE, ""))
        assert unread.waiting is not None and unread.waiting.kind == "key", unread
        keyed = await casino.ask(TABLE, "coup", commands.KeyCard, coup=f"{TABLE}-000001", card=burn, dealer="D-1")
        assert keyed.ok, keyed
        confirmed = await second.ask(commands.Rule(f"t-{uuid.uuid4().hex[:8]}", TABLE, f"{TABLE}-000001", "confirm",
                                                   SUPERVISOR, burn))
        assert confirmed.ok, confirmed
        await reading.deal()
        misdrawn = await second.ask(commands.CardRead("between-1", TABLE, reading.devices.cards.pop(0)))
        assert misdrawn.incident == "misdrawn", misdrawn
        assert (await reading.supervise(commands.Rule, coup=f"{TABLE}-000002", ruling="go_on")).ok
        await reading.deal()
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    shoe_1 = f"{TABLE}-shoe-1"
    filed = [(type(env.data).__name__, subjects.tokens(m.subject)[1], env.shoe) for m in history
             for env in m.batch.events if isinstance(env.data, CardIncident | CardKeyed | CoupRuled)]
    assert filed == [("CardIncident", shoe_1, shoe_1), ("CardKeyed", shoe_1, shoe_1), ("CoupRuled", shoe_1, shoe_1),
                     ("CardIncident", shoe_1, shoe_1), ("CoupRuled", shoe_1, shoe_1)], filed
    assert [e.data.shoe for m in history for e in m.batch.events if isinstance(e.data, CardIncident)] == [shoe_1] * 2
    report = verify_history(history)
    assert report.findings == [] and report.coups == 2, report.findings


async def test_an_instance_that_heard_the_shoe_wait_for_its_order_asks_again_before_saying_so(
        nats_url: str) -> None:
    """A second dealer-policy is refused the table's first opening: the shoe
    waits for its machine's order. The first instance opens and deals coup 1
    on the order since reported, to the player's decision, which then
    reaches the second. It is taken, and the answer says what the coup waits
    for next (the dealer's card), never that the shoe waits for an order (which would have the
    devices shuffle a new shoe in the middle of the coup, every card after
    it refused)."""
    async with Casino(nats_url, _tables()) as casino:
        reading = Reading(casino)
        second = Second(casino.nc, casino.tables)
        refused = await second.ask(commands.OpenCoup(f"t-{uuid.uuid4().hex[:8]}", TABLE, dealer="D-1", number=1))
        assert refused.clause == commands.SHUFFLING_MACHINE, refused
        for dealt in range(10):  # until a coup waits for the player's decision (a natural finishes one at once)
            coup = await reading.open()
            if dealt == 0:
                await casino.patiently(TABLE, "wager", commands.Sit, coup=coup, seat=1, player="P1")
            await casino.patiently(TABLE, "wager", commands.PlaceWager, coup=coup, seat=1, bet="box", amount=1000)
            reply = await casino.ask(TABLE, "coup", commands.CloseBetting, coup=coup)
            while reply.waiting is not None and reply.waiting.kind == "read":
                reply = await reading.devices.read()
            if reply.waiting is None or reply.waiting.kind != "finished":
                break
            await casino.settled(coup)
        w = reply.waiting
        assert w is not None and w.kind == "decision", reply
        stood = await second.ask(commands.Decide(f"t-{uuid.uuid4().hex[:8]}", TABLE, coup, w.seat, w.box_hand,
                                                 "stand"))
        assert stood.ok and stood.waiting is not None and stood.waiting.kind in ("read", "finished"), stood
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    assert not any(isinstance(e.data, shoe.ShoeEnded) for m in history for e in m.batch.events)


async def test_a_card_keyed_in_names_the_dealer_on_duty_and_is_confirmed_by_another(nats_url: str) -> None:
    """The table's first burn card, unread before any coup: keying it in with
    nobody signed in is refused; keyed by a supervisor's name, that
    supervisor's confirmation is refused (another confirms it); keyed again
    by a dealer, it is confirmed. Between coups 1 and 2 (coup 1 dealt by D-2)
    a card keyed in with no name is D-2's, the dealer on duty. Verification
    finds a record whose confirmer keyed the card, or whose card names nobody."""
    async with Casino(nats_url, _tables()) as casino:
        reading = Reading(casino)
        await casino.ask(TABLE, "coup", commands.OpenCoup)  # the shoe service takes the table: the machine's order
        await reading.devices.shuffle()
        burn = reading.devices.cards.pop(0)
        assert (await reading.report("", "unread-1")).waiting.kind == "key"  # type: ignore[union-attr]
        first = f"{TABLE}-000001"
        nobody = await casino.ask(TABLE, "coup", commands.KeyCard, coup=first, card=burn)
        assert (nobody.ok, nobody.clause) == (False, "unread card") and "no dealer is signed in" in nobody.reason
        assert (await casino.ask(TABLE, "coup", commands.KeyCard, coup=first, card=burn, dealer=SUPERVISOR)).ok
        own = await reading.supervise(commands.Rule, coup=first, ruling="confirm", card=burn)
        assert (own.ok, own.clause) == (False, "unread card") and "another confirms it" in own.reason, own
        assert (await casino.ask(TABLE, "coup", commands.KeyCard, coup=first, card=burn, dealer="D-9")).ok
        assert (await reading.supervise(commands.Rule, coup=first, ruling="confirm", card=burn)).ok
        await reading.deal(dealer="D-2")
        card = reading.devices.cards.pop(0)
        await reading.report("", "unread-2")
        assert (await casino.ask(TABLE, "coup", commands.KeyCard, coup=f"{TABLE}-000002", card=card)).ok
        confirmed = await reading.supervise(commands.Rule, coup=f"{TABLE}-000002", ruling="confirm", card=card)
        assert confirmed.waiting is not None and confirmed.waiting.incident == "misdrawn", confirmed  # none was due
        assert (await reading.supervise(commands.Rule, coup=f"{TABLE}-000002", ruling="go_on")).ok
        await reading.deal()
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    keyed = [(e.data.read, e.data.dealer) for m in history for e in m.batch.events if isinstance(e.data, CardKeyed)]
    assert keyed == [("unread-1", SUPERVISOR), ("unread-1", "D-9"), ("unread-2", "D-2")]
    assert verify_history(history).findings == []

    def keyed_by(name: str) -> list[Stored]:
        out = []
        for m in history:
            events = tuple(msgspec.structs.replace(e, data=msgspec.structs.replace(e.data, dealer=name))
                           if isinstance(e.data, CardKeyed) and e.data.read == "unread-2" else e for e in m.batch.events)
            out.append(msgspec.structs.replace(m, batch=envelope.Batch(events)))
        return out

    assert any("another confirms it" in f.what for f in verify_history(keyed_by(SUPERVISOR)).findings)
    assert any("no dealer is signed in" in f.what for f in verify_history(keyed_by("")).findings)


def _refiled(history: list[Stored], change: Callable[[Stored, dict[str, object]], str]) -> list[Stored]:
    """The record as an older version wrote it: each card incident at version 1
    (no shoe named), its message filed under the subject ``change`` gives, and
    each opening at version 6 (no shoe, no shoe a ruling ended before it)."""
    out = []
    for m in history:
        raw = json.loads(envelope.encode(m.batch))
        subject = m.subject
        for e in raw["events"]:
            if e["type"] == "coup.configured":
                e["version"] = 6
                del e["data"]["shoe"], e["data"]["ruled_ended"]
            if e["type"] == "coup.card_incident":
                e["version"] = 1
                del e["data"]["shoe"]
                subject = change(m, e)
        out.append(Stored(m.seq, subject, envelope.decode(json.dumps(raw).encode()), m.msg_id))
    return out


async def test_records_filed_before_incidents_named_their_shoe_still_read_and_a_misfiled_one_is_named(
        nats_url: str) -> None:
    """Card incidents of version 1 (no shoe named) filed where their cards
    came from read and verify as they are. Filed as the engine filed them
    before (a new shoe's burn card under the shoe of the coup before, its
    envelope naming no shoe), verification names each such message, never
    accepting it in silence, and the coup still replays."""
    async with Casino(nats_url, _tables()) as casino:
        await _between_coups_across_a_shoe_ended_by_a_ruling(Reading(casino))
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    older = _refiled(history, lambda m, e: m.subject)
    assert verify_history(older).findings == []
    shoe_1 = f"{TABLE}-shoe-1"

    def as_before(m: Stored, e: dict[str, object]) -> str:
        table, _, coup, aggregate = subjects.tokens(m.subject)
        e["shoe"] = ""
        return subjects.event(table, shoe_1, coup, aggregate)

    misfiled = _refiled(history, as_before)
    findings = verify_history(misfiled).findings
    named = [f.what for f in findings]
    assert any("s2-burn" in what and f"came from shoe {TABLE}-shoe-2" in what for what in named), named
    assert any("its envelope names" in what for what in named), named
    assert all(f.coup == f"{TABLE}-000002" for f in findings), findings
    coup_2 = [m for m in misfiled if subjects.tokens(m.subject)[2] == f"{TABLE}-000002"]
    replayed = replay_coup(coup_2)
    assert any("s2-burn" in step.text for step in replayed.steps)


async def test_no_card_leaves_the_shoe_for_a_coup_before_its_betting_closed_is_recorded(nats_url: str) -> None:
    """At every kind of table (shuffled and card-reading, baccarat and
    blackjack), two instances of every service dealing, the first card the
    shoe records for each coup comes after the coup's betting closed in the
    record; verification holds every coup to it, and finds a record in which
    a card was drawn first."""
    tables = default_tables(4, ["baccarat-000-methods", BLACKJACK], readers=2)  # the simulator's supervisors
    assert sorted(bool(c.source) for c in tables.values()) == [False, False, True, True]
    async with Casino(nats_url, tables) as casino:
        for kind in ("shoe", "wager", "dealer-policy", "settlement"):
            await casino.start(kind)
        sim = Simulator(casino.nc, tables, seed=9, patience=40)
        await asyncio.wait_for(sim.run(6), 600)
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    closed_at: dict[str, tuple[int, int]] = {}  # (the message's sequence, the event's place in it)
    first_drawn: dict[str, tuple[int, int]] = {}
    for m in history:
        for i, env in enumerate(m.batch.events):
            if type(env.data) in games.BETTING_CLOSED:
                closed_at.setdefault(subjects.tokens(m.subject)[2], (m.seq, i))
            elif isinstance(env.data, shoe.CardDrawn):
                first_drawn.setdefault(env.data.coup_id, (m.seq, i))
    assert len(first_drawn) == 24 and first_drawn.keys() <= closed_at.keys()
    assert all(closed_at[coup] < at for coup, at in first_drawn.items()), {
        c: (closed_at.get(c), s) for c, s in first_drawn.items() if closed_at.get(c, (0, 0)) >= s}
    report = verify_history(history)
    assert report.findings == [] and report.coups == 24, report.findings

    coup = min(c for c in first_drawn if first_drawn[c][0] == closed_at[c][0])  # drawn in the closing's message
    seq = closed_at[coup][0]
    # The record as if the card had been drawn first: the shoe's record of the draw in a message before the
    # closing's (sequences renumbered).
    swapped: list[Stored] = []
    for m in history:
        if m.seq != seq:
            swapped.append(msgspec.structs.replace(m, seq=2 * m.seq))
            continue
        carried = tuple(e for e in m.batch.events if isinstance(e.data, CARRIED))
        rest = tuple(e for e in m.batch.events if not isinstance(e.data, CARRIED))
        swapped += [msgspec.structs.replace(m, seq=2 * seq - 1, batch=Batch(carried)),
                    msgspec.structs.replace(m, seq=2 * seq, batch=Batch(rest))]
    assert any(f.coup == coup and "before its betting closed was recorded" in f.what
               for f in verify_history(swapped).findings)
