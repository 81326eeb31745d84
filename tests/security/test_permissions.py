"""The permission model on a real nats-server (casino.nats.permissions), tried as an
attacker would: with every user's own password, subscribed to everything,
aiming replies at the streams and the JetStream API, and reaching for other
users' consumers, buckets and streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import msgspec
import nats
import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy
from services import followers, runner
from services.archiver.consumer import ARCHIVER_FILTER, ensure_archiver_consumer
from services.settlement.consumer import ensure_settlement_consumer

from casino.audit.verify import verify_coup
from casino.config.tables import TableConfig
from casino.nats import permissions as natsauth
from casino.protocol import commands
from casino.readmodels.projections import BUCKETS, META, TableStatus
from casino.rules.shoe import ShoeEnded
from casino.store import envelope, subjects
from casino.store.archive import SealStore
from casino.store.jetstream import ARCHIVE_STREAM, SECRETS_STREAM, STREAM, JetStreamEventStore
from tests.security.secured import READ_TABLES, SERVICE_USERS, TABLES, Secured, Spy, secured_casino
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
EVERY_USER = tuple(natsauth.permissions(TABLES))
SERVICE_CONSUMERS = tuple(u for u in SERVICE_USERS if u not in ("settlement", "archiver"))  # each creates its own
NOT_SHOE = tuple(u for u in EVERY_USER if u != "shoe")


async def denied(nc: nats.NATS, subject: str, body: object = None) -> bool:
    """Whether the JetStream API refused a request, or never received it."""
    try:
        reply = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=0.5)
    except nats.errors.Error:
        return True
    return "error" in json.loads(reply.data or b"{}")


async def spies(casino: Secured, users: tuple[str, ...]) -> list[Spy]:
    """Each user subscribed to everything, every inbox and the secrets, and to
    what it may: what it receives is kept."""
    out = []
    for user in users:
        errors: list[str] = []
        spy = Spy(user, await casino.connect(user, errors), errors)
        await spy.listen(">", "_INBOX.>", "casino.secret.>", "_INBOX.shoe.>", "$JS.>", *casino.allowed(user))
        out.append(spy)
    return out


def revealed(msg: object) -> bool:
    """An event batch holding a shoe's end, where its order is revealed."""
    try:
        batch = envelope.decode(msg.data)  # type: ignore[attr-defined]
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return False
    return any(isinstance(e.data, ShoeEnded) for e in batch.events)


@pytest.mark.parametrize("tables", [TABLES, READ_TABLES], ids=["shuffled", "read"])
async def test_no_user_but_the_shoe_service_receives_an_order_before_its_shoe_ends(
        tmp_path: Path, tables: dict[str, TableConfig]) -> None:
    """Nor, at card-reading tables, the order a shuffling machine reports:
    every user (the devices' own among them) spies on everything it can."""
    async with secured_casino(tmp_path, tables) as casino:
        watching = await spies(casino, tuple(u for u in casino.users if u != "shoe"))
        await casino.deal(12)
        orders = await casino.orders()
        assert orders  # shoes were shuffled and their orders kept
        for spy in watching:
            for denied in (">", "_INBOX.>", "casino.secret.>", "_INBOX.shoe.>"):
                assert any(f'subscription to "{denied.lower()}"' in e.lower() for e in spy.errors), (spy.user, denied)
            for msg in spy.received:
                for order, salt in orders.values():
                    if salt.encode() in msg.data or ",".join(order[:12]).encode() in msg.data.replace(b'"', b""):
                        assert revealed(msg), (spy.user, msg.subject)  # revealed only as the shoe ends
        floor = next(s for s in watching if s.user == "floor")
        assert any(m.subject.startswith("casino.ev.") for m in floor.received)  # the console sees the events
        # A terminal receives its own table's replies only (those to the simulated terminal with its user).
        terminal = next(s for s in watching if s.user == "terminal-BAC000-1")
        assert terminal.received
        assert all(m.subject.startswith("_INBOX.terminal-BAC000-1.") and b"BJ002" not in m.data
                   for m in terminal.received)
        for spy in watching:
            await spy.nc.close()


async def test_no_user_but_the_shoe_service_can_read_or_copy_the_secret_orders(tmp_path: Path) -> None:
    async with secured_casino(tmp_path) as casino:
        await casino.deal(1)
        assert await casino.orders()

        async def attempts(user: str) -> None:
            nc = await casino.connect(user)
            js = nc.jetstream(timeout=1)
            for attempt in (
                js.get_last_msg(SECRETS_STREAM, "casino.secret.>", direct=True),
                js.get_msg(SECRETS_STREAM, seq=1),
                js.add_consumer(SECRETS_STREAM, name="peek", deliver_subject=nc.new_inbox()),
                js.add_consumer(SECRETS_STREAM, durable_name="peek"),
            ):
                with pytest.raises((nats.errors.TimeoutError, nats.errors.Error, nats.js.errors.Error)):
                    await attempt
            # A mirror of the secrets under a read model's name (before its bucket exists, or beside it),
            # or the secrets sourced into the event stream.
            for name in ("KV_casino_shoe_stats_copy", f"KV_{BUCKETS['shoe_stats']}", "MIRROR"):
                assert await denied(nc, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "mirror": {
                    "name": SECRETS_STREAM}}), (user, name)
            assert await denied(nc, f"$JS.API.STREAM.UPDATE.{STREAM}", {
                "name": STREAM, "subjects": ["casino.ev.>"], "sources": [{"name": SECRETS_STREAM}]}), user
            await nc.close()

        await asyncio.gather(*(attempts(user) for user in NOT_SHOE
                               if natsauth.permissions(TABLES)[user].account == natsauth.CASINO))
        admin = await casino.connect("admin")
        info = await admin.jetstream().stream_info(STREAM)
        assert not info.config.sources and not info.config.mirror
        await admin.close()


async def test_replies_aimed_at_the_streams_or_the_jetstream_api_write_nothing(tmp_path: Path) -> None:
    async with secured_casino(tmp_path) as casino:
        await casino.deal(2)
        admin = await casino.connect("admin")
        js = admin.jetstream()
        before = {s: (await js.stream_info(s)).state.messages for s in (STREAM, SECRETS_STREAM)}
        aims = [subjects.event("BAC000-1", "BAC000-1-shoe-1", "BAC000-1-999999", "coup"),
                subjects.event("BAC000-1", "BAC000-1-shoe-1", "BAC000-1-999999", "wager"),
                subjects.secret("BAC000-1", "BAC000-1-shoe-2"), subjects.secret("BJ002-1", "BJ002-1-shoe-9"),
                f"$JS.API.CONSUMER.DELETE.{STREAM}.settlement", f"$JS.API.STREAM.PURGE.{STREAM}",
                "$KV.casino_projections.checkpoint"]
        terminal = await casino.connect("terminal-BAC000-1")
        status = commands.encoder.encode(commands.Status(id="s", table="BAC000-1"))
        for aim in aims:
            for body in (status, b"{}"):
                for service in ("coup", "wager"):
                    await terminal.publish(subjects.command("BAC000-1", service), body, reply=aim)
        # A user inside the casino's account aiming its request's reply: the services answer inboxes only.
        for aim in aims:
            await admin.publish(subjects.command("-", "coup"), b"{}", reply=aim)
            await admin.publish(subjects.command("-", "wager"), b"{}", reply=aim)
        await terminal.flush()
        await asyncio.sleep(1.0)
        after = {s: (await js.stream_info(s)).state.messages for s in (STREAM, SECRETS_STREAM)}
        assert after == before
        assert (await casino.settlement_consumer()).durable_name == "settlement"
        ok = await terminal.request(subjects.command("BAC000-1", "coup"), status, timeout=5)
        assert commands.reply_decoder.decode(ok.data).ok  # answered as ever on its own inbox
        await casino.deal(1)  # the tables go on
        compliance = await casino.connect("compliance")
        store = JetStreamEventStore(compliance)
        for coup in ("BAC000-1-000003", "BJ002-1-000003"):
            assert verify_coup(await store.read(subjects.coup_filter(coup))) == []
        for nc in (terminal, admin, compliance):
            await nc.close()


async def test_only_the_settlement_service_may_touch_its_consumer(tmp_path: Path) -> None:
    async with secured_casino(tmp_path) as casino:
        await casino.deal(1)
        config = await casino.settlement_consumer()
        for user in (u for u in EVERY_USER if u != "settlement"):
            nc = await casino.connect(user)
            attempts = (
                (f"$JS.API.CONSUMER.DELETE.{STREAM}.settlement", b""),
                (f"$JS.API.CONSUMER.PAUSE.{STREAM}.settlement", b'{"pause_until": "2099-01-01T00:00:00Z"}'),
                (f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.settlement", b'{"batch": 10}'),
                (f"$JS.API.CONSUMER.INFO.{STREAM}.settlement", b""),
                # Re-filtering it: by name, by durable name, and by the legacy ephemeral subject.
                (f"$JS.API.CONSUMER.CREATE.{STREAM}.settlement", json.dumps({"stream_name": STREAM, "config": {
                    "name": "settlement", "durable_name": "settlement", "filter_subject": "casino.ev.none",
                    "ack_policy": "explicit"}}).encode()),
                (f"$JS.API.CONSUMER.DURABLE.CREATE.{STREAM}.settlement", json.dumps({
                    "stream_name": STREAM, "config": {"durable_name": "settlement", "filter_subject": "casino.ev.none",
                                                      "ack_policy": "explicit"}}).encode()),
                (f"$JS.API.CONSUMER.CREATE.{STREAM}", json.dumps({"stream_name": STREAM, "config": {
                    "name": "settlement", "filter_subject": "casino.ev.none", "ack_policy": "explicit"}}).encode()),
            )
            refused = await asyncio.gather(*(denied(nc, subject, json.loads(body) if body else None)
                                             for subject, body in attempts))
            assert all(refused), (user, [s for (s, _), r in zip(attempts, refused, strict=True) if not r])
            await nc.close()
        after = await casino.settlement_consumer()
        assert (after.filter_subjects, after.filter_subject) == (config.filter_subjects, config.filter_subject)
        assert not getattr(after, "pause_until", None)
        await casino.deal(1)  # and every coup is still settled


async def test_a_consumer_delivering_onto_another_streams_subjects_writes_nothing_there(tmp_path: Path) -> None:
    # A consumer's deliver subject is in its creator's request body, where permissions cannot look: a
    # service that may create consumers aims one at the secret orders' and a read model's subjects.
    async with secured_casino(tmp_path) as casino:
        await casino.deal(1)
        admin = await casino.connect("admin")
        js = admin.jetstream()
        kv = f"$KV.{BUCKETS['table_status']}.BAC000-1"
        secret = subjects.secret("BAC000-1", "BAC000-1-shoe-9")  # a shoe not yet shuffled
        before = (await js.stream_info(STREAM)).state.messages
        created = []
        held = {name for r in casino.running for name in r.durables}
        for user in SERVICE_CONSUMERS:
            nc = await casino.connect(user)
            free = [n for n in followers.slot_names(user) if n not in held]  # under names of its own
            for i, aim in enumerate((secret, kv)):
                with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                    await nc.jetstream(timeout=1).add_consumer(STREAM, ConsumerConfig(
                        name=free[i], filter_subject="casino.ev.>", deliver_subject=aim))
                    created.append((user, aim))
            await nc.close()
        assert created, "no consumer could be created: the test would prove nothing"
        await asyncio.sleep(1.0)
        # Nothing is delivered there (no subscriber can have interest in them), nor written.
        assert secret not in await casino.orders(), created
        floor = await casino.connect("floor")
        status = await floor.jetstream().get_last_msg(f"KV_{BUCKETS['table_status']}", kv, direct=True)
        msgspec.json.decode(status.data or b"", type=TableStatus)  # the projections' value, no event batch
        await floor.close()
        assert (await js.stream_info(STREAM)).state.messages == before, created
        await admin.close()


async def test_readers_create_no_consumers_and_nobody_but_the_projections_writes_the_read_models(
        tmp_path: Path) -> None:
    async with secured_casino(tmp_path) as casino:
        await casino.deal(1)
        for user in ("floor", "compliance", "web", "terminal-BAC000-1"):
            nc = await casino.connect(user)
            js = nc.jetstream(timeout=0.5)
            outcomes = await asyncio.gather(
                js.add_consumer(STREAM, name="mine", filter_subject="casino.ev.>"),
                js.add_consumer(STREAM),  # an ephemeral named by the server
                *(js.publish(f"$KV.{bucket}.forged", b"+9966125", timeout=0.5) for bucket in (*BUCKETS.values(), META)),
                js.publish("$KV.casino_projections.checkpoint", b"forged", timeout=0.5), return_exceptions=True)
            assert all(isinstance(o, (nats.errors.Error, nats.js.errors.Error)) for o in outcomes), (user, outcomes)
            await nc.close()
        floor = await casino.connect("floor")  # the readers still read, by direct gets
        assert await JetStreamEventStore(floor).read(subjects.table_filter("BAC000-1"))
        await floor.close()


async def test_a_terminal_commands_its_own_table_only_and_a_service_writes_its_own_events_only(
        tmp_path: Path) -> None:
    """No anonymous client connects; the wager service cannot publish a shoe
    event; a table's terminal cannot command another table, not even by
    naming it in a command sent on its own table's subject, nor open, close or
    add to a wager book (the dealer-policy alone may)."""
    async with secured_casino(tmp_path) as casino:
        await casino.deal(2)
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(casino.server.url, max_reconnect_attempts=0, connect_timeout=2, allow_reconnect=False)
        compliance = await casino.connect("compliance")
        store = JetStreamEventStore(compliance)
        before = len(await store.read(f"{subjects.EVENTS}.>"))

        errors: list[str] = []
        wager = await casino.connect("wager", errors)
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await wager.jetstream().publish(subjects.event("BAC000-1", "BAC000-1-shoe-1", "-", "shoe"), b"{}",
                                            timeout=1)
        await wager.close()
        assert any("permissions violation" in e.lower() for e in errors), errors

        terminal = await casino.connect("terminal-BAC000-1", errors)
        ok = await terminal.request(subjects.command("BAC000-1", "coup"),
                                    commands.encoder.encode(commands.Status(id="s", table="BAC000-1")), timeout=5)
        assert commands.reply_decoder.decode(ok.data).ok
        errors.clear()
        other = commands.OpenCoup(id="o", table="BJ002-1")
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await terminal.request(subjects.command("BJ002-1", "coup"), commands.encoder.encode(other), timeout=1)
        await asyncio.sleep(0.2)
        assert any("permissions violation" in e.lower() for e in errors), errors
        for service, command in (("coup", other), ("wager", commands.PlaceWager(
                id="w", table="BJ002-1", coup="BJ002-1-000003", seat=1, bet="box", amount=1000))):
            sent = await terminal.request(subjects.command("BAC000-1", service), commands.encoder.encode(command), timeout=5)
            refused = commands.reply_decoder.decode(sent.data)
            assert (refused.ok, refused.clause) == (False, "protocol"), refused
            assert "table BJ002-1 came on table BAC000-1's subject" in refused.reason
        book = commands.CloseBook(id="close", table="BAC000-1", coup="BAC000-1-000003")
        errors.clear()
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await terminal.request(subjects.command("BAC000-1", "book"), commands.encoder.encode(book), timeout=1)
        await asyncio.sleep(0.2)
        assert any("permissions violation" in e.lower() for e in errors), errors
        sent = await terminal.request(subjects.command("BAC000-1", "wager"), commands.encoder.encode(book), timeout=5)
        refused = commands.reply_decoder.decode(sent.data)
        assert (refused.ok, refused.clause) == (False, "protocol") and "unknown" in refused.reason, refused
        await terminal.close()
        assert len(await store.read(f"{subjects.EVENTS}.>")) == before  # nothing was written
        await compliance.close()


async def test_a_terminal_holds_few_connections_and_subscriptions_and_never_another_tables(tmp_path: Path) -> None:
    async with secured_casino(tmp_path, services=False) as casino:
        limits = natsauth.TERMINAL_LIMITS
        held = [await casino.connect("terminal-BAC000-1") for _ in range(limits["max_connections"])]
        with pytest.raises(nats.errors.Error, match="maximum account active connections exceeded"):
            await casino.connect("terminal-BAC000-1", max_reconnect_attempts=0, allow_reconnect=False)
        other = await casino.connect("terminal-BJ002-1")  # another table's terminal still connects
        flooding = await casino.connect("terminal-BJ002-1", max_reconnect_attempts=0, allow_reconnect=False)
        with contextlib.suppress(nats.errors.Error):
            for i in range(limits["max_subscriptions"] + 4):
                await flooding.subscribe(f"{natsauth.inbox('terminal-BJ002-1')}.{i}")
            await flooding.flush(timeout=2)
        await asyncio.sleep(0.3)
        assert "maximum subscriptions exceeded" in str(flooding.last_error), flooding.last_error
        for nc in (*held, other, flooding):
            with contextlib.suppress(nats.errors.Error):
                await nc.close()


async def test_only_the_archiver_removes_anything_and_only_sealed_shoes_from_the_live_stream(tmp_path: Path) -> None:
    one_deck = ruleset_variant(tmp_path, "blackjack-002-hole-card", decks=1, penetration=0.5)
    async with secured_casino(tmp_path, {"BJ-1": TableConfig(one_deck)}) as casino:
        await casino.deal(12)
        archiver = next(r for r in casino.running if r.kind == "archiver").service  # its sweep asked for
        compliance = await casino.connect("compliance")
        seals = SealStore(compliance)
        deadline = asyncio.get_running_loop().time() + 60
        while not await seals.seals("BJ-1") or (await compliance.jetstream().stream_info(STREAM)).state.num_deleted == 0:
            assert asyncio.get_running_loop().time() < deadline, "nothing sealed and removed as the archiver's user"
            await archiver.sweep()
            await asyncio.sleep(0.2)
        running = next(r for r in casino.running if r.kind == "archiver")
        await running.stop()  # nothing more sealed or removed while the others try
        casino.running.remove(running)
        admin = await casino.connect("admin")
        js = admin.jetstream()
        before = {s: (await js.stream_info(s)).state for s in (STREAM, ARCHIVE_STREAM)}
        live = subjects.shoe_filter("BJ-1", (await JetStreamEventStore(compliance).last("casino.ev.BJ-1.>")).subject
                                    .split(".")[3])  # the shoe in play
        for user in natsauth.permissions(casino.tables):
            nc = await casino.connect(user)
            attempts = [(f"$JS.API.STREAM.MSG.DELETE.{stream}", {"seq": 1})
                        for stream in (STREAM, ARCHIVE_STREAM, SECRETS_STREAM)]
            attempts += [(f"$JS.API.STREAM.PURGE.{stream}", {}) for stream in (ARCHIVE_STREAM, SECRETS_STREAM)]
            attempts += [(f"$JS.API.STREAM.PURGE.{STREAM}", {"filter": live})] if user != "archiver" else []
            refused = await asyncio.gather(*(denied(nc, subject, body) for subject, body in attempts))
            assert all(refused), (user, [s for (s, _), r in zip(attempts, refused, strict=True) if not r])
            if user != "archiver":  # nor may anyone else write a seal
                with contextlib.suppress(nats.errors.Error):
                    await nc.publish(subjects.sealed("BJ-1", "BJ-1-shoe-99"), b"forged")
                    await nc.flush()
            await nc.close()
        await asyncio.sleep(0.5)
        after = {s: (await js.stream_info(s)).state for s in (STREAM, ARCHIVE_STREAM)}
        assert after[ARCHIVE_STREAM].messages == before[ARCHIVE_STREAM].messages
        assert after[STREAM].num_deleted == before[STREAM].num_deleted
        assert await JetStreamEventStore(compliance).read(live)  # the shoe in play is whole
        await admin.close()
        await compliance.close()


async def test_no_user_may_change_a_stream_once_made_nor_source_the_secret_orders(tmp_path: Path) -> None:
    """As every user, the administrator first: the dead letters given the
    secret orders as a source (which would republish every order to their
    reader), the event stream given the same source or a limit that would
    delete the record, any stream deleted, or made again with another
    configuration under its name: each refused, and the streams as they were."""
    from casino.store.jetstream import declared_streams

    async with secured_casino(tmp_path) as casino:
        await casino.deal(2)
        admin = await casino.connect("admin")
        js = admin.jetstream()
        before = {c.name: await js.stream_info(c.name or "") for c in declared_streams()}
        secret = [{"name": SECRETS_STREAM}]
        dlq, live = (msgspec.to_builtins(before[n].config.as_dict()) for n in (natsauth.DLQ, STREAM))
        attempts = [(f"$JS.API.STREAM.UPDATE.{natsauth.DLQ}", {**dlq, "sources": secret}),
                    (f"$JS.API.STREAM.UPDATE.{STREAM}", {**live, "sources": secret}),
                    (f"$JS.API.STREAM.UPDATE.{STREAM}", {**live, "max_msgs": 100}),
                    (f"$JS.API.STREAM.CREATE.{STREAM}", {**live, "max_msgs": 100}),
                    (f"$JS.API.STREAM.CREATE.{natsauth.DLQ}", {**dlq, "sources": secret})]
        attempts += [(f"$JS.API.STREAM.{verb}.{c.name}", {}) for c in declared_streams() for verb in ("DELETE", "UPDATE")]
        for user in ("admin", *(u for u in EVERY_USER if u != "admin")):
            nc = await casino.connect(user)
            refused = await asyncio.gather(*(denied(nc, subject, body) for subject, body in attempts))
            assert all(refused), (user, [s for (s, _), r in zip(attempts, refused, strict=True) if not r])
            await nc.close()
        for name, info in before.items():
            now = await js.stream_info(name or "")
            assert now.config.sources == info.config.sources == None and now.config.mirror is None, name  # noqa: E711
            assert now.config.max_msgs == info.config.max_msgs and now.state.messages >= info.state.messages, name
        await admin.close()


async def test_no_user_can_exhaust_the_servers_consumers_and_a_service_restarted_claims_its_own(
        tmp_path: Path) -> None:
    """The projections' user (as any consuming user) tries to create consumers
    of any name, its own service's and the others': it holds its service's
    few names and no more; the wager service, restarted, claims a free one of
    its own and deals on."""
    async with secured_casino(tmp_path) as casino:
        await casino.deal(1)
        nc = await casino.connect("projections")
        js = nc.jetstream(timeout=0.5)
        names = [f"{service}-{k}" for service in SERVICE_CONSUMERS for k in range(followers.SLOTS + 2)]
        names += [f"x{k}" for k in range(40)]

        async def create(name: str) -> None:
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await js.add_consumer(STREAM, ConsumerConfig(name=name, durable_name=name,
                                                             filter_subject="casino.ev.>",
                                                             inactive_threshold=3600.0))

        await asyncio.gather(*(create(name) for name in names))  # all at once, as a flood would come
        await nc.close()
        admin = await casino.connect("admin")
        info = await admin.jetstream().stream_info(STREAM)
        # the services' own (one an instance) and the projections' names, settlement's and the archiver's
        assert info.state.consumer_count <= len(SERVICE_CONSUMERS) + followers.SLOTS + 2, info.state
        await admin.close()
        wager = next(r for r in casino.running if r.kind == "wager")
        await wager.stop()
        casino.running.remove(wager)
        casino.running.append(await runner.start("wager", casino.url("wager"), tables=casino.tables))
        await casino.deal(1)


async def test_only_a_supervisors_own_credential_directs_as_that_supervisor(tmp_path: Path) -> None:
    """The subject names the supervisor, and only that supervisor's user may
    publish on it: a terminal cannot, another supervisor cannot, and a
    supervisor commands nothing else."""
    async with secured_casino(tmp_path) as casino:
        forfeit = commands.encoder.encode(commands.ForfeitShoe(id="f-1", table="BAC000-1", coup="BAC000-1-000001",
                                                               seat=1))
        sup = natsauth.SIMULATED_SUPERVISORS[0]
        terminal, supervisor = await casino.connect("terminal-BAC000-1"), await casino.connect(f"supervisor-{sup}")
        for nc, subject in ((terminal, subjects.supervise("BAC000-1", sup)),
                            (supervisor, subjects.supervise("BAC000-1", "SUP-OTHER")),
                            (supervisor, subjects.command("BAC000-1", "coup")),
                            (supervisor, subjects.command("BAC000-1", "wager"))):
            with pytest.raises(nats.errors.Error):
                await nc.request(subject, forfeit, timeout=0.5)
        answered = commands.reply_decoder.decode(
            (await supervisor.request(subjects.supervise("BAC000-1", sup), forfeit, timeout=5)).data)
        assert answered.clause != "protocol", answered  # taken as the supervisor's, and decided by the rules
        for nc in (terminal, supervisor):
            await nc.close()


async def test_settlement_and_the_archiver_change_their_consumers_of_an_earlier_release_as_themselves(
        tmp_path: Path) -> None:
    """An earlier release's consumers followed other subjects (the
    archiver's every settlement, settlement's the coup events alone); each
    service, as its own user, changes its own to follow what this release
    follows, the same durable, inbox and queue, and leaves it so after."""
    made = {natsauth.ARCHIVER_DURABLE: (ensure_archiver_consumer, subjects.aggregate_filter("settle"), [ARCHIVER_FILTER]),
            "settlement": (ensure_settlement_consumer, subjects.aggregate_filter("coup"),
                           sorted(subjects.aggregate_filter(a) for a in ("coup", "wager")))}
    async with secured_casino(tmp_path, services=False) as casino:
        for user, (ensure, before, after) in made.items():
            nc = await casino.connect(user)
            js = nc.jetstream()
            await js.add_consumer(STREAM, ConsumerConfig(
                durable_name=user, deliver_subject=f"{natsauth.inbox(user)}.events", deliver_group=user,
                filter_subject=before, deliver_policy=DeliverPolicy.NEW, ack_wait=60.0,
                max_ack_pending=followers.IN_FLIGHT))
            await ensure(nc)
            info = await js.consumer_info(STREAM, user)
            assert (info.config.deliver_subject, info.config.deliver_group) == (f"{natsauth.inbox(user)}.events", user)
            assert sorted(info.config.filter_subjects or [info.config.filter_subject or ""]) == after, user
            await ensure(nc)  # as it is: left so
            assert (await js.consumer_info(STREAM, user)).created == info.created, user
            await nc.close()
