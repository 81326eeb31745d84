"""A coup's wager book opened at the wager service: asked in the background
until it answers (asked again, it answers from its record), so that a coup
opened while the wager service is away gets its book as soon as it is back,
with no restart of anything; a command waits for it a little, then is told
to ask again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from casino.protocol import commands
from casino.protocol.service import Peer, log
from casino.rules.errors import RuleViolation
from casino.store import subjects

if TYPE_CHECKING:
    from services.dealer_policy.table import TableCoup

BOOK_WAIT = 3.0  # seconds a command waits for the coup's wager book to open (under a terminal's patience)


async def book_open(peer: Peer, t: TableCoup) -> None:
    """Until the coup's wager book is open, for ``BOOK_WAIT`` seconds at most."""
    try:
        await asyncio.wait_for(asyncio.shield(_book(peer, t)), BOOK_WAIT)
    except TimeoutError:
        raise RuleViolation(commands.WAGER_SERVICE, f"coup {t.coup} is open and its wager book not yet: the wager "
                            "service has not answered (it is asked until it does); ask again") from None


def _book(peer: Peer, t: TableCoup) -> asyncio.Future[Any]:
    """The coup's wager book being opened, asked once a coup (again if the asking failed)."""
    if t.booking is None or t.booking_for != t.coup or failed(t.booking):
        t.booking_for = t.coup
        previous = f"{t.name}-{t.number - 1:06d}" if t.number > 1 else ""
        t.booking = asyncio.ensure_future(_ask_until_answered(peer, subjects.command(t.name, "book"), commands.OpenBook(
            f"{t.coup}:open-book", t.name, t.coup, t.shoe, t.config.ruleset, previous)))
        t.booking.add_done_callback(logged("a coup's wager book was refused by the wager service"))
    return t.booking


async def _ask_until_answered(peer: Peer, subject: str, command: commands.OpenBook) -> None:
    while True:
        try:
            await peer.must(subject, command)
            return
        except RuntimeError as exc:  # no answer: the wager service is away
            log.warning("%s: %s; asked again", command.id, exc)
            await asyncio.sleep(1.0)


def failed(asked: asyncio.Future[Any]) -> bool:
    return asked.done() and (asked.cancelled() or asked.exception() is not None)


def logged(what: str) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback logging ``what`` failed, with why."""
    def log_failure(asked: asyncio.Future[Any]) -> None:
        if not asked.cancelled() and (exc := asked.exception()) is not None:
            log.warning("%s: %s", what, exc)

    return log_failure
