"""The settlement service's handler: when a coup's result is recorded, pay
every wager of its closed book by the ruleset it was dealt under."""

from __future__ import annotations

from casino.metrics import Metrics, count_recorded
from casino.payouts import payouts_of
from casino.rules import settlement as pay
from casino.rules.baccarat import messages as bm
from casino.rules.blackjack import messages as jm
from casino.service import Clock, Recorder, log, utc_now
from casino.store import subjects
from casino.store.envelope import AnyEvent, Batch, CoupConfigured
from casino.store.eventstore import Conflict, EventStore


class SettlementService:
    producer = "settlement"

    def __init__(self, store: EventStore, clock: Clock = utc_now) -> None:
        self.store = store
        self.recorder = Recorder(store, self.producer, clock)
        self.settled = 0
        self.metrics: Metrics | None = None

    async def on_coup_events(self, subject: str, batch: Batch) -> None:
        """React to a batch of coup events: settle the coup if it has its result."""
        if not any(isinstance(e.data, bm.CoupResulted | jm.CoupResulted) for e in batch.events):
            return
        table, shoe, coup, _ = subjects.tokens(subject)
        await self.settle(table, shoe, coup, causation=batch.events[-1].id)

    async def settle(self, table: str, shoe: str, coup: str, causation: str) -> None:
        envelopes = [env for msg in await self.store.read(subjects.coup_filter(coup)) for env in msg.batch.events]
        events = [env.data for env in envelopes]
        if any(isinstance(e, pay.CoupSettled) for e in events):
            return
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
