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
    """Open betting; ``seated`` is who sits where as the table's last coup left it."""

    coup_id: str
    ruleset: str
    seated: tuple[tuple[int, str], ...] = ()


class PlaceWager(BookCommand, frozen=True, tag="wager.place"):
    """``player``: who wagers; empty for the player seated at ``seat``."""

    seat: int
    bet: str
    amount: int
    player: str = ""


class PlaceWagers(BookCommand, frozen=True, tag="wager.place_slip"):
    """A bet slip: several wagers placed at once, as an electronic table
    confirms a player's slip. Each is decided as ``PlaceWager`` on the book
    the slip's earlier wagers leave; one refused refuses the whole slip."""

    wagers: tuple[PlaceWager, ...]


class CancelWager(BookCommand, frozen=True, tag="wager.cancel"):
    seat: int
    bet: str
    player: str = ""


class Sit(BookCommand, frozen=True, tag="wager.sit"):
    """A player takes a seat while betting is open."""

    seat: int
    player: str


class Leave(BookCommand, frozen=True, tag="wager.leave"):
    """The player seated at ``seat`` leaves it while betting is open."""

    seat: int


class CloseBook(BookCommand, frozen=True, tag="wager.close_book"):
    """Close betting; ``void``: for a coup a supervisor's ruling voids while
    betting is open, whose wagers are all returned: closed as they stand, with
    nothing the deal would need of them (no wager at blackjack included)."""

    void: bool = False


class PlaceExtra(BookCommand, frozen=True, tag="wager.place_extra"):
    """A blackjack double, split or insurance stake the dealer accepted."""

    seat: int
    hand: int
    kind: Literal["double", "split", "insurance"]
    amount: int


class BookEvent(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A fact about the wager book of one coup."""


class BookOpened(BookEvent, frozen=True, tag="wager.book_opened"):
    """Betting opened; ``seated``: (seat, player) of every player seated as it opened."""

    coup_id: str
    ruleset: str
    seated: tuple[tuple[int, str], ...] = ()


class WagerPlaced(BookEvent, frozen=True, tag="wager.placed"):
    wager: Wager


class WagerCancelled(BookEvent, frozen=True, tag="wager.cancelled"):
    seat: int
    bet: str
    player: str = ""


class PlayerSeated(BookEvent, frozen=True, tag="wager.player_seated"):
    seat: int
    player: str


class PlayerLeft(BookEvent, frozen=True, tag="wager.player_left"):
    seat: int
    player: str


class BookClosed(BookEvent, frozen=True, tag="wager.book_closed"):
    wagers: tuple[Wager, ...]


class ExtraPlaced(BookEvent, frozen=True, tag="wager.extra_placed"):
    seat: int
    hand: int
    kind: Literal["double", "split", "insurance"]
    amount: int


AnyBookCommand = OpenBook | PlaceWager | PlaceWagers | CancelWager | CloseBook | PlaceExtra | Sit | Leave
AnyBookEvent = BookOpened | WagerPlaced | WagerCancelled | BookClosed | ExtraPlaced | PlayerSeated | PlayerLeft


class Book(msgspec.Struct, frozen=True, gc=False):
    coup_id: str = ""
    status: Literal["new", "open", "closed"] = "new"
    wagers: tuple[Wager, ...] = ()
    extras: tuple[ExtraPlaced, ...] = ()
    seated: tuple[tuple[int, str], ...] = ()  # (seat, player), in seat order

    def seated_at(self, seat: int) -> str:
        """The player seated at ``seat``, empty if none is."""
        return next((p for s, p in self.seated if s == seat), "")

    def staked(self, seat: int) -> int:
        return sum(w.amount for w in self.wagers if w.seat == seat) + sum(
            e.amount for e in self.extras if e.seat == seat)


def decide(rules: BaccaratRules | BlackjackRules, book: Book, command: AnyBookCommand) -> list[AnyBookEvent]:
    """The events ``command`` causes, or ``RuleViolation`` naming the reason."""
    match command:
        case OpenBook():
            if book.status != "new":
                raise RuleViolation("wager book", f"the book of {book.coup_id} is already open")
            return [BookOpened(command.coup_id, command.ruleset, command.seated)]
        case PlaceWager():
            _must_be_open(book)
            player, back = _who(rules, book, command.seat, command.player)
            wager = Wager(command.seat, command.bet, command.amount, player, back)
            check_wager(rules.table, rules.limits, wager)
            if any((w.seat, w.bet, w.player) == (wager.seat, wager.bet, player) for w in book.wagers):
                raise RuleViolation("wager book", f"seat {wager.seat} already has a {wager.bet} wager"
                                                  f"{f' by {player}' if player else ''}; cancel it first")
            return [WagerPlaced(wager)]
        case PlaceWagers():
            return _slip(rules, book, command.wagers)
        case CancelWager():
            _must_be_open(book)
            player, _ = _who(rules, book, command.seat, command.player)
            if not any((w.seat, w.bet, w.player) == (command.seat, command.bet, player) for w in book.wagers):
                raise RuleViolation("wager book", f"seat {command.seat} has no {command.bet} wager"
                                                  f"{f' by {player}' if player else ''}")
            return [WagerCancelled(command.seat, command.bet, player)]
        case Sit():
            _must_be_open(book)
            rules.table.check_seat(command.seat)
            if not command.player:
                raise RuleViolation("seating", "a player who sits is named")
            if taken := book.seated_at(command.seat):
                raise RuleViolation("seating", f"seat {command.seat} is taken by {taken}")
            if any(p == command.player for _, p in book.seated):
                raise RuleViolation("seating", f"{command.player} is seated already")
            if any(w.seat == command.seat for w in book.wagers):
                # The seat's wagers are those of a player not recorded as seated (``_who``): the box
                # is theirs, and a second player's wagers would make it two (a blackjack box one hand).
                raise RuleViolation("seating", f"seat {command.seat} has wagers in this coup by a player not "
                                               f"recorded as seated; they are cancelled before another sits there")
            if any(w.player == command.player and w.back for w in book.wagers):
                raise RuleViolation("seating", f"{command.player} has back bets in this coup; cancel them first")
            return [PlayerSeated(command.seat, command.player)]
        case Leave():
            _must_be_open(book)
            if not (player := book.seated_at(command.seat)):
                raise RuleViolation("seating", f"nobody is seated at seat {command.seat}")
            if any(w.seat == command.seat for w in book.wagers):
                raise RuleViolation("seating", f"seat {command.seat} has wagers in this coup; they are cancelled "
                                               f"before its player leaves")
            return [PlayerLeft(command.seat, player)]
        case CloseBook():
            _must_be_open(book)
            if command.void:  # nothing is dealt: every wager is returned as placed
                return [BookClosed(tuple(book.wagers))]
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


def _slip(rules: BaccaratRules | BlackjackRules, book: Book,
          wagers: tuple[PlaceWager, ...]) -> list[AnyBookEvent]:
    """A slip's wagers, each decided on the book the ones before it leave
    (two on one seat's same bet are refused as they are one after the other);
    the first refused names its line and refuses the slip."""
    if not wagers:
        raise RuleViolation("wager book", "a bet slip holds at least one wager")
    events: list[AnyBookEvent] = []
    for line, wager in enumerate(wagers, start=1):
        try:
            placed = decide(rules, book, wager)
        except RuleViolation as exc:
            raise RuleViolation(exc.clause, f"line {line} of the slip (seat {wager.seat} {wager.bet}): "
                                            f"{exc.reason}; no wager on the slip is placed") from None
        for event in placed:
            book = evolve(book, event)
        events += placed
    return events


def check(rules: BaccaratRules | BlackjackRules, book: Book, command: AnyBookCommand) -> RuleViolation | None:
    """Whether ``command`` is allowed now."""
    return violation(lambda: decide(rules, book, command))


def _who(rules: BaccaratRules | BlackjackRules, book: Book, seat: int, named: str) -> tuple[str, bool]:
    """Who wagers at ``seat``, and whether it is a back bet: the seated player
    (unnamed, or named), or another player on a seated player's box (a back
    bet, at baccarat). Where nobody is recorded seated, an unnamed wager is the
    wagering player's own, as tables whose terminals record no seating have it."""
    seated = book.seated_at(seat)
    if not named or named == seated:
        return seated, False
    if not seated:
        raise RuleViolation("seating", f"nobody is seated at seat {seat}: a back bet is placed on a seated "
                                       f"player's box")
    if not isinstance(rules, BaccaratRules):
        raise RuleViolation("seating", "back bets are taken at baccarat only")
    return named, True


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
            return Book(coup_id=event.coup_id, status="open", seated=event.seated)
        case WagerPlaced():
            return r(book, wagers=book.wagers + (event.wager,))
        case WagerCancelled():
            gone = (event.seat, event.bet, event.player)
            return r(book, wagers=tuple(w for w in book.wagers if (w.seat, w.bet, w.player) != gone))
        case PlayerSeated():
            return r(book, seated=tuple(sorted(book.seated + ((event.seat, event.player),))))
        case PlayerLeft():
            return r(book, seated=tuple(x for x in book.seated if x[0] != event.seat))
        case BookClosed():
            return r(book, status="closed", wagers=event.wagers)
        case ExtraPlaced():
            return r(book, extras=book.extras + (event,))
    return book


_BOOK_EVENTS = frozenset({BookOpened, WagerPlaced, WagerCancelled, BookClosed, ExtraPlaced, PlayerSeated, PlayerLeft})


def book_of(events: Iterable[object]) -> Book:
    """The book folded from whichever of ``events`` are the wager book's (a
    coup's whole record holds the other services' events too)."""
    book = Book()
    for e in events:
        if type(e) in _BOOK_EVENTS:
            book = evolve(book, cast(AnyBookEvent, e))
    return book
