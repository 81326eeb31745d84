"""The settlement service's handler: when a coup's result is recorded, pay
every wager of its closed book by the ruleset it was dealt under.

It follows each coup's coup and wager events as they pass, from the coup's
first event (``casino.store.following``), so that the result finds the whole
coup in hand; a coup it did not follow from its start (after a restart, a
redelivery, or deliveries that went to another instance) is read back from
the stream instead.
"""

from __future__ import annotations

from typing import NamedTuple

from casino import games
from casino.games import payouts_of
from casino.metrics import Metrics, count_recorded
from casino.protocol.service import Clock, Recorder, log, utc_now
from casino.rules import settlement
from casino.rules.wagerbook import BookOpened
from casino.store import subjects
from casino.store.envelope import AnyEvent, CoupConfigured
from casino.store.eventstore import Conflict, EventStore, Stored
from casino.store.following import Delivery, Following

FOLLOWED = ("coup", "wager")  # the aggregates whose events a settlement needs


class Due(NamedTuple):
    """A coup whose result is recorded."""

    table: str
    shoe: str
    coup: str
    causation: str  # the id of the result batch's last event
    kept: list[Stored] | None  # the coup's messages, if it was followed from its start


class SettlementService:
    producer = "settlement"

    def __init__(self, store: EventStore, clock: Clock = utc_now) -> None:
        self.store = store
        self.recorder = Recorder(store, self.producer, clock)
        self.settled = 0
        self.metrics: Metrics | None = None
        self.following = Following(first=(CoupConfigured,))

    def follow(self, stored: Stored, at: Delivery | None = None) -> Due | None:
        """Keep a coup or wager message; the coup is due when it holds its result."""
        table, shoe, coup, aggregate = subjects.tokens(stored.subject)
        if aggregate not in FOLLOWED:
            return None
        self.following.take(stored, at)
        if aggregate != "coup" or not any(games.ends_coup(e.data) for e in stored.batch.events):
            return None
        kept = self.following.pop(coup)
        # Without its book's opening the record is not whole (a consumer that passes no wager events).
        if kept is not None and not any(isinstance(e.data, BookOpened) for m in kept for e in m.batch.events):
            kept = None
        return Due(table, shoe, coup, stored.batch.events[-1].id, kept)

    async def on_coup_events(self, stored: Stored, at: Delivery | None = None) -> None:
        """React to a coup or wager message: settle the coup if it has its result."""
        due = self.follow(stored, at)
        if due is not None:
            await self.settle(due)

    async def settle(self, due: Due) -> None:
        table, shoe, coup, causation, kept = due
        if kept is None:
            if self.metrics:
                self.metrics.read_back.labels(self.metrics.service).inc()
            kept = await self.store.read(subjects.coup_filter(coup, table, shoe))
            if any(isinstance(env.data, settlement.CoupSettled) for m in kept for env in m.batch.events):
                return
        envelopes = [env for m in kept for env in m.batch.events]
        events = [env.data for env in envelopes]
        # Each coup is settled once by its own subject's guard (expected 0), not by a ledger in memory.
        settled: list[AnyEvent] = list(settlement.decide_settlement(
            settlement.Ledger(), settlement.SettleCoup(coup, payouts_of(events))))
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
