"""The wager service's handlers: betting window, limits and extra wagers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from casino.config import rulesets
from casino.metrics import Metrics, count_recorded
from casino.nats.partitions import partition
from casino.protocol.commands import (
    BookCommand,
    CancelWager,
    CloseBook,
    Leave,
    OpenBook,
    PlaceExtra,
    PlaceWager,
    PlaceWagers,
    Reply,
    Sit,
    WagerCommand,
    digest,
    write_id,
)
from casino.protocol.service import Clock, utc_now
from casino.rules import wagerbook
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import Ruleset
from casino.store import subjects
from casino.store.envelope import Batch, CoupConfigured
from casino.store.eventstore import EventStore
from services.repository import Held, Repository

# A terminal's command (and the dealer-policy's extra stake) as the wager book's own, by its type.
TO_BOOK: dict[type, Callable[[Any], wagerbook.AnyBookCommand]] = {
    PlaceWager: lambda c: wagerbook.PlaceWager(c.seat, c.bet, c.amount, c.player),
    PlaceWagers: lambda c: wagerbook.PlaceWagers(tuple(wagerbook.PlaceWager(w.seat, w.bet, w.amount, w.player)
                                                       for w in c.wagers)),
    CancelWager: lambda c: wagerbook.CancelWager(c.seat, c.bet, c.player),
    Sit: lambda c: wagerbook.Sit(c.seat, c.player),
    Leave: lambda c: wagerbook.Leave(c.seat),
    PlaceExtra: lambda c: wagerbook.PlaceExtra(c.seat, c.hand, c.kind, c.amount),
}


class CoupBook(Held, kw_only=True):
    """A coup's wager book, and what of the stream it is folded from."""

    table: str
    shoe: str
    ruleset: str
    book: wagerbook.Book = wagerbook.Book()
    # The book's opening as the coup's record gives it, not recorded yet: recorded with the book's first
    # fact (a wager, a seat, its closing), in one append guarded on the table's books from ``after`` on.
    opening: wagerbook.BookOpened | None = None
    after: int = 0


def _fold(cb: CoupBook, event: wagerbook.AnyBookEvent, causation: str) -> None:
    cb.book = wagerbook.evolve(cb.book, event)
    if isinstance(event, wagerbook.BookOpened):
        cb.opening = None  # recorded, here or by another instance


class WagerService:
    producer = "wager"

    def __init__(self, store: EventStore, clock: Clock = utc_now) -> None:
        self.store = store
        self.repository: Repository[CoupBook] = Repository(store, self.producer, _fold, clock=clock)
        self.books: dict[str, CoupBook] = {}
        self.metrics: Metrics | None = None
        self._rules: dict[str, Ruleset] = {}

    def let_go(self, parts: set[int]) -> None:
        """Hold the books of partitions ``parts``' tables no more (services.ownership):
        another instance owns them, or this one takes them and reads each book
        afresh when a command next names it."""
        for coup in [coup for coup, b in self.books.items() if partition(b.table) in parts]:
            del self.books[coup]

    def rules(self, name: str) -> Ruleset:
        if name not in self._rules:
            self._rules[name] = rulesets.load(name)
        return self._rules[name]

    async def rebuild(self, table: str, coup: str) -> None:
        """Fold one coup's book from the stream. Books are read as commands
        name their coups (a command for a book not held is refused for want of
        it, reloads it and is decided again), not all at start: a start would
        otherwise read every wager ever placed. A book held is read from its
        own subject, one not held from the table the command came for (a
        coup of another table is not found there: its command is refused)."""
        held = self.books.get(coup)
        filter_ = subjects.event(table, "*", coup, "wager") if held is None else \
            subjects.event(held.table, held.shoe, coup, "wager")
        await self.repository.catch_up(filter_, 0, self.observe)

    async def _commit(self, cb: CoupBook, coup: str, events: list[wagerbook.AnyBookEvent], msg_id: str,
                      causation: str, command: str, expected: int | None = None, guard: str | None = None) -> None:
        ack = await self.repository.commit(cb, subjects.event(cb.table, cb.shoe, coup, "wager"), events,
                                           msg_id=msg_id, table=cb.table, shoe=cb.shoe, coup=coup,
                                           causation=causation, command=command, expected=expected, guard=guard)
        if ack.duplicate:
            # Written before (a retry, or an instance since stopped): the record
            # stands, not this decision, which may have been taken on a book
            # read before the record moved on. It is read into the book this
            # command holds, even where the book was let go meanwhile.
            async def into(subject: str, seq: int, batch: Batch) -> None:
                self.repository.take(cb, seq, batch)

            await self.repository.catch_up(subjects.event(cb.table, cb.shoe, coup, "wager"), cb.last_seq, into)
        else:
            count_recorded(self.metrics, cb.table, list(events))
        if any(isinstance(e, wagerbook.BookOpened) for e in events):
            self._forget_before(cb.table, ack.seq)

    async def observe(self, subject: str, seq: int, batch: Batch) -> None:
        """Follow the stream: apply what another instance appended."""
        table, shoe, coup, _ = subjects.tokens(subject)
        for env in batch.events:
            if isinstance(env.data, wagerbook.BookOpened) and coup not in self.books:
                self.books[coup] = CoupBook(table=table, shoe=shoe, ruleset=env.data.ruleset)
        cb = self.books.get(coup)
        if cb is None or not self.repository.take(cb, seq, batch):
            return
        if any(isinstance(env.data, wagerbook.BookOpened) for env in batch.events):
            self._forget_before(table, seq)

    def _forget_before(self, table: str, seq: int) -> None:
        """A table's book opened at ``seq``: its earlier coups' books are let go
        (a table deals one coup at a time). A late command for one of them is
        refused for want of a book, reloads it from the stream and is decided on
        it, so nothing is lost; without this every coup's book stayed in memory."""
        for coup in [coup for coup, b in self.books.items() if b.table == table and b.last_seq < seq]:
            del self.books[coup]

    def _book(self, cmd: WagerCommand | BookCommand) -> CoupBook:
        cb = self.books.get(cmd.coup)
        if cb is None:
            raise RuleViolation("wager book", f"there is no book for coup {cmd.coup}")
        if cb.table != cmd.table:  # a terminal wagers at its own table's coups only
            raise RuleViolation("wager book", f"coup {cmd.coup} is dealt at table {cb.table}, not {cmd.table}")
        return cb

    async def reload(self, cmd: WagerCommand | BookCommand) -> None:
        if (held := self.books.get(cmd.coup)) is not None and held.book.status == "new":
            del self.books[cmd.coup]  # not opened here: read from the stream, where another may have opened it
        await self.rebuild(cmd.table, cmd.coup)
        if cmd.coup not in self.books:
            await self._opened_in_record(cmd.table, cmd.coup)

    async def _opened_in_record(self, table: str, coup: str) -> None:
        """The book of the table's latest coup, which the record holds opened
        and whose book is not recorded open yet, held open as that opening
        gives it: seated as the table's last book left it. The book's opening
        is recorded with its first fact, in the same append (``_decide``):
        the coup's opening is answered, and its first wager taken, with no
        request between the services, and a refused command records nothing.
        A coup of no opening, or one the table's books have passed, gets none."""
        books = subjects.aggregate_filter("wager", table)
        last = await self.store.last(books)
        if last is not None and subjects.tokens(last.subject)[2] >= coup:
            return  # the table's books are at this coup or past it: nothing is opened behind them
        for m in await self.store.read(subjects.event(table, "*", coup, "coup")):
            opening = next((e.data for e in m.batch.events if isinstance(e.data, CoupConfigured)), None)
            if opening is not None and opening.table == table:
                after = last.seq if last is not None else 0
                previous = f"{table}-{opening.coup_number - 1:06d}" if opening.coup_number > 1 else ""
                seated = await self._seated_after(table, previous, after)
                self.books[coup] = CoupBook(table=table, shoe=subjects.tokens(m.subject)[1], ruleset=opening.ruleset,
                                            opening=wagerbook.BookOpened(coup, opening.ruleset, seated), after=after)
                return

    async def handle(self, cmd: WagerCommand | BookCommand) -> Reply:
        if (to_book := TO_BOOK.get(type(cmd))) is not None:  # a terminal's: decided by the book alone
            cb = self._book(cmd)
            if not cb.recorded(cmd):  # else a retried command, recorded once already
                await self._decide(cb, cmd, to_book(cmd), write_id(cmd.coup, cmd.id))
            return Reply(True, coup=cmd.coup)
        if isinstance(cmd, OpenBook):  # the dealer-policy's
            return await self._open_book(cmd)
        if isinstance(cmd, CloseBook):
            return await self._close_book(cmd)
        raise RuleViolation("protocol", f"unknown wager command {type(cmd).__name__}")

    async def _open_book(self, cmd: OpenBook) -> Reply:
        if cmd.coup in self.books and self._book(cmd).book.status != "new":
            return Reply(True, coup=cmd.coup)
        # Guarded on every book of the table from their last message on: a sit or a leave
        # another instance records in the last book meanwhile (a table moving between
        # instances) fails the append, and the book is opened again on the record (``reload``).
        books = subjects.aggregate_filter("wager", cmd.table)
        last = await self.store.last(books)
        if last is not None and subjects.tokens(last.subject)[2] == cmd.coup:  # opened already: as recorded
            await self.rebuild(cmd.table, cmd.coup)
            return Reply(True, coup=cmd.coup)
        after = last.seq if last is not None else 0
        seated = await self._seated_after(cmd.table, cmd.previous, after)
        cb = self.books[cmd.coup] = CoupBook(table=cmd.table, shoe=cmd.shoe, ruleset=cmd.ruleset)
        await self._decide(cb, cmd, wagerbook.OpenBook(cmd.coup, cmd.ruleset, seated), f"{cmd.coup}:open-book",
                           expected=after, guard=books)
        return Reply(True, coup=cmd.coup)

    async def _close_book(self, cmd: CloseBook) -> Reply:
        cb = self._book(cmd)
        if cb.book.status != "closed":
            await self._decide(cb, cmd, wagerbook.CloseBook(cmd.void), f"{cmd.coup}:close-book")
        return Reply(True, coup=cmd.coup, wagers=cb.book.wagers)

    async def _seated_after(self, table: str, coup: str, last: int) -> tuple[tuple[int, str], ...]:
        """Who sits where as the table's coup ``coup`` left it: its book held,
        where that holds the table's ``last`` wager message, else read from its
        own subject; none for a table's first coup."""
        if not coup:
            return ()
        held = self.books.get(coup)
        if held is None or held.table != table or held.last_seq != last:
            stored = await self.store.read(subjects.event(table, "*", coup, "wager"))
            return wagerbook.book_of(e.data for m in stored for e in m.batch.events).seated
        return held.book.seated

    async def _decide(self, cb: CoupBook, cmd: WagerCommand | BookCommand, command: wagerbook.AnyBookCommand,
                      msg_id: str, expected: int | None = None, guard: str | None = None) -> None:
        """Decide ``command`` on the book and record what it causes: after the
        book's opening, where that is not recorded yet (``CoupBook.opening``),
        in one append guarded on the table's books, as ``OpenBook`` is."""
        opening = [] if isinstance(command, wagerbook.OpenBook) or cb.opening is None else [cb.opening]
        book = wagerbook.evolve(cb.book, opening[0]) if opening else cb.book
        events: list[wagerbook.AnyBookEvent] = [*opening, *wagerbook.decide(self.rules(cb.ruleset), book, command)]
        if opening:
            expected, guard = cb.after, subjects.aggregate_filter("wager", cb.table)
        await self._commit(cb, cmd.coup, events, msg_id, cmd.id, digest(cmd), expected, guard)

