"""Envelopes: every event on the wire, with who, when, why and where.

One JetStream message holds the events one command caused (a batch), so the
store never holds half of a decision. Each event has its own envelope.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

import msgspec

from casino.rules import incidents, settlement, shoe, wagerbook
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages


class CoupConfigured(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="coup.configured"):
    """The table, game and ruleset a coup is dealt under, recorded when it
    opens. ``opened_before``: the digests of the command ids that opened the
    table's coups before this one, the latest first (``OPENINGS_KEPT`` at
    most; ``casino.protocol.commands.id_digest``), so that an opening asked
    again after later coups opened is known for what it is (applied once).
    ``currency``: the ISO 4217 code of the currency its money is in (version
    3; a hundredth is its minor unit), as the tables file gives the table's.
    ``supervisors``: the casino's roster of supervisors when it opened
    (version 4; empty before, and where the configuration names none): who
    may direct at the table, and since when (the first coup naming them).
    ``dealer``: who dealt it, as signed in at the table's terminal, and
    ``dealer_before``: who dealt the table's coup before (version 5; empty
    before, and where nobody signed in): where they differ, the dealer changed.
    ``voids_before``: how many of the table's coups just before it were voided
    in a row (version 6; 0 before; on the shoe in play before version 7, across
    shoes since): the coup that would be the ruleset's ``shoe.end_shoe_after``-th
    ends the shoe (docs/readers.md). ``shoe``: the shoe it is dealt from, the
    one its subject names (version 7; empty before). ``ruled_ended``: the shoe
    a supervisor's ruling ended, where ``shoe`` is the one after it (version
    7): a ruling that would end ``shoe`` too closes the table instead
    (casino.rules.incidents)."""

    table: str
    game: str
    ruleset: str
    ruleset_digest: str
    coup_number: int
    opened_before: tuple[str, ...] = ()
    currency: str = ""
    supervisors: tuple[str, ...] = ()
    dealer: str = ""
    dealer_before: str = ""
    voids_before: int = 0
    shoe: str = ""
    ruled_ended: str = ""


OPENINGS_KEPT = 32  # the openings a coup's record names, its own and the table's before it


class RulesetRecorded(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="ruleset.recorded"):
    """A ruleset's full content, recorded at a table before the first coup dealt
    under it and again whenever it changes, so that the record alone says what
    every coup was dealt under. ``content`` is the ruleset as JSON text (every
    setting, defaults included); ``digest``, the one each ``coup.configured``
    names, is the first 16 hexadecimal digits of the SHA-256 of that text's
    UTF-8 bytes (docs/replay.md shows the check with ``sha256sum``)."""

    table: str
    name: str
    digest: str
    content: str


class CoupHeld(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="coup.held"):
    """A coup held for compliance: its record holds a message, at stream
    sequence ``seq``, that the dealer-policy cannot read or follow (``reason``):
    written by whoever held a writer's credential, or by a fault. Nothing more
    is dealt in it, its wagers stay unsettled for compliance to rule on (a
    house rule where the regulations are silent: docs/clauses.md, "A coup
    held for compliance"), and the table goes on with its next coup."""

    table: str
    coup: str
    seq: int
    reason: str


READ = "read:"  # the causation of what a card-reading shoe's report caused (the coup's and the shoe's): its id follows
KEYED = "keyed:"  # the causation of the card a ``CardKeyed`` keyed in, once confirmed: the report's id follows


AnyEvent = (
    shoe.AnyShoeEvent | baccarat_messages.AnyBaccaratEvent | blackjack_messages.AnyBlackjackEvent | wagerbook.AnyBookEvent
    | settlement.CoupSettled | CoupConfigured | RulesetRecorded | CoupHeld | incidents.AnyIncidentEvent
)
# What the shoe service decides for a coup's step and gives to the coup's append to carry (the cards
# drawn, the round's end and the next round's start): the shoe's record, in the coup's (docs/readers.md).
CARRIED = (shoe.CardDrawn, shoe.CutCardReached, shoe.ReshuffleRequired, shoe.RoundEnded, shoe.RoundStarted)
# The events of a coup's record that are no step of its game: not decided again by its rules.
NOT_OF_THE_GAME = (CoupConfigured, CoupHeld, *incidents.EVENTS, *CARRIED)


def carried_by(event: object, causation: str) -> str:
    """What names the shoe's step that gave a carried event (``CARRIED``):
    the report of a card-reading shoe's card (read, or keyed in and
    confirmed), else the shoe command that drew it (its causation)."""
    for prefix in (READ, KEYED):
        if causation.startswith(prefix):
            return causation[len(prefix):]
    return causation


def step_digest(events: Sequence[object]) -> str:
    """A digest of what one of the shoe's steps decided (its carried events,
    in order): two decisions under one name, a stale instance's and the one
    recorded, differ in it (docs/architecture.md)."""
    return hashlib.sha256(msgspec.msgpack.encode(list(events))).hexdigest()[:16] if events else ""

# The schema version of each event type now written; a type not listed is at 1.
VERSIONS: dict[str, int] = {"shoe.shuffled": 3, "baccarat.card_dealt": 2, "shoe.card_burned": 3, "shoe.card_drawn": 2,
                            "blackjack.decision_taken": 2, "baccarat.holder_assigned": 3, "baccarat.coup_opened": 3,
                            "coup.configured": 7, "coup.card_incident": 2, "baccarat.cards_returned": 2,
                            "baccarat.shoe_given_up": 2, "settlement.coup_settled": 2}
# The fields that came with a version of their event type: a record of an
# earlier version holds them empty (its upcaster gives them so), and is
# verified without them (casino.audit.verify).
ADDED_SINCE: dict[str, tuple[str, ...]] = {
    "baccarat.card_dealt": ("clause",), "shoe.card_burned": ("clause", "read"), "blackjack.decision_taken": ("clause",),
    "shoe.shuffled": ("source",), "shoe.card_drawn": ("read",),
    "baccarat.holder_assigned": ("player",), "baccarat.coup_opened": ("shoe_holder_player", "in_force", "supervisor"),
    "coup.configured": ("opened_before", "currency", "supervisors", "dealer", "dealer_before", "voids_before", "shoe",
                        "ruled_ended"),
    "coup.card_incident": ("shoe",),
    "baccarat.cards_returned": ("clause",),
    "baccarat.shoe_given_up": ("player",)}


def version_of(event_type: str) -> int:
    return VERSIONS.get(event_type, 1)


class UnknownVersion(ValueError):
    """An event written by a newer schema than this code knows."""


class _Metadata(msgspec.Struct, frozen=True, gc=False):
    """Who, when, why and where: what every event carries besides itself."""

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


class Envelope(_Metadata, frozen=True):
    """One event with its metadata; ``command`` is the digest of the command
    that caused it (``casino.protocol.commands.digest``; empty for the dealer's own
    steps, and in records older than it): a command id used again for other
    content is told apart from a retry."""

    data: AnyEvent
    command: str = ""


class Batch(msgspec.Struct, frozen=True, gc=False):
    """The events of one decision, appended as one message."""

    events: tuple[Envelope, ...]


class _RawEnvelope(_Metadata, frozen=True):
    data: msgspec.Raw
    command: str = ""


class _RawBatch(msgspec.Struct, frozen=True, gc=False):
    events: tuple[_RawEnvelope, ...]


_encoder = msgspec.json.Encoder()
_raw_decoder = msgspec.json.Decoder(_RawBatch)
_batch_decoder = msgspec.json.Decoder(Batch)
_event_decoder = msgspec.json.Decoder(AnyEvent)


def encode(batch: Batch) -> bytes:
    return _encoder.encode(batch)


def decode(data: bytes) -> Batch:
    """Decode a stored batch; an event of an older schema version is upcast to
    the current one, step by step (``casino.store.upcast``)."""
    try:  # the usual case, and the hot path of every read: every event is current
        batch = _batch_decoder.decode(data)
    except msgspec.ValidationError:
        return _upcast(data)
    for e in batch.events:
        if e.version != VERSIONS.get(e.type, 1):
            return _upcast(data)
    return batch


def _upcast(data: bytes) -> Batch:
    from casino.store.upcast import upcast

    raw = _raw_decoder.decode(data)
    events = []
    for e in raw.events:
        current = version_of(e.type)
        if e.version == current:
            event = _event_decoder.decode(e.data)
        elif e.version < current:
            event = upcast(e.type, e.version, current, msgspec.json.decode(e.data))
        else:
            raise UnknownVersion(f"{e.type} version {e.version} is newer than this code knows ({current})")
        # Decoded, the event is in its current shape, and says so.
        events.append(Envelope(e.id, e.type, current, e.table, e.shoe, e.coup, e.causation, e.correlation,
                               e.producer, e.at, event, e.command))
    return Batch(tuple(events))


def type_of(event: AnyEvent) -> str:
    """The stable tag of an event (``"baccarat.card_dealt"``)."""
    return str(type(event).__struct_config__.tag)
