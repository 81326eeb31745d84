"""The `casino` command as a person uses it on a real store. Every command
against the mistakes a person makes (an unknown table, coup or shoe, a
window with nothing in it, a store that is not one or was copied without its
configuration, a file that is not an export, a server that is down): each is
refused in one line that says what is there instead, with a non-zero exit,
within seconds, never a traceback, a hang, or an empty answer that reads as
a pass. And what it shows: a shoe, sealed or in play; an export that takes
the shoe in play, marked as not sealed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import nats
import pytest

from casino.audit import archive
from casino.cli.run import projections_caught_up
from casino.nats.provision import provision
from casino.nats.server import NatsServer, free_port
from casino.rules.shoe import CardDrawn
from casino.store.eventstore import Stored
from casino.store.jetstream import Undeclared, casino_named
from tests.archive.test_archiver import Casino, tables
from tests.natsfixture import nats_server

HANG = 60  # seconds: far beyond what any refusal takes, on a busy machine too


class Store:
    """A store where a baccarat table dealt six coups and two one-deck
    blackjack tables six or more, until a shoe of each is sealed into the
    archive and gone from the live stream."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp

    def casino(self, *args: str, store: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "casino.cli.main", *args, *(("--nats", self.url) if store else ())],
                              capture_output=True, text=True, timeout=HANG, cwd=self.tmp)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    import anyio

    tmp = tmp_path_factory.mktemp("refusals")

    async def deal(url: str) -> None:
        casino = Casino(url, tables(tmp))
        await casino.start()
        nc = await nats.connect(url)
        try:
            await casino.deal(nc, 6)
            await casino.sealing(nc)
            # What the live fold made, compared with a rebuild below, however busy the machine.
            assert await projections_caught_up(nc, timeout=60), "the read models did not reach the stream's end"
        finally:
            await nc.close()
            await casino.stop()

    with nats_server(tmp_path_factory.mktemp("nats")) as url:
        anyio.run(deal, url)
        yield Store(url, tmp)


def refused(done: subprocess.CompletedProcess[str], status: int, *said: str) -> str:
    """The one line a refusal prints, checked to say each of ``said``."""
    lines = done.stderr.splitlines()
    assert done.returncode == status and len(lines) == 1 and "Traceback" not in done.stderr, done
    assert all(s in lines[0] for s in said), lines[0]
    return lines[0]


WHERE_THE_COUPS_ARE = "table BAC-1's coups run from 1 (opened "
NO_TIME = ("--since", "2001-01-01", "--until", "2001-01-02")


@pytest.mark.parametrize(("args", "said"), [
    (("verify", "--table", "NOPE"), ["no table NOPE in the record", "tables BAC-1, T-1, T-2"]),
    (("verify", "--table", "BAC-1", *NO_TIME), ["no coup in that window", WHERE_THE_COUPS_ARE, "to 6 (opened"]),
    (("verify", *NO_TIME), ["no coup in that window", WHERE_THE_COUPS_ARE, "table T-2's coups run from 1"]),
    (("verify", "--coup", "BAC-1-000999"), ["no coup BAC-1-000999", WHERE_THE_COUPS_ARE]),
    (("verify", "--shoe", "T-1-shoe-999"), ["no shoe T-1-shoe-999", "table T-1's shoes run from T-1-shoe-1 to"]),
    (("verify", "--sealed", "--table", "BAC-1"), ["no sealed shoe of table BAC-1 in the archive"]),
    (("replay", "table", "NOPE"), ["no table NOPE in the record", "tables BAC-1, T-1, T-2"]),
    (("replay", "table", "BAC-1", "--from", "40"), ["no coup in that window", WHERE_THE_COUPS_ARE]),
    (("replay", "coup", "BAC-1", "999"), ["no coup 999 at table BAC-1", WHERE_THE_COUPS_ARE]),
    (("replay", "coup", "NOPE", "1"), ["no table NOPE in the record"]),
    (("replay", "shoe", "BAC000-1-shoe-999"), ["no table BAC000-1 in the record", "tables BAC-1, T-1, T-2"]),
    (("replay", "shoe", "BAC-1-shoe-999"), ["no shoe BAC-1-shoe-999", "shoes run from BAC-1-shoe-1 to BAC-1-shoe-1"]),
    (("replay", "roads", "BAC-1", "9"), ["no shoe BAC-1-shoe-9", "shoes run from BAC-1-shoe-1 to BAC-1-shoe-1"]),
    (("replay", "roads", "BAC-1", "T-1-shoe-1"), ["shoe T-1-shoe-1 is not a shoe of table BAC-1"]),
    (("replay", "roads", "T-1", "1"), ["table T-1 deals blackjack: roads are a baccarat shoe's scoreboard"]),
    (("export", "--table", "NOPE", "out.export"), ["no table NOPE in the record", "tables BAC-1, T-1, T-2"]),
    (("export", "--table", "BAC-1", "--until", "2030-01-01", "out.export"),
     ["no sealed shoe of table BAC-1 ended in that window", "none of its shoes is sealed yet"]),
    (("export", "--table", "T-1", "--until", "2001-01-01", "out.export"),
     ["no sealed shoe of table T-1 ended in that window", "sealed shoes ended from"]),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_a_name_or_window_that_is_not_in_the_record_is_refused_naming_what_is(
        store: Store, args: tuple[str, ...], said: list[str]) -> None:
    refused(store.casino(*args), 2, *said)
    assert not (store.tmp / "out.export").exists()  # a refused export writes no file


@pytest.mark.parametrize(("args", "said"), [
    (("replay", "table", "BAC-1.>"), ["'BAC-1.>' is no table's name"]),
    (("verify", "--coup", "*"), ["'*' is no coup's name"]),
    (("verify", "--since", "yesterday"), ["argument --since", "'yesterday'"]),
    (("replay", "coup", "BAC-1"), ["the following arguments are required: coup"]),
    (("frobnicate",), ["invalid choice: 'frobnicate'"]),
    (("par-sheet", "no-such-ruleset"), ["no ruleset 'no-such-ruleset'", "built in: baccarat-000-methods"]),
    (("run", "--rulesets", "baccarat-000-methods,nope", "--var", "never"), ["no ruleset 'nope'"]),
    (("run", "--tables", "0", "--var", "never"), ["argument --tables: '0' is not a whole number of 1 or more"]),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_arguments_a_command_cannot_take_are_refused_in_one_line(
        store: Store, args: tuple[str, ...], said: list[str]) -> None:
    refused(store.casino(*args, store=args[0] in ("replay", "verify")), 2, *said)
    assert not (store.tmp / "never").exists()  # a casino refused starts nothing and writes nothing


def test_what_is_in_the_record_is_still_answered(store: Store) -> None:
    verified = store.casino("verify", "--table", "BAC-1")
    assert verified.returncode == 0 and "verified 6 coups" in verified.stdout, verified


def test_replay_shoe_shows_the_shoe_its_order_once_it_has_ended_and_its_coups(store: Store) -> None:
    """A sealed shoe: its decks and cut card, the commitment, its burns, the
    order and salt revealed at its end checked against the commitment, its
    seal; a shoe in play: the same but its order, which stays secret."""
    ended = store.casino("replay", "shoe", "T-1-shoe-1")
    assert ended.returncode == 0, ended
    text = ended.stdout
    assert "Shoe T-1-shoe-1 at table T-1" in text and "Shuffled " in text and ": 1 deck, 52 cards, the cut card " in text
    assert "Commitment " in text and "Burned card 1, " in text, text
    assert "order revealed, salt " in text and "it hashes to the commitment" in text, text
    order = [card for line in text.splitlines() if line.startswith(("     1:", "    27:"))
             for card in line.split(":", 1)[1].split()]
    assert len(order) == 52 and len(set(order)) == 52, order  # a whole deck, each card once
    assert "Sealed in the archive: seal hash " in text and "Coups dealt from it:" in text
    assert text.split("Coups dealt from it:")[1].splitlines()[2].startswith("T-1-000001"), text
    playing = store.casino("replay", "shoe", "BAC-1-shoe-1")
    assert playing.returncode == 0 and "8 decks, 416 cards" in playing.stdout, playing
    assert "In play: " in playing.stdout and "order revealed" not in playing.stdout, playing.stdout
    assert "BAC-1-000006" in playing.stdout.splitlines()[-1]


def test_replay_roads_draws_a_shoes_scoreboard_from_its_coups_results(store: Store) -> None:
    """The JSON holds the grids a regulator checks: the shoe's results in the
    order dealt, as the table's listing has them, one bead each."""
    listing = store.casino("replay", "table", "BAC-1")
    assert listing.returncode == 0, listing
    # Each line's result reads "<winner>, player <points> banker <points>...".
    dealt = [line.split(",")[0].split()[-1][0].upper() for line in listing.stdout.splitlines()
             if line.startswith("BAC-1-0")]
    roads = store.casino("replay", "roads", "BAC-1", "1", "--json")
    assert roads.returncode == 0, roads
    board = msgspec.json.decode(roads.stdout)
    assert len(dealt) == 6 and board["results"] == dealt
    assert [(b["col"], b["row"], b["result"]) for b in board["bead_plate"]] == [
        (i // 6, i % 6, r) for i, r in enumerate(dealt)]
    assert len(board["big_road"]) == sum(r != "T" for r in dealt)
    assert board["counts"]["coups"] == 6 and set(board["ask"]) == {"B", "P"}
    text = store.casino("replay", "roads", "BAC-1", "BAC-1-shoe-1")
    assert text.returncode == 0 and "Shoe BAC-1-shoe-1 at table BAC-1" in text.stdout, text
    assert "Big road" in text.stdout and "Ask banker: big eye boy" in text.stdout, text.stdout


def test_a_file_that_is_not_an_export_is_refused_in_one_line(store: Store, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not an export\n")
    with open(tmp_path / "empty.export", "wb") as out:  # a well-formed file of no shoe
        archive.write_export(out, archive.Header("T-1", archive.GENESIS, archive.GENESIS, 0), [])
    for path in (tmp_path / "notes.txt", tmp_path, tmp_path / "missing.export"):
        refused(store.casino("verify", "--file", str(path), store=False), 1, str(path))
    refused(store.casino("verify", "--file", str(tmp_path / "empty.export"), store=False), 1,
            "the file holds no shoe")


def test_a_store_that_is_not_one_or_lacks_its_configuration_is_named(store: Store, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in (("verify",), ("projections", "rebuild"), ("projections", "floor", "--svg", "f.svg")):
        refused(store.casino(*command, "--var", str(empty), store=False), 2, f"no event store under {empty / 'nats'}")
    copied = tmp_path / "copied"
    (copied / "nats" / "jetstream").mkdir(parents=True)  # the store copied alone
    refused(store.casino("replay", "table", "BAC-1", "--var", str(copied), store=False), 2,
            "is missing", str(copied / "nats.conf"), str(copied / "nats-auth.json"), "copy them with the store")


def test_a_server_that_is_down_or_holds_no_store_is_named(store: Store, tmp_path: Path) -> None:
    down = f"nats://someone:secret@127.0.0.1:{free_port()}"
    for command in (("verify",), ("replay", "table", "BAC-1"), ("projections", "rebuild")):
        line = refused(store.casino(*command, "--nats", down, store=False), 2, "no event store answers at",
                       "nats://127.0.0.1:")
        assert "secret" not in line  # a password in the URL is never printed
    with NatsServer(tmp_path / "bare") as bare:  # JetStream, no stream
        refused(store.casino("export", "--table", "T-1", "x", "--nats", bare.url, store=False), 2, "no event store at")


def test_an_export_takes_the_shoe_in_play_marked_as_not_sealed_and_proven_by_nothing(
        store: Store, tmp_path: Path) -> None:
    """A dispute does not wait for the shoe to end: without --until, the
    table's shoes not sealed yet follow its sealed ones in the file, marked
    as not sealed; verification decides their coups again, finds a change
    in them, and never calls them proven (exit 3, with --expect too)."""
    playing, both, sealed = (tmp_path / f"{name}.export" for name in ("playing", "both", "sealed"))
    exported = store.casino("export", "--table", "BAC-1", str(playing))
    assert exported.returncode == 0 and "marked as not sealed, BAC-1-shoe-1" in exported.stdout, exported
    checked = store.casino("verify", "--file", str(playing), "--expect", archive.GENESIS, store=False)
    assert checked.returncode == 3 and "verified 6 coups" in checked.stdout, checked
    assert "not sealed: BAC-1-shoe-1" in checked.stdout and "not proven" not in checked.stdout  # anchored, but
    exported = store.casino("export", "--table", "T-1", str(both))
    last = exported.stdout.split("--expect ")[1].split(")")[0]
    assert exported.returncode == 0 and "marked as not sealed" in exported.stdout, exported
    checked = store.casino("verify", "--file", str(both), "--expect", last, store=False)
    assert checked.returncode == 3 and "every one follows the rules" in checked.stdout, checked
    assert store.casino("export", "--table", "T-1", "--until", "2100-01-01", str(sealed)).returncode == 0
    checked = store.casino("verify", "--file", str(sealed), "--expect", last, store=False)
    assert checked.returncode == 0 and "not sealed" not in checked.stdout, checked  # the chain alone: proven

    with open(playing, "rb") as source:
        header, seals, unsealed = archive.read_export(source)
    opened = archive.open_seal(unsealed[0])
    changed = [m for m in opened.stored()]
    i = next(i for i, m in enumerate(changed) if any(isinstance(e.data, CardDrawn) for e in m.batch.events))
    m = changed[i]
    drawn = next(e for e in m.batch.events if isinstance(e.data, CardDrawn))
    other = "AS" if drawn.data.card != "AS" else "KD"
    events = tuple(msgspec.structs.replace(e, data=msgspec.structs.replace(e.data, card=other)) if e is drawn else e
                   for e in m.batch.events)
    changed[i] = Stored(m.seq, m.subject, msgspec.structs.replace(m.batch, events=events), m.msg_id)
    with open(playing, "wb") as out:
        archive.write_export(out, header, seals, [archive.seal("BAC-1", opened.shoe, "", changed)])
    checked = store.casino("verify", "--file", str(playing), store=False)
    assert checked.returncode == 1 and "differences" in checked.stdout, checked


def test_the_read_models_are_folded_again_from_the_sealed_shoes_and_the_live_stream(store: Store) -> None:
    """With shoes sealed and gone from the live stream, `casino projections
    rebuild` folds the archive's shoes and the live stream together and
    finds every read model equal to the one the live fold made."""
    rebuilt = store.casino("projections", "rebuild")
    assert rebuilt.returncode == 0 and "sealed shoes and live: equal to the live ones" in rebuilt.stdout, rebuilt


@pytest.mark.anyio
async def test_a_store_says_whose_record_it_is_and_is_never_named_again(store: Store, tmp_path: Path) -> None:
    """The casino's name is recorded once, as provisioning makes the store,
    and every replay, verification and export begins with it and the date;
    provisioning the store again under another name is refused. A store made
    before names were recorded says so."""
    with NatsServer(tmp_path / "a") as a, NatsServer(tmp_path / "b") as b:
        for server, name in ((a, "Casino A"), (b, "Casino B")):
            nc = await nats.connect(server.url)
            await provision(nc, casino=name)
            await provision(nc, casino=name)  # again: nothing changes
            with pytest.raises(Undeclared, match=f"record of casino '{name}', not of 'Casino C'"):
                await provision(nc, casino="Casino C")
            named = await casino_named(nc.jetstream())
            await nc.close()
            assert named.casino == name and named.since.startswith("20") and named.since.endswith(" UTC")
            shown = store.casino("verify", "--nats", server.url, store=False)  # nothing in it yet
            assert shown.stdout.startswith(f"Casino {name!r}, record made {named.since}; verified 20"), shown
    unnamed = store.casino("replay", "table", "BAC-1")
    assert unnamed.stdout.startswith("Casino not named (its record was made before provisioning recorded"), unnamed
