"""The settlement service's handler: when a coup's result is recorded, pay
every wager of its closed book by the ruleset it was dealt under.

It follows each coup's coup and wager events as they pass, from the coup's
first event, so that the result finds the whole coup in hand; a coup it did
not follow from its start (after a restart, a redelivery, or deliveries that
went to another instance) is read back from the stream instead.
"""

from __future__ import annotations

from typing import NamedTuple

from casino.metrics import Metrics, count_recorded
from casino.payouts import payouts_of
from casino.rules import settlement as pay
from casino.rules import wagerbook as W
from casino.rules.baccarat import messages as bm
from casino.rules.blackjack import messages as jm
from casino.service import Clock, Recorder, log, utc_now
from casino.store import subjects
from casino.store.envelope import AnyEvent, Batch, CoupConfigured, Envelope
from casino.store.eventstore import Conflict, EventStore

FOLLOWED = ("coup", "wager")  # the aggregates whose events a settlement needs


class Due(NamedTuple):
    """A coup whose result is recorded."""

    table: str
    shoe: str
    coup: str
    causation: str  # the id of the batch's last event
    envelopes: list[Envelope] | None  # the coup's events, if it was followed from its start


class Followed:
    """A coup's coup and wager events, from its first, as they passed."""

    def __init__(self, coup: str) -> None:
        self.coup = coup
        self.envelopes: list[Envelope] = []
        self.book_opened = False  # whether its wager book was seen from its opening


class SettlementService:
    producer = "settlement"

    def __init__(self, store: EventStore, clock: Clock = utc_now) -> None:
        self.store = store
        self.recorder = Recorder(store, self.producer, clock)
        self.settled = 0
        self.metrics: Metrics | None = None
        # Per table, the coup followed from its first event and its events so far.
        self.following: dict[str, Followed] = {}

    def forget(self) -> None:
        """What is held may have a gap (a delivery went elsewhere or comes again):
        coups in play are read back from the stream when their result comes."""
        self.following.clear()

    def follow(self, subject: str, batch: Batch, first_delivery: bool = True) -> Due | None:
        """Keep a coup or wager batch of the coup in play at its table; the coup
        is due when the batch holds its result.

        The caller passes every delivery in stream order and calls ``forget``
        when one does not follow the last; a coup is followed from its first
        event, and only if this is that event's first delivery (otherwise later
        events of the coup may have passed already)."""
        table, shoe, coup, aggregate = subjects.tokens(subject)
        if aggregate not in FOLLOWED or not batch.events:
            return None
        if aggregate == "coup" and isinstance(batch.events[0].data, CoupConfigured):
            self.following.pop(table, None)  # the table's previous coup is over
            if first_delivery:
                self.following[table] = Followed(coup)
        kept = self.following.get(table)
        if kept is not None and kept.coup == coup:
            kept.envelopes.extend(batch.events)
            kept.book_opened = kept.book_opened or isinstance(batch.events[0].data, W.BookOpened)
        else:
            kept = None
        if aggregate == "coup" and any(isinstance(e.data, bm.CoupResulted | jm.CoupResulted) for e in batch.events):
            if kept is not None:
                del self.following[table]
            # Without its book's opening the record is not whole (a consumer that does not pass wager events).
            whole = kept is not None and kept.book_opened
            return Due(table, shoe, coup, batch.events[-1].id, kept.envelopes if whole and kept else None)
        return None

    async def on_coup_events(self, subject: str, batch: Batch, first_delivery: bool = True) -> None:
        """React to a coup or wager batch: settle the coup if it has its result."""
        due = self.follow(subject, batch, first_delivery)
        if due is not None:
            await self.settle(due)

    async def settle(self, due: Due) -> None:
        table, shoe, coup, causation, envelopes = due
        if envelopes is None:
            envelopes = [env for msg in await self.store.read(subjects.coup_filter(coup)) for env in msg.batch.events]
            if any(isinstance(env.data, pay.CoupSettled) for env in envelopes):
                return
        events = [env.data for env in envelopes]
        payouts = payouts_of(events)
        staked = sum(p.stake for p in payouts)
        settled: list[AnyEvent] = [
            pay.CoupSettled(coup, payouts, staked, sum(p.returned for p in payouts))]
        try:
            ack = await self.recorder.record(subjects.event(table, shoe, coup, "settle"), settled, expected=0,
                                             msg_id=f"{coup}:settle", table=table, shoe=shoe, coup=coup,
                                             causation=causation)
            self.settled += 1
            if self.metrics and not ack.duplicate:
                count_recorded(self.metrics, table, list(settled))
                game = next(e.game for e in events if isinstance(e, CoupConfigured))
                opened = next(env.at for env in envelopes if isinstance(env.data, CoupConfigured))
                self.metrics.coup_duration.labels(game).observe((self.recorder.clock() - opened).total_seconds())
        except Conflict:
            log.info("coup %s was already settled", coup)
