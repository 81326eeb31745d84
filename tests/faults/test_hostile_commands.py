"""Random command sequences, hostile ones among them, driven at the four
services (wired in memory through their real command decoding): nothing
crashes, a refused command writes nothing, and every finished coup verifies
with its cards and its money accounted for."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
from bench.history import carried
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from services.dealer_policy.service import DealerPolicyService
from services.settlement.service import SettlementService
from services.shoe.secrets import MemorySecrets
from services.shoe.service import ShoeService
from services.wager.service import WagerService

from casino.audit.history import by_coup
from casino.audit.verify import verify_coup
from casino.cli.run import APPROVALS
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.protocol.service import answer
from casino.rules.errors import RuleViolation
from casino.rules.runs import DealerRun, Pickup, TableauRun
from casino.rules.shoe import CardDrawn, RoundEnded
from casino.store import subjects
from casino.store.envelope import type_of
from casino.store.eventstore import InMemoryEventStore, Stored
from tests.examples import examples
from tests.rules.stacking import baccarat, blackjack, burn_cards, order
from tests.variants import ruleset_variant

TABLES = {"B": TableConfig("baccarat-000-methods", approvals=APPROVALS), "J": TableConfig("blackjack-002-hole-card")}


class LocalPeer:
    """Request/reply between the services in memory, through the same decoding
    and refusal path as on NATS."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[Any, Any, Any]] = {}

    async def ask(self, subject: str, command: commands.Command) -> commands.Reply:
        return commands.reply_decoder.decode(await self.raw(subject, commands.encoder.encode(command)))

    async def raw(self, subject: str, data: bytes) -> bytes:
        decoder, handle, reload = self.routes[subject.split(".")[-1]]
        return await answer(data, decoder, handle, reload)

    async def must(self, subject: str, command: commands.Command) -> commands.Reply:
        from casino.rules.errors import RuleViolation

        reply = await self.ask(subject, command)
        if not reply.ok:
            raise RuleViolation(reply.clause, reply.reason)
        return reply


async def deal_in_memory(coups: int, same_ids: bool = False) -> InMemoryEventStore:
    """Coups dealt to the end at every table, with wagers, by the services in
    memory; with ``same_ids`` every table's terminal numbers its commands alike."""
    store, peer = InMemoryEventStore(), LocalPeer()
    shoe = ShoeService(store, MemorySecrets())
    wager, dealer = WagerService(store), DealerPolicyService(store, peer, TABLES)  # type: ignore[arg-type]
    peer.routes = {"shoe": (commands.shoe_decoder, shoe.handle, shoe.reload),
                   "wager": (commands.wager_decoder, wager.handle, wager.reload),
                   "book": (commands.book_decoder, wager.handle, wager.reload),
                   "coup": (commands.coup_decoder, dealer.handle, dealer.reload)}
    for table in TABLES:
        tid = "" if same_ids else table
        for n in range(coups):
            reply = await peer.ask(f"casino.cmd.{table}.coup", commands.OpenCoup(id=f"o{tid}{n}", table=table,
                                                                                 number=n + 1))
            assert reply.ok, reply
            coup = reply.coup
            for seat, bet in ((1, "banker" if table == "B" else "box"), (3, "player" if table == "B" else "box")):
                placed = await peer.ask(f"casino.cmd.{table}.wager", commands.PlaceWager(
                    id=f"w{tid}{n}-{seat}", table=table, coup=coup, seat=seat, bet=bet, amount=5000))
                assert placed.ok, placed
            reply = await peer.ask(f"casino.cmd.{table}.coup", commands.CloseBetting(id=f"c{tid}{n}", table=table, coup=coup))
            k = 0
            while reply.waiting is not None and reply.waiting.kind != "finished":
                step, k = _follow(reply.waiting), k + 1
                cid, seat = f"{step[0]}{tid}{n}-{k}", step[1]
                cmd: commands.Command
                if step[0] == "answer":
                    cmd = commands.AnswerOffer(id=cid, table=table, coup=coup, seat=seat, accept=True)
                elif step[0] == "expose":
                    cmd = commands.ExposeHand(id=cid, table=table, coup=coup, seat=seat, hand=step[2])
                else:
                    cmd = commands.Decide(id=cid, table=table, coup=coup, seat=seat, hand=step[2], action="stand")
                reply = await peer.ask(f"casino.cmd.{table}.coup", cmd)
                assert reply.ok, reply
    return store


seats = st.sampled_from([1, 2, 3, 5, 7, 14, 99, 0, -1])
amounts = st.one_of(st.sampled_from([2500, 5000, 1000, 500000]), st.integers(-10, 2_000_000))
garbage = st.one_of(st.binary(max_size=64), st.just(b'{"type":"table.open_coup"}'),
                    st.just(b'{"type":"table.place_wager","id":"x","table":"B","coup":"B-000001","seat":2,'
                            b'"bet":"banker","amount":12.5}'), st.just(b"{" * 10000))
step = st.one_of(
    # An opening, as a supervisor directs (in memory, the supervisor's subject is the name it carries) or not.
    st.tuples(st.just("open"), st.sampled_from(["", "method_a", "method_b", "method_c", "method_d", "style_a"]),
              st.booleans()),
    st.tuples(st.just("wager"), seats, st.sampled_from(["banker", "player", "tie", "box", "dragon"]), amounts),
    st.tuples(st.just("close")),
    st.tuples(st.just("answer"), seats, st.booleans()),
    st.tuples(st.just("expose"), seats, st.sampled_from(["player", "banker"]), st.booleans()),
    st.tuples(st.just("decide"), seats, st.integers(0, 2),
              st.sampled_from(["stand", "hit", "double", "split", "insurance"]), st.integers(0, 3000)),
    st.tuples(st.just("garbage"), garbage),
    st.tuples(st.just("follow")),  # do what the coup waits for, sensibly
)


async def run(steps: list[tuple[Any, ...]]) -> None:
    store = InMemoryEventStore()
    peer = LocalPeer()
    shoe, wager = ShoeService(store, MemorySecrets()), WagerService(store)
    dealer, settle = DealerPolicyService(store, peer, TABLES), SettlementService(store)  # type: ignore[arg-type]
    peer.routes = {"shoe": (commands.shoe_decoder, shoe.handle, shoe.reload),
                   "wager": (commands.wager_decoder, wager.handle, wager.reload),
                   "book": (commands.book_decoder, wager.handle, wager.reload),
                   "coup": (commands.coup_decoder, dealer.handle, dealer.reload)}
    ids = iter(range(10**6))
    for table in TABLES:
        for s in steps:
            status = await peer.ask(f"casino.cmd.{table}.coup", commands.Status(id="s", table=table))
            coup, w = status.coup, status.waiting or commands.Waiting("open")
            kind = s[0]
            if kind == "follow":
                s = _follow(w)
                kind = s[0]
            cid = f"h{next(ids)}"
            if kind == "garbage":
                raw = await peer.raw(f"casino.cmd.{table}.coup", s[1])
                reply = commands.reply_decoder.decode(raw)
                assert not reply.ok and reply.clause == "protocol"
                continue
            cmd: commands.Command
            if kind == "open":
                cmd = commands.OpenCoup(id=cid, table=table, procedure=s[1] if table == "B" else "",
                                        supervisor="SUP-1" if s[2] else "",
                                        number=(subjects.coup_number(coup) or 0) + 1)
            elif kind == "wager":
                cmd = commands.PlaceWager(id=cid, table=table, coup=coup, seat=s[1], bet=s[2], amount=s[3])
            elif kind == "close":
                cmd = commands.CloseBetting(id=cid, table=table, coup=coup)
            elif kind == "answer":
                cmd = commands.AnswerOffer(id=cid, table=table, coup=coup, seat=s[1], accept=s[2])
            elif kind == "expose":
                kind_ = commands.ExposeHand if s[3] else commands.ReturnCards
                cmd = kind_(id=cid, table=table, coup=coup, seat=s[1], hand=s[2])
            else:
                cmd = commands.Decide(id=cid, table=table, coup=coup, seat=s[1], hand=s[2], action=s[3], amount=s[4])
            service = "wager" if isinstance(cmd, commands.PlaceWager) else "coup"
            before = len(store.messages)
            reply = await peer.ask(f"casino.cmd.{table}.{service}", cmd)
            assert reply.clause != "internal", reply
            if not reply.ok and service == "wager":
                assert len(store.messages) == before  # a refused command writes nothing
        # settle what finished (settlement follows the table's events), then check every finished coup
        for msg in await store.read(subjects.table_filter(table)):
            await settle.on_coup_events(msg)
    stored = await store.read(f"{subjects.EVENTS}.>")
    for coup, msgs in by_coup(stored).items():
        finished = any(e.type.endswith("cards_picked_up") for m in msgs for e in m.batch.events)
        if finished:
            assert verify_coup(msgs) == [], coup


def _follow(w: commands.Waiting) -> tuple[Any, ...]:
    if w.kind in ("open", "finished"):
        return ("open", "", False)
    if w.kind == "close_betting":
        return ("close",)
    if w.kind == "answer":
        return ("answer", w.seat, True)
    if w.kind == "expose":
        return ("expose", w.seat, w.hand, True)
    if w.kind == "decision":
        return ("decide", w.seat, w.box_hand, "stand", 0)
    return ("close",)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=5, max_size=40))
def test_hostile_command_sequences_never_break_the_rules_or_the_records(steps: list[tuple[Any, ...]]) -> None:
    asyncio.run(run(steps))


def test_a_command_of_absurd_size_is_refused() -> None:
    async def go() -> commands.Reply:
        peer = LocalPeer()
        store = InMemoryEventStore()
        dealer = DealerPolicyService(store, peer, TABLES)  # type: ignore[arg-type]
        peer.routes = {"coup": (commands.coup_decoder, dealer.handle, dealer.reload)}
        big = msgspec.json.encode({"type": "table.open_coup", "id": "x" * 200_000, "table": "B"})
        return commands.reply_decoder.decode(await peer.raw("casino.cmd.B.coup", big))

    reply = asyncio.run(go())
    assert (reply.ok, reply.clause) == (False, "protocol") and "too large" in reply.reason


def test_a_reload_that_fails_is_answered_as_internal_not_left_unanswered() -> None:
    async def handler(command: Any) -> commands.Reply:
        raise RuleViolation("000 8.11", "refused on state that may be stale")

    async def reload(command: Any) -> None:
        raise TimeoutError("the broker is away")

    command = commands.encoder.encode(commands.Status(id="s1", table="BAC000-1"))
    reply = msgspec.json.decode(asyncio.run(answer(command, commands.coup_decoder, handler, reload)), type=commands.Reply)
    assert (reply.ok, reply.clause) == (False, "internal")


def test_terminals_at_two_tables_may_number_their_commands_alike() -> None:
    """A terminal's command ids are its own: the same id at another table is
    another command, recorded, never answered as a duplicate of the first."""
    async def dealt() -> list[Stored]:
        store = await deal_in_memory(3, same_ids=True)
        settlement = SettlementService(store)
        for msg in await store.read(f"{subjects.EVENTS}.>"):
            await settlement.on_coup_events(msg)
        return await store.read(f"{subjects.EVENTS}.>")

    stored = asyncio.run(dealt())
    placed = [m for m in stored if any(e.type == "wager.placed" for e in m.batch.events)]
    assert len(placed) == 2 * 3 * 2  # two wagers a coup, three coups, two tables
    coups = by_coup(stored)
    assert len(coups) == 6 and all(verify_coup(msgs) == [] for msgs in coups.values())



def test_a_wager_command_naming_another_tables_coup_is_refused_and_writes_nothing() -> None:
    """A terminal commands its own table only: naming its own table with
    another table's coup neither wagers on that coup nor opens its book."""
    store = InMemoryEventStore()
    wager = WagerService(store)
    opened = commands.OpenBook(id="open", table="B", coup="B-000001", shoe="B-shoe-1", ruleset="baccarat-000-methods")
    assert asyncio.run(wager.handle(opened)).ok
    written = len(store.messages)
    for command in (commands.PlaceWager(id="w", table="A", coup="B-000001", seat=1, bet="banker", amount=5000),
                    commands.CloseBook(id="close", table="A", coup="B-000001"),
                    commands.OpenBook(id="open", table="A", coup="B-000001", shoe="A-shoe-1", ruleset="baccarat-000-methods")):
        with pytest.raises(RuleViolation, match="coup B-000001 is dealt at table B, not A"):
            asyncio.run(wager.handle(command))
    assert len(store.messages) == written and wager.books["B-000001"].book.wagers == ()
    # A service that does not hold the book (restarted) looks for it at the
    # command's own table only, finds none, and refuses for want of one.
    restarted = WagerService(store)
    wager_a = commands.PlaceWager(id="w", table="A", coup="B-000001", seat=1, bet="banker", amount=5000)
    asyncio.run(restarted.reload(wager_a))
    with pytest.raises(RuleViolation, match="there is no book for coup B-000001"):
        asyncio.run(restarted.handle(wager_a))
    assert len(store.messages) == written and "B-000001" not in restarted.books


def test_a_draw_from_a_shoe_with_no_card_left_is_refused_naming_the_shoe(tmp_path: Path) -> None:
    """A ruleset may put the cut card so deep that a long round empties the
    shoe (one deck, 95%): the next draw is refused, not failed."""
    ruleset = ruleset_variant(tmp_path, "blackjack-003-no-hole-card", decks=1, penetration=0.95)
    shoe = ShoeService(InMemoryEventStore(), MemorySecrets())

    def draw(index: int) -> commands.Reply:
        # Each draw recorded as the dealer-policy's append carries it, before the next is asked.
        reply = asyncio.run(shoe.handle(commands.DrawCard(id=f"d{index}", table="T", coup="T-1", ruleset=ruleset,
                                                          index=index, after=f"d{index - 1}" if index else "")))
        asyncio.run(carried(shoe, reply, f"d{index}", "T", "T-1", ""))
        return reply

    assert asyncio.run(shoe.handle(commands.StartRound(id="start", table="T", coup="T-1", ruleset=ruleset))).ok
    assert all(draw(index).ok for index in range(51))  # a deck less the burn card (002 (3))
    with pytest.raises(RuleViolation, match="shoe T-shoe-1 has no card left for coup T-1"):
        draw(51)


def test_a_draw_by_the_tableau_is_one_step_asked_again_the_same_and_refused_at_blackjack() -> None:
    """The dealer-policy asks for a baccarat run the tableau alone decides in
    one draw: the shoe draws every card the tableau calls for as one batch; the
    same draw asked again (a retry, a resumed dealer) is answered with the same
    cards and writes nothing. The run's rule comes with the draw: the shoe
    holds no game of its own (which game names which run: tests/rules)."""
    store = InMemoryEventStore()
    shoe = ShoeService(store, MemorySecrets(), shuffle=lambda table, decks: (
        order(decks, ["2S", "3H", "2D", "3C", "6H", "9D"], burn_cards(baccarat().shoe)), "salt"))

    def ask(command: commands.Command) -> commands.Reply:
        return asyncio.run(shoe.handle(command))

    assert ask(commands.StartRound(id="start", table="T", coup="T-1", ruleset="baccarat-000-methods")).ok
    draw = commands.DrawCard(id="T-1:draw:0", table="T", coup="T-1", ruleset="baccarat-000-methods", index=0, count=4,
                             run=TableauRun())
    written = len(asyncio.run(store.read(f"{subjects.EVENTS}.>")))
    first = ask(draw)
    assert first.cards == ("2S", "3H", "2D", "3C", "6H", "9D")  # both hands draw a third card
    assert ask(draw) == first
    # One step, given whole for the coup's append to carry: the shoe writes nothing of it.
    assert len(asyncio.run(store.read(f"{subjects.EVENTS}.>"))) == written
    assert [e.card for e in first.carried if isinstance(e, CardDrawn)] == list(first.cards)


def test_a_draw_by_the_dealers_rule_is_one_step_asked_again_the_same() -> None:
    """002 (7), 003 7.6: once every player has acted, the dealer-policy asks for
    the dealer's cards in one draw: the shoe draws each card the dealer's rule
    calls for (after 6H: 5C, 2D, 3S to 16, then KH) as one batch, and not the
    card after; asked again, the same cards, nothing written."""
    store = InMemoryEventStore()
    rules = "blackjack-003-no-hole-card"
    shoe = ShoeService(store, MemorySecrets(), shuffle=lambda table, decks: (
        order(decks, ["TS", "6H", "9D", "5C", "2D", "3S", "KH", "QD"], burn_cards(blackjack(rules).shoe)), "salt"))

    def ask(command: commands.Command) -> commands.Reply:
        return asyncio.run(shoe.handle(command))

    assert ask(commands.StartRound(id="start", table="J", coup="J-1", ruleset=rules)).ok
    dealt = ask(commands.DrawCard(id="J-1:draw:0", table="J", coup="J-1", ruleset=rules, index=0, count=3))
    assert dealt.cards == ("TS", "6H", "9D")  # 003 7.3: a box, the dealer, the box
    asyncio.run(carried(shoe, dealt, "J-1:draw:0", "J", "J-1", ""))  # recorded as the coup's append carries it
    written = len(asyncio.run(store.read(f"{subjects.EVENTS}.>")))
    draw = commands.DrawCard(id="J-1:draw:3", table="J", coup="J-1", ruleset=rules, index=3,
                             run=DealerRun(("6H",), hits_soft_17=False), after="J-1:draw:0")
    first = ask(draw)
    assert first.cards == ("5C", "2D", "3S", "KH") and first.positions == (4, 5, 6, 7)  # after the burn
    assert ask(draw) == first
    assert len(asyncio.run(store.read(f"{subjects.EVENTS}.>"))) == written  # one step, carried: nothing written
    assert [e.card for e in first.carried if isinstance(e, CardDrawn)] == list(first.cards)


def test_a_run_with_its_pickup_ends_the_round_in_its_draw_and_is_asked_again_the_same() -> None:
    """A run draws the coup's last cards: with its pickup, the round ends
    and the next coup's round starts in the draw's own append (one append a
    coup less). The dealer-policy may ask again, or a resumed one after a
    crash before the deal was recorded: the shoe, this instance or one
    started afresh from the record, answers with the same cards, writes
    nothing, and answers the round's end as done."""
    store = InMemoryEventStore()
    rules = "baccarat-000-methods"

    def shoe_service() -> ShoeService:
        return ShoeService(store, MemorySecrets(), shuffle=lambda table, decks: (
            order(decks, ["2S", "3H", "2D", "3C", "6H", "9D"], burn_cards(baccarat().shoe)), "salt"))

    shoe = shoe_service()
    assert asyncio.run(shoe.handle(commands.StartRound(id="start", table="T", coup="T-000001", ruleset=rules))).ok
    pickup = Pickup()  # baccarat: in the order dealt, every card the run's
    draw = commands.DrawCard(id="T-000001:draw:0", table="T", coup="T-000001", ruleset=rules, index=0, count=4,
                             run=TableauRun(pickup), next="T-000002")
    first = asyncio.run(shoe.handle(draw))
    assert first.cards == ("2S", "3H", "2D", "3C", "6H", "9D")
    assert [type_of(e) for e in first.carried] == [*["shoe.card_drawn"] * 6, "shoe.round_ended", "shoe.round_started"]
    ended = first.carried[-2]
    assert isinstance(ended, RoundEnded) and ended.pickup == first.cards
    asyncio.run(carried(shoe, first, draw.id, "T", "T-000001", ""))  # recorded as the coup's append carries it
    written = asyncio.run(store.read(f"{subjects.EVENTS}.>"))
    end = commands.EndRound(id="T-000001:end", table="T", coup="T-000001", ruleset=rules, pickup=first.cards,
                            next="T-000002", after=draw.id)
    for asked in (shoe, shoe_service()):  # asked again, and by an instance folded from the record
        assert asyncio.run(asked.handle(draw)) == first
        assert asyncio.run(asked.handle(end)) == commands.Reply(True, coup="T-000002", shoe="T-shoe-1")
        with pytest.raises(RuleViolation, match="not the round being dealt"):  # no card beyond the run's
            asyncio.run(asked.handle(msgspec.structs.replace(draw, id="T-000001:draw:6", index=6, count=1, run=None)))
    assert len(asyncio.run(store.read(f"{subjects.EVENTS}.>"))) == len(written)


@pytest.mark.anyio
async def test_a_coup_opened_while_the_wager_service_is_away_gets_its_book_once_it_is_back(nats_url: str) -> None:
    """The opening is answered once it is recorded, the wager service away:
    the book follows from the record, not from a request the answer waits
    for. Away for longer than the dealer-policy asks a peer (about 20 s),
    the terminal's wager finds no wager service and is asked again; once it
    is back the book is open (asked for by the dealer-policy until the wager
    service answers, or opened by the wager service from the coup's record
    at the first wager, whichever comes first, recorded once), with nothing
    restarted, and the coup takes the wager and closes on it."""
    from tests.e2e.casino import Casino

    tables = {"BAC000-1": TableConfig("baccarat-000-methods")}
    async with Casino(nats_url, tables) as casino:
        await casino.stop("wager")
        opening = commands.OpenCoup(id="open-while-away", table="BAC000-1", procedure="method_a", number=1)
        opened = await casino.peer.ask(subjects.command("BAC000-1", "coup"), opening)
        assert opened.ok and opened.coup == "BAC000-1-000001", opened
        assert opened.waiting is not None and opened.waiting.kind == "close_betting"
        wager = commands.PlaceWager(id="bet-while-away", table="BAC000-1", coup=opened.coup, seat=1, bet="banker",
                                    amount=5000)
        with pytest.raises(RuntimeError, match="no answer"):
            await casino.peer.ask(subjects.command("BAC000-1", "wager"), wager)
        await asyncio.sleep(30.0)
        await casino.start("wager")
        placed = await casino.again("wager", wager)
        assert placed.ok, placed
        again = await casino.again("coup", opening)  # asked again: the coup it opened
        assert again.ok and again.coup == opened.coup, again
        closed = await casino.ask("BAC000-1", "coup", commands.CloseBetting, coup=opened.coup)
        assert closed.ok, closed
        stored = await casino.store.read(subjects.event("BAC000-1", "*", opened.coup, "wager"))
        assert [type(e.data).__name__ for m in stored for e in m.batch.events] == [
            "BookOpened", "WagerPlaced", "BookClosed"]
        await casino.settled(opened.coup, timeout=30)

