"""An instance that decides on a state the record has moved past, and finds
its write already made (a retry of a command another instance, since stopped,
recorded), answers from the record, not from its own decision; one whose
write would go on top of what it has not seen is refused it, reads on and
decides again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from bench.history import carried, deal
from services.dealer_policy.dealing import play
from services.dealer_policy.service import DealerPolicyService
from services.dealer_policy.sources import draw_id
from services.dealer_policy.table import follow
from services.settlement.service import SettlementService
from services.shoe.secrets import MemorySecrets, secure_shuffle
from services.shoe.service import ShoeService
from services.wager.service import WagerService

from casino.audit.audits import verify_history
from casino.config.tables import TableConfig
from casino.games import Step
from casino.nats.partitions import PARTITIONS
from casino.protocol import commands
from casino.protocol.service import Recorder, answer, decide
from casino.rules import shoe as dealing_shoe
from casino.rules import wagerbook
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.errors import RuleViolation
from casino.rules.runs import DealerRun, TableauRun
from casino.store import subjects
from casino.store.envelope import Batch, CoupHeld, step_digest
from casino.store.eventstore import Appended, Conflict, InMemoryEventStore
from tests.faults.test_hostile_commands import TABLES, LocalPeer
from tests.rules.stacking import blackjack, burn_cards, order
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
TABLE, SHOE, COUP, RULESET = "BAC-1", "BAC-1-shoe-1", "BAC-1-000001", "baccarat-000-methods"


async def test_a_book_closed_by_a_stopped_instance_is_answered_with_its_recorded_wagers() -> None:
    store = InMemoryEventStore()
    first = WagerService(store)
    open_book = commands.OpenBook(id=f"{COUP}:open-book", table=TABLE, coup=COUP, shoe=SHOE, ruleset=RULESET)
    close_book = commands.CloseBook(id=f"{COUP}:close-book", table=TABLE, coup=COUP)
    assert (await first.handle(open_book)).ok
    assert (await first.handle(commands.PlaceWager(id="w1", table=TABLE, coup=COUP, seat=1, bet="banker", amount=5000))).ok
    closed = await first.handle(close_book)  # recorded, and the answer lost with the instance

    # The next instance holds no book: the dealer-policy, resuming, opens it again
    # (written already: the book as opened), then asks again to close it.
    second = WagerService(store)
    assert (await second.handle(open_book)).ok
    again = await second.handle(close_book)
    assert again.ok and again.wagers == closed.wagers and len(again.wagers) == 1
    assert second.books[COUP].book == first.books[COUP].book
    stored = [e.data for m in await store.read(subjects.coup_filter(COUP)) for e in m.batch.events]
    assert sum(isinstance(e, wagerbook.BookClosed) for e in stored) == 1


def one_deck(tmp_path: Path) -> str:
    """Baccarat from one deck: a new shoe every few coups."""
    return ruleset_variant(tmp_path, RULESET, decks=1)


def appends_of(store: InMemoryEventStore) -> list[tuple[str, str | None, int, str]]:
    """Each append to ``store`` from now on: subject, guard, expected sequence, and how it ended."""
    seen: list[tuple[str, str | None, int, str]] = []
    append = store.append

    async def recorded(subject: str, batch: Batch, *, expected: int, msg_id: str,
                       guard: str | None = None) -> Appended:
        try:
            ack = await append(subject, batch, expected=expected, msg_id=msg_id, guard=guard)
        except Conflict:
            seen.append((subject, guard, expected, "conflict"))
            raise
        seen.append((subject, guard, expected, "duplicate" if ack.duplicate else "written"))
        return ack

    store.append = recorded  # type: ignore[method-assign]
    return seen


async def shoe_events(store: InMemoryEventStore, table: str, shoe: str) -> list[object]:
    return [e.data for m in await store.read(subjects.event(table, shoe, "*", "shoe")) for e in m.batch.events]


async def test_each_shoe_append_is_guarded_on_the_shoe_in_play_not_on_the_tables_whole_history(tmp_path: Path) -> None:
    """The server matches a guard's every subject on each append: a guard over
    every shoe of the table grows with its history (``python -m bench.history``)."""
    ruleset, store = one_deck(tmp_path), InMemoryEventStore()
    appends = appends_of(store)
    shoe = ShoeService(store, MemorySecrets(), secure_shuffle)
    await deal(shoe, 1, 20, TABLE, ruleset)
    shoes = {subjects.tokens(subject)[1] for subject, *_ in appends}
    assert len(shoes) >= 3, shoes  # the history spans shoes, or the test proves nothing
    first, *rest = [a for a in appends if a[0].endswith(".shoe")]  # the shoe's own (the rest ride in coups')
    assert first[1:] == (subjects.aggregate_filter("shoe", TABLE), 0, "written")  # the table's first: nothing before
    for subject, guard, _, outcome in rest:
        assert outcome == "written"
        assert guard == subjects.event(TABLE, subjects.tokens(subject)[1], "*", "shoe")


async def test_a_shoe_instance_left_behind_by_a_new_shoe_writes_nothing_on_the_shoe_that_ended(tmp_path: Path) -> None:
    ruleset, store, secrets = one_deck(tmp_path), InMemoryEventStore(), MemorySecrets()
    first = ShoeService(store, secrets, secure_shuffle)
    await deal(first, 1, 1, TABLE, ruleset)
    behind = ShoeService(store, secrets, secure_shuffle)
    await behind.table(TABLE, ruleset)  # holds the table after coup 1, and follows it no further
    n = 1
    while first.tables[TABLE].state.shoe_id == subjects.shoe_id(TABLE, 1):
        n += 1
        await deal(first, n, 1, TABLE, ruleset)
    appends = appends_of(store)

    coup = f"{TABLE}-{n + 1:06d}"
    start = commands.StartRound(id=f"{coup}:start", table=TABLE, coup=coup, ruleset=ruleset)
    with pytest.raises(RuleViolation, match="is not the table's next coup"):  # as it left the table, refused
        await behind.handle(start)
    await behind.reload(start)  # as the service answers a refusal: read on, decide again
    assert (await behind.handle(start)).ok
    assert [a[3] for a in appends] == ["written"]
    assert [subjects.tokens(a[0])[1] for a in appends] == [subjects.shoe_id(TABLE, 2)]
    assert isinstance((await shoe_events(store, TABLE, subjects.shoe_id(TABLE, 1)))[-1], dealing_shoe.ShoeEnded)
    await first.reload(commands.StartRound(id="catch-up", table=TABLE, coup=coup, ruleset=ruleset))
    assert behind.tables[TABLE].state == first.tables[TABLE].state and behind.tables[TABLE].state.round == coup


async def test_two_instances_starting_the_next_shoe_write_it_once(tmp_path: Path) -> None:
    """One instance has seen the shoe end and not the next shoe begun: its
    shuffle of that shoe is the other's, already written, and it deals on."""
    ruleset, store, secrets = one_deck(tmp_path), InMemoryEventStore(), MemorySecrets()
    first = ShoeService(store, secrets, secure_shuffle)
    behind = ShoeService(store, secrets, secure_shuffle)
    append = store.append

    async def fold_behind_at_the_shoes_end(subject: str, batch: Batch, *, expected: int, msg_id: str,
                                           guard: str | None = None) -> Appended:
        ack = await append(subject, batch, expected=expected, msg_id=msg_id, guard=guard)
        if any(isinstance(e.data, dealing_shoe.ShoeEnded) for e in batch.events) and TABLE not in behind.tables:
            await behind.table(TABLE, ruleset)
        return ack

    store.append = fold_behind_at_the_shoes_end  # type: ignore[method-assign]
    n = 0
    while TABLE not in behind.tables:
        n += 1
        await deal(first, n, 1, TABLE, ruleset)
    assert behind.tables[TABLE].state.shoe_id is None  # the shoe ended, the next not begun
    appends = appends_of(store)

    await deal(behind, n + 1, 1, TABLE, ruleset)
    assert appends[0][1:] == (subjects.event(TABLE, subjects.shoe_id(TABLE, 2), "*", "shoe"), 0, "duplicate")
    assert sum(isinstance(e, dealing_shoe.ShoeShuffled) for e in await shoe_events(store, TABLE, subjects.shoe_id(TABLE, 2))) == 1
    # The first told of the steps the coup's record carries since (``after``), as its next command tells it.
    await first.confirmed(TABLE, first.tables[TABLE], f"{TABLE}-{n + 1:06d}:draw")
    assert behind.tables[TABLE].state == first.tables[TABLE].state


def letting_go(store: InMemoryEventStore, instance: ShoeService | WagerService) -> None:
    """From now on ``instance`` lets every table go as each append is made (a
    partition moving meanwhile); ten appends at most (an instance that goes on
    appending fails the test, not hangs it)."""
    append, appends = store.append, iter(range(10))

    async def let_go(subject: str, batch: Batch, *, expected: int, msg_id: str, guard: str | None = None) -> Appended:
        if next(appends, None) is None:
            raise AssertionError("the command goes on appending what it finds written")
        instance.let_go(set(range(PARTITIONS)))
        return await append(subject, batch, expected=expected, msg_id=msg_id, guard=guard)

    store.append = let_go  # type: ignore[method-assign]


async def test_a_draw_whose_table_is_let_go_as_it_finds_its_cards_written_answers_them(tmp_path: Path) -> None:
    """A draw asked again of an instance that had not seen it (the other
    instance gave it and its answer was lost), while this instance lets the
    table go (its partition moves): it is answered with the same cards, and
    the shoe writes nothing (the coup's append carries its record of them).
    Before, the shoe appended its draws, and an instance that found them
    written read them into the table held, which was gone, and went on
    writing the same cards forever."""
    ruleset, store, secrets = one_deck(tmp_path), InMemoryEventStore(), MemorySecrets()
    first, other = ShoeService(store, secrets, secure_shuffle), ShoeService(store, secrets, secure_shuffle)
    await deal(first, 1, 1, TABLE, ruleset)
    coup = f"{TABLE}-000002"
    assert (await first.handle(commands.StartRound(id=f"{coup}:start", table=TABLE, coup=coup, ruleset=ruleset))).ok
    draw = commands.DrawCard(id=f"{coup}:draw", table=TABLE, coup=coup, ruleset=ruleset, index=0, count=4, run=TableauRun())
    await other.handle(draw)
    written = await other.handle(draw)  # as recorded
    letting_go(store, first)
    again = await first.handle(draw)
    assert (again.cards, again.positions, again.carried) == (written.cards, written.positions, written.carried)
    assert len(written.cards) >= 4 and [e.card for e in written.carried
                                        if isinstance(e, dealing_shoe.CardDrawn)] == list(written.cards)
    stored = await store.read(subjects.event(TABLE, written.shoe, coup, "shoe"))
    assert not [e for m in stored for e in m.batch.events if isinstance(e.data, dealing_shoe.CardDrawn)]


async def test_a_close_whose_book_is_let_go_as_it_finds_the_close_written_answers_the_recorded_wagers() -> None:
    """The close asked again of an instance that had not seen a wager or the
    close written by another, while it lets the book go (its partition
    moves): answered with the wagers the book closed on, read into the book
    the command holds."""
    store = InMemoryEventStore()
    first, other = WagerService(store), WagerService(store)
    open_book = commands.OpenBook(id=f"{COUP}:open-book", table=TABLE, coup=COUP, shoe=SHOE, ruleset=RULESET)
    close_book = commands.CloseBook(id=f"{COUP}:close-book", table=TABLE, coup=COUP)
    assert (await first.handle(open_book)).ok
    await other.reload(open_book)
    wager = commands.PlaceWager(id="w1", table=TABLE, coup=COUP, seat=1, bet="banker", amount=5000)
    assert (await other.handle(wager)).ok
    closed = await other.handle(close_book)
    letting_go(store, first)
    again = await first.handle(close_book)
    assert again.wagers == closed.wagers and len(again.wagers) == 1


async def test_a_decision_retried_at_an_instance_behind_the_record_is_answered_from_the_record() -> None:
    """Two dealer-policy instances at one blackjack table. The second last
    looked when the box stood at 12; the first then recorded a hit (8S, to
    20) and the stand, and dealt the dealer's hand out. The stand asked again
    of the second (its answer lost with the first) is decided there on 12:
    its append finds the stand's message recorded already, before any guard.
    The record stands: read back, and the coup answered as recorded. Before,
    the second kept its own stand at 12 as recorded, then dealt the 8S to the
    dealer (the shoe answers a card drawn already with the same card) on a
    message the stream also took for a duplicate, and ended the round at the
    shoe with cards the record never dealt so (a coup left unfinished in the
    record, or held for compliance, as the table moved on)."""
    store, peer, ruleset = InMemoryEventStore(), LocalPeer(), "blackjack-002-hole-card"
    stack = ["6D", "2S", "2H", "7H", "4S", "8S", "9C"]  # box 8 against 2S (7H in the hole), then 4S, 8S, 9C
    shoe = ShoeService(store, MemorySecrets(), shuffle=lambda table, decks: (
        order(decks, stack, burn_cards(blackjack(ruleset).shoe)), "salt"))
    wager, tables = WagerService(store), {"J": TableConfig(ruleset)}
    first, second = DealerPolicyService(store, peer, tables), DealerPolicyService(store, peer, tables)  # type: ignore[arg-type]
    peer.routes = {"shoe": (commands.shoe_decoder, shoe.handle, shoe.reload),
                   "wager": (commands.wager_decoder, wager.handle, wager.reload),
                   "book": (commands.book_decoder, wager.handle, wager.reload),
                   "coup": (commands.coup_decoder, first.handle, first.reload)}

    async def at(instance: DealerPolicyService, command: commands.Command) -> commands.Reply:
        reply = await decide(command, instance.handle, instance.reload, "J")
        assert reply.ok, reply
        return reply

    coup = (await at(first, commands.OpenCoup(id="open", table="J", number=1))).coup
    assert (await peer.ask("casino.cmd.J.wager", commands.PlaceWager(id="w", table="J", coup=coup, seat=3, bet="box",
                                                                     amount=1000))).ok
    await at(first, commands.CloseBetting(id="close", table="J", coup=coup))
    await at(first, commands.Decide(id="hit-1", table="J", coup=coup, seat=3, hand=0, action="hit"))  # 4S: 12
    await at(second, commands.Status(id="look", table="J"))  # the second's last look: the box at 12
    await at(first, commands.Decide(id="hit-2", table="J", coup=coup, seat=3, hand=0, action="hit"))  # 8S: 20
    stand = commands.Decide(id="stand", table="J", coup=coup, seat=3, hand=0, action="stand")
    await at(first, stand)  # the dealer's 2S 7H, then 9C: 18
    await asyncio.sleep(0)  # the round's end asked of the shoe

    again = await at(second, stand)
    assert again.waiting is not None and again.waiting.kind == "finished"
    await asyncio.sleep(0)
    stored = [e.data for m in await store.read(f"{subjects.EVENTS}.>") for e in m.batch.events]
    (result,) = [e for e in stored if isinstance(e, blackjack_messages.CoupResulted)]
    assert result.dealer_total == 18 and [h.total for h in result.hands] == [20]
    (picked,) = [e for e in stored if isinstance(e, blackjack_messages.CardsPickedUp)]
    ended = [e for e in stored if isinstance(e, dealing_shoe.RoundEnded)]
    assert [e.pickup for e in ended] == [picked.cards]  # the round ended once, with the record's cards
    fresh = DealerPolicyService(store, peer, tables)  # type: ignore[arg-type]
    await at(fresh, commands.Status(id="look-again", table="J"))
    assert second.tables["J"].state == fresh.tables["J"].state  # what the second holds is the record


async def test_a_step_a_stale_instance_is_refused_at_the_shoe_holds_nothing_once_the_record_went_on() -> None:
    """Two dealer-policy instances at one table (for up to a tick as it moves
    between them): the first deals coup 1 to its end and the shoe ends its
    round with the dealer's run, while the second still knows it as waiting
    for the dealer's card. The second's draw was refused at the shoe (not the
    round being dealt), and it held the coup for compliance as it knew it
    until its next command caught up. The shoe now answers it with the cards
    its run drew (it keeps the last round's, and its record of them), and
    the second's record of them, asked the first's last choice again, is
    refused as recorded already: nothing is held, its next command
    finds the coup dealt to its end by the first and goes on, no coup.held is
    recorded, the next coup opens, and the record verifies. (Found by
    tests/faults/test_replicas.py's kills, once in many runs.)"""
    store, peer = InMemoryEventStore(), LocalPeer()
    shoe = ShoeService(store, MemorySecrets(), shuffle=lambda table, decks: (order(
        decks, ["2S", "3H", "4D", "5C", "6H", "7D", "TS", "9C"], burn_cards(blackjack(TABLES["J"].ruleset).shoe)),
        "salt"))  # no hand a natural, the dealer's under 17: the dealer's card is drawn last
    wager = WagerService(store)
    first, second = (DealerPolicyService(store, peer, TABLES) for _ in range(2))  # type: ignore[arg-type]
    peer.routes = {"shoe": (commands.shoe_decoder, shoe.handle, shoe.reload),
                   "wager": (commands.wager_decoder, wager.handle, wager.reload),
                   "book": (commands.book_decoder, wager.handle, wager.reload)}

    async def ask(dealer: DealerPolicyService, command: commands.Command) -> commands.Reply:
        return commands.reply_decoder.decode(await answer(commands.encoder.encode(command), commands.coup_decoder,
                                                          dealer.handle, dealer.reload))

    assert (await ask(first, commands.OpenCoup(id="o1", table="J", number=1))).ok
    for seat in (1, 3):
        assert (await peer.ask("casino.cmd.J.wager", commands.PlaceWager(
            id=f"w{seat}", table="J", coup="J-000001", seat=seat, bet="box", amount=5000))).ok
    reply = await ask(first, commands.CloseBetting(id="c1", table="J", coup="J-000001"))
    k, decided = 0, None
    while reply.waiting is not None and reply.waiting.kind == "decision":
        k += 1
        decided = commands.Decide(id=f"d{k}", table="J", coup="J-000001", seat=reply.waiting.seat or 0, hand=0,
                                  action="stand")
        reply = await ask(first, decided)
    assert reply.waiting is not None and reply.waiting.kind == "finished", reply
    await first.finish_rounds()  # the round ended at the shoe
    coup = await store.read(subjects.aggregate_filter("coup", "J"))
    assert coup[-1].batch.events[-1].type == "blackjack.cards_picked_up"

    # The second knows the coup as it stood before the first's last message (the last choice, the dealer's
    # cards and the result), and is asked the last choice again: the dealer's cards due after it.
    t = second.new_table("J")
    for m in coup[:-1]:
        follow(second.repository, t, m)
    second.tables["J"] = t
    assert decided is not None
    async with second.working("J") as w:
        with pytest.raises(Conflict, match="recorded already"):
            await play(w, decided)
    assert not t.held

    opened = await ask(second, commands.OpenCoup(id="o2", table="J", number=2))
    assert opened.ok and opened.coup == "J-000002", opened
    settlement = SettlementService(store)
    for m in await store.read(subjects.table_filter("J")):
        await settlement.on_coup_events(m)
    stored = await store.read(f"{subjects.EVENTS}.>")
    assert not [e for m in stored for e in m.batch.events if isinstance(e.data, CoupHeld)]
    assert verify_history(stored).findings == []


async def test_two_dealers_asking_one_card_for_different_steps_leave_each_shoe_instance_on_the_record() -> None:
    """Two dealer-policy instances, each answered by another shoe instance:
    the stale one asks the card after the players' for the dealer's run (its
    choice, a stand, never recorded), the other for a hit, which is recorded. The
    draws ask the same card under different ids (``draw_id``: what each asks
    for), so the shoe instance that gave the run, told of the hit's step,
    folds itself from the record: it deals the coup on from the hit, not
    from the run it gave and nobody recorded."""
    rules, store, secrets = "blackjack-003-no-hole-card", InMemoryEventStore(), MemorySecrets()

    def shoe_instance() -> ShoeService:
        return ShoeService(store, secrets, shuffle=lambda table, decks: (order(
            decks, ["TS", "6H", "5D", "2C", "3S", "4H", "9D"], burn_cards(blackjack(rules).shoe)), "salt"))

    given, other = shoe_instance(), shoe_instance()
    coup, waiting = "J-000001", commands.Waiting("card")
    started = await given.handle(commands.StartRound(id=f"{coup}:start", table="J", coup=coup, ruleset=rules))
    deal = Step("draw", waiting, first=0, due=3)
    dealt = await given.handle(commands.DrawCard(draw_id(coup, deal, "J-000002"), "J", coup, rules, 0, 3))
    after = await carried(given, dealt, draw_id(coup, deal, "J-000002"), "J", coup, started.coup)
    stand = Step("draw", waiting, first=3, due=1, run=DealerRun(dealt.cards[1:2], hits_soft_17=False))
    hit = Step("draw", waiting, first=3, due=1)
    assert draw_id(coup, stand, "J-000002") != draw_id(coup, hit, "J-000002")
    assert draw_id(coup, hit, "J-000002") == draw_id(coup, hit, "J-000002")
    ran = await given.handle(commands.DrawCard(draw_id(coup, stand, "J-000002"), "J", coup, rules, 3, 1,
                                               stand.run, "J-000002", after))
    assert len(ran.cards) > 1 and len(ran.carried) == len(ran.cards)  # the dealer's run given, never recorded
    hit_card = await other.handle(commands.DrawCard(draw_id(coup, hit, "J-000002"), "J", coup, rules, 3, 1,
                                                    None, "J-000002", after))
    after = await carried(other, hit_card, draw_id(coup, hit, "J-000002"), "J", coup, after)
    another = Step("draw", waiting, first=4, due=1)
    next_card = await given.handle(commands.DrawCard(draw_id(coup, another, "J-000002"), "J", coup, rules, 4, 1,
                                                     None, "J-000002", after))
    assert next_card.ok and next_card.positions == (hit_card.positions[0] + 1,), next_card
    held = given.tables["J"].state
    assert held.round == coup and held.layout == [*dealt.cards, *hit_card.cards, *next_card.cards]


NO_HOLE = "blackjack-003-no-hole-card"


async def two_shoes_dealt() -> tuple[ShoeService, ShoeService, commands.Reply, str]:
    """Two shoe instances of table J on one stacked one-deck shoe: coup
    J-000001's initial deal given by the first and recorded, the second
    folded from the record then; the deal, and its step's name."""
    store, secrets = InMemoryEventStore(), MemorySecrets()

    def shoe_instance() -> ShoeService:
        return ShoeService(store, secrets, shuffle=lambda table, decks: (order(
            decks, ["TS", "6H", "5D", "2C", "3S", "4H", "9D", "8C", "7H"], burn_cards(blackjack(NO_HOLE).shoe)), "salt"))

    first, second = shoe_instance(), shoe_instance()
    coup, next_coup = "J-000001", "J-000002"
    started = await first.handle(commands.StartRound(id=f"{coup}:start", table="J", coup=coup, ruleset=NO_HOLE))
    deal = draw_id(coup, Step("draw", commands.Waiting("card"), first=0, due=3), next_coup)
    dealt = await first.handle(commands.DrawCard(deal, "J", coup, NO_HOLE, 0, 3))
    after_deal = await carried(first, dealt, deal, "J", coup, started.coup)
    await second.table("J", NO_HOLE)
    return first, second, dealt, after_deal


async def test_a_round_end_given_on_a_stale_shoe_under_the_name_another_instance_recorded_deals_no_card_twice() -> None:
    """Two shoe instances, one behind the record. A dealer-policy that had not
    seen the player's hit asks the round's end of the instance behind (its
    append then fails its guard); asked again, the end comes from the other
    instance and is recorded, under the same name. The next coup's deal,
    asked of the instance behind, names that end and its digest as the
    record's last step: the instance, finding that the end it gave is not
    the one recorded, folds itself from the record and deals the card after
    the hit, not the hit's card again."""
    rules, coup, next_coup, waiting = NO_HOLE, "J-000001", "J-000002", commands.Waiting("card")
    ahead, behind, dealt, after_deal = await two_shoes_dealt()  # the one behind folded from the deal, no hit
    hit = Step("draw", waiting, first=3, due=1)
    hit_card = await ahead.handle(commands.DrawCard(draw_id(coup, hit, next_coup), "J", coup, rules, 3, 1,
                                                    None, next_coup, after_deal))
    after_hit = await carried(ahead, hit_card, draw_id(coup, hit, next_coup), "J", coup, after_deal)

    def end(after: str, pickup: tuple[str, ...]) -> commands.EndRound:
        return commands.EndRound(f"{coup}:end", "J", coup, rules, pickup, next_coup, after=after, unrecorded=True)

    stale = await behind.handle(end(after_deal, dealt.cards))  # given, and never recorded
    assert stale.ok and stale.carried
    ended = await ahead.handle(end(after_hit, (*dealt.cards, *hit_card.cards)))
    after_end = await carried(ahead, ended, f"{coup}:end", "J", coup, after_hit)
    assert after_end == f"{coup}:end" and stale.carried != ended.carried  # one name, two decisions
    deal_next = Step("draw", waiting, first=0, due=2)
    next_cards = await behind.handle(commands.DrawCard(draw_id(next_coup, deal_next, "J-000003"), "J", next_coup,
                                                       rules, 0, 2, None, "J-000003", after_end,
                                                       after_digest=step_digest(ended.carried)))
    assert next_cards.ok and next_cards.positions[0] == hit_card.positions[0] + 1, next_cards
    assert set(next_cards.cards).isdisjoint(hit_card.cards)


async def test_a_draw_on_a_step_staged_and_not_recorded_is_given_by_the_instance_that_gave_it_alone() -> None:
    """A dealer-policy asks the dealer's draw in the same append as a hit's
    card, the hit's step staged and not yet recorded (``unrecorded``, and
    ``after`` naming it). The shoe instance that gave the hit's card gives
    the draw on top of it, and one append records both. Another instance,
    which cannot know the card the hit took, refuses (``record first``)
    rather than give it again; asked once the hit is recorded, it deals the
    card after it."""
    rules, coup, next_coup, waiting = NO_HOLE, "J-000001", "J-000002", commands.Waiting("card")
    gave, other, _, after_deal = await two_shoes_dealt()
    store = gave.store
    hit = Step("draw", waiting, first=3, due=1)
    hit_id = draw_id(coup, hit, next_coup)
    hit_card = await gave.handle(commands.DrawCard(hit_id, "J", coup, rules, 3, 1, None, next_coup, after_deal,
                                                   unrecorded=True))
    dealers = Step("draw", waiting, first=4, due=1)

    def dealers_draw(after: str, unrecorded: bool) -> commands.DrawCard:
        return commands.DrawCard(draw_id(coup, dealers, next_coup), "J", coup, rules, 4, 1, None, next_coup, after,
                                 unrecorded=unrecorded, after_digest=step_digest(hit_card.carried))

    with pytest.raises(RuleViolation) as refused:
        await other.handle(dealers_draw(hit_id, unrecorded=True))
    assert refused.value.clause == commands.RECORD_FIRST, refused.value
    chained = await gave.handle(dealers_draw(hit_id, unrecorded=True))
    assert chained.ok and chained.positions[0] == hit_card.positions[0] + 1 and chained.carried
    # One append carries both steps, as the dealer-policy records them.
    subject = subjects.event("J", hit_card.carried[0].shoe_id, coup, "coup")
    last = await store.last(subject)
    await Recorder(store, "dealer-policy").record(
        subject, [*hit_card.carried, *chained.carried], expected=last.seq if last is not None else 0,
        msg_id=f"{hit_id}:carried", table="J", shoe=hit_card.carried[0].shoe_id, coup=coup,
        causation=[hit_id] * len(hit_card.carried) + [dealers_draw(hit_id, True).id] * len(chained.carried))
    again = await other.handle(dealers_draw(hit_id, unrecorded=False))  # the hit recorded: the same card given
    assert again.ok and again.cards == chained.cards and again.positions == chained.positions, again
    assert set(again.cards).isdisjoint(hit_card.cards)
