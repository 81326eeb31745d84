"""``casino replay``, ``casino verify`` and ``casino projections``."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import msgspec
from nats.aio.client import Client

from casino.audit import archive
from casino.audit.archive import (
    ArchiveError,
    Header,
    WithArchive,
    export_table,
    fold_history,
    history,
    in_play,
    verify_archived,
    verify_export,
    write_export,
)
from casino.audit.audits import Report, verify_all, verify_store, verify_table, verify_window
from casino.audit.history import (
    Absent,
    Bounds,
    Record,
    by_coup,
    coup_id,
    coups_held,
    known_table,
    listing_line,
    shoe_results,
    shoes_held,
    table_listing,
    tables_held,
)
from casino.audit.parallel import cores
from casino.audit.replay import CoupReplay, render_shoe, render_text, replay_coup
from casino.audit.verify import shoe_records
from casino.cli import store as storeaccess
from casino.readmodels.projections import KvProjections, Projector
from casino.rules.baccarat import scoreboard
from casino.rules.text import escaped
from casino.store import subjects
from casino.store.archive import SealStore
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import Stored
from casino.store.jetstream import JetStreamEventStore, Named, casino_named


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    replay = sub.add_parser("replay", help="reconstruct coups from the event store")
    which = replay.add_subparsers(dest="what", required=True)
    coup = which.add_parser("coup", help="one coup, as a compliance officer reads it")
    coup.add_argument("table", type=name("table"))
    coup.add_argument("coup", type=name("coup"), help="the coup id (BAC000-1-000042) or its number (42)")
    coup.add_argument("--json", action="store_true", help="the stable JSON schema casino.replay.coup/1")
    coup.add_argument("--svg", metavar="FILE", help="also draw the layout at the end of the coup")
    table = which.add_parser("table", help="list a table's coups")
    table.add_argument("table", type=name("table"))
    _window_arguments(table)
    shoe = which.add_parser("shoe", help="list the coups dealt from one shoe")
    shoe.add_argument("shoe", type=name("shoe"), help="the shoe id, e.g. BAC000-1-shoe-3")
    roads = which.add_parser("roads", help="a baccarat shoe's scoreboard: the bead plate, the big road, the "
                                           "derived roads, the counts and the ask")
    roads.add_argument("table", type=name("table"))
    roads.add_argument("shoe", type=name("shoe"), help="the shoe id (BAC000-1-shoe-3) or its number (3)")
    roads.add_argument("--json", action="store_true", help="the grids as JSON: results, bead_plate, big_road, "
                                                           "big_eye_boy, small_road, cockroach_pig, counts, ask")
    verify = sub.add_parser("verify", help="check every selected coup and ended shoe against the rules")
    verify.add_argument("--table", type=name("table"), help="one table; with the options below (alone: at every table), "
                                        "its coups in that window and the shoes they were dealt from")
    _window_arguments(verify)
    verify.add_argument("--coup", type=name("coup"))
    verify.add_argument("--shoe", type=name("shoe"))
    verify.add_argument("--workers", type=int, default=cores(),
                        help="processes verifying a whole store, its tables shared among them (default: the cores)")
    verify.add_argument("--file", help="an export file (casino export), verified with no server at all")
    verify.add_argument("--expect", metavar="HASH",
                        help="with --file: the hash of the table's last seal as the casino's archive holds it "
                             "(`casino export` prints it); a file whose chain does not end there is refused. "
                             "Without it a consistent file exits 3: not proven to be the casino's")
    verify.add_argument("--sealed", action="store_true",
                        help="the archive's sealed shoes (of --table, or of every table): the chain and every shoe")
    verify.add_argument("--shares", type=int, default=1,
                        help="with --sealed: verify one of this many shares of each table's shoes (an indexed Job's)")
    verify.add_argument("--share", type=int, default=int(os.environ.get("JOB_COMPLETION_INDEX", "0")),
                        help="which share, from 0 (default: $JOB_COMPLETION_INDEX, as a Kubernetes indexed Job sets it)")
    export = sub.add_parser("export", help="write a table's sealed shoes, chained, to one file for a regulator")
    export.add_argument("--table", type=name("table"), required=True)
    export.add_argument("--since", type=datetime.fromisoformat, help="shoes ended at or after (ISO time, UTC)")
    export.add_argument("--until", type=datetime.fromisoformat, help="shoes ended before (ISO time, UTC)")
    export.add_argument("file")
    projections = sub.add_parser("projections", help="the read models in key-value buckets")
    projections_do = projections.add_subparsers(dest="what", required=True)
    rebuild = projections_do.add_parser("rebuild", help="fold the stream again from the first event")
    floor = projections_do.add_parser("floor", help="draw the floor's figures from the live read models")
    floor.add_argument("--svg", metavar="FILE", required=True)
    for p in (coup, table, shoe, roads, verify, export, rebuild, floor):
        storeaccess.add_arguments(p)


def name(kind: str) -> Callable[[str], str]:
    """An argument that names a table, a coup or a shoe: letters, digits,
    '_' and '-' as the record names them (no wildcard reads many)."""

    def checked(value: str) -> str:
        if not NAME.fullmatch(value):
            raise argparse.ArgumentTypeError(escaped(f"{value!r} is no {kind}'s name: a {kind} is named in letters, "
                                                     "digits, '_' and '-'", keep_newlines=False))
        return value

    return checked


NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _window_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="first", type=int, help="first coup number")
    parser.add_argument("--to", dest="last", type=int, help="last coup number")
    parser.add_argument("--since", type=datetime.fromisoformat, help="opened at or after (ISO time, UTC)")
    parser.add_argument("--until", type=datetime.fromisoformat, help="opened before (ISO time, UTC)")


def _bounds(args: argparse.Namespace) -> Bounds:
    since, until = (_utc(t) if t else None for t in (args.since, args.until))
    return Bounds(args.first, args.last, since, until)


def run(args: argparse.Namespace) -> int:
    if args.command == "verify" and args.file:
        return verify_file(args.file, args.expect)
    if args.command == "verify" and _bounds(args).any() and (args.coup or args.shoe):
        print("casino: --from, --to, --since and --until verify a window of a table's coups (or of every "
              "table's): not with --coup or --shoe", file=sys.stderr)
        return 2
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    # Rebuilding writes the read models: the projections' own user alone may.
    rebuilding = args.command == "projections" and args.what == "rebuild"
    async with storeaccess.open_store(args, "projections" if rebuilding else "compliance",
                                      archived=not rebuilding) as (store, nc):
        if args.command == "projections" and args.what == "floor":
            return await draw_floor(nc, args.svg)
        if args.command == "projections":
            return await rebuild_projections(store, nc)
        named, now = await casino_named(nc.jetstream()), f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"
        if args.command == "export":
            return await export(store, nc, args, named, now)
        if args.command == "replay" and args.what == "coup" and args.json:
            return await show_coup(store, args, named, now)
        if args.command == "replay" and args.what == "roads" and args.json:
            return await show_roads(store, args)
        print(escaped(f"{named.header()}; {'verified' if args.command == 'verify' else 'replayed'} {now}",
                      keep_newlines=False))
        if args.command == "verify":
            return await verify(store, nc, args)
        if args.what == "coup":
            return await show_coup(store, args, named, now)
        if args.what == "roads":
            return await show_roads(store, args)
        return await list_coups(store, args)


async def show_coup(store: Record, args: argparse.Namespace, named: Named, now: str) -> int:
    stored = await store.read(subjects.coup_filter(coup_id(args.table, args.coup), args.table))
    try:
        r = replay_coup(stored)
    except LookupError:
        await known_table(store, args.table)
        raise Absent(f"no coup {args.coup} at table {args.table}: {await coups_held(store, args.table)}") from None
    r = msgspec.structs.replace(r, casino=named.casino, record_made=named.since, replayed=now)
    print(coup_text(r, args.json))
    if args.svg:
        from casino.audit.picture import render_svg

        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(render_svg(r))
    return 0


async def show_roads(store: Record, args: argparse.Namespace) -> int:
    """A shoe's scoreboard, from its coups' results as recorded (voided coups left out)."""
    shoe = subjects.shoe_id(args.table, int(args.shoe)) if args.shoe.isdigit() else args.shoe
    if subjects.table_of_shoe(shoe) != args.table:
        raise Absent(f"shoe {shoe} is not a shoe of table {args.table}")
    records = await _shoe_records(store, shoe)
    games = {e.data.game for m in records if not m.unreadable for e in m.batch.events
             if isinstance(e.data, CoupConfigured)}
    if games and "baccarat" not in games:
        raise Absent(f"table {args.table} deals {', '.join(sorted(games))}: roads are a baccarat shoe's scoreboard "
                     f"(`casino replay shoe {shoe}` lists its coups)")
    board = scoreboard.scoreboard(shoe_results(records))
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(board)).decode())
    else:
        print("\n".join([f"Shoe {shoe} at table {args.table}", *scoreboard.text(board)]))
    return 0


def coup_text(r: CoupReplay, as_json: bool = False) -> str:
    """A coup as `casino replay coup` prints it: every character a record holds
    that a terminal could act on (an escape sequence, a bidirectional override)
    shown as an escape, so what an officer reads is what is recorded."""
    return escaped(msgspec.json.format(msgspec.json.encode(r)).decode() if as_json else render_text(r))


async def list_coups(store: Record, args: argparse.Namespace) -> int:
    if args.what == "shoe":
        table = subjects.table_of_shoe(args.shoe)
        records = await _shoe_records(store, args.shoe)
        kept = await store.seals.get(table, args.shoe) if isinstance(store, WithArchive) else None
        print(escaped("\n".join([f"Shoe {args.shoe} at table {table}", *render_shoe(
            shoe_records(records), kept.hash if kept else ""), "",
            "Coups dealt from it:"])))
        lines = {}
        for coup in sorted(by_coup(records)):
            if (line := listing_line(await store.read(subjects.coup_filter(coup, table)), Bounds())) is not None:
                lines[coup] = line
        listing = [lines[coup] for coup in sorted(lines)]
    else:
        await known_table(store, args.table)
        listing = await table_listing(store, args.table, _bounds(args))
        if not listing:
            raise Absent(("no coup in that window: " if _bounds(args).any() else "")
                         + await coups_held(store, args.table))
    print(f"{'coup':<18} {'opened (UTC)':<20} {'dealt by':<12} {'result':<34} settled")
    for line in listing:
        print(escaped(line, keep_newlines=False))
    return 0


async def _shoe_records(store: Record, shoe: str) -> list[Stored]:
    """The records filed under ``shoe``: refused (``Absent``) if there are none."""
    table = subjects.table_of_shoe(shoe)
    if records := await store.read(subjects.shoe_filter(table, shoe)):
        return records
    await known_table(store, table)
    raise Absent(f"no shoe {shoe}: {await shoes_held(store, table)}")


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


async def verify(store: Record, nc: Client, args: argparse.Namespace) -> int:
    if args.sealed:
        if not 0 <= args.share < args.shares:
            print(f"casino: share {args.share} of {args.shares}: a share is 0 to {args.shares - 1}", file=sys.stderr)
            return 2
        seals = SealStore(nc)
        tables = [args.table] if args.table else await seals.tables()
        if not set(tables) <= set(await seals.tables()) or not tables:
            raise Absent(f"no sealed shoe of table {args.table} in the archive" if args.table
                         else "the archive holds no sealed shoe yet")
        try:
            report = Report.of([await verify_archived(seals, t, args.share, args.shares) for t in tables])
        except ArchiveError as exc:
            print(f"casino: {exc}", file=sys.stderr)
            return 1
        print(f"share {args.share} of {args.shares} of the sealed shoes of {len(tables)} tables")
        return _print_report(report)
    if args.coup:
        table = subjects.table_of_coup(args.coup)
        if not (stored := await store.read(subjects.coup_filter(args.coup, table))):
            raise Absent(f"no coup {args.coup}: " + (await coups_held(store, table) if table in await store.tables()
                                                     else await tables_held(store)))
        report = verify_all(stored, [])
    elif args.shoe:
        table = subjects.table_of_shoe(args.shoe)
        shoes = await _shoe_records(store, args.shoe)
        stored = [m for c in sorted(by_coup(shoes)) for m in await store.read(subjects.coup_filter(c, table))]
        report = verify_all(stored, shoes)
    elif (window := _bounds(args)).any():  # the window at the table, or at every table at once
        if args.table:
            await known_table(store, args.table)
        tables = [args.table] if args.table else await history(nc).tables()
        windows = await asyncio.gather(*(verify_window(store, table, window) for table in tables))
        if unnumbered := [table for table, window in zip(tables, windows, strict=True) if window is None]:
            print(f"casino: the coups of {', '.join(unnumbered)} are not numbered in a run: verify the whole table",
                  file=sys.stderr)
            return 2
        report = Report.of(w for w in windows if w is not None)
        if not report.coups:
            raise Absent("no coup in that window: " + "; ".join([await coups_held(store, t) for t in tables])
                         if tables else await tables_held(store))
    elif args.table:
        await known_table(store, args.table)
        report, _ = await verify_table(store, args.table, 0)
    else:
        report = await verify_store(nc, args.workers)
    if not report.coups and not report.shoes and not report.findings:
        raise Absent(f"coup {args.coup} is still being dealt: it is verified once it is settled" if args.coup else
                     f"shoe {args.shoe} has neither ended nor a coup settled yet" if args.shoe else
                     await coups_held(store, args.table) if args.table else await tables_held(store))
    return _print_report(report)


def _print_report(report: Report) -> int:
    for f in report.findings:
        print(escaped(f"{f.coup}: event seq {f.seq}: {f.what}", keep_newlines=False))
    print(f"verified {report.coups} coups and {report.shoes} ended shoes: "
          + ("every one follows the rules" if not report.findings else f"{len(report.findings)} differences"))
    return 1 if report.findings else 0


async def exported(nc: Client, table: str, since: datetime | None, until: datetime | None, named: Named,
                   now: str, out: BinaryIO) -> Header:
    """The table's sealed shoes that ended in the window, chained, written to
    ``out``; and without ``until``, its shoes not sealed yet (the one in play,
    for a dispute that cannot wait for its end), each marked as not sealed,
    after the chain. The export's header (``last``: the chain's end)."""
    seals_ = SealStore(nc)
    header, seals = await export_table(seals_, table, since, until)
    kept = await seals_.seals(table)
    unsealed = [] if until else await in_play(JetStreamEventStore(nc), table, {k.shoe for k in kept})
    if not seals and not unsealed:
        raise Absent(f"no sealed shoe of table {table} ended in that window: " + (
            f"its {len(kept)} sealed shoes ended from {kept[0].ended} to {kept[-1].ended}" if kept else
            "none of its shoes is sealed yet (without --until, the shoe in play is exported, marked as not sealed)"))
    header = msgspec.structs.replace(header, in_play=tuple(archive.open_seal(u).shoe for u in unsealed),
                                     casino=named.casino, record_made=named.since, exported=now)
    write_export(out, header, seals, unsealed)
    return header


async def export(store: Record, nc: Client, args: argparse.Namespace, named: Named, now: str) -> int:
    """``exported`` to the file ``args.file``."""
    await known_table(store, args.table)
    since, until = (_utc(t) if t else None for t in (args.since, args.until))
    out = io.BytesIO()  # a refused export leaves no file
    header = await exported(nc, args.table, since, until, named, now, out)
    Path(args.file).write_bytes(out.getvalue())
    print(f"{header.seals} sealed shoes of table {args.table} written to {args.file}, chained from "
          f"{header.previous} to {header.last} (verify it with --expect {header.last})")
    if header.in_play:
        print(f"and after them, marked as not sealed, {', '.join(header.in_play)}: their coups as far as they are "
              "dealt, proven by no seal until the archiver seals them")
    return 0


# `casino verify --file` without --expect: the file is consistent (its chain
# holds, every shoe and coup follows the rules) but nothing shows it is the
# casino's, since anyone can re-seal and re-chain a record: an exit status of
# its own, so that a regulator's script tells it from a proof.
UNANCHORED = 3


def verify_file(path: str, expect: str | None = None) -> int:
    """An export file verified; its chain's last hash printed, to be compared
    with the casino's archive (or given as ``expect``, which it must equal):
    without an anchor, a chain proves only that it is a chain. Exit 0 only
    for a file anchored to ``expect`` and following the rules; 1 for a file
    refused or a difference; ``UNANCHORED`` for a consistent file with no
    anchor, or holding shoes not sealed yet (which no anchor proves)."""
    try:
        with open(path, "rb") as source:
            header, report = verify_export(source, expect)
    except (OSError, ArchiveError) as exc:
        print(escaped(f"casino: {path}: {exc}", keep_newlines=False), file=sys.stderr)
        return 1
    print(escaped(f"{Named(header.casino, header.record_made).header()}; exported "
                  f"{header.exported or 'at a time the file does not say'}", keep_newlines=False))
    print(escaped(f"table {header.table}: the chain of its sealed shoes holds, from {header.previous} to "
                  f"{header.last}" + (" (as expected)" if expect else ""), keep_newlines=False))
    if status := _print_report(report):
        return status
    if header.in_play:
        print(escaped(f"not sealed: {', '.join(header.in_play)}, exported before the archiver sealed them: their "
                      f"coups follow the rules as far as they are dealt, but no seal or chain proves them the "
                      f"casino's record (exit {UNANCHORED})", keep_newlines=False))
    if not expect:
        print(escaped(f"not proven to be the casino's record: the file is consistent, but anyone can seal and "
                      f"chain shoes anew; compare {header.last} with the last seal of table {header.table} in the "
                      f"casino's archive, or verify again with --expect HASH (exit {UNANCHORED}: consistent, not "
                      "anchored)", keep_newlines=False))
    return UNANCHORED if header.in_play or not expect else 0


async def rebuild_projections(store: Record, nc: Client) -> int:
    """Rebuild the read models from the whole history (the archive's sealed
    shoes, then the live stream: ``fold_history``), compare them with the
    live ones (once the live projector has caught up with the stream), and
    store the rebuilt ones. An ended shoe's figures are final: compared,
    written and let go as it is folded."""
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
    compared, differ = 0, 0

    async def compare_and_write(projector: Projector, keys: set[tuple[str, str]], with_seq: bool) -> None:
        nonlocal compared, differ
        rebuilt = {k: projector.value(*k) for k in keys}
        live = await kv.values(rebuilt)
        for bucket, key in sorted(k for k in rebuilt if live.get(k) != rebuilt[k]):
            print(escaped(f"{bucket} {key}: live {live.get((bucket, key))!r}, rebuilt {rebuilt[bucket, key]!r}"))
            differ += 1
        await kv.put(projector, set(rebuilt), with_seq=with_seq)
        compared += len(rebuilt)

    async def folded(projector: Projector, changed: set[tuple[str, str]]) -> None:
        await compare_and_write(projector, {("shoe_stats", k) for k, st in projector.shoe_stats.items() if st.ended},
                                False)
        projector.forget_ended_shoes()

    whole = Projector()
    await fold_history(whole, nc, folded)
    await compare_and_write(whole, set(whole.everything()), True)
    await kv.save(whole)  # a restart of the projections service folds on from the rebuilt state
    print(f"rebuilt {compared} read-model entries up to stream sequence {whole.seq}, sealed shoes and live: "
          + ("equal to the live ones" if not differ else f"{differ} differed from the live ones"))
    return 0


async def draw_floor(nc: Client, path: str) -> int:
    """The floor's figures, from the live key-value buckets, as SVG."""
    from casino.readmodels.floor import render_floor
    from casino.readmodels.projections import ShoeStats, TableStatus, Takings

    kv = await KvProjections(nc.jetstream()).open()
    live = await kv.everything_listed()
    status = [msgspec.json.decode(v, type=TableStatus) for (b, _), v in live.items() if b == "table_status"]
    shoes = {k: msgspec.json.decode(v, type=ShoeStats) for (b, k), v in live.items() if b == "shoe_stats"}
    takings = {k: msgspec.json.decode(v, type=Takings) for (b, k), v in live.items() if b == "takings"}
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_floor(status, shoes, takings))
    print(f"{len(status)} tables drawn to {path}")
    return 0
