"""``casino replay``, ``casino verify`` and ``casino projections``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime
from functools import partial

import msgspec
from nats.aio.client import Client

from casino import natsclient, storeaccess
from casino.parallel import cores, in_processes
from casino.projections import KvProjections, Projector, fold_stream
from casino.replay import render_text, replay_coup
from casino.rules.shoe import RoundEnded, ShoeEnded
from casino.store import subjects
from casino.store.envelope import AnyEvent, CoupConfigured
from casino.store.eventstore import EventStore, Stored, latest_at_table
from casino.store.jetstream import JetStreamEventStore
from casino.verify import SHOE_EVENTS, Finding, verify_coup, verify_shoe, verify_shoes


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    replay = sub.add_parser("replay", help="reconstruct coups from the event store")
    which = replay.add_subparsers(dest="what", required=True)
    coup = which.add_parser("coup", help="one coup, as a compliance officer reads it")
    coup.add_argument("table")
    coup.add_argument("coup", help="the coup id (BAC000-1-000042) or its number (42)")
    coup.add_argument("--json", action="store_true", help="the stable JSON schema casino.replay.coup/1")
    coup.add_argument("--svg", metavar="FILE", help="also draw the layout at the end of the coup")
    table = which.add_parser("table", help="list a table's coups")
    table.add_argument("table")
    _window_arguments(table)
    shoe = which.add_parser("shoe", help="list the coups dealt from one shoe")
    shoe.add_argument("shoe", help="the shoe id, e.g. BAC000-1-shoe-3")
    verify = sub.add_parser("verify", help="check every selected coup and ended shoe against the rules")
    verify.add_argument("--table", help="one table; with the options below (alone: at every table), "
                                        "its coups in that window and the shoes they were dealt from")
    _window_arguments(verify)
    verify.add_argument("--coup")
    verify.add_argument("--shoe")
    verify.add_argument("--workers", type=int, default=cores(),
                        help="processes verifying a whole store, its tables shared among them (default: the cores)")
    projections = sub.add_parser("projections", help="the read models in key-value buckets")
    projections_do = projections.add_subparsers(dest="what", required=True)
    rebuild = projections_do.add_parser("rebuild", help="fold the stream again from the first event")
    floor = projections_do.add_parser("floor", help="draw the floor's figures from the live read models")
    floor.add_argument("--svg", metavar="FILE", required=True)
    for p in (coup, table, shoe, verify, rebuild, floor):
        storeaccess.add_arguments(p)


def _window_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="first", type=int, help="first coup number")
    parser.add_argument("--to", dest="last", type=int, help="last coup number")
    parser.add_argument("--since", type=datetime.fromisoformat, help="opened at or after (ISO time, UTC)")
    parser.add_argument("--until", type=datetime.fromisoformat, help="opened before (ISO time, UTC)")


def _bounds(args: argparse.Namespace) -> Bounds:
    since, until = (_utc(t) if t else None for t in (args.since, args.until))
    return Bounds(args.first, args.last, since, until)


def run(args: argparse.Namespace) -> int:
    if args.command == "verify" and _bounds(args).any() and (args.coup or args.shoe):
        print("casino: --from, --to, --since and --until verify a window of a table's coups (or of every "
              "table's): not with --coup or --shoe", file=sys.stderr)
        return 2
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    async with storeaccess.open_store(args) as (store, nc):
        if args.command == "verify":
            return await verify(store, nc, args)
        if args.command == "projections" and args.what == "floor":
            return await draw_floor(nc, args.svg)
        if args.command == "projections":
            return await rebuild_projections(store, nc)
        if args.what == "coup":
            return await show_coup(store, args)
        return await list_coups(store, args)


def coup_id(table: str, coup: str) -> str:
    return f"{table}-{int(coup):06d}" if coup.isdigit() else coup


async def show_coup(store: EventStore, args: argparse.Namespace) -> int:
    stored = await store.read(subjects.coup_filter(coup_id(args.table, args.coup), args.table))
    try:
        r = replay_coup(stored)
    except LookupError:
        print(f"casino: no coup {args.coup} at table {args.table}", file=sys.stderr)
        return 2
    print(msgspec.json.format(msgspec.json.encode(r)).decode() if args.json else render_text(r))
    if args.svg:
        from casino.svg import render_svg

        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(render_svg(r))
    return 0


def by_coup(stored: list[Stored]) -> dict[str, list[Stored]]:
    coups: dict[str, list[Stored]] = defaultdict(list)
    for m in stored:
        coup = subjects.tokens(m.subject)[2]
        if coup != subjects.NO_COUP:
            coups[coup].append(m)
    return coups


async def list_coups(store: EventStore, args: argparse.Namespace) -> int:
    if args.what == "shoe":
        table = subjects.table_of_shoe(args.shoe)
        lines = {}
        for coup in sorted(by_coup(await store.read(subjects.shoe_filter(table, args.shoe)))):
            if (line := _listing(await store.read(subjects.coup_filter(coup, table)), Bounds())) is not None:
                lines[coup] = line
        listing = [lines[coup] for coup in sorted(lines)]
    else:
        listing = await table_listing(store, args.table, _bounds(args))
    print(f"{'coup':<18} {'opened (UTC)':<20} {'dealt by':<12} {'result':<34} settled")
    for line in listing:
        print(line)
    return 0


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
    pass (`python -m bench.verifying`: 6 to 12 ms against 0.9 ms a coup)."""
    numbers, latest = await coups_within(store, table, bounds)
    if numbers is None or len(numbers) * 10 > latest:
        return await listed_in_one_pass(store, table, bounds)
    return [line async for msgs in _each_coup(store, table, numbers) if (line := _listing(msgs, bounds)) is not None]


async def _each_coup(store: EventStore, table: str, numbers: range) -> AsyncIterator[list[Stored]]:
    """The records of each of the table's coups numbered ``numbers``, read by
    its own subjects, one at a time. Each coup after the first is looked for
    under the shoe the one before it opened in, then the next shoe: a filter
    that names the shoe is matched against that shoe's subjects, where one
    with a wildcard for it is matched under every shoe the table has had (a
    table as `bench.history` writes it, 100,000 coups: 6.0 ms a coup, against
    10 to 13 with the wildcard; 3.6 ms at 1,000 coups)."""
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


async def listed_in_one_pass(store: EventStore, table: str, bounds: Bounds) -> list[str]:
    """The lines of the table's coups within ``bounds``, read in one pass,
    a few shoes' records held at a time (``_AsRead``)."""
    lines: dict[str, str] = {}

    def listed(msgs: list[Stored]) -> None:
        if (line := _listing(msgs, bounds)) is not None:
            lines[subjects.tokens(msgs[0].subject)[2]] = line

    grouped = _AsRead(table, listed)
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


def _listing(msgs: list[Stored], bounds: Bounds) -> str | None:
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


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


async def verify(store: EventStore, nc: Client, args: argparse.Namespace) -> int:
    if args.coup:
        stored = await store.read(subjects.coup_filter(args.coup, subjects.table_of_coup(args.coup)))
        report = verify_all(stored, [])
    elif args.shoe:
        table = subjects.table_of_shoe(args.shoe)
        shoes = await store.read(subjects.shoe_filter(table, args.shoe))
        stored = [m for c in sorted(by_coup(shoes)) for m in await store.read(subjects.coup_filter(c, table))]
        report = verify_all(stored, shoes)
    elif (window := _bounds(args)).any():  # the window at the table, or at every table at once
        tables = [args.table] if args.table else await JetStreamEventStore(nc).tables()
        windows = await asyncio.gather(*(verify_window(store, table, window) for table in tables))
        if unnumbered := [table for table, window in zip(tables, windows, strict=True) if window is None]:
            print(f"casino: the coups of {', '.join(unnumbered)} are not numbered in a run: verify the whole table",
                  file=sys.stderr)
            return 2
        report = Report.of(w for w in windows if w is not None)
    elif args.table:
        report, _ = await verify_table(store, args.table, 0)
    else:
        report = await verify_store(nc, args.workers)
    for f in report.findings:
        print(f"{f.coup}: event seq {f.seq}: {f.what}")
    print(f"verified {report.coups} coups and {report.shoes} ended shoes: "
          + ("every one follows the rules" if not report.findings else f"{len(report.findings)} differences"))
    return 1 if report.findings else 0


async def verify_window(store: EventStore, table: str, bounds: Bounds) -> Report | None:
    """The table's coups within ``bounds`` (found as ``coups_within`` finds
    them, each read by its own subjects) verified, and every ended shoe they
    were dealt from, from its own shoe events: a disputed hour or day in a
    time that grows with the window (and slowly with the table's shoes), in
    the memory of a coup or a shoe. None where the coups cannot be found by
    number."""
    numbers, _ = await coups_within(store, table, bounds)
    if numbers is None:
        return None
    parts, shoes = [], set()
    async for msgs in _each_coup(store, table, numbers):  # each verified as read: a coup's records held at a time
        if (opening := opening_of(msgs)) is not None and bounds.hold(opening):
            parts.append(verify_all(msgs, []))
            shoes |= {subjects.tokens(m.subject)[1] for m in msgs if subjects.tokens(m.subject)[3] == "shoe"}
    for shoe in sorted(shoes):
        parts.append(verify_all([], await store.read(subjects.event(table, shoe, "*", "shoe"))))
    return Report.of(parts)


class Report(msgspec.Struct):
    coups: int
    shoes: int
    findings: list[Finding]

    @staticmethod
    def of(reports: Iterable[Report]) -> Report:
        """One report of several parts."""
        parts = list(reports)
        return Report(sum(r.coups for r in parts), sum(r.shoes for r in parts), [f for r in parts for f in r.findings])


async def verify_store(nc: Client, workers: int, each_coup: Callable[[list[Stored]], object] | None = None) -> Report:
    """Verify every coup and ended shoe in the store ``nc`` is connected to, its
    tables spread over ``workers`` processes that each read their own tables
    over a connection of their own (a table's coups and shoes are all under its
    subjects). ``each_coup`` is also given every coup's records, where they are read.

    Every event up to the last when this starts must have been read under some
    table; otherwise this fails rather than report a partial verification."""
    assert nc.connected_url is not None
    store = JetStreamEventStore(nc)
    state = (await store.js.stream_info(store.stream)).state
    tables = await store.tables()
    n = max(1, min(workers, len(tables)))
    parts = await in_processes(partial(_verify_tables, nc.connected_url.geturl(), state.last_seq, each_coup),
                               [tables[i::n] for i in range(n)])
    read = sum(count for _, count in parts)
    if read != state.messages:
        raise RuntimeError(f"the stream holds {state.messages} events up to sequence {state.last_seq}, "
                           f"but its tables hold {read}: not every event was verified")
    return Report.of(report for report, _ in parts)


async def _verify_tables(url: str, last_seq: int, each_coup: Callable[[list[Stored]], object] | None,
                         tables: list[str]) -> tuple[Report, int]:
    """The report on ``tables``, and how many of their events are at or below ``last_seq``."""
    nc = await natsclient.connect(url)
    try:
        store = JetStreamEventStore(nc)
        parts = [await verify_table(store, table, last_seq, each_coup) for table in tables]
    finally:
        await nc.close()
    return Report.of(report for report, _ in parts), sum(read for _, read in parts)


async def verify_table(store: EventStore, table: str, last_seq: int,
                       each_coup: Callable[[list[Stored]], object] | None = None) -> tuple[Report, int]:
    """The report on one table's whole history, and how many of its events are
    at or below ``last_seq``: read in one pass, verified as it is read."""
    verifying = _Verifying(table, last_seq, each_coup)
    await store.scan(subjects.table_filter(table), verifying.take)
    return await verifying.finish(store), verifying.read


class _AsRead:
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
            if number is not None:
                self.opened_in.setdefault(coup, number)
        if aggregate == "shoe" and self.shoe is not None:
            for env in m.batch.events:
                if isinstance(env.data, SHOE_EVENTS):
                    shoe_id = env.data.shoe_id
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


class _Verifying:
    """One table's history verified as it is read (``_AsRead``): a coup found
    with records read after it was verified is read again whole and verified
    again, its report the one of the whole coup."""

    def __init__(self, table: str, last_seq: int, each_coup: Callable[[list[Stored]], object] | None) -> None:
        self.table, self.last_seq, self.each_coup = table, last_seq, each_coup
        self.grouped = _AsRead(table, self._coup, self._shoe)
        self.read, self.coups, self.ended = 0, 0, 0
        self.unfinished: set[str] = set()  # coups found still being dealt
        self.findings: list[Finding] = []

    def take(self, m: Stored) -> None:
        self.read += m.seq <= self.last_seq
        self.grouped.take(m)

    def _coup(self, records: list[Stored]) -> None:
        coup = subjects.tokens(records[0].subject)[2]
        report = _verify_coups({coup: records}, self.each_coup)
        self.coups += report.coups
        self.findings += report.findings
        if not report.coups:
            self.unfinished.add(coup)

    def _shoe(self, shoe_id: str, events: list[tuple[int, AnyEvent]]) -> None:
        self.findings += verify_shoe(shoe_id, events)
        self.ended += 1

    async def finish(self, store: EventStore) -> Report:
        self.grouped.rest()
        for coup in sorted(self.grouped.again):
            report = _verify_coups({coup: await store.read(subjects.coup_filter(coup, self.table))}, None)
            self.findings = [f for f in self.findings if f.coup != coup] + report.findings
            self.coups += report.coups - (coup not in self.unfinished)
        return Report(self.coups, self.ended, self.findings)


def _verify_coups(coups: dict[str, list[Stored]], each_coup: Callable[[list[Stored]], object] | None) -> Report:
    """Every finished coup of ``coups`` verified (one being dealt is skipped);
    ``each_coup`` is given every one's records."""
    findings: list[Finding] = []
    verified = 0
    for _, msgs in sorted(coups.items()):
        if each_coup is not None:
            each_coup(msgs)
        if not any(subjects.tokens(m.subject)[3] == "settle" for m in msgs) and _in_play(msgs):
            continue
        verified += 1
        findings += verify_coup(msgs)
    return Report(verified, 0, findings)


def verify_history(stored: list[Stored]) -> Report:
    """Verify every coup and every ended shoe of a history (a table's, or the whole store's)."""
    return verify_all(stored, [m for m in stored if subjects.tokens(m.subject)[3] == "shoe"])


def verify_all(stored: list[Stored], shoe_events: list[Stored]) -> Report:
    """Verify every coup in ``stored`` (finished ones; one being dealt is skipped)
    and every ended shoe in ``shoe_events``."""
    report = _verify_coups(by_coup(stored), None)
    ended = {e.data.shoe_id for m in shoe_events for e in m.batch.events if isinstance(e.data, ShoeEnded)}
    return Report(report.coups, len(ended), report.findings + verify_shoes(shoe_events))


def _in_play(msgs: list[Stored]) -> bool:
    """The latest coup of a table, not yet finished: not verified until it is."""
    return not any(e.type.endswith("cards_picked_up") for m in msgs for e in m.batch.events)


async def rebuild_projections(store: EventStore, nc: Client) -> int:
    """Rebuild the read models from the first event, a page at a time, compare
    them with the live ones (once the live projector has caught up with the
    stream), and store the rebuilt ones. An ended shoe's figures are final:
    compared, written and let go as its page is folded."""
    kv = await KvProjections(nc.jetstream()).open()
    latest = await store.last(f"{subjects.EVENTS}.>")
    end = latest.seq if latest else 0
    for _ in range(100):
        if await kv.seq() >= end:
            break
        await asyncio.sleep(0.1)
    if (live_seq := await kv.seq()) < end:
        print(f"the live read models stop at stream sequence {live_seq} of {end}: "
              "the projections service is not running or still catching up")
    projector, compared, differ = Projector(), 0, 0

    async def compare_and_write(keys: set[tuple[str, str]], with_seq: bool) -> None:
        nonlocal compared, differ
        rebuilt = {k: projector.value(*k) for k in keys}
        live = await kv.values(rebuilt)
        for bucket, key in sorted(k for k in rebuilt if live.get(k) != rebuilt[k]):
            print(f"{bucket} {key}: live {live.get((bucket, key))!r}, rebuilt {rebuilt[bucket, key]!r}")
            differ += 1
        await kv.put(projector, set(rebuilt), with_seq=with_seq)
        compared += len(rebuilt)

    async def folded(changed: set[tuple[str, str]]) -> None:
        await compare_and_write({("shoe_stats", k) for k, st in projector.shoe_stats.items() if st.ended}, False)
        projector.forget_ended_shoes()

    await fold_stream(projector, store, folded)
    await compare_and_write(set(projector.everything()), True)
    await kv.save(projector)  # a restart of the projections service folds on from the rebuilt state
    print(f"rebuilt {compared} read-model entries up to stream sequence {projector.seq}: "
          + ("equal to the live ones" if not differ else f"{differ} differed from the live ones"))
    return 0


async def draw_floor(nc: Client, path: str) -> int:
    """The floor's figures, from the live key-value buckets, as SVG."""
    from casino.floor import render_floor
    from casino.projections import ShoeStats, TableStatus, Takings

    kv = await KvProjections(nc.jetstream()).open()
    live = await kv.everything_listed()
    status = [msgspec.json.decode(v, type=TableStatus) for (b, _), v in live.items() if b == "table_status"]
    shoes = {k: msgspec.json.decode(v, type=ShoeStats) for (b, k), v in live.items() if b == "shoe_stats"}
    takings = {k: msgspec.json.decode(v, type=Takings) for (b, k), v in live.items() if b == "takings"}
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_floor(status, shoes, takings))
    print(f"{len(status)} tables drawn to {path}")
    return 0
