"""The wager book of one coup: the betting window, table limits, extra wagers.

The wager service owns it. Betting opens when the dealer opens the coup and
closes when the dealer closes it; a closed book is what the coup deals to. Extra
wagers (a blackjack double, split or insurance) are recorded against a closed
book when the dealer accepts the player's decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, cast

import msgspec

from casino.rules.aggregate import violation
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BaccaratRules, BlackjackRules
from casino.rules.wagers import Wager, check_book, check_wager


class BookCommand(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A command to the wager book of one coup."""


class OpenBook(BookCommand, frozen=True, tag="wager.open_book"):
    coup_id: str
    ruleset: str


class PlaceWager(BookCommand, frozen=True, tag="wager.place"):
    seat: int
    bet: str
    amount: int


class CancelWager(BookCommand, frozen=True, tag="wager.cancel"):
    seat: int
    bet: str


class CloseBook(BookCommand, frozen=True, tag="wager.close_book"):
    pass


class PlaceExtra(BookCommand, frozen=True, tag="wager.place_extra"):
    """A blackjack double, split or insurance stake the dealer accepted."""

    seat: int
    hand: int
    kind: Literal["double", "split", "insurance"]
    amount: int


class BookEvent(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A fact about the wager book of one coup."""


class BookOpened(BookEvent, frozen=True, tag="wager.book_opened"):
    coup_id: str
    ruleset: str


class WagerPlaced(BookEvent, frozen=True, tag="wager.placed"):
    wager: Wager


class WagerCancelled(BookEvent, frozen=True, tag="wager.cancelled"):
    seat: int
    bet: str


class BookClosed(BookEvent, frozen=True, tag="wager.book_closed"):
    wagers: tuple[Wager, ...]


class ExtraPlaced(BookEvent, frozen=True, tag="wager.extra_placed"):
    seat: int
    hand: int
    kind: Literal["double", "split", "insurance"]
    amount: int


AnyBookCommand = OpenBook | PlaceWager | CancelWager | CloseBook | PlaceExtra
AnyBookEvent = BookOpened | WagerPlaced | WagerCancelled | BookClosed | ExtraPlaced


class Book(msgspec.Struct, frozen=True, gc=False):
    coup_id: str = ""
    status: Literal["new", "open", "closed"] = "new"
    wagers: tuple[Wager, ...] = ()
    extras: tuple[ExtraPlaced, ...] = ()

    def staked(self, seat: int) -> int:
        return sum(w.amount for w in self.wagers if w.seat == seat) + sum(
            e.amount for e in self.extras if e.seat == seat)


def decide(rules: BaccaratRules | BlackjackRules, book: Book, command: AnyBookCommand) -> list[AnyBookEvent]:
    """The events ``command`` causes, or ``RuleViolation`` naming the reason."""
    match command:
        case OpenBook():
            if book.status != "new":
                raise RuleViolation("wager book", f"the book of {book.coup_id} is already open")
            return [BookOpened(command.coup_id, command.ruleset)]
        case PlaceWager():
            _must_be_open(book)
            wager = Wager(command.seat, command.bet, command.amount)
            check_wager(rules.table, rules.limits, wager)
            if any(w.seat == wager.seat and w.bet == wager.bet for w in book.wagers):
                raise RuleViolation("wager book", f"seat {wager.seat} already has a {wager.bet} wager; cancel it first")
            return [WagerPlaced(wager)]
        case CancelWager():
            _must_be_open(book)
            if not any(w.seat == command.seat and w.bet == command.bet for w in book.wagers):
                raise RuleViolation("wager book", f"seat {command.seat} has no {command.bet} wager")
            return [WagerCancelled(command.seat, command.bet)]
        case CloseBook():
            _must_be_open(book)
            if isinstance(rules, BlackjackRules) and not book.wagers:
                # Refused here, before the book closes: a book closed on a coup that
                # cannot be dealt would leave the table with neither betting nor a deal.
                raise RuleViolation("002 (4)(a)" if rules.hole_card else "003 7.3(a)",
                                    "cards go only to boxes containing a wager, and none has one: "
                                    "betting stays open")
            return [BookClosed(check_book(rules.table, rules.limits, book.wagers))]
        case PlaceExtra():
            if book.status != "closed":
                raise RuleViolation("wager book", "extra wagers are placed only after betting has closed")
            if command.amount <= 0:
                raise RuleViolation("wager book", "an extra wager is a positive amount")
            if not any(w.seat == command.seat for w in book.wagers):
                raise RuleViolation("wager book", f"seat {command.seat} has no wager in this coup")
            return [ExtraPlaced(command.seat, command.hand, command.kind, command.amount)]
    raise RuleViolation("protocol", f"unknown wager command {type(command).__name__}")


def check(rules: BaccaratRules | BlackjackRules, book: Book, command: AnyBookCommand) -> RuleViolation | None:
    """Whether ``command`` is allowed now."""
    return violation(lambda: decide(rules, book, command))


def _must_be_open(book: Book) -> None:
    if book.status == "new":
        raise RuleViolation("wager book", "betting has not opened for this coup")
    if book.status == "closed":
        raise RuleViolation("wager book", "betting is closed for this coup")


def evolve(book: Book, event: AnyBookEvent) -> Book:
    """The book after ``event``."""
    r = msgspec.structs.replace
    match event:
        case BookOpened():
            return Book(coup_id=event.coup_id, status="open")
        case WagerPlaced():
            return r(book, wagers=book.wagers + (event.wager,))
        case WagerCancelled():
            return r(book, wagers=tuple(w for w in book.wagers if (w.seat, w.bet) != (event.seat, event.bet)))
        case BookClosed():
            return r(book, status="closed", wagers=event.wagers)
        case ExtraPlaced():
            return r(book, extras=book.extras + (event,))
    return book


_BOOK_EVENTS = frozenset({BookOpened, WagerPlaced, WagerCancelled, BookClosed, ExtraPlaced})


def book_of(events: Iterable[object]) -> Book:
    """The book folded from whichever of ``events`` are the wager book's (a
    coup's whole record holds the other services' events too)."""
    book = Book()
    for e in events:
        if type(e) in _BOOK_EVENTS:
            book = evolve(book, cast(AnyBookEvent, e))
    return book
