"""Full coups through all four services on real NATS: for each baccarat method
and style and each blackjack procedure, the recorded events are exactly those
of the rules library's golden coup for the same stacked shoe, and the
settlement pays exactly the library's payouts."""

from __future__ import annotations

import pytest

from casino.cli.simulator import until_finished
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.rules import play
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.shoe import CardDrawn, RoundEnded, RoundStarted, ShoeEvent
from casino.rules.wagers import Wager
from casino.store import subjects
from casino.store.envelope import CARRIED, CoupConfigured
from tests.e2e.casino import SUPERVISOR, Casino, order_of
from tests.rules.stacking import Scripted, baccarat, blackjack, burn_cards, order

pytestmark = pytest.mark.anyio

APPROVALS = (baccarat_messages.Approval("method_b", "inspector", "INS-1"), baccarat_messages.Approval("holder_plays_player", "casino_supervisor", "SUP-1"))
TABLES = {
    "BAC000": TableConfig("baccarat-000-methods", approvals=APPROVALS),
    "BAC001": TableConfig("baccarat-001-styles"),
    "BJ002": TableConfig("blackjack-002-hole-card"),
    "BJ003": TableConfig("blackjack-003-no-hole-card"),
}
DRAWS = ["2S", "3H", "2D", "3C", "6H", "9D"]  # both hands draw a third card


async def drive(casino: Casino, table: str, procedure: str, book: tuple[Wager, ...], players: Scripted,
                directed: bool = False) -> str:
    """Deal one coup as a table terminal would, answering as ``players``;
    opened as the supervisor directs where ``directed`` (000 8.2, 001 8.5)."""
    if directed:
        reply = await casino.supervise(table, commands.OpenCoup, procedure=procedure)
    else:
        reply = await casino.ask(table, "coup", commands.OpenCoup, procedure=procedure)
    assert reply.ok, reply
    coup = reply.coup
    for w in book:
        placed = await casino.ask(table, "wager", commands.PlaceWager, coup=coup, seat=w.seat, bet=w.bet, amount=w.amount)
        assert placed.ok, placed

    async def respond(w: commands.Waiting) -> commands.Reply:
        assert w.seat is not None, w
        if w.kind == "answer":
            a = players.answers.get((w.offer or "", w.seat), True)
            return await casino.ask(table, "coup", commands.AnswerOffer, coup=coup, seat=w.seat, accept=bool(a),
                                    plays="player" if a == "player" else "banker")
        if w.kind == "expose":
            kind = commands.ReturnCards if w.seat in players.returns else commands.ExposeHand
            return await casino.ask(table, "coup", kind, coup=coup, seat=w.seat, hand=w.hand)
        if w.kind == "decision":
            d = players.decide(None, jm_awaiting(w))  # type: ignore[arg-type]
            return await casino.ask(table, "coup", commands.Decide, coup=coup, seat=d.seat, hand=d.hand,
                                    action=d.action, amount=d.amount)
        raise AssertionError(f"unexpected wait {w}")

    reply = await until_finished(await casino.ask(table, "coup", commands.CloseBetting, coup=coup), respond)
    assert reply.ok, reply
    return coup


def jm_awaiting(w: commands.Waiting) -> object:
    from casino.rules.blackjack.coup import Awaiting

    return Awaiting("decision", w.seat, w.box_hand)


def with_next_round(golden: list[object], table: str, coup: str) -> list[object]:
    """The golden shoe's events, and the next coup's round, which the shoe
    starts as the last one ends where it can deal it at once (docs/clauses.md,
    "The next round")."""
    shoe = next(e.shoe_id for e in reversed(golden) if isinstance(e, RoundEnded))
    return [*golden, RoundStarted(shoe, f"{table}-{(subjects.coup_number(coup) or 0) + 1:06d}")]


async def recorded(casino: Casino, table: str, coup: str) -> tuple[list[object], list[object], object]:
    """The coup's game, the shoe's and the settlement's record, once the
    round has ended at the shoe and the coup is settled: the shoe's record is
    its own messages and what it gave the coup's appends to carry, in
    stream order."""
    await casino.recorded(coup, RoundEnded)
    events = await casino.events(subjects.coup_filter(coup))
    coup_events = [e for agg, e in events if agg == "coup" and not isinstance(e, (CoupConfigured, *CARRIED))]
    shoe_events = [e for agg, e in await casino.events(subjects.table_filter(table))
                   if (agg == "shoe" and isinstance(e, ShoeEvent)) or (agg == "coup" and isinstance(e, CARRIED))]
    return coup_events, shoe_events, await casino.settled(coup)


async def carried_draws(casino: Casino, table: str) -> tuple[int, int]:
    """How many of the table's messages hold cards drawn: the coups' (the shoe's draws carried with the
    cards dealt), and the shoe's own."""
    messages = await casino.store.read(subjects.table_filter(table))
    counted = [subjects.tokens(m.subject)[3] for m in messages if any(isinstance(e.data, CardDrawn)
                                                                        for e in m.batch.events)]
    return counted.count("coup"), counted.count("shoe")


# And how many draws the shoe records: where nobody handles the cards the
# whole deal is the tableau's, one draw; otherwise the initial deal, then the
# third cards together once the hands are handled.
BACCARAT = [
    ("method_a", "BAC000", Scripted(), 1),
    ("method_b", "BAC000", Scripted({("player", 3): False}, returns={6}), 2),
    ("method_c", "BAC000", Scripted({("shoe", 2): False}), 2),
    ("method_d", "BAC000", Scripted({("shoe", 6): "player"}), 2),
    ("style_a", "BAC001", Scripted(), 1),
    ("style_b", "BAC001", Scripted({("banker", 6): False}, returns={2}), 2),
]


@pytest.mark.parametrize("procedure,table,players,draws", BACCARAT, ids=[p for p, _, _, _ in BACCARAT])
async def test_a_baccarat_coup_through_all_four_services_equals_the_golden_coup(
    nats_url: str, procedure: str, table: str, players: Scripted, draws: int
) -> None:
    rules = baccarat(TABLES[table].ruleset)
    stacked = order(rules.shoe.decks, DRAWS, burn_cards(rules.shoe))
    book = (Wager(2, "banker", 5000), Wager(3, "player", 5000), Wager(6, "banker", 5000), Wager(5, "tie", 1000))
    book = tuple(w for w in book if w.bet in rules.limits)
    in_force = rules.procedures[0]  # a new table's: its tables file names none
    directed = procedure != in_force  # another, as a supervisor directs
    async with Casino(nats_url, TABLES, {table: [order_of(stacked)]}) as casino:
        coup = await drive(casino, table, procedure, book, players, directed)
        coup_events, shoe_events, settled = await recorded(casino, table, coup)
        # Each draw of the shoe in the same message as the cards it dealt: none in the shoe's own.
        assert await carried_draws(casino, table) == (draws, 0)

    golden_shoe = play.Shoe(rules.shoe, [order_of(stacked)], prefix=f"{table}-shoe-", document=rules.document)
    opening = baccarat_messages.OpenCoup(coup, procedure, TABLES[table].approvals, in_force=in_force,
                                         supervisor=SUPERVISOR if directed else "")
    golden = play.play_baccarat(rules, golden_shoe, opening, book, Scripted(dict(players.answers), set(players.returns)))
    assert coup_events == golden.events
    assert shoe_events == with_next_round(golden_shoe.events, table, coup)
    assert settled.payouts == golden.payouts  # type: ignore[attr-defined]


# Boxes 1, 3, 6 and the dealer's ace: box 1 insures, box 3 splits its eights, box 6 doubles on 11.
BLACKJACK = [
    ("BJ002", ["TS", "8H", "5D", "AS", "9C", "8C", "6D", "7H", "2S", "3S", "KD", "9S"]),
    ("BJ003", ["TS", "8H", "5D", "AS", "9C", "8C", "6D", "2S", "3S", "KD", "9S", "7H"]),
]


@pytest.mark.parametrize("table,cards", BLACKJACK, ids=[t for t, _ in BLACKJACK])
async def test_a_blackjack_coup_through_all_four_services_equals_the_golden_coup(
    nats_url: str, table: str, cards: list[str]
) -> None:
    rules = blackjack(TABLES[table].ruleset)
    stacked = order(rules.shoe.decks, cards, burn_cards(rules.shoe))
    book = (Wager(1, "box", 2000), Wager(3, "box", 4000), Wager(6, "box", 1000))

    def players() -> Scripted:
        return Scripted(decisions={(3, 0): ["split"], (3, 1): ["hit", "stand"], (6, 0): ["double"]},
                        insurance={1: 1000})

    async with Casino(nats_url, TABLES, {table: [order_of(stacked)]}) as casino:
        coup = await drive(casino, table, "", book, players())
        coup_events, shoe_events, settled = await recorded(casino, table, coup)
        assert (await carried_draws(casino, table))[1] == 0

    golden_shoe = play.Shoe(rules.shoe, [order_of(stacked)], prefix=f"{table}-shoe-", document=rules.document)
    golden = play.play_blackjack(rules, golden_shoe, coup, book, players())
    assert any(isinstance(e, blackjack_messages.DecisionTaken) and e.action == "split" for e in golden.events)
    assert coup_events == golden.events
    assert shoe_events == with_next_round(golden_shoe.events, table, coup)
    assert settled.payouts == golden.payouts  # type: ignore[attr-defined]
