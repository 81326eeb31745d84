"""Where a shoe's order comes from and where it waits until revealed: the
shuffle source (the shoe service's own cryptographically secure shuffle),
the secret store of orders (on their own JetStream stream, one message per
shoe order kept, out of the public stream), and the store's in-memory fake."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Callable
from typing import Protocol

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import APIError, NotFoundError

from casino.rules.cards import Card, full_set
from casino.store import subjects
from casino.store.jetstream import SECRETS_STREAM, WRONG_LAST_SEQUENCE

Order = tuple[tuple[Card, ...], str]
ShuffleSource = Callable[[str, int], Order]


def secure_shuffle(table: str, decks: int) -> Order:
    """A cryptographically secure shuffle of a full shoe, and a fresh salt."""
    cards = list(full_set(decks))
    secrets.SystemRandom().shuffle(cards)
    return tuple(cards), secrets.token_hex(16)


class SecretStore(Protocol):
    """Where shuffled orders wait, out of the public stream, until revealed."""

    async def put(self, table: str, shoe: str, order: Order) -> Order:
        """Keep ``order`` for the shoe unless one is kept already (another
        instance shuffled it first); the order kept, which the shoe deals."""
        ...

    async def replace(self, table: str, shoe: str, order: Order) -> None:
        """Keep ``order`` for the shoe in place of the one kept."""
        ...

    async def get(self, table: str, shoe: str) -> Order | None: ...


class MemorySecrets:
    def __init__(self) -> None:
        self.orders: dict[tuple[str, str], Order] = {}

    async def put(self, table: str, shoe: str, order: Order) -> Order:
        return self.orders.setdefault((table, shoe), order)

    async def replace(self, table: str, shoe: str, order: Order) -> None:
        self.orders[(table, shoe)] = order

    async def get(self, table: str, shoe: str) -> Order | None:
        return self.orders.get((table, shoe))


class _Secret(msgspec.Struct):
    order: tuple[str, ...]
    salt: str


class JetStreamSecrets:
    def __init__(self, js: JetStreamContext) -> None:
        self.js = js

    async def put(self, table: str, shoe: str, order: Order) -> Order:
        """Written only where no order is kept for the shoe yet (expected last
        sequence 0 on its subject); otherwise the order kept, read back."""
        try:
            ack = await self.js.publish(subjects.secret(table, shoe), msgspec.json.encode(_Secret(*order)),
                                        stream=SECRETS_STREAM, headers={"Nats-Msg-Id": f"secret:{shoe}",
                                                                        "Nats-Expected-Last-Subject-Sequence": "0"})
        except APIError as exc:
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise
        else:
            if not ack.duplicate:
                return order
        for _ in range(50):  # kept by another instance: read it back (a replica may be a moment behind)
            if (kept := await self.get(table, shoe)) is not None:
                return kept
            await asyncio.sleep(0.1)
        raise RuntimeError(f"the order of {shoe} is kept but cannot be read back")

    async def replace(self, table: str, shoe: str, order: Order) -> None:
        """Keep ``order`` for the shoe in place of the one kept (a shuffling
        machine's order replaced before the shoe's first card): the last kept
        is the shoe's, every one before it stays out of the public stream."""
        subject = subjects.secret(table, shoe)
        try:
            last = (await self.js.get_last_msg(SECRETS_STREAM, subject, direct=True)).seq or 0
        except NotFoundError:
            last = 0
        digest_ = hashlib.sha256(" ".join(order[0]).encode()).hexdigest()[:16]
        await self.js.publish(subject, msgspec.json.encode(_Secret(*order)), stream=SECRETS_STREAM,
                              headers={"Nats-Msg-Id": f"secret:{shoe}:{digest_}",
                                       "Nats-Expected-Last-Subject-Sequence": str(last)})

    async def get(self, table: str, shoe: str) -> Order | None:
        try:
            msg = await self.js.get_last_msg(SECRETS_STREAM, subjects.secret(table, shoe), direct=True)
        except NotFoundError:
            return None
        s = msgspec.json.decode(msg.data or b"", type=_Secret)
        return s.order, s.salt
