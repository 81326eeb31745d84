"""What every service shares: recording events with their envelopes, answering
commands with a reply or a refusal, and asking other services."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import APIError

from casino.protocol.commands import ASK_AGAIN, Command, Reply, encoder, refused, reply_decoder
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import RulesetError
from casino.store.envelope import AnyEvent, Batch, Envelope, type_of, version_of
from casino.store.eventstore import Appended, Conflict, EventStore

log = logging.getLogger("casino")

Clock = Callable[[], datetime]
MAX_COMMAND_BYTES = 64 * 1024  # a table command is a few hundred bytes
C = TypeVar("C", bound=Command)


def utc_now() -> datetime:
    return datetime.now(UTC)


class Recorder:
    """Appends the events of one decision, or of consecutive decisions taken
    together, as one batch, each event with its envelope."""

    def __init__(self, store: EventStore, producer: str, clock: Clock = utc_now) -> None:
        self.store, self.producer, self.clock = store, producer, clock

    def message_id(self, msg_id: str) -> str:
        return f"{self.producer}:{msg_id}"  # one command may cause writes by several services

    async def record(
        self, subject: str, events: Sequence[AnyEvent], *, expected: int, msg_id: str, table: str, shoe: str,
        coup: str, causation: str | Sequence[str], correlation: str = "", guard: str | None = None,
        command: str | Sequence[str] = "",
    ) -> Appended:
        """``causation`` is the cause of every event, or one cause per event
        where the batch holds several decisions; ``command`` the digest of
        each cause (``casino.protocol.commands.digest``), likewise."""
        at = self.clock()
        msg_id = self.message_id(msg_id)
        causes = [causation] * len(events) if isinstance(causation, str) else list(causation)
        digests = [command] * len(events) if isinstance(command, str) else list(command)
        batch = Batch(tuple(
            Envelope(f"{msg_id}/{i}", type_of(e), version_of(type_of(e)), table, shoe, coup, cause,
                     correlation or coup or cause, self.producer, at, e, digest_)
            for i, (e, cause, digest_) in enumerate(zip(events, causes, digests, strict=True))
        ))
        return await self.store.append(subject, batch, expected=expected, msg_id=msg_id, guard=guard)


class Malformed(msgspec.Struct, frozen=True):
    """A command that could not be read: refused with this reason."""

    reason: str


def read_command(data: bytes, decoder: msgspec.json.Decoder[Any]) -> Any:
    """The command in ``data``, or what is wrong with it (``Malformed``)."""
    if len(data) > MAX_COMMAND_BYTES:
        return Malformed(f"command too large: {len(data)} bytes, at most {MAX_COMMAND_BYTES}")
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return Malformed(f"malformed or unknown command: {exc}")


async def answer(data: bytes, decoder: msgspec.json.Decoder[Any], handler: Callable[[Any], Awaitable[Reply]],
                 reload: Callable[[Any], Awaitable[None]] | None = None, table: str | None = None) -> bytes:
    """``decide`` on the command in ``data``, the reply encoded."""
    return encoder.encode(await decide(read_command(data, decoder), handler, reload, table))


async def decide(command: Any, handler: Callable[[Any], Awaitable[Reply]],
                 reload: Callable[[Any], Awaitable[None]] | None, table: str | None) -> Reply:
    """Run a command's handler and give its reply. A malformed or unknown
    command, one for another table than ``table`` (the table whose subject it
    came on: a terminal may publish on its own table's subjects only), or a
    step the rules forbid, is refused with its reason; a concurrency conflict
    reloads the aggregate and tries again. A refusal is only given on current
    state: if another instance may have moved the aggregate on, it is
    reloaded and the command decided once more."""
    if isinstance(command, Malformed):
        return refused(command.reason, "protocol")
    if table is not None and command.table != table:
        return refused(f"a command for table {command.table} came on table {table}'s subject", "protocol")
    reloaded = False
    for _ in range(5):
        try:  # a failure of the handler or of the reload is answered, never left unanswered
            try:
                return await handler(command)
            except RuleViolation as exc:  # answered on state reloaded, unless it is not the state that refuses
                if reload is None or reloaded or exc.clause in ASK_AGAIN:
                    return refused(exc.reason, exc.clause)
            except Conflict as exc:
                log.warning("%s %s: concurrency conflict (%s); reloading", type(command).__name__, command.id, exc)
                if reload is None:
                    break
            await reload(command)
            reloaded = True
        except RulesetError as exc:  # a table configured with a ruleset that cannot be loaded
            return refused(str(exc), "ruleset")
        except APIError as exc:  # the event store refused the write (full, or away)
            log.error("%s %s: the event store refused: %s", type(command).__name__, command.id, exc)
            return refused(f"the event store refused the write: {exc.description}; nothing was recorded",
                           "event store")
        except Exception as exc:
            log.exception("%s %s failed", type(command).__name__, command.id)
            return refused(f"the service failed on this command ({type(exc).__name__}); it is logged", "internal")
    return refused("the table is busy: another writer keeps winning; try again", "concurrency")


class Peer:
    """Asks another service by request/reply, retrying with the same command id."""

    def __init__(self, nc: Client, timeout: float = 5.0, attempts: int = 5) -> None:
        self.nc, self.timeout, self.attempts = nc, timeout, attempts

    async def ask(self, subject: str, command: Command) -> Reply:
        payload = encoder.encode(command)
        for attempt in range(self.attempts):
            try:
                msg = await self.nc.request(subject, payload, timeout=self.timeout)
                return reply_decoder.decode(msg.data)
            except (TimeoutError, NatsTimeout, NoRespondersError, NatsError, ConnectionError):
                # no answer yet, or the connection away (the broker restarting): asked again
                await asyncio.sleep(min(1.0, 0.05 * 2**attempt))
        raise RuntimeError(f"no answer from {subject} after {self.attempts} attempts")

    async def must(self, subject: str, command: Command) -> Reply:
        """Ask, and turn a refusal into a ``RuleViolation`` for our own caller."""
        reply = await self.ask(subject, command)
        if not reply.ok:
            raise RuleViolation(reply.clause, reply.reason)
        return reply


def digest(text: bytes) -> str:
    import hashlib

    return hashlib.sha256(text).hexdigest()[:16]


# How often one source outside a table's terminal may ask at the table (services.messaging.CommandGate):
# a supervisor, or a device (the card-reading shoe, the shuffling machine). A forfeit or a change of
# procedure is a few a coup, and a dealer draws a card or two a second, where a simulated floor deals a
# coup every few milliseconds: a refusal there is asked again (a late opening opens the coup after the one
# its terminal looked at).
LANE_RATE, LANE_BURST = 20.0, 8


class Rate:
    """At most ``burst`` at once, refilled at ``per_second``: how often one
    source may ask at one table."""

    def __init__(self, per_second: float, burst: int) -> None:
        self.per_second, self.burst = per_second, burst
        self.tokens: dict[str, tuple[float, float]] = {}  # source -> (tokens left, when counted)

    def take(self, source: str) -> bool:
        now = time.monotonic()
        left, at = self.tokens.get(source, (float(self.burst), now))
        left = min(float(self.burst), left + (now - at) * self.per_second)
        if left < 1.0:
            self.tokens[source] = (left, now)
            return False
        self.tokens[source] = (left - 1.0, now)
        return True


class TableLocks:
    """One lock per table: a table's commands are decided one at a time."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def __call__(self, table: str) -> asyncio.Lock:
        lock = self._locks.get(table)
        if lock is None:  # made once a table: this is asked for every command and every followed event
            lock = self._locks[table] = asyncio.Lock()
        return lock
