"""One credential in an attacker's hands, on a real nats-server with the
permission model applied: whatever it writes or floods, no table and no
service stalls for longer than the attack lasts, and nothing but the
server writes where a consumer delivers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
import nats
import pytest
from nats.aio.client import Client
from services import ownership, runner
from services.archiver.consumer import ARCHIVER_DELIVERY
from services.settlement.consumer import SETTLEMENT_DELIVERY

from casino.nats import permissions as natsauth
from casino.protocol import commands
from casino.readmodels.projections import KvProjections
from casino.store import subjects
from tests.security.secured import READ_TABLES, TABLES, secured_casino

pytestmark = pytest.mark.anyio
SUPERVISOR = natsauth.SIMULATED_SUPERVISORS[0]
BACCARAT, BLACKJACK = "BAC000-1", "BJ002-1"


async def ask(nc: Client, subject: str, command: commands.Command, timeout: float = 5) -> commands.Reply:
    return commands.reply_decoder.decode((await nc.request(subject, commands.encoder.encode(command),
                                                           timeout=timeout)).data)


def flood(nc: Client, subject: str, command: Callable[[str], commands.Command], until: float,
          replies: list[commands.Reply], lanes: int = 24) -> list[asyncio.Task[None]]:
    """``lanes`` requests in flight at once on ``subject`` until ``until``,
    each asked again (with a new id) as soon as it is answered; the replies kept."""
    async def lane(k: int) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            with contextlib.suppress(nats.errors.TimeoutError):
                replies.append(await ask(nc, subject, command(f"flood-{k}-{n}")))

    return [asyncio.create_task(lane(k)) for k in range(lanes)]


async def test_only_their_consumers_deliveries_reach_settlement_and_the_archiver(tmp_path: Path) -> None:
    """Every user, its own credential in hand, aims at the deliver subjects of
    settlement's and the archiver's consumers all it can: a publication, the
    reply of every request it may send (a ping, a shoe's or a book's command,
    a supervisor's direction, a terminal's command), the server's own answer
    to a JetStream request and to an append (the server publishes those on
    whatever reply subject the request names). No service answers there, and
    settlement and the archiver take nothing that their consumer did not
    deliver: each is dropped and counted, nothing is filed or settled of it,
    and the casino deals and settles on."""
    async with secured_casino(tmp_path) as casino:
        status = commands.encoder.encode(commands.Status(id="s-1", table=BACCARAT))
        asked = [subjects.command(table, kind) for table in (BACCARAT, "-") for kind in ("coup", "wager", "shoe", "book")]
        asked += [subjects.supervise(BACCARAT, SUPERVISOR), "$JS.API.STREAM.INFO.CASINO", "$JS.API.DIRECT.GET.CASINO",
                  "$JS.API.STREAM.INFO.KV_casino_table_status"]
        for user in natsauth.permissions(TABLES, natsauth.SIMULATED_SUPERVISORS):
            nc = await casino.connect(user)
            for target in (SETTLEMENT_DELIVERY, ARCHIVER_DELIVERY):
                with contextlib.suppress(nats.errors.Error):
                    await nc.publish(target, status)
                    for subject in asked:
                        await nc.publish(subject, status if subject.startswith("casino.cmd") else b'{"seq": 1}',
                                         reply=target)
            with contextlib.suppress(nats.errors.Error):
                await nc.flush()
            await nc.close()
        await asyncio.sleep(1.0)  # time for any answer to arrive

        def sample(kind: str, name: str, labels: dict[str, str]) -> float:
            running = next(r for r in casino.running if r.kind == kind)
            return running.metrics.registry.get_sample_value(name, labels) or 0.0

        for kind in ("settlement", "archiver"):
            assert sample(kind, "casino_deliveries_refused_total", {"consumer": kind}) > 0, kind
            assert sample(kind, "casino_dead_letters_total", {"consumer": kind}) == 0, kind
        assert sum(sample(kind, "casino_commands_refused_total", {"service": kind, "clause": "reply subject"})
                   for kind in ("shoe", "wager", "dealer-policy")) > 0  # asked to answer there, and did not
        await casino.deal(2)  # dealt and settled through the consumers as ever


async def terminal_deals(nc: Client, table: str, until: float) -> tuple[int, list[str]]:
    """The table's terminal dealing Method A coups until ``until`` (whatever
    coup is open, a supervisor's included): how many it dealt to their end,
    and the clauses of the refusals it met that ask again."""
    def at(kind: str) -> str:
        return subjects.command(table, kind)

    dealt, asked_again, n = 0, [], 0
    while time.monotonic() < until:
        n += 1
        status = await ask(nc, at("coup"), commands.Status(id=f"st-{n}", table=table))
        if status.waiting is None or status.waiting.kind in ("open", "finished"):
            status = await ask(nc, at("coup"), commands.OpenCoup(
                id=f"op-{n}", table=table, number=(subjects.coup_number(status.coup) or 0) + 1))
            if not status.ok:
                if status.clause in commands.ASK_AGAIN:
                    asked_again.append(status.clause)
                continue  # another opened the next coup first: dealt as it stands
        if status.waiting is None or status.waiting.kind != "close_betting":
            continue
        placed = await ask(nc, at("wager"), commands.PlaceWager(id=f"w-{n}", table=table, coup=status.coup, seat=1,
                                                                 bet="banker", amount=5000))
        closed = await ask(nc, at("coup"), commands.CloseBetting(id=f"c-{n}", table=table, coup=status.coup))
        for reply in (placed, closed):
            if not reply.ok and reply.clause in commands.ASK_AGAIN:
                asked_again.append(reply.clause)
        dealt += closed.ok and closed.waiting is not None and closed.waiting.kind == "finished"
    return dealt, asked_again


async def test_a_supervisors_credential_flooding_a_table_takes_nothing_of_its_terminals_share(tmp_path: Path) -> None:
    """24 openings in flight at once from one supervisor's credential, asked
    again as fast as they are answered: the supervisor is held to a lane of
    its own (a few a second, refused beyond as ``rate limit``), and the
    table's own terminal deals meanwhile without one refusal to ask again.
    The supervisor's account holds four connections, like a terminal's."""
    async with secured_casino(tmp_path) as casino:
        supervisor = await casino.connect(f"supervisor-{SUPERVISOR}")
        terminal = await casino.connect(f"terminal-{BACCARAT}")
        until = time.monotonic() + 8.0
        replies: list[commands.Reply] = []
        flooding = flood(supervisor, subjects.supervise(BACCARAT, SUPERVISOR), lambda i: commands.OpenCoup(
            id=i, table=BACCARAT, procedure="method_a", number=1), until, replies)
        dealt, asked_again = await terminal_deals(terminal, BACCARAT, until)
        await asyncio.gather(*flooding)
        refused = [r for r in replies if not r.ok and r.clause == "rate limit"]
        assert len(refused) > len(replies) / 2 and "supervisor SUP-SIM" in refused[0].reason, len(replies)
        assert asked_again == [] and dealt >= 3, (dealt, asked_again)
        held = [await casino.connect(f"supervisor-{SUPERVISOR}") for _ in range(natsauth.SUPERVISOR_LIMITS[
            "max_connections"] - 1)]
        with pytest.raises(nats.errors.Error, match="maximum account active connections exceeded"):
            await casino.connect(f"supervisor-{SUPERVISOR}", max_reconnect_attempts=0, allow_reconnect=False)
        for nc in (supervisor, terminal, *held):
            await nc.close()


async def test_what_a_supervisor_cannot_direct_at_a_table_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """A baccarat method directed at a blackjack table is refused naming the
    blackjack rule (it was taken and ignored), as a supervisor's opening
    there with nothing to direct is; the table then deals as ever."""
    async with secured_casino(tmp_path) as casino:
        supervisor = await casino.connect(f"supervisor-{SUPERVISOR}")
        compliance = await casino.connect("compliance")
        before = (await compliance.jetstream().stream_info("CASINO")).state.messages
        for n, procedure in enumerate(("method_b", "style_a", "")):
            refused = await ask(supervisor, subjects.supervise(BLACKJACK, SUPERVISOR), commands.OpenCoup(
                id=f"d-{n}", table=BLACKJACK, procedure=procedure, number=1))
            assert (refused.ok, refused.clause) == (False, "002 (4)"), refused
            assert "dealt one way" in refused.reason
        assert (await compliance.jetstream().stream_info("CASINO")).state.messages == before
        terminal = await casino.connect(f"terminal-{BLACKJACK}")
        assert (await ask(terminal, subjects.command(BLACKJACK, "coup"), commands.OpenCoup(id="o", table=BLACKJACK,
                                                                                           number=1))).ok
        for nc in (supervisor, compliance, terminal):
            await nc.close()


async def answered(terminal: Client, table: str, kind: str) -> bool:
    """Whether the instance that owns ``table`` at the ``kind`` service answers (a refusal is an answer)."""
    command: commands.Command = commands.Status(id="st", table=table) if kind == "coup" else commands.PlaceWager(
        id="w", table=table, coup=f"{table}-999999", seat=1, bet="banker", amount=5000)
    try:
        await ask(terminal, subjects.command(table, kind), command, timeout=1)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
        return False
    return True


async def outage(check: Callable[[], Awaitable[bool]], within: float = 30.0) -> float:
    """Seconds from now to the last moment ``check`` failed, once it has held
    for a lapse and a tick in a row (0 where it never failed); failing past ``within``."""
    started = last_failed = time.monotonic()
    failed = False
    while time.monotonic() - last_failed < ownership.LAPSE + ownership.TICK + 1:
        if not await check():
            failed, last_failed = True, time.monotonic()
        assert last_failed - started < within, f"still out after {within:.0f} s"
        await asyncio.sleep(0.2)
    return last_failed - started if failed else 0.0


async def test_no_write_to_the_owners_or_the_live_bucket_stalls_the_floor_past_a_lapse(tmp_path: Path) -> None:
    """Each service's own credential writes what it may into the buckets that
    say who owns which tables and who is live: members that never run out by
    their own say (the year 33658), an assignment to nobody, bytes that are
    no assignment, members that never were, the projections' writer's lease
    for an instance that does not exist. Each heals by itself within 30 s
    (a lapse and a tick at most, by the server's clock), and a new instance
    starts whatever the bucket holds."""
    async with secured_casino(tmp_path) as casino:
        terminals = {t: await casino.connect(f"terminal-{t}") for t in TABLES}
        users = {user: await casino.connect(user) for user in ("wager", "dealer-policy", "settlement", "projections")}
        owners = {u: await nc.jetstream().key_value(natsauth.OWNERS) for u, nc in users.items() if u != "projections"}
        live = {u: await nc.jetstream().key_value(natsauth.LIVE) for u, nc in users.items()}
        floor = await casino.connect("floor")
        read_models = await KvProjections(floor.jetstream()).open()
        took: dict[str, float] = {}

        def every_table(kind: str) -> Callable[[], Awaitable[bool]]:
            async def answering() -> bool:
                return all([await answered(nc, t, kind) for t, nc in terminals.items()])
            return answering

        async def read_models_follow() -> bool:
            return await read_models.seq() >= (await floor.jetstream().stream_info("CASINO")).state.last_seq

        ghosts = [f"ghost-{k}" for k in range(15)]
        forever = {"members": {g: 1e12 for g in ghosts}, "owners": [ghosts[k % 15] for k in range(16)]}
        await owners["wager"].put("wager", msgspec.json.encode(forever))
        for ghost in ghosts:  # members that never were, each written once
            await live["dealer-policy"].put(f"dealer-policy.{ghost}", b"")
        await owners["settlement"].put("settlement", msgspec.json.encode({"owners": ["ghost"] * 16}))
        attacks = {"wager: members that never lapse by their own say": every_table("wager"),
                   "dealer-policy: 15 members that never were": every_table("coup")}
        # A coup dealt and settled meanwhile, through settlement's assignment to nobody.
        *results, _ = await asyncio.gather(*(outage(check) for check in attacks.values()), casino.deal(1))
        took.update(zip(attacks, results, strict=True))
        await live["projections"].put("projections.writer", b"ghost")
        await owners["wager"].put("wager", b"\x00\xff junk")
        extra = await runner.start("wager", casino.url("wager"), tables=casino.tables)  # starts whatever it holds
        await asyncio.sleep(ownership.TICK + 0.5)  # the writer finds its lease gone at its next renewal
        # The coups then dealt go unfollowed by the read models until the lease is taken again.
        stalled, junk, _ = await asyncio.gather(outage(read_models_follow), outage(every_table("wager")),
                                                casino.deal(1))
        took["projections: the writer's lease for nobody"] = ownership.TICK + 0.5 + stalled
        took["wager: bytes that are no assignment"] = junk
        await extra.stop()
        await casino.deal(1)
        print(f"out of service after each write, in seconds: {took}")
        # The writes did stall what they could, for a lapse: the tables of members that never were, the read models.
        assert took["dealer-policy: 15 members that never were"] > 0
        assert stalled > 0
        assert all(t < 30 for t in took.values()), took
        for nc in (floor, *terminals.values(), *users.values()):
            await nc.close()


async def test_a_tables_card_reading_shoe_and_shuffling_machine_report_for_their_own_table_only_and_read_nothing(
        tmp_path: Path) -> None:
    """A device's credential in an attacker's hands (docs/readers.md): it
    receives nothing (no event, no secret order, no inbox but its own), asks
    nothing but its own table's report subject, a report naming another table
    on it is refused, 24 reports in flight at once are held to the device's
    own lane while the table's terminal is answered every time, and its
    account holds four connections. Nothing of it is written."""
    async with secured_casino(tmp_path, READ_TABLES) as casino:
        errors: list[str] = []
        reader = await casino.connect(f"reader-{BACCARAT}", errors)
        shuffler = await casino.connect(f"shuffler-{BACCARAT}", errors)
        received: list[object] = []

        async def keep(msg: object) -> None:
            received.append(msg)

        for nc in (reader, shuffler):
            for subject in (">", "casino.>", "_INBOX.>", "casino.secret.>", "$JS.API.>"):
                await nc.subscribe(subject, cb=keep)
            await nc.flush()
        await asyncio.sleep(0.3)
        assert sum("permissions violation for subscription" in e.lower() for e in errors) == 10, errors
        compliance = await casino.connect("compliance")
        before = (await compliance.jetstream().stream_info("CASINO")).state.messages
        card = commands.CardRead(id="r-1", table=BACCARAT, card="AS")
        for nc, subject in ((reader, subjects.command(BLACKJACK, "read")), (reader, subjects.command(BACCARAT, "shuffler")),
                            (reader, subjects.command(BACCARAT, "coup")), (shuffler, subjects.command(BACCARAT, "read")),
                            (reader, subjects.event(BACCARAT, "-", "-", "coup")), (reader, "$JS.API.STREAM.INFO.CASINO")):
            errors.clear()
            with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
                await ask(nc, subject, card, timeout=0.5)
            await asyncio.sleep(0.1)
            assert any("permissions violation for publish" in e.lower() for e in errors), (subject, errors)
        other = await ask(reader, subjects.command(BACCARAT, "read"), msgspec.structs.replace(card, table=BLACKJACK))
        assert (other.ok, other.clause) == (False, "protocol") and "came on table BAC000-1's subject" in other.reason

        terminal = await casino.connect(f"terminal-{BACCARAT}")
        until = time.monotonic() + 5.0
        replies: list[commands.Reply] = []
        flooding = flood(reader, subjects.command(BACCARAT, "read"), lambda i: msgspec.structs.replace(card, id=i),
                         until, replies)
        statuses = []
        while time.monotonic() < until:
            statuses.append(await ask(terminal, subjects.command(BACCARAT, "coup"),
                                      commands.Status(id="s", table=BACCARAT)))
        await asyncio.gather(*flooding)
        limited = [r for r in replies if not r.ok and r.clause == "rate limit"]
        assert len(limited) > len(replies) / 2 and "card-reading shoe" in limited[0].reason, len(replies)
        taken = [r for r in replies if r.clause != "rate limit"]
        # No shoe in play yet: the table waits for its shuffling machine's order.
        assert taken and all((r.ok, r.clause) == (False, commands.SHUFFLING_MACHINE) for r in taken), taken[:1]
        assert len(statuses) >= 10 and all(s.ok for s in statuses), statuses[-1]
        held = [await casino.connect(f"reader-{BACCARAT}") for _ in range(natsauth.DEVICE_LIMITS["max_connections"] - 2)]
        with pytest.raises(nats.errors.Error, match="maximum account active connections exceeded"):
            await casino.connect(f"shuffler-{BACCARAT}", max_reconnect_attempts=0, allow_reconnect=False)
        assert received == []
        assert (await compliance.jetstream().stream_info("CASINO")).state.messages == before
        for nc in (reader, shuffler, compliance, terminal, *held):
            await nc.close()
