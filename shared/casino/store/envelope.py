"""Envelopes: every event on the wire, with who, when, why and where.

One JetStream message holds the events one command caused (a batch), so the
store never holds half of a decision. Each event has its own envelope.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from casino.rules import settlement, shoe, wagerbook
from casino.rules.baccarat import messages as bm
from casino.rules.blackjack import messages as jm


class CoupConfigured(msgspec.Struct, frozen=True, tag_field="type", tag="coup.configured"):
    """The table, game and ruleset a coup is dealt under, recorded when it opens."""

    table: str
    game: str
    ruleset: str
    ruleset_digest: str
    coup_number: int


AnyEvent = (
    shoe.AnyShoeEvent | bm.AnyBaccaratEvent | jm.AnyBlackjackEvent | wagerbook.AnyBookEvent
    | settlement.CoupSettled | CoupConfigured
)

SCHEMA_VERSION = 1


class Envelope(msgspec.Struct, frozen=True):
    """One event with its metadata."""

    id: str
    type: str
    version: int
    table: str
    shoe: str
    coup: str
    causation: str
    correlation: str
    producer: str
    at: datetime
    data: AnyEvent


class Batch(msgspec.Struct, frozen=True):
    """The events of one decision, appended as one message."""

    events: tuple[Envelope, ...]


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Batch)


def encode(batch: Batch) -> bytes:
    return _encoder.encode(batch)


def decode(data: bytes) -> Batch:
    return _decoder.decode(data)


def type_of(event: AnyEvent) -> str:
    """The stable tag of an event (``"baccarat.card_dealt"``)."""
    return str(type(event).__struct_config__.tag)
