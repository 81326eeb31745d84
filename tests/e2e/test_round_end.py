"""The terminal has a coup's result as soon as the result is recorded; the
round's end at the shoe (the cards to the discard rack), where no run of the
coup's last cards ended it in its draw, is asked meanwhile, and the table's
next coup does not start before it: asked again if the first asking failed,
and recorded once; the shoe answers it asked again as done."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from services.dealer_policy.sources import ShuffledShoe
from services.shoe.service import ShoeService

from casino.audit.audits import verify_history
from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules import shoe
from casino.rules.shoe import RoundEnded, RoundStarted
from casino.store import subjects
from tests.e2e.casino import SUPERVISOR, Casino

pytestmark = pytest.mark.anyio
TABLES = default_tables(1, ["baccarat-000-methods"])
TABLE = next(iter(TABLES))


async def test_a_failed_round_end_is_asked_again_before_the_next_coup_starts(
        nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dealer-policy of an earlier release, whose runs carry no pickup: the
    shoe ends no round in a draw, and each round's end is asked for, first
    for the result's append to carry it, then beside the answer. Both
    failing, the next coup's opening asks again, and the round ends once."""
    asked: list[str] = []
    handle = ShoeService.handle
    draw = ShuffledShoe.draw

    async def earlier(self: ShuffledShoe, peer: Peer, ask: commands.DrawCard) -> commands.Reply:
        run = ask.run and msgspec.structs.replace(ask.run, pickup=None)
        return await draw(self, peer, msgspec.structs.replace(ask, run=run))

    monkeypatch.setattr(ShuffledShoe, "draw", earlier)

    async def fails_once(self: ShoeService, cmd: commands.ShoeCommand) -> commands.Reply:
        if isinstance(cmd, commands.EndRound):
            asked.append(cmd.coup)
            if len(asked) <= 2:
                raise RuntimeError("the shoe cannot write just now")
        return await handle(self, cmd)

    monkeypatch.setattr(ShoeService, "handle", fails_once)
    async with Casino(nats_url, TABLES) as casino:

        async def shoe_events() -> list[tuple[int, object]]:  # the shoe's own messages, and those coups carry
            return [(m.seq, e.data) for m in await casino.store.read(subjects.table_filter(TABLE))
                    for e in m.batch.events if isinstance(e.data, shoe.ShoeEvent)]

        first, second = f"{TABLE}-000001", f"{TABLE}-000002"
        await Simulator(casino.nc, TABLES, seed=3, patience=40).run(1)  # answered and settled
        for _ in range(100):  # the round's end is asked beside the answer, once the result's asking failed
            if len(asked) == 2:
                break
            await asyncio.sleep(0.05)
        assert asked == [first, first]
        assert not [e for _, e in await shoe_events() if isinstance(e, RoundEnded)]

        await Simulator(casino.nc, TABLES, seed=4, patience=40).run(1)
        for _ in range(100):  # the second coup's round ends as its result is answered
            events = await shoe_events()
            ended = [(seq, e.coup_id) for seq, e in events if isinstance(e, RoundEnded)]
            if len(ended) == 2:
                break
            await asyncio.sleep(0.05)
        started = {e.coup_id: seq for seq, e in events if isinstance(e, RoundStarted)}
        assert [coup for _, coup in ended] == [first, second]  # each recorded once
        assert ended[0][0] == started[second]  # the first coup's round ended, and the second's started, in one message
        assert asked == [first, first, first, second]

        # A round's end asked again (an instance restarted, another finished the
        # coup) once the next round has started is answered as done, nothing written.
        peer = Peer(casino.nc, timeout=10)
        third = await peer.ask(subjects.command(TABLE, "coup"), commands.OpenCoup(id="third", table=TABLE, number=3))
        assert third.ok and third.coup == f"{TABLE}-000003"
        before = await shoe_events()
        again = await peer.ask(subjects.command(TABLE, "shoe"), commands.EndRound(
            id=f"{second}:end", table=TABLE, coup=second, ruleset=TABLES[TABLE].ruleset, pickup=()))
        assert again.ok, again
        assert await shoe_events() == before


async def test_a_dealer_policy_stopping_waits_for_the_round_end_it_asked(nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        await Simulator(casino.nc, TABLES, seed=5, patience=40).run(1)
        dealer = await casino.stop("dealer-policy")
        ending = dealer.service.tables[TABLE].ending
        assert ending is not None and ending.done() and ending.result().ok


async def test_a_round_the_shoe_does_not_deal_holds_its_coup_for_compliance_and_the_table_deals_on(
        nats_url: str) -> None:
    """The shoe ends a coup's round before the dealer-policy has (a fault, or
    whoever holds a writer's credential): the coup's next card is refused by
    the shoe (``shoe round``), the coup is held for compliance, the next
    opening records it held and ends its round as the shoe holds it, and the
    table deals on; verification names the held coup and nothing else."""
    tables = default_tables(1, ["blackjack-002-hole-card"])
    [table] = tables
    async with Casino(nats_url, tables) as casino:
        for dealt in range(12):  # a coup that waits for the player's decision (a blackjack ends one at once)
            coup = (await casino.ask(table, "coup", commands.OpenCoup)).coup
            if dealt == 0:
                await casino.patiently(table, "wager", commands.Sit, coup=coup, seat=1, player="P1")
            await casino.patiently(table, "wager", commands.PlaceWager, coup=coup, seat=1, bet="box", amount=1000)
            closed = await casino.ask(table, "coup", commands.CloseBetting, coup=coup)
            if closed.waiting is not None and closed.waiting.kind == "decision":
                break
        assert closed.waiting is not None and closed.waiting.kind == "decision", closed
        layout = [e.card for _, e in await casino.events(subjects.coup_filter(coup))  # the shoe's, and carried
                  if type(e).__name__ == "CardDrawn"]
        ended = await Peer(casino.nc).ask(subjects.command(table, "shoe"), commands.EndRound(
            "not-the-dealer", table, coup, tables[table].ruleset, tuple(layout)))
        assert ended.ok, ended
        # a hit always asks the shoe for a card (a stand may need none: a dealer on 17 or more)
        refused = await casino.ask(table, "coup", commands.Decide, coup=coup, seat=1, hand=0, action="hit")
        assert not refused.ok and refused.clause in (commands.HELD, "shoe round"), refused
        status = await casino.ask(table, "coup", commands.Status)
        assert status.waiting is not None and status.waiting.kind == "held", status
        await Simulator(casino.nc, tables, seed=4, patience=40).run(3)  # the table deals on
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    report = verify_history(history)
    assert {f.coup for f in report.findings} == {coup} and report.coups == dealt + 4, report.findings
    assert any("held for compliance" in f.what and "shoe refused" in f.what for f in report.findings)


async def test_a_rounds_last_card_of_a_run_ends_it_in_its_own_append_at_every_kind_of_table(nats_url: str) -> None:
    """Shuffled and card-reading, baccarat and blackjack, two instances of
    every service: a round whose last cards are a run (the tableau's, the
    dealer's) ends in the message of its last card, drawn or read, with the
    next coup's round started; every round ends once, after all its cards;
    and the record verifies."""
    tables = {name: msgspec.structs.replace(config, supervisors=(*config.supervisors, SUPERVISOR))
              for name, config in default_tables(4, ["baccarat-000-methods", "blackjack-002-hole-card"],
                                                 readers=2).items()}
    async with Casino(nats_url, tables) as casino:
        for kind in ("shoe", "wager", "dealer-policy", "settlement"):
            await casino.start(kind)
        await asyncio.wait_for(Simulator(casino.nc, tables, seed=6, patience=40).run(8), 600)
        for running in casino.running:  # the last coups' rounds, where EndRound ends them, asked beside answers
            if running.kind == "dealer-policy":
                await running.service.finish_rounds()
        history = await casino.store.read(f"{subjects.EVENTS}.>")
    ended: dict[str, int] = {}
    last_card: dict[str, int] = {}
    in_its_draw: dict[str, int] = dict.fromkeys(tables, 0)
    for m in history:
        kinds = [type(e.data) for e in m.batch.events]
        for e in m.batch.events:
            if isinstance(e.data, shoe.CardDrawn):
                last_card[e.data.coup_id] = m.seq
            elif isinstance(e.data, shoe.RoundEnded):
                assert e.data.coup_id not in ended, f"{e.data.coup_id}'s round ended twice"
                ended[e.data.coup_id] = m.seq
                if shoe.CardDrawn in kinds:  # the shoe's message, or the coup's carrying it with the cards dealt
                    shoes = [k for k in kinds if issubclass(k, shoe.ShoeEvent)]
                    assert shoes[-2:] == [shoe.RoundEnded, shoe.RoundStarted] or shoes[-1] == shoe.RoundEnded
                    in_its_draw[subjects.tokens(m.subject)[0]] += 1
    assert ended.keys() == last_card.keys() and len(ended) == 32
    assert all(last_card[coup] <= seq for coup, seq in ended.items())  # no card of a round after its end
    assert all(in_its_draw.values()), in_its_draw  # at every kind of table
    report = verify_history(history)
    assert report.findings == [] and report.coups == 32, report.findings
