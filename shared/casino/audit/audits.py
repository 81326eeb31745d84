"""Auditing the event store: every coup and ended shoe of a store, a table,
a window of a table's coups, or a history in hand, verified through the rules
(``casino.audit.verify``), as ``casino verify`` does. A whole store's tables are
shared among processes, each reading its own over its own connection; a table
is verified as it is read, a coup and a few shoes held at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial

import msgspec
from nats.aio.client import Client

from casino.audit.carried import Carried, carried_before_opening, carried_over, off_roster
from casino.audit.findings import Finding
from casino.audit.history import AsRead, Bounds, by_coup, coups_within, opening_of, read_coups
from casino.audit.parallel import in_processes
from casino.audit.readings import before_opening_only, enveloped
from casino.audit.verify import (
    Openings,
    recorded_rulesets,
    shoe_records,
    unreadable,
    verify_before_opening,
    verify_coup,
    verify_shoe,
    verify_shoes,
)
from casino.nats import client as natsclient
from casino.rules.ruleset import Ruleset
from casino.rules.shoe import ShoeEnded
from casino.store import subjects
from casino.store.envelope import CARRIED, AnyEvent, CoupConfigured
from casino.store.eventstore import EventStore, Stored
from casino.store.jetstream import STREAM


class Report(msgspec.Struct):
    """What a verification found: how many coups and ended shoes it verified, and every difference."""

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
    from casino.audit.archive import history  # it verifies seals with this module

    assert nc.connected_url is not None
    state = (await nc.jetstream().stream_info(STREAM)).state
    tables = await history(nc).tables()
    n = max(1, min(workers, len(tables)))
    parts = await in_processes(partial(_verify_tables, nc.connected_url.geturl(), state.last_seq, each_coup),
                               [tables[i::n] for i in range(n)])
    live = sum(count for _, (count, _) in parts)  # read from the live stream
    read = sum(count for _, (_, count) in parts)  # read, live or from their shoes' seals
    after = (await nc.jetstream().stream_info(STREAM)).state
    # Shoes the archiver removed meanwhile were read from their seals: then each
    # event live at the start must have been read one way or the other.
    removed = (after.num_deleted or 0) != (state.num_deleted or 0) or after.first_seq != state.first_seq
    if live != state.messages and not (removed and read >= state.messages):
        raise RuntimeError(f"the stream holds {state.messages} events up to sequence {state.last_seq}, "
                           f"but its tables hold {live}: not every event was verified")
    return Report.of(report for report, _ in parts)


async def _verify_tables(url: str, last_seq: int, each_coup: Callable[[list[Stored]], object] | None,
                         tables: list[str]) -> tuple[Report, tuple[int, int]]:
    """The report on ``tables``, live and archived, and how many of their
    events at or below ``last_seq`` were read from the live stream, and in all."""
    from casino.audit.archive import history

    nc = await natsclient.connect(url)
    try:
        store = history(nc)
        parts = [await verify_table(store, table, last_seq, each_coup) for table in tables]
    finally:
        await nc.close()
    read = sum(count for _, count in parts)
    return Report.of(report for report, _ in parts), (read - store.archived_only, read)


async def verify_table(store: EventStore, table: str, last_seq: int,
                       each_coup: Callable[[list[Stored]], object] | None = None) -> tuple[Report, int]:
    """The report on one table's whole history, and how many of its events are
    at or below ``last_seq``: read in one pass, verified as it is read."""
    verifying = _Verifying(table, last_seq, each_coup)
    await store.scan(subjects.table_filter(table), verifying.take)
    return await verifying.finish(store), verifying.read


class _Verifying:
    """One table's history verified as it is read (``AsRead``): a coup found
    with records read after it was verified is read again whole and verified
    again, its report the one of the whole coup."""

    def __init__(self, table: str, last_seq: int, each_coup: Callable[[list[Stored]], object] | None) -> None:
        self.table, self.last_seq, self.each_coup = table, last_seq, each_coup
        self.grouped = AsRead(table, self._coup, self._shoe)
        self.read, self.coups, self.ended = 0, 0, 0
        self.unfinished: set[str] = set()  # coups found still being dealt
        self.findings: list[Finding] = []
        self.rulesets: dict[str, Ruleset] = {}  # recorded at the table (before the coups dealt under them)
        self.carried: Carried = {}  # the coups are handed over in order: each checked against the one before
        self.openings = Openings()

    def take(self, m: Stored) -> None:
        self.read += m.seq <= self.last_seq
        self.findings += between_coups([m]) + enveloped(m)
        self.openings.take(m)
        if m.subject.endswith(".ruleset"):
            found, findings = recorded_rulesets([m])
            self.rulesets.update(found)
            self.findings += findings
        self.grouped.take(m)

    def _coup(self, records: list[Stored]) -> None:
        coup = subjects.tokens(records[0].subject)[2]
        report = _verify_coups({coup: records}, self.each_coup, self.rulesets, self.carried, self.openings)
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
            report = _verify_coups({coup: await store.read(subjects.coup_filter(coup, self.table))}, None,
                                   self.rulesets, None, self.openings)
            self.findings = [f for f in self.findings if f.coup != coup] + report.findings
            self.coups += report.coups - (coup not in self.unfinished)
        return Report(self.coups, self.ended, self.findings + self.openings.findings + self.openings.left_in_play())


def _verify_coups(coups: dict[str, list[Stored]], each_coup: Callable[[list[Stored]], object] | None,
                  rulesets: Mapping[str, Ruleset] | None = None, carried: Carried | None = None,
                  openings: Openings | None = None) -> Report:
    """Every finished coup of ``coups`` verified under the ``rulesets``
    recorded (by digest), in order, each opening against what the coup before
    it left (``carried``: kept across calls by a caller that hands the coups
    over in turn); ``each_coup`` is given every one's records. A coup being
    dealt is not decided yet: only its directions are checked against its
    roster, and it is named in ``openings`` (``Openings.left_in_play``). A
    coup of which ``coups`` hold only the shoe's messages is the shoe's side
    of a round carried over from the shoe before (003 7.9: reshuffled at once
    as the cut card came first): its record is that shoe's, where it is
    verified whole (``archive.continued``), and it is neither verified nor
    in play here."""
    findings: list[Finding] = []
    verified = 0
    carried = {} if carried is None else carried
    for coup, msgs in sorted(coups.items()):
        if each_coup is not None:
            each_coup(msgs)
        if all(subjects.tokens(m.subject)[3] == "shoe" for m in msgs):
            continue
        before = carried.get(subjects.tokens(msgs[0].subject)[0])
        if before_opening_only(msgs):  # what was filed before its opening, under a shoe it did not open from
            findings += verify_before_opening(msgs, before, rulesets)
            carried_before_opening(msgs, carried)
            continue
        if not any(subjects.tokens(m.subject)[3] == "settle" for m in msgs) and _in_play(msgs):
            findings += _directions(coup, msgs)
            if openings is not None:
                openings.in_play[coup] = subjects.tokens(msgs[0].subject)[0]
            continue
        if openings is not None:
            openings.in_play.pop(coup, None)
        verified += 1
        findings += verify_coup(msgs, rulesets, before) + carried_over(msgs, carried)
    return Report(verified, 0, findings)


def _directions(coup: str, msgs: list[Stored]) -> list[Finding]:
    """The directions in a coup in play from a name not on its roster."""
    events = [(m.seq, e.data) for m in msgs if subjects.tokens(m.subject)[3] == "coup" for e in m.batch.events]
    configured = next((e for _, e in events if isinstance(e, CoupConfigured)), None)
    return [] if configured is None else off_roster(coup, configured, events)


def verify_history(stored: list[Stored], carried: Carried | None = None) -> Report:
    """Verify every coup and every ended shoe of a history (a table's, or the whole store's)."""
    return verify_all(stored, stored, carried)


def verify_all(stored: list[Stored], shoe_events: list[Stored], carried: Carried | None = None,
               openings: Openings | None = None) -> Report:
    """Verify every coup in ``stored`` (finished ones; one being dealt is
    checked as ``_verify_coups`` checks it) and every ended shoe in
    ``shoe_events`` (the shoes' records: ``verify.of_the_shoe``); their openings taken into ``openings`` (kept across
    calls by a caller that hands the coups over in turn, else named here)."""
    recorded, findings = recorded_rulesets(stored)
    turns = Openings() if openings is None else openings
    for m in sorted(stored, key=lambda m: m.seq):
        turns.take(m)
    report = _verify_coups(by_coup(stored), None, recorded, carried, turns)
    if openings is None:
        findings += turns.findings + turns.left_in_play()
    # A coup's message among the shoe's records (a card it carries) is looked at with its coup's.
    every = {m.seq: m for m in [*stored, *(m for m in shoe_events if subjects.tokens(m.subject)[3] != "coup")]}.values()
    report.findings += findings + between_coups(every) + [f for m in every for f in enveloped(m)]
    ended = {e.data.shoe_id for m in shoe_events for e in m.batch.events if isinstance(e.data, ShoeEnded)}
    return Report(report.coups, len(ended), report.findings + verify_shoes(shoe_events))


def between_coups(stored: Iterable[Stored]) -> list[Finding]:
    """A message that cannot be read filed under no coup (a shoe's between
    coups, a table's ruleset): a finding under the shoe or the table, as a
    coup's are under the coup (``verify.unreadable``)."""
    return [f for m in stored if m.unreadable and subjects.tokens(m.subject)[2] == subjects.NO_COUP
            for f in unreadable(subjects.tokens(m.subject)[1], [m])]


def _in_play(msgs: list[Stored]) -> bool:
    """The latest coup of a table, not yet finished: not verified until it is.
    A coup held for compliance, or whose record holds a message that cannot
    be read, is verified as it stands: its findings are not for later."""
    return not any(m.unreadable for m in msgs) and not any(
        e.type.endswith("cards_picked_up") or e.type == "coup.held" for m in msgs for e in m.batch.events)


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
    parts, shoes, carried, openings = [], set(), Carried(), Openings()
    async for msgs in read_coups(store, table, numbers):  # each verified as read: a coup's records held at a time
        if (opening := opening_of(msgs)) is not None and bounds.hold(opening):
            parts.append(verify_all(msgs, [], carried, openings))
            # The shoes it drew from: its own records' (a round dealt on from a new shoe is filed there too), and
            # each the shoe's steps its messages carry name.
            shoes |= {subjects.tokens(m.subject)[1] for m in msgs} | {
                e.data.shoe_id for m in msgs for e in m.batch.events if isinstance(e.data, CARRIED)}
    for shoe in sorted(shoes):
        parts.append(verify_all([], shoe_records([m for aggregate in ("shoe", "coup") for m in await store.read(
            subjects.event(table, shoe, "*", aggregate))])))
    return Report.of([*parts, Report(0, 0, openings.findings + openings.left_in_play())])
