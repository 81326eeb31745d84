"""An instance that decides on a state the record has moved past, and finds
its write already made (a retry of a command another instance, since stopped,
recorded), answers from the record, not from its own decision."""

from __future__ import annotations

import pytest
from services.wager.service import WagerService

from casino import commands as c
from casino.rules import wagerbook as W
from casino.store import subjects
from casino.store.eventstore import InMemoryEventStore

pytestmark = pytest.mark.anyio
TABLE, SHOE, COUP, RULESET = "BAC-1", "BAC-1-shoe-1", "BAC-1-000001", "baccarat-000-methods"


async def test_a_book_closed_by_a_stopped_instance_is_answered_with_its_recorded_wagers() -> None:
    store = InMemoryEventStore()
    first = WagerService(store)
    open_book = c.OpenBook(id=f"{COUP}:open-book", table=TABLE, coup=COUP, shoe=SHOE, ruleset=RULESET)
    close_book = c.CloseBook(id=f"{COUP}:close-book", table=TABLE, coup=COUP)
    assert (await first.handle(open_book)).ok
    assert (await first.handle(c.PlaceWager(id="w1", table=TABLE, coup=COUP, seat=1, bet="banker", amount=5000))).ok
    closed = await first.handle(close_book)  # recorded, and the answer lost with the instance

    # The next instance holds no book: the dealer-policy, resuming, opens it again
    # (written already: the book as opened), then asks again to close it.
    second = WagerService(store)
    assert (await second.handle(open_book)).ok
    again = await second.handle(close_book)
    assert again.ok and again.wagers == closed.wagers and len(again.wagers) == 1
    assert second.books[COUP].book == first.books[COUP].book
    stored = [e.data for m in await store.read(subjects.coup_filter(COUP)) for e in m.batch.events]
    assert sum(isinstance(e, W.BookClosed) for e in stored) == 1
