"""Routing: each service's command subjects, as the server delivers them in
their partitions, reach its handler with the command decoded, and what
cannot be decided is refused naming why (``services.messaging.Commands``,
without a server). Subscriptions, partitions, persistence,
acknowledgements, deduplication and concurrency are tested on a real
nats-server (tests/e2e, tests/faults)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from services import runner

from casino.nats import permissions
from casino.nats.partitions import partition
from casino.protocol import commands

pytestmark = pytest.mark.anyio


class Handled:
    """A service's place: what it was asked, each answered done."""

    def __init__(self) -> None:
        self.commands: list[Any] = []

    async def handle(self, command: Any) -> commands.Reply:
        self.commands.append(command)
        return commands.Reply(True, coup=getattr(command, "coup", ""))

    async def reload(self, command: Any) -> None:
        raise AssertionError("nothing conflicts here")


ASKED = [
    ("shoe", "shoe", commands.DrawCard(id="d1", table="T1", coup="T1-000001", ruleset="baccarat-000-methods", index=0)),
    ("wager", "wager", commands.PlaceWager(id="w1", table="T1", coup="T1-000001", seat=1, bet="banker", amount=100)),
    ("wager", "book", commands.OpenBook(id="b1", table="T1", coup="T1-000001", shoe="T1-shoe-1",
                                 ruleset="baccarat-000-methods")),
    ("dealer-policy", "coup", commands.OpenCoup(id="o1", table="T1")),
]


async def ask(kind: str, subject: str, body: bytes) -> tuple[commands.Reply, Handled]:
    running = runner.Running(kind)
    running.service = handled = Handled()
    assert running.commands is not None
    table = subject.split(".")[2]
    reply = await running.commands.reply_for(f"{subject}.{partition(table)}", body)
    return msgspec.json.decode(commands.encoder.encode(reply), type=commands.Reply), handled


@pytest.mark.parametrize(("kind", "token", "command"), ASKED, ids=[f"{k}:{t}" for k, t, _ in ASKED])
async def test_each_command_subject_reaches_its_service_decoded(kind: str, token: str, command: Any) -> None:
    reply, handled = await ask(kind, f"casino.cmd.T1.{token}", commands.encoder.encode(command))
    assert reply.ok and handled.commands == [command]


@pytest.mark.parametrize(("kind", "token", "command"), ASKED, ids=[f"{k}:{t}" for k, t, _ in ASKED])
async def test_a_malformed_command_is_refused_as_protocol_and_reaches_no_handler(
        kind: str, token: str, command: Any) -> None:
    for body in (b"{not json", b'{"type": "table.no_such_command", "id": "x", "table": "T1"}', b"x" * 70_000):
        reply, handled = await ask(kind, f"casino.cmd.T1.{token}", body)
        assert (reply.ok, reply.clause, handled.commands) == (False, "protocol", [])


@pytest.mark.parametrize(("kind", "token", "command"), ASKED, ids=[f"{k}:{t}" for k, t, _ in ASKED])
async def test_a_command_for_another_table_on_this_tables_subject_is_refused(
        kind: str, token: str, command: Any) -> None:
    reply, handled = await ask(kind, f"casino.cmd.T2.{token}", commands.encoder.encode(command))
    assert (reply.ok, reply.clause, handled.commands) == (False, "protocol", [])
    assert "came on table T2's subject" in reply.reason


async def test_a_command_of_one_kind_on_another_kinds_subject_is_refused() -> None:
    shoe_command = commands.encoder.encode(ASKED[0][2])
    reply, handled = await ask("wager", "casino.cmd.T1.wager", shoe_command)
    assert (reply.ok, reply.clause, handled.commands) == (False, "protocol", [])


async def test_a_request_whose_reply_would_go_anywhere_but_an_inbox_is_not_handled() -> None:
    class Request:
        subject = f"casino.cmd.T1.coup.{partition('T1')}"
        data = commands.encoder.encode(ASKED[-1][2])

        def __init__(self, reply: str) -> None:
            self.reply = reply

    running = runner.Running("dealer-policy")
    running.service = handled = Handled()
    assert running.commands is not None
    for reply_to in ("casino.ev.T1.T1-shoe-1.T1-000001.coup", "$JS.API.STREAM.PURGE.CASINO", ""):
        await running.commands.answer(Request(reply_to))
    assert handled.commands == []
    assert running.metrics.registry.get_sample_value(
        "casino_commands_refused_total", {"service": "dealer-policy", "clause": "reply subject"}) == 3


async def test_a_service_with_a_user_answers_only_where_the_requester_may_receive_it() -> None:
    """A service connected as its user (the permission model in force)
    answers a request across the account boundary (the subject the server
    made) or on the inbox of a user that may send that request; never on
    another user's inbox, where a consumer delivers: a reply aimed at
    settlement's or the archiver's deliveries is not answered."""
    class Request:
        def __init__(self, subject: str, reply: str) -> None:
            self.subject, self.reply, self.data = subject, reply, commands.encoder.encode(ASKED[-1][2])

    shoe = runner.Running("shoe", "nats://shoe:secret@127.0.0.1:4222")
    shoe.service = handled = Handled()
    assert shoe.commands is not None
    draw = f"casino.cmd.T1.shoe.{partition('T1')}"
    for subject, reply_to in ((draw, "_INBOX.settlement.events"), (draw, "_INBOX.archiver.events"),
                              (draw, "_INBOX.supervisor-SUP-1.x"), (draw, "_INBOX.floor.x"),
                              (f"casino.cmd.T1.coup.{partition('T1')}", "_INBOX.admin.x")):
        await shoe.commands.answer(Request(subject, reply_to))
    assert handled.commands == []
    assert shoe.metrics.registry.get_sample_value(
        "casino_commands_refused_total", {"service": "shoe", "clause": "reply subject"}) == 5
    assert permissions.answerable("_INBOX.dealer-policy.abc.1", draw)  # the dealer-policy asks the shoe
    assert permissions.answerable("_INBOX.admin.abc.1", f"casino.cmd.-.shoe.{partition('-')}")  # a ping
    assert permissions.answerable("_R_.abc.def", f"casino.cmd.T1.coup.{partition('T1')}")  # a terminal's
