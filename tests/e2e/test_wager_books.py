"""The wager service holds the book of each table's current coup, not of
every coup it has seen: a casino dealing for months would otherwise run out
of memory. A command for an earlier coup still finds that coup's book, read
back from the stream; a book held is read back from its own subject."""

from __future__ import annotations

import nats
import pytest
from services.wager.service import WagerService

from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.protocol import commands
from casino.protocol.service import Peer, decide
from casino.rules import wagerbook
from casino.store import subjects
from casino.store.eventstore import InMemoryEventStore
from casino.store.jetstream import JetStreamEventStore
from tests.e2e.casino import Casino
from tests.e2e.test_bounded_start import catch_ups_of
from tests.natsfixture import provisioned

pytestmark = pytest.mark.anyio
TABLES = default_tables(2, ["baccarat-000-methods", "blackjack-002-hole-card"])


async def test_the_wager_service_keeps_one_book_a_table_and_reads_an_earlier_one_back(nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        await Simulator(casino.nc, TABLES, seed=9, patience=40).run(6)
        books = casino.service("wager").service.books
        assert sorted(books) == sorted(f"{table}-000006" for table in TABLES)

        table = next(iter(TABLES))
        first = f"{table}-000001"
        stored = await casino.store.read(subjects.coup_filter(first))
        closed = [e.data for m in stored for e in m.batch.events if isinstance(e.data, wagerbook.BookClosed)]

        peer, wager = Peer(casino.nc, timeout=10), subjects.command(table, "wager")
        again = await peer.ask(subjects.command(table, "book"), commands.CloseBook(id="late-close", table=table, coup=first))
        assert again.ok and again.wagers == closed[0].wagers
        late = await peer.ask(wager, commands.PlaceWager(id="late-bet", table=table, coup=first, seat=1, bet="banker", amount=5000))
        assert not late.ok and "betting is closed" in late.reason
        assert len(await casino.store.read(subjects.coup_filter(first))) == len(stored)


async def test_a_restarted_wager_service_reads_no_book_until_a_command_names_its_coup(nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        await Simulator(casino.nc, TABLES, seed=9, patience=40).run(3)
        table = next(iter(TABLES))
        peer = Peer(casino.nc, timeout=10)
        opened = await peer.ask(subjects.command(table, "coup"), commands.OpenCoup(id="open-4", table=table, number=4))
        assert opened.ok
        wager = subjects.command(table, "wager")
        first = commands.PlaceWager(id="bet-1", table=table, coup=opened.coup, seat=1, bet="banker", amount=5000)
        assert (await peer.ask(wager, first)).ok

        await casino.stop("wager")
        restarted = await casino.start("wager")
        assert restarted.service.books == {}  # nothing read at start
        second = commands.PlaceWager(id="bet-2", table=table, coup=opened.coup, seat=2, bet="player", amount=5000)
        assert (await peer.ask(wager, second)).ok
        assert (await peer.ask(wager, first)).ok  # asked again: recorded once
        closed = await peer.ask(subjects.command(table, "coup"),
                                commands.CloseBetting(id="close-4", table=table, coup=opened.coup))
        assert closed.ok, closed
        book = restarted.service.books[opened.coup].book
        assert [(w.seat, w.bet) for w in book.wagers] == [(1, "banker"), (2, "player")]
        stored = await casino.store.read(subjects.coup_filter(opened.coup))
        placed = [e.data for m in stored for e in m.batch.events if isinstance(e.data, wagerbook.WagerPlaced)]
        assert len(placed) == 2


async def test_a_book_held_is_read_back_from_its_own_subject_and_one_not_held_from_its_table() -> None:
    """A wildcard before the coup's token has the server match every table and
    shoe the stream has ever held; a book held names its own, one not held the
    table the command came for."""
    table, shoe, coup, ruleset = "BAC-1", "BAC-1-shoe-1", "BAC-1-000001", "baccarat-000-methods"
    store = InMemoryEventStore()
    held = WagerService(store)
    assert (await held.handle(commands.OpenBook(id="open", table=table, coup=coup, shoe=shoe, ruleset=ruleset))).ok
    assert (await held.handle(commands.PlaceWager(id="w1", table=table, coup=coup, seat=1, bet="banker", amount=5000))).ok
    over = commands.PlaceWager(id="w2", table=table, coup=coup, seat=2, bet="banker", amount=10**9)
    reads = catch_ups_of(store)
    await held.reload(over)  # as a refusal is answered: on current state
    assert reads == [subjects.event(table, shoe, coup, "wager")]

    restarted = WagerService(store)
    reads.clear()
    await restarted.reload(over)
    assert reads == [subjects.event(table, "*", coup, "wager")]
    assert restarted.books[coup].book == held.books[coup].book


async def test_a_book_opens_with_the_seating_another_instance_left_the_last_one_with(nats_url: str) -> None:
    """Two wager instances, as while a table moves from one to the other: one
    holds the last coup's book when the other records a leave in it; the first
    then opens the next coup's book. The opening is guarded on the table's
    books, fails on the leave it has not seen, reads the last book again and
    opens with the seating as it is."""
    await provisioned(nats_url)
    nc = await nats.connect(nats_url)
    try:
        holding, other = WagerService(JetStreamEventStore(nc)), WagerService(JetStreamEventStore(nc))
        table, shoe, ruleset = "W1", "W1-shoe-1", "baccarat-000-methods"

        async def ask(service: WagerService, command: commands.Command) -> commands.Reply:
            return await decide(command, service.handle, service.reload, table)

        first, second = f"{table}-000001", f"{table}-000002"
        assert (await ask(holding, commands.OpenBook(id="o1", table=table, coup=first, shoe=shoe, ruleset=ruleset))).ok
        for seat, player in ((5, "P1"), (9, "P2")):
            assert (await ask(holding, commands.Sit(id=f"s{seat}", table=table, coup=first, seat=seat, player=player))).ok
        assert (await ask(other, commands.Leave(id="l9", table=table, coup=first, seat=9))).ok
        assert holding.books[first].book.seated == ((5, "P1"), (9, "P2"))  # it has not seen the leave
        opened = await ask(holding, commands.OpenBook(id="o2", table=table, coup=second, shoe=shoe, ruleset=ruleset,
                                                      previous=first))
        assert opened.ok, opened
        stored = await JetStreamEventStore(nc).read(subjects.event(table, "*", second, "wager"))
        [book_opened] = [e.data for m in stored for e in m.batch.events if isinstance(e.data, wagerbook.BookOpened)]
        assert book_opened.seated == ((5, "P1"),)
    finally:
        await nc.close()
