"""Each coup's messages as a durable consumer delivers them, kept from the
coup's first message, so that a service can act on the whole coup when it
closes (settle it, verify it) without reading it back from the stream.

What is kept is whole only while the deliveries follow one another: each a
first delivery, its consumer sequence one more than the last. Then every
message the consumer's filter matches has passed, in stream order (a consumer
delivers new messages in stream order, each taking the next consumer
sequence). A redelivery, or a gap (a delivery that went to another instance
of the service, or one before a restart), may mean a message was missed: all
that is kept is forgotten, and a coup not followed from its first message is
read back from the stream.
"""

from __future__ import annotations

from typing import NamedTuple

from casino.store import subjects
from casino.store.eventstore import Stored


class Delivery(NamedTuple):
    """Where a JetStream delivery stands, from its ack subject."""

    stream_seq: int
    consumer_seq: int  # counts every delivery of the consumer, redeliveries too
    delivered: int  # 1 on the first delivery of the message
    pending: int  # messages of the consumer still to deliver after it


class Following:
    """The coups in play, each with its messages so far.

    ``first`` are the event types a coup's first message on this consumer
    starts with; a coup is followed only from such a message. At most the two
    latest coups of a table are kept (the next coup may open before the last
    one's final message has passed)."""

    def __init__(self, first: tuple[type, ...]) -> None:
        self.first = first
        self.coups: dict[str, tuple[str, list[Stored]]] = {}  # coup: (its table, its messages)
        self.last = 0  # the consumer sequence of the last delivery

    def forget(self) -> None:
        self.coups.clear()

    def take(self, stored: Stored, at: Delivery | None = None) -> None:
        """Keep a delivered message (``at`` None: a reader that hands every
        message once and in order, as the in-memory store does)."""
        fresh = at is None or at.delivered == 1
        if at is not None:
            if not fresh or at.consumer_seq != self.last + 1:
                self.forget()
            self.last = at.consumer_seq
        table, _, coup, _ = subjects.tokens(stored.subject)
        kept = self.coups.get(coup)
        if kept is not None:
            kept[1].append(stored)
        elif fresh and stored.batch.events and isinstance(stored.batch.events[0].data, self.first):
            older = [c for c, (t, _) in self.coups.items() if t == table]
            for c in older[:-1]:
                del self.coups[c]
            self.coups[coup] = (table, [stored])

    def pop(self, coup: str) -> list[Stored] | None:
        """The coup's messages if it was followed from its first; it is no longer kept."""
        kept = self.coups.pop(coup, None)
        return None if kept is None else kept[1]
