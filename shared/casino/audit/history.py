"""A table's history as the event store holds it: its coups grouped as they
are read in one pass (a few shoes' records held at a time, however long the
history), a window of its coups found by number or opening time and read
coup by coup, and each coup's line in a listing."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Protocol

import msgspec

from casino.audit.replay import replay_coup
from casino.audit.verify import of_the_shoe
from casino.rules.baccarat import scoreboard
from casino.rules.baccarat.messages import CoupResulted
from casino.rules.shoe import RoundEnded, ShoeEnded
from casino.store import subjects
from casino.store.envelope import AnyEvent, CoupConfigured
from casino.store.eventstore import EventStore, Stored, latest_at_table


def coup_id(table: str, coup: str) -> str:
    """A coup's id from its id or its number at the table (``42`` at BAC000-1: ``BAC000-1-000042``)."""
    return f"{table}-{int(coup):06d}" if coup.isdigit() else coup


def by_coup(stored: list[Stored]) -> dict[str, list[Stored]]:
    """The records of each coup among ``stored``; those filed between coups left out."""
    coups: dict[str, list[Stored]] = defaultdict(list)
    for m in stored:
        coup = subjects.tokens(m.subject)[2]
        if coup != subjects.NO_COUP:
            coups[coup].append(m)
    return coups


def shoe_results(stored: list[Stored]) -> list[scoreboard.Coup]:
    """The results of the baccarat coups among a shoe's records, in the order
    dealt, as its scoreboard takes them: a voided coup, which has none, left out."""
    results = {}
    for m in stored:
        for env in m.batch.events:
            if isinstance(env.data, CoupResulted):
                results[subjects.coup_number(subjects.tokens(m.subject)[2]) or 0] = scoreboard.of_result(env.data)
    return [results[n] for n in sorted(results)]


class Bounds(msgspec.Struct, frozen=True):
    """Which of a table's coups a listing or a verification asks for: numbers
    from ``first`` to ``last``, opened at or after ``since`` and before
    ``until`` (each open if None)."""

    first: int | None = None
    last: int | None = None
    since: datetime | None = None
    until: datetime | None = None

    def hold(self, opening: tuple[int, datetime]) -> bool:
        """Whether a coup of this number, opened at this time (``opening_of``), is within these bounds."""
        number, opened = opening
        return (self.first is None or number >= self.first) and (self.last is None or number <= self.last) and \
            (self.since is None or opened >= self.since) and (self.until is None or opened < self.until)

    def any(self) -> bool:
        return any(x is not None for x in (self.first, self.last, self.since, self.until))


async def table_listing(store: EventStore, table: str, bounds: Bounds) -> list[str]:
    """The lines of the table's coups within ``bounds``, in order. The numbers
    asked are found first (``coups_within``); a tenth of the table's coups or
    fewer are read coup by coup, by their own subjects, in a time that grows
    with the window, and with the table's shoes far more slowly than a pass
    grows with its coups; more are read in one pass (``listed_in_one_pass``):
    a coup read by its own subjects costs some ten times what it does in a
    pass (``python -m bench.verifying`` measures both)."""
    numbers, latest = await coups_within(store, table, bounds)
    if numbers is None or len(numbers) * 10 > latest:
        return await listed_in_one_pass(store, table, bounds)
    return [line async for msgs in read_coups(store, table, numbers) if (line := listing_line(msgs, bounds)) is not None]


async def read_coups(store: EventStore, table: str, numbers: range) -> AsyncIterator[list[Stored]]:
    """The records of each of the table's coups numbered ``numbers``, read by
    its own subjects, one at a time. Each coup after the first is looked for
    under the shoe the one before it opened in, then the next shoe: a filter
    that names the shoe is matched against that shoe's subjects, where one
    with a wildcard for it is matched under every shoe the table has had
    (``python -m bench.history`` measures both)."""
    shoe: int | None = None
    for n in numbers:
        if msgs := await _coup_records(store, table, coup_id(table, str(n)), shoe):
            shoe = subjects.shoe_number(table, subjects.tokens(msgs[0].subject)[1])
            yield msgs


async def _coup_records(store: EventStore, table: str, coup: str, after: int | None) -> list[Stored]:
    """A coup's records, where the coup before it opened in shoe ``after``: it
    opens in that shoe or in the next (if in neither, or ``after`` is None,
    it is looked for under any shoe of the table). A round that goes on into
    a new shoe (003 7.9) files what it draws there, and its end, under that
    shoe: a coup whose round has not ended where it opened is read there too."""
    if after is not None:
        for number in (after, after + 1):
            if msgs := await store.read(subjects.coup_filter(coup, table, subjects.shoe_id(table, number))):
                if not any(isinstance(e.data, RoundEnded) for m in msgs for e in m.batch.events):
                    went_on = subjects.coup_filter(coup, table, subjects.shoe_id(table, number + 1))
                    msgs = sorted(msgs + await store.read(went_on), key=lambda m: m.seq)
                return msgs
    return await store.read(subjects.coup_filter(coup, table))


async def played_at(store: EventStore, table: str, numbers: range, player: str,
                    players: Callable[[AnyEvent], set[str]]) -> AsyncIterator[tuple[int, datetime]]:
    """The coups among ``numbers`` of the table whose wager book names
    ``player`` (``players``: the players an event names), in order, each
    with the time its book opened. The books are read shoe by shoe, one read
    a shoe live or sealed, from the shoe the first coup opened in: a wager
    book is filed under the shoe its coup opened in, and a table's shoes are
    numbered in turn."""
    if not numbers:
        return
    first = await store.first(subjects.event(table, "*", coup_id(table, str(numbers[0])), "coup"))
    shoe = subjects.shoe_number(table, subjects.tokens(first.subject)[1]) if first is not None else None
    if shoe is None:
        return
    while True:
        books = await store.read(subjects.event(table, subjects.shoe_id(table, shoe), "*", "wager"))
        if not books:
            return
        opened: dict[int, datetime] = {}
        found: set[int] = set()
        for m in books:
            number = subjects.coup_number(subjects.tokens(m.subject)[2])
            if number is None or number not in numbers:
                continue
            if m.batch.events:
                opened.setdefault(number, m.batch.events[0].at)
            if number not in found and any(player in players(e.data) for e in m.batch.events):
                found.add(number)
        for number in sorted(found):
            yield number, opened[number]
        if max((subjects.coup_number(subjects.tokens(m.subject)[2]) or 0) for m in books) >= numbers[-1]:
            return
        shoe += 1


async def listed_in_one_pass(store: EventStore, table: str, bounds: Bounds) -> list[str]:
    """The lines of the table's coups within ``bounds``, read in one pass,
    a few shoes' records held at a time (``AsRead``)."""
    lines: dict[str, str] = {}

    def listed(msgs: list[Stored]) -> None:
        if (line := listing_line(msgs, bounds)) is not None:
            lines[subjects.tokens(msgs[0].subject)[2]] = line

    grouped = AsRead(table, listed)
    await store.scan(subjects.table_filter(table), grouped.take)
    grouped.rest()
    for coup in sorted(grouped.again):  # records read after the coup was listed: listed again, whole
        listed(await store.read(subjects.coup_filter(coup, table)))
    return [lines[coup] for coup in sorted(lines)]


async def coups_within(store: EventStore, table: str, bounds: Bounds) -> tuple[range | None, int]:
    """The numbers of the table's coups ``bounds`` asks for, and the latest
    number: those opened between its times found by halving, one get of a
    coup's first record (its opening) at each step (a table's coups are
    numbered as they open, one after another, so their opening times ascend
    with their numbers). None for the numbers where a coup is missing from
    the numbers' run: the table is then read whole."""
    latest_coup = await latest_at_table(store, table, "coup")
    if latest_coup is None:
        return range(0), 0
    number = subjects.tokens(latest_coup.subject)[2].rpartition("-")[2]
    if not number.isdigit():  # not named by the dealer-policy
        return None, 0
    latest = int(number)

    async def first_opened_at(t: datetime) -> int | None:
        """The first number opened at or after ``t`` (``latest + 1`` if none)."""
        low, high = 1, latest + 1
        while low < high:
            mid = (low + high) // 2
            if (opened := await opened_at(store, table, mid)) is None:
                return None
            low, high = (low, mid) if opened >= t else (mid + 1, high)
        return low

    first = await first_opened_at(bounds.since) if bounds.since else 1
    end = await first_opened_at(bounds.until) if bounds.until else latest + 1
    if first is None or end is None:
        return None, latest
    return range(max(first, bounds.first or 1), min(end, (bounds.last or latest) + 1)), latest


async def opened_at(store: EventStore, table: str, number: int) -> datetime | None:
    """When the table's coup ``number`` opened: one get of its first record (None if there is no such coup)."""
    first_record = await store.first(subjects.event(table, "*", coup_id(table, str(number)), "coup"))
    opening = opening_of([first_record]) if first_record is not None else None
    return opening[1] if opening is not None else None


def opening_of(msgs: list[Stored]) -> tuple[int, datetime] | None:
    """A coup's number and the time it opened, from its opening event among its records."""
    for m in msgs:
        for e in m.batch.events:
            if isinstance(e.data, CoupConfigured):
                return e.data.coup_number, e.at
    return None


def listing_line(msgs: list[Stored], bounds: Bounds) -> str | None:
    """The coup's line in a listing; None if the records hold no coup or it is outside ``bounds``."""
    opening = opening_of(msgs)
    if opening is None or not bounds.hold(opening):
        return None
    try:
        r = replay_coup(msgs)
    except LookupError:
        return None
    _, opened = opening
    result = next((s.text.removeprefix("result: ") for s in r.steps if s.type.endswith("coup_resulted")), "-")
    return (f"{r.coup:<18} {opened:%Y-%m-%d %H:%M:%S} {r.procedure or r.game:<12} {result[:34]:<34} "
            f"{'yes' if r.settled else 'no'}")


SHOE_RECORDS = ("shoe", "coup")  # the aggregates a shoe's record is under (casino.audit.verify.of_the_shoe)


class AsRead:
    """A table's records grouped as they are read, in one pass in stream order,
    holding a few shoes' records however long the history (and the name of
    each coup handed over).

    A coup is filed under the shoe in play when it opened (``<table>-shoe-<n>``,
    numbered in turn); a round that goes on into a new shoe (003 7.9) files
    what it draws from there under the new shoe. So once the stream reaches
    shoe n + 2, the coups opened in shoe n and before have every record but one
    written late (a settlement delayed for as long as a shoe is dealt): each
    is handed to ``coup`` and let go. A record for a coup already handed over
    names it in ``again``, to be read whole by its own subjects. A shoe's
    events go to ``shoe`` as its end is read (every card it gave is recorded
    before). Coups under shoes named otherwise are held to ``rest``."""

    def __init__(self, table: str, coup: Callable[[list[Stored]], object],
                 shoe: Callable[[str, list[tuple[int, AnyEvent]]], object] | None = None) -> None:
        self.table, self.coup, self.shoe = table, coup, shoe
        self.held: dict[str, list[Stored]] = {}  # coups not yet handed over: their records so far
        self.opened_in: dict[str, int] = {}  # their shoes' numbers, where numbered
        self.shoes: dict[str, list[tuple[int, AnyEvent]]] = {}  # shoes not yet ended: their events so far
        self.numbers: dict[str, int | None] = {}  # each shoe's number, by its name
        self.newest = 0  # the latest shoe read
        self.gone: set[str] = set()  # coups handed over and let go
        self.again: set[str] = set()  # of those, the ones with records read after

    def take(self, m: Stored) -> None:
        _, shoe_token, coup, aggregate = subjects.tokens(m.subject)
        number = self.numbers.get(shoe_token, 0)
        if number == 0:
            number = self.numbers[shoe_token] = subjects.shoe_number(self.table, shoe_token)
        if coup == subjects.NO_COUP:
            pass
        elif coup in self.gone:
            self.again.add(coup)
        else:
            self.held.setdefault(coup, []).append(m)
            if number is not None and (aggregate == "coup" or coup not in self.opened_in):
                # The shoe its record is under: what was filed before its opening may be under the shoe before.
                self.opened_in[coup] = max(self.opened_in.get(coup, number), number)
        if self.shoe is not None and aggregate in SHOE_RECORDS:
            for env in m.batch.events:
                if of_the_shoe(aggregate, env.data):
                    shoe_id = env.data.shoe_id  # type: ignore[union-attr]
                    self.shoes.setdefault(shoe_id, []).append((m.seq, env.data))
                    if type(env.data) is ShoeEnded:
                        self.shoe(shoe_id, self.shoes.pop(shoe_id))
        if number is not None and number > self.newest:
            self.newest = number
            self._hand_over([c for c, n in self.opened_in.items() if n <= number - 2])

    def rest(self) -> None:
        """Hand over every coup still held (the stream has been read)."""
        self._hand_over(sorted(self.held))

    def _hand_over(self, coups: list[str]) -> None:
        for coup in coups:
            self.opened_in.pop(coup, None)
            self.gone.add(coup)
            self.coup(self.held.pop(coup))


class Absent(Exception):
    """What a person asked for is not in the record: its message says what is
    there instead (the tables, a table's coups and shoes, the times they span),
    so that a typo never reads as an empty answer."""


class Tables(Protocol):
    async def tables(self) -> list[str]: ...


class Record(EventStore, Tables, Protocol):
    """An event store that can name its tables (the live stream, or it with the archive)."""


async def tables_held(store: Tables) -> str:
    """The tables the record holds, as a refusal names them."""
    tables = await store.tables()
    return f"the record holds tables {', '.join(tables)}" if tables else "the record holds no table yet"


async def known_table(store: Tables, table: str) -> None:
    """Refused (``Absent``) unless the record holds events of ``table``."""
    if table not in await store.tables():
        raise Absent(f"no table {table} in the record: {await tables_held(store)}")


async def coups_held(store: EventStore, table: str) -> str:
    """The run of the table's coups, their numbers and when the first and
    the latest opened: a few gets, whatever the table's history."""
    latest = await latest_at_table(store, table, "coup")
    number = subjects.coup_number(subjects.tokens(latest.subject)[2]) if latest is not None else None
    if number is None:
        return f"table {table} has no coup yet"
    first, last = await opened_at(store, table, 1), await opened_at(store, table, number)
    return (f"table {table}'s coups run from 1 (opened {_when(first)}) to {number} (opened {_when(last)}), "
            f"{coup_id(table, '1')} to {coup_id(table, str(number))}")


async def shoes_held(store: EventStore, table: str) -> str:
    """The run of the table's shoes, for a shoe asked for that is not there."""
    latest = await latest_at_table(store, table, "shoe")
    number = subjects.shoe_number(table, subjects.tokens(latest.subject)[1]) if latest is not None else None
    if number is None:
        return f"table {table} has no numbered shoe yet"
    return f"table {table}'s shoes run from {subjects.shoe_id(table, 1)} to {subjects.shoe_id(table, number)}"


def _when(t: datetime | None) -> str:
    return "at a time not recorded" if t is None else f"{t:%Y-%m-%d %H:%M:%S} UTC"
