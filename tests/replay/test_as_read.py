"""A table's history verified (and listed) as it is read, each coup let go
once the shoe two after its own begins, so that a year of it is verified in
the memory a few shoes take: the same report as the whole history held at
once, rounds that go on into a new shoe (003 7.9) and records written late
included."""

from __future__ import annotations

import argparse
import random
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import msgspec
import nats
import pytest

from casino.audit.audits import verify_history, verify_table, verify_window
from casino.audit.findings import Finding
from casino.audit.history import Bounds, by_coup, listed_in_one_pass, table_listing
from casino.cli import replay as replaycli
from casino.cli.replay import add_commands, list_coups, verify
from casino.cli.run import APPROVALS
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.rules import shoe
from casino.rules.cards import full_set
from casino.store import envelope, subjects
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import EventStore, InMemoryEventStore, Stored
from casino.store.jetstream import JetStreamEventStore
from tests.e2e.casino import Casino
from tests.e2e.test_bounded_start import filters_of, reads_of
from tests.natsfixture import nats_server
from tests.replay.test_replay_verify import _a_store_holding
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
BJ, BAC = "BJ-1", "BAC-1"
COUPS = 30


def orders(seed: int, decks: int) -> list[tuple[tuple[str, ...], str]]:
    rnd = random.Random(seed)
    out = []
    for n in range(40):
        cards = list(full_set(decks))
        rnd.shuffle(cards)
        out.append((tuple(cards), f"salt-{n}"))
    return out


@pytest.fixture(scope="module")
def dealt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Stored]]:
    """Every message of a store where two tables dealt 30 coups each from small
    stacked shoes (the same deal for the same seed): blackjack under 003 from
    two decks, where a round goes on into a new shoe, and baccarat from one
    deck. The players' seed is the first that deals such a round (the deal
    follows the simulated players' habits)."""
    import anyio

    rulesets = tmp_path_factory.mktemp("rulesets")
    tables = {BJ: TableConfig(ruleset_variant(rulesets, "blackjack-003-no-hole-card", decks=2)),
              BAC: TableConfig(ruleset_variant(rulesets, "baccarat-000-methods", decks=1), approvals=APPROVALS)}

    async def deal(url: str, seed: int) -> list[Stored]:
        async with Casino(url, tables, {BJ: orders(1, 2), BAC: orders(2, 1)}) as casino:
            await Simulator(casino.nc, tables, seed=seed, patience=40).run(COUPS)
            for table in tables:  # stored, not only seen live by the players
                await casino.settled(f"{table}-{COUPS:06d}")
            return await casino.store.read(f"{subjects.EVENTS}.>")

    for seed in range(1, 13):
        with nats_server(tmp_path_factory.mktemp("nats")) as url:
            stored = anyio.run(deal, url, seed)
        if across_shoes(at(BJ, stored)):
            yield stored
            return
    pytest.fail("no seed from 1 to 12 dealt a blackjack round on into a new shoe")


def in_memory(stored: list[Stored]) -> InMemoryEventStore:
    store = InMemoryEventStore()
    store.messages = [(m.seq, m.subject, envelope.encode(m.batch)) for m in stored]
    return store


def cli_args(*argv: str) -> argparse.Namespace:
    """``casino`` ``argv`` as the command line parses it."""
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def read_coup_by_coup(reads: list[str], coups: list[str]) -> bool:
    """Whether ``reads`` read ``coups`` alone, in turn, each by its own subjects:
    the first under any shoe of the table, the others under a shoe named
    (the one the coup before opened in, or the next)."""
    tokens = [f.split(".") for f in reads]  # casino.ev.<table>.<shoe>.<coup>.>
    return list(dict.fromkeys(t[4] for t in tokens)) == coups and reads[0] == subjects.coup_filter(coups[0], BAC) \
        and all(t[3] != "*" and t[5] == ">" for t in tokens[1:])


def at(table: str, stored: list[Stored]) -> list[Stored]:
    return [m for m in stored if subjects.tokens(m.subject)[0] == table]


def across_shoes(stored: list[Stored]) -> list[str]:
    """The coups with records under two shoes."""
    return [coup for coup, msgs in by_coup(stored).items() if len({subjects.tokens(m.subject)[1] for m in msgs}) > 1]


@pytest.mark.parametrize("table", [BJ, BAC])
async def test_a_table_verified_as_it_is_read_reports_what_its_whole_history_does_holding_a_few_shoes(
        dealt: list[Stored], table: str) -> None:
    history = at(table, dealt)
    shoes = sorted({subjects.shoe_number(table, subjects.tokens(m.subject)[1]) or 0 for m in history
                    if subjects.tokens(m.subject)[3] != "ruleset"})
    assert len(shoes) >= 4  # or the history is not long enough to prove anything
    if table == BJ:
        assert len(across_shoes(history)) == 1  # a round gone on into a new shoe under 003 7.9
    store, taken = in_memory(dealt), 0
    scan = store.scan

    async def counted(filter_: str, each: Callable[[Stored], object]) -> None:
        def one(m: Stored) -> None:
            nonlocal taken
            taken += 1
            each(m)
        await scan(filter_, one)

    store.scan = counted  # type: ignore[method-assign]
    verified_at: dict[str, int] = {}
    report, read = await verify_table(store, table, dealt[-1].seq,
                                      lambda msgs: verified_at.setdefault(subjects.tokens(msgs[0].subject)[2], taken))
    whole = verify_history(history)
    assert (report.coups, report.shoes, report.findings) == (whole.coups, whole.shoes, []) == (COUPS, len(shoes) - 1, [])
    assert read == len(history) and sorted(verified_at) == sorted(by_coup(history))
    # Each coup is verified, and let go, as the first record of the shoe two
    # after the one it opened in is read: never more than three shoes held.
    first_of = {n: next(i for i, m in enumerate(history, 1)
                        if subjects.shoe_number(table, subjects.tokens(m.subject)[1]) == n) for n in shoes}
    for coup, msgs in by_coup(history).items():
        opened_in = subjects.shoe_number(table, subjects.tokens(msgs[0].subject)[1]) or 0
        assert verified_at[coup] == first_of.get(opened_in + 2, len(history)), coup


async def test_a_card_changed_where_a_round_went_on_into_a_new_shoe_is_found(dealt: list[Stored]) -> None:
    """The part of the round dealt from the new shoe is filed under it: the coup
    is verified with it."""
    coup = across_shoes(at(BJ, dealt))[0]
    opened_in = next(subjects.tokens(m.subject)[1] for m in dealt if subjects.tokens(m.subject)[2:] == (coup, "coup"))
    new_shoe = subjects.shoe_id(BJ, (subjects.shoe_number(BJ, opened_in) or 0) + 1)
    later = next(m for m in dealt if subjects.tokens(m.subject)[1:] == (new_shoe, coup, "shoe")
                 and any(isinstance(e.data, shoe.CardDrawn) for e in m.batch.events))

    def other_card(env: envelope.Envelope) -> envelope.Envelope:
        if not isinstance(env.data, shoe.CardDrawn):
            return env
        return msgspec.structs.replace(env, data=msgspec.structs.replace(env.data, card="KS" if env.data.card != "KS"
                                                                         else "QS"))

    tampered = [msgspec.structs.replace(m, batch=envelope.Batch(tuple(other_card(e) for e in m.batch.events)))
                if m.seq == later.seq else m for m in dealt]
    report, _ = await verify_table(in_memory(tampered), BJ, dealt[-1].seq)

    def key(f: Finding) -> tuple[int, str, str]:
        return f.seq, f.coup, f.what

    assert sorted(report.findings, key=key) == sorted(verify_history(at(BJ, tampered)).findings, key=key)
    found = [f for f in report.findings if f.coup == coup]
    assert found and all("but the shoe drew" in f.what for f in found), report.findings
    # and the new shoe, where it has ended, finds the card not its revealed order's
    # (and, where the card put in is one copy too many, the shoe's composition)
    assert all(f.coup == new_shoe and ("the revealed order has" in f.what or "-deck shoe holds" in f.what)
               for f in report.findings if f.coup != coup)


async def test_a_record_written_after_its_coup_was_verified_has_the_coup_verified_again_whole(
        dealt: list[Stored]) -> None:
    """A settlement delayed while two more shoes are dealt: the coup is first
    verified without it, then read again whole."""
    first = f"{BAC}-000001"
    settled = next(m for m in dealt if subjects.tokens(m.subject)[2:] == (first, "settle"))
    late = [*[m for m in dealt if m.seq != settled.seq], msgspec.structs.replace(settled, seq=dealt[-1].seq + 1)]
    report, _ = await verify_table(in_memory(late), BAC, late[-1].seq)
    assert (report.coups, report.findings) == (COUPS, [])
    # Without its settlement the coup would have been reported unsettled.
    report, _ = await verify_table(in_memory(late[:-1]), BAC, late[-1].seq)
    assert [(f.coup, f.what) for f in report.findings] == [(first, "the coup is not settled")]


async def test_an_ended_shoe_whose_shuffle_is_missing_is_a_difference(dealt: list[Stored]) -> None:
    shuffled = next(m for m in dealt if any(isinstance(e.data, shoe.ShoeShuffled) and e.data.shoe_id ==
                                            subjects.shoe_id(BAC, 2) for e in m.batch.events))
    report, _ = await verify_table(in_memory([m for m in dealt if m.seq != shuffled.seq]), BAC, dealt[-1].seq)
    assert [(f.coup, f.what) for f in report.findings] == \
        [(subjects.shoe_id(BAC, 2), "the shoe ended, but its shuffle and commitment are not recorded")]


async def test_casino_verify_of_a_table_reads_it_from_the_server_in_one_pass(
        dealt: list[Stored], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with nats_server(tmp_path) as url:
        await _a_store_holding(dealt, url)
        nc = await nats.connect(url)
        try:
            args = cli_args("verify", "--table", BJ, "--workers", "1")
            assert await verify(JetStreamEventStore(nc), nc, args) == 0
        finally:
            await nc.close()
    whole = verify_history(at(BJ, dealt))
    assert f"verified {COUPS} coups and {whole.shoes} ended shoes: every one follows the rules" in capsys.readouterr().out


async def test_a_table_listed_as_it_is_read_lists_every_coup_once_in_order_as_its_whole_records_give_it(
        dealt: list[Stored], capsys: pytest.CaptureFixture[str]) -> None:
    """``casino replay table`` without a range of numbers reads the table in
    one pass as verification does; a coup whose settlement was read after it
    was listed is listed again, settled."""
    first = f"{BAC}-000001"
    settled = next(m for m in dealt if subjects.tokens(m.subject)[2:] == (first, "settle"))
    late = [*[m for m in dealt if m.seq != settled.seq], msgspec.structs.replace(settled, seq=dealt[-1].seq + 1)]
    args = argparse.Namespace(what="table", table=BAC, first=None, last=None, since=None, until=None)
    assert await list_coups(in_memory(late), args) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [f"{BAC}-{n:06d}" for n in range(1, COUPS + 1)]
    assert all(line.endswith(" yes") for line in lines)
    # A range of numbers reads those coups alone, by their own subjects.
    store = in_memory(late)
    reads = reads_of(store)
    args.first, args.last = 3, 5
    assert await list_coups(store, args) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == \
        [f"{BAC}-{n:06d}" for n in (3, 4, 5)]
    assert read_coup_by_coup(reads, [f"{BAC}-{n:06d}" for n in (3, 4, 5)])


def opened(stored: list[Stored], n: int, table: str = BAC) -> datetime:
    """When the table's coup ``n`` opened, as recorded."""
    return next(e.at for m in stored for e in m.batch.events
                if isinstance(e.data, CoupConfigured) and e.coup == f"{table}-{n:06d}")


@pytest.fixture(params=["memory", "jetstream"])
async def holding_dealt(request: pytest.FixtureRequest, dealt: list[Stored],
                        tmp_path: Path) -> AsyncIterator[EventStore]:
    if request.param == "memory":
        yield in_memory(dealt)
        return
    with nats_server(tmp_path) as url:
        await _a_store_holding(dealt, url)
        nc = await nats.connect(url)
        try:
            yield JetStreamEventStore(nc)
        finally:
            await nc.close()


async def test_a_window_of_opening_times_reads_only_its_own_coups_found_by_halving_over_their_numbers(
        dealt: list[Stored], holding_dealt: EventStore, capsys: pytest.CaptureFixture[str]) -> None:
    """``casino replay table --since/--until`` finds the coups opened in the
    window with a few gets of a coup's opening (halving over the numbers), and
    reads those coups alone by their own subjects, not the table's history; a
    window over more than a tenth of the table is read in one pass. Either
    lists what the whole table's one pass lists within the window."""
    store = holding_dealt
    coups = [f"{BAC}-{n:06d}" for n in range(1, COUPS + 1)]
    window = Bounds(since=opened(dealt, 11), until=opened(dealt, 14))
    probes, reads = filters_of(store, "first"), reads_of(store)
    lines = await table_listing(store, BAC, window)
    assert [line.split()[0] for line in lines] == coups[10:13]
    assert read_coup_by_coup(reads, coups[10:13])
    assert 0 < len(probes) <= 10  # two halvings over 30 numbers, not a look at each
    assert lines == await listed_in_one_pass(store, BAC, window)
    # Numbers and times together; the command line's naive times are UTC.
    assert window.since is not None and window.until is not None
    since, until = (t.replace(tzinfo=None).isoformat() for t in (window.since, window.until))
    assert await list_coups(store, cli_args("replay", "table", BAC, "--from", "12", "--since", since,
                                            "--until", until)) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == coups[11:13]
    # Most of the table: one pass, no coup read by its own subjects.
    reads.clear()
    most = Bounds(since=opened(dealt, 2))
    assert await table_listing(store, BAC, most) == await listed_in_one_pass(store, BAC, most)
    assert [line.split()[0] for line in await table_listing(store, BAC, most)] == coups[1:]
    assert [f for f in reads if f != subjects.table_filter(BAC)] == []  # the fake's pass is a read of the table
    # A window no coup opened in.
    assert await table_listing(store, BAC, Bounds(since=opened(dealt, COUPS) + timedelta(microseconds=1))) == []


async def test_a_window_of_a_table_is_verified_with_every_shoe_its_coups_were_dealt_from(
        dealt: list[Stored], holding_dealt: EventStore, capsys: pytest.CaptureFixture[str]) -> None:
    """``casino verify --table T`` with ``--from/--to`` or ``--since/--until``
    verifies the coups in the window, each read by its own subjects, and every
    ended shoe they drew from, whole: a round gone on into a new shoe
    (003 7.9) brings in both shoes."""
    store = holding_dealt
    crossing = across_shoes(at(BJ, dealt))[0]
    n = int(crossing.rpartition("-")[2])
    coups = {f"{BJ}-{k:06d}" for k in (n - 1, n, n + 1)}
    records = [m for m in dealt if subjects.tokens(m.subject)[2] in coups]
    shoes = {subjects.tokens(m.subject)[1] for m in records if subjects.tokens(m.subject)[3] == "shoe"}
    ended = {e.data.shoe_id for m in dealt for e in m.batch.events if isinstance(e.data, shoe.ShoeEnded)}
    assert len(shoes) == 2 and shoes & ended
    report = await verify_window(store, BJ, Bounds(first=n - 1, last=n + 1))
    assert report is not None and (report.coups, report.shoes, report.findings) == (3, len(shoes & ended), [])
    # The same window by its opening times, through the command line (naive times are UTC).
    since, until = (opened(dealt, k, BJ).replace(tzinfo=None).isoformat() for k in (n - 1, n + 2))
    args = cli_args("verify", "--table", BJ, "--since", since, "--until", until)
    assert await verify(store, None, args) == 0  # type: ignore[arg-type]  # a window needs no connection of its own
    assert capsys.readouterr().out.strip() == \
        f"verified 3 coups and {len(shoes & ended)} ended shoes: every one follows the rules"
    # A window is of a table's coups, not of a coup's or a shoe's.
    assert replaycli.run(cli_args("verify", "--coup", crossing, "--since", since)) == 2
    assert "not with --coup or --shoe" in capsys.readouterr().err


async def test_a_window_without_a_table_is_verified_at_every_table(
        dealt: list[Stored], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``casino verify --since --until`` alone: every table's coups opened in
    the window (the tables deal side by side), with their shoes."""
    since, until = opened(dealt, 11), opened(dealt, 21)
    in_window = {e.coup for m in dealt for e in m.batch.events
                 if isinstance(e.data, CoupConfigured) and since <= e.at < until}
    assert {c.rpartition("-")[0] for c in in_window} == {BJ, BAC}  # both tables dealt in it
    with nats_server(tmp_path) as url:
        await _a_store_holding(dealt, url)
        nc = await nats.connect(url)
        try:
            store = JetStreamEventStore(nc)
            args = cli_args("verify", "--since", since.isoformat(), "--until", until.isoformat())
            assert await verify(store, nc, args) == 0
            each = [await verify_window(store, table, Bounds(since=since, until=until)) for table in (BJ, BAC)]
        finally:
            await nc.close()
    assert all(r is not None and not r.findings for r in each)
    coups, shoes = len(in_window), sum(r.shoes for r in each if r is not None)
    assert shoes > 0
    assert capsys.readouterr().out.strip() == \
        f"verified {coups} coups and {shoes} ended shoes: every one follows the rules"


async def test_a_card_changed_in_a_shoe_a_window_was_dealt_from_is_found_and_one_in_another_shoe_is_not(
        dealt: list[Stored]) -> None:
    """Every card of a shoe the window's coups drew from is checked against its
    revealed order, whoever drew it; the table's other shoes are not read."""
    first = f"{BAC}-000011"
    its_shoe = next(subjects.tokens(m.subject)[1] for m in dealt if subjects.tokens(m.subject)[2:] == (first, "coup"))

    def drawn(shoe_token: str) -> Stored:
        """A draw from that shoe by a coup outside the window."""
        return next(m for m in dealt if subjects.tokens(m.subject)[:2] == (BAC, shoe_token)
                    and subjects.tokens(m.subject)[2] not in (first, subjects.NO_COUP)
                    and any(isinstance(e.data, shoe.CardDrawn) for e in m.batch.events))

    def changed(m: Stored) -> list[Stored]:
        other = envelope.Batch(tuple(msgspec.structs.replace(e, data=msgspec.structs.replace(
            e.data, card="KS" if e.data.card != "KS" else "QS")) if isinstance(e.data, shoe.CardDrawn) else e
            for e in m.batch.events))
        return [msgspec.structs.replace(x, batch=other) if x.seq == m.seq else x for x in dealt]

    window = Bounds(first=11, last=11)
    same = await verify_window(in_memory(changed(drawn(its_shoe))), BAC, window)
    assert same is not None and same.findings and all(f.coup == its_shoe for f in same.findings), same
    other_shoe = next(e.data.shoe_id for m in at(BAC, dealt) for e in m.batch.events
                      if isinstance(e.data, shoe.ShoeEnded) and e.data.shoe_id != its_shoe)
    whole = verify_history(at(BAC, changed(drawn(other_shoe))))
    assert any(f.coup == other_shoe for f in whole.findings)  # found, where the shoe is read
    elsewhere = await verify_window(in_memory(changed(drawn(other_shoe))), BAC, window)
    assert elsewhere is not None and (elsewhere.coups, elsewhere.findings) == (1, [])
