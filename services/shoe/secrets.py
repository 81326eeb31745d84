"""Shuffled orders on their own JetStream stream, one message per shoe."""

from __future__ import annotations

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from casino.store import subjects
from casino.store.jetstream import SECRETS_STREAM
from services.shoe.service import Order


class _Secret(msgspec.Struct):
    order: tuple[str, ...]
    salt: str


class JetStreamSecrets:
    def __init__(self, js: JetStreamContext) -> None:
        self.js = js

    async def put(self, table: str, shoe: str, order: Order) -> None:
        await self.js.publish(subjects.secret(table, shoe), msgspec.json.encode(_Secret(*order)),
                              stream=SECRETS_STREAM, headers={"Nats-Msg-Id": f"secret:{shoe}"})

    async def get(self, table: str, shoe: str) -> Order | None:
        try:
            msg = await self.js.get_last_msg(SECRETS_STREAM, subjects.secret(table, shoe), direct=True)
        except NotFoundError:
            return None
        s = msgspec.json.decode(msg.data or b"", type=_Secret)
        return s.order, s.salt
