"""The shoe service's handlers, reaching the world only through its ports: the
event store, the secret store of shuffled orders and the shuffle source
(services.shoe.secrets), the clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.metrics import Metrics, count_recorded
from casino.nats.partitions import within
from casino.protocol.commands import (
    SHUFFLING_MACHINE,
    DrawCard,
    EndRound,
    EndShoeNow,
    Reply,
    ShoeCommand,
    ShoeStatus,
    ShuffleMade,
    StartRound,
    TakeRead,
)
from casino.protocol.service import Clock, TableLocks, log, utc_now
from casino.rules import shoe as dealing_shoe
from casino.rules.cards import Card
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import ShoeRules
from casino.rules.runs import end_of
from casino.store import subjects
from casino.store.envelope import Batch
from casino.store.eventstore import Appended, EventStore, Stored, latest_at_table
from services.repository import Held, Repository
from services.shoe import readers
from services.shoe.orders import OrderSource, orders_of
from services.shoe.secrets import Order, SecretStore, ShuffleSource, secure_shuffle

READ = "read:"  # how the dealer-policy's TakeRead ids begin: the card-reading shoe's report id follows
# What a card-reading shoe's report is taken as (services.shoe.readers), beside the shuffles it may cause.
TAKEN = (dealing_shoe.CardDrawn, dealing_shoe.CardBurned, dealing_shoe.CardMisdrawn, dealing_shoe.CardRefused,
         dealing_shoe.CutCardReached, dealing_shoe.CutCardMisplaced)


class TableShoe(Held, kw_only=True):
    """A table's shoe, the secret order of the shoe in play, and what of the stream it is folded from."""

    rules: ShoeRules
    document: str = ""  # the ruleset's document: the clauses the shoe cites (casino.rules.shoe.cites)
    state: dealing_shoe.ShoeState = msgspec.field(default_factory=dealing_shoe.ShoeState)
    order: Order | None = None
    shuffles: int = 0
    last_round: str = ""
    # A card-reading shoe's reports taken in the shoe in play, and in the shoe before it, by the report's id:
    # what each was recorded as.
    reads: dict[str, list[dealing_shoe.AnyShoeEvent]] = msgspec.field(default_factory=dict)
    reads_before: dict[str, list[dealing_shoe.AnyShoeEvent]] = msgspec.field(default_factory=dict)
    orders: OrderSource  # where the table's shoe orders come from (picked once, from the tables file)

    def anew(self) -> TableShoe:
        """The table's shoe before any event is folded."""
        return TableShoe(rules=self.rules, document=self.document, orders=self.orders)


def _fold(t: TableShoe, event: dealing_shoe.AnyShoeEvent, causation: str) -> None:
    t.state = dealing_shoe.evolve(t.state, event)
    if isinstance(event, dealing_shoe.ShoeShuffled):
        t.shuffles += 1
        t.reads_before, t.reads = t.reads, {}
    if causation.startswith(READ) and isinstance(event, TAKEN):  # what a card-reading shoe's report was taken as
        t.reads.setdefault(causation[len(READ):], []).append(event)
    elif isinstance(event, dealing_shoe.RoundEnded):
        t.last_round = event.coup_id


class ShoeService:
    producer = "shoe"

    def __init__(self, store: EventStore, secrets_: SecretStore, shuffle: ShuffleSource = secure_shuffle,
                 clock: Clock = utc_now, configs: Mapping[str, TableConfig] | None = None) -> None:
        """``configs``: the tables file, where each table's orders come from
        (None: the service's own shuffle at every table)."""
        self.store, self.secrets, self.shuffle, self.configs = store, secrets_, shuffle, configs
        # A table's shoe lives as long as the table: a retry is told by the shoe's state, not by its causes.
        self.repository: Repository[TableShoe] = Repository(store, self.producer, _fold, clock=clock, by_cause=False)
        self.tables: dict[str, TableShoe] = {}
        self.folding = TableLocks()
        self.metrics: Metrics | None = None

    # ---- state ----------------------------------------------------------

    def let_go(self, parts: set[int]) -> None:
        """Hold the tables of partitions ``parts`` no more (services.ownership): another
        instance owns them, or this one takes them and folds each afresh at its next command."""
        for name in within(self.tables, parts):
            del self.tables[name]

    async def rebuild(self, table: str) -> None:
        """Fold one table's shoe from the stream, the table's lock held."""
        async with self.folding(table):
            t = self.tables[table] = self.tables[table].anew()
            history, t.shuffles = await self._since_last_round_ended(table)
            for msg in history:
                await self._observe_into(t, msg.subject, msg.seq, msg.batch)

    async def _since_last_round_ended(self, table: str) -> tuple[list[Stored], int]:
        """The table's shoe events from the shoe in play back to the shoe where
        the last round ended (most often the shoe in play alone), and how many
        shuffles came before them. A shuffle starts the shoe afresh but for
        the round being dealt (003 7.9: it goes on from the new shoe), and a
        round's end leaves none: nothing before it decides anything."""
        latest = await latest_at_table(self.store, table, "shoe")
        if latest is None:
            return [], 0
        found: int | None = 0
        if not latest.unreadable:  # else a stray message that is no batch of ours
            found = subjects.shoe_number(table, subjects.tokens(latest.subject)[1])
            if found is None:  # not a shoe this service named: the whole history
                return await self.store.read(subjects.aggregate_filter("shoe", table)), 0
        number = await self._in_play(table, found or 0)
        history: list[Stored] = []
        while number >= 1:
            shoe = await self.store.read(subjects.event(table, subjects.shoe_id(table, number), "*", "shoe"))
            history[:0] = shoe
            if any(isinstance(env.data, dealing_shoe.RoundEnded) for msg in shoe for env in msg.batch.events):
                break
            number -= 1
        return history, max(number - 1, 0)

    async def _in_play(self, table: str, number: int) -> int:
        """The shoe in play, from shoe ``number`` where the table's latest shoe
        message was found. A shoe begins with its shuffle: a shoe whose live
        messages do not is not in play (a stray message written under a shoe
        already sealed and removed, until the archiver files it away), and the
        shoe is then the one the table's latest coup was dealt from, or the
        first after it that begins with its shuffle."""
        if number and await self._shuffled(table, number):
            return number
        log.warning("table %s: shoe %s does not begin with its shuffle in the live stream (a stray message under a "
                    "sealed shoe): the shoe in play is found from the table's latest coup", table,
                    subjects.shoe_id(table, number))
        coup = await self.store.last(subjects.aggregate_filter("coup", table))
        found = None if coup is None else subjects.shoe_number(table, subjects.tokens(coup.subject)[1])
        if found is None:
            return number
        while await self.store.first(subjects.event(table, subjects.shoe_id(table, found + 1), "*", "shoe")):
            found += 1
        return found

    async def _shuffled(self, table: str, number: int) -> bool:
        first = await self.store.first(subjects.event(table, subjects.shoe_id(table, number), "*", "shoe"))
        return first is None or any(isinstance(env.data, dealing_shoe.ShoeShuffled) for env in first.batch.events)

    async def reload(self, cmd: ShoeCommand) -> None:
        """Catch up with what other instances appended since our last event."""
        await self._catch_up(cmd.table)

    async def _catch_up(self, table: str, t: TableShoe | None = None) -> None:
        """Fold what was appended since into ``t``, a command's table (held by the
        command even where the table was let go meanwhile: the command goes on
        on it), else into the table held."""
        t = self.tables.get(table) if t is None else t
        if t is None:
            return
        held = t

        async def into(subject: str, seq: int, batch: Batch) -> None:
            async with self.folding(table):
                await self._observe_into(held, subject, seq, batch)

        await self.repository.catch_up(subjects.aggregate_filter("shoe", table), t.last_seq, into)

    async def table(self, table: str, ruleset: str) -> TableShoe:
        """The table's shoe, folded from the stream the first time it is asked for."""
        if table not in self.tables:
            if self.configs is not None and table not in self.configs:
                raise RuleViolation("tables", f"table {table} is not in the shoe service's tables file")
            rules = rulesets.load(ruleset)
            orders = orders_of(None if self.configs is None else self.configs[table], self.shuffle)
            if self.metrics is not None:
                orders.watched(self.metrics, table)
            self.tables[table] = TableShoe(rules=rules.shoe, document=rules.document, orders=orders)
            await self.rebuild(table)
        return self.tables[table]

    async def _commit(self, table: str, t: TableShoe, events: list[dealing_shoe.AnyShoeEvent], coup: str, msg_id: str,
                      causation: str) -> Appended:
        shoe = t.state.shoe_id or next((e.shoe_id for e in events), "")
        subject = subjects.event(table, shoe, coup, "shoe")
        guard, expected = _guard(table, t, shoe)
        ack = await self.repository.commit(t, subject, events, msg_id=msg_id, table=table, shoe=shoe, coup=coup,
                                           causation=causation, expected=expected, guard=guard)
        if ack.duplicate:  # written before: the record stands, read back, not this decision
            await self._catch_up(table, t)
        else:
            count_recorded(self.metrics, table, list(events))
        return ack

    async def observe(self, subject: str, seq: int, batch: Batch) -> None:
        """Follow the stream: apply what another instance appended."""
        table = subjects.tokens(subject)[0]
        async with self.folding(table):
            if (t := self.tables.get(table)) is not None:
                await self._observe_into(t, subject, seq, batch)

    async def _observe_into(self, t: TableShoe, subject: str, seq: int, batch: Batch) -> None:
        table, shoe, _, _ = subjects.tokens(subject)
        if _before(table, shoe, t.state.shoe_id) or not self.repository.take(t, seq, batch):
            return
        if any(isinstance(env.data, dealing_shoe.ShoeShuffled) for env in batch.events) and t.state.shoe_id:
            t.order = await self.secrets.get(table, t.state.shoe_id)

    async def _reshuffle(self, table: str, t: TableShoe, coup: str, causation: str, replaced: str = "") -> None:
        """End the shoe in play (revealing it) and fill a new one with the
        table's next order (services.shoe.orders) and burn; at a card-reading
        shoe, with the order its shuffling machine reported (none, shuffled by
        hand), its burn cards read; an order kept for it before and
        ``replaced`` by that machine's report recorded so as the new shoe is
        filled."""
        if t.state.active and (t.order is not None or t.state.source == "hand"):
            reveal = dealing_shoe.EndShoe(*t.order) if t.order is not None else dealing_shoe.EndShoe((), "")
            ended = dealing_shoe.decide(t.rules, t.state, reveal, t.document)
            await self._commit(table, t, ended, coup, f"{t.state.shoe_id}:end", causation)
        new = subjects.shoe_id(table, t.shuffles + 1)
        order = await t.orders.order(self.secrets, table, new, t.rules.decks)
        events = dealing_shoe.fill(t.rules, t.state, new, *order, t.document, t.orders.recorded)
        if replaced:
            events = [dealing_shoe.OrderReplaced(new, replaced), *events]
        await self._commit(table, t, events, coup, f"{new}:shuffle", causation)
        # Only now: a shuffle that lost its race to another instance's step in
        # the shoe in play leaves the order of the shoe in play to deal from.
        t.order = order if order[0] else None

    # ---- commands -------------------------------------------------------

    async def handle(self, cmd: ShoeCommand | ShuffleMade) -> Reply:
        match cmd:
            case StartRound():
                t = await self.table(cmd.table, cmd.ruleset)
                if t.state.round == cmd.coup and not t.state.active:
                    # Started as the last round ended, and the shoe ended since (a ruling): the next filled first.
                    await self._reshuffle(cmd.table, t, subjects.NO_COUP, cmd.id)
                if t.state.round == cmd.coup or t.last_round == cmd.coup:  # asked again
                    return Reply(True, coup=cmd.coup, shoe=t.state.shoe_id or "")
                if t.state.round is not None:
                    raise RuleViolation("shoe", f"round {t.state.round} has not ended")
                if (wrong := _not_next(cmd.coup, t.last_round)) is not None:
                    # A stale dealer (another instance moved the table on) never deals a coup twice, and no
                    # round is started for a coup that cannot be the table's next (it would hold the shoe).
                    raise RuleViolation("shoe", wrong)
                if not t.state.ready_for_round and (t.state.reshuffle or not t.state.active):
                    await self._reshuffle(cmd.table, t, subjects.NO_COUP, cmd.id)
                events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.StartRound(cmd.coup), t.document)
                await self._commit(cmd.table, t, events, cmd.coup, f"{cmd.coup}:start", cmd.id)
                return Reply(True, coup=cmd.coup, shoe=t.state.shoe_id or "")
            case DrawCard():
                return await self._draw(cmd)
            case TakeRead():
                return await readers.take(self, cmd)
            case ShuffleMade():
                return await readers.shuffle_made(self, cmd)
            case EndShoeNow():
                return await readers.end_now(self, cmd)
            case ShoeStatus():
                return await readers.status(self, cmd)
            case EndRound():
                t = await self.table(cmd.table, cmd.ruleset)
                ended_in = t.state.shoe_id or ""
                # Else asked again, perhaps once the next round has started (a held coup's: once it has ended).
                if t.last_round != cmd.coup and not (cmd.held and t.last_round > cmd.coup):
                    ending = dealing_shoe.EndHeld(cmd.coup) if cmd.held else dealing_shoe.EndRound(cmd.coup, cmd.pickup)
                    events = dealing_shoe.decide(t.rules, t.state, ending, t.document)
                    await self._commit(cmd.table, t, events + self._next_round(t, events, cmd), cmd.coup,
                                       f"{cmd.coup}:end", cmd.id)
                    if t.state.reshuffle and t.state.round is None:
                        # 002 (9), 003 7.8: the round completed, the cards are reshuffled now, not when the
                        # next coup opens (a next round asked first reshuffles as it starts, as before).
                        try:
                            await self._reshuffle(cmd.table, t, subjects.NO_COUP, cmd.id)
                        except RuleViolation as exc:  # the machine's order not reported yet: the next round's
                            if exc.clause != SHUFFLING_MACHINE:  # start reshuffles once it is
                                raise
                if cmd.next is not None and t.state.round == cmd.next and t.state.active:
                    return Reply(True, coup=cmd.next, shoe=t.state.shoe_id or "")
                return Reply(True, coup=cmd.coup, shoe=ended_in)
        raise RuleViolation("protocol", f"unknown shoe command {type(cmd).__name__}")

    @staticmethod
    def _next_round(t: TableShoe, ending: list[dealing_shoe.AnyShoeEvent], cmd: EndRound,
                    ) -> list[dealing_shoe.AnyShoeEvent]:
        """The next coup's round started as the last one ends (``cmd.next``),
        where the shoe can deal it at once; nothing where it cannot (a
        reshuffle or a burn due first, decided as the next coup opens)."""
        if cmd.next is None or _not_next(cmd.next, cmd.coup) is not None:
            return []
        after = dealing_shoe.copy(t.state)
        for event in ending:
            after = dealing_shoe.evolve(after, event)
        try:
            return dealing_shoe.decide(t.rules, after, dealing_shoe.StartRound(cmd.next), t.document)
        except RuleViolation:
            return []

    async def _draw(self, cmd: DrawCard) -> Reply:
        t = await self.table(cmd.table, cmd.ruleset)
        if t.state.round != cmd.coup:
            raise RuleViolation(dealing_shoe.ROUND, f"coup {cmd.coup} is not the round being dealt")
        if cmd.count < 1:
            raise RuleViolation("protocol", f"a draw is of one card or more, not {cmd.count}")
        while len(t.state.layout) < _last(cmd, t.state.layout):  # not drawn yet (asked again: the same cards)
            first = len(t.state.layout)
            if cmd.index > first or t.order is None:
                raise RuleViolation("shoe", f"card {cmd.index} of coup {cmd.coup} is not the next card")
            state, events = dealing_shoe.copy(t.state), []  # the shoe's own state moves on once recorded
            while len(state.layout) < _last(cmd, state.layout):
                if state.position >= len(t.order[0]):
                    raise RuleViolation("shoe", f"shoe {state.shoe_id} has no card left for coup {cmd.coup}: the "
                                                "ruleset's penetration leaves too few cards behind the cut card")
                step = dealing_shoe.decide(t.rules, state, dealing_shoe.Draw(cmd.coup, t.order[0][state.position]), t.document)
                if not any(isinstance(e, dealing_shoe.CardDrawn) for e in step):
                    break
                for e in step:
                    state = dealing_shoe.evolve(state, e)
                events += step
            if events:  # the cards drawn, as one batch
                await self._commit(cmd.table, t, events, cmd.coup, f"{cmd.coup}:draw:{first}", cmd.id)
            else:  # 003 7.9: the cut card came out first: reshuffle now
                await self._commit(cmd.table, t, step, cmd.coup, f"{cmd.coup}:cut:{t.state.shoe_id}", cmd.id)
                await self._reshuffle(cmd.table, t, cmd.coup, cmd.id)
        layout, end = t.state.layout, _last(cmd, t.state.layout)
        start = t.state.position - len(layout)  # the round's cards lie together in the shoe
        return Reply(True, coup=cmd.coup, shoe=t.state.shoe_id or "", cards=tuple(layout[cmd.index:end]),
                     positions=tuple(range(start + cmd.index, start + end)))


def _before(table: str, shoe: str, in_play: str | None) -> bool:
    """Whether ``shoe`` comes before the shoe in play: nothing is written to
    a shoe once the next is filled, so a message under it is a stray."""
    number, current = subjects.shoe_number(table, shoe), subjects.shoe_number(table, in_play or "")
    return number is not None and current is not None and number < current


def _guard(table: str, t: TableShoe, shoe: str) -> tuple[str, int]:
    """The subjects an append to ``shoe`` is guarded on, and the last sequence
    this instance knows on them: another instance's write since then is a
    conflict.

    The table's shoe events are one aggregate, but the guard is one shoe's
    subjects: the server finds the last message on a wildcard filter by
    matching every subject under it, so a guard over every shoe of the table
    costs each append in proportion to the table's history (measured by
    ``python -m bench.history``). One shoe is enough: while a shoe is in play
    everything is written to it (no shuffle before it is ended, on its own
    subjects), so another instance moves the table on only by writing to it;
    once it has ended, the next append starts the next shoe and expects
    nothing on it yet. A table's first append expects nothing on the table."""
    if t.state.active:  # the shoe in play, the one this append goes to; our last message is on it
        return subjects.event(table, shoe, "*", "shoe"), t.last_seq
    if t.last_seq:  # the shoe before has ended: nothing more goes on it
        return subjects.event(table, shoe, "*", "shoe"), 0
    return subjects.aggregate_filter("shoe", table), 0


def _not_next(coup: str, last_round: str) -> str | None:
    """Why ``coup`` is not the table's next coup after its last round (the
    first coup where there has been none), or None where it is."""
    number, last = subjects.coup_number(coup), subjects.coup_number(last_round) if last_round else 0
    if number is None or last is None or number == last + 1:
        return None
    if number <= last:
        return f"coup {coup} does not come after {last_round}, the round the shoe dealt last at this table"
    return (f"coup {coup} is not the table's next coup: the shoe dealt its last round for "
            f"{last_round or 'no coup yet'}, so the next is number {last + 1}")


def _last(cmd: DrawCard, layout: Sequence[Card]) -> int:
    """One past the round's last card that ``cmd`` draws: ``count`` of them from
    ``index``, then each further card its run calls for (each known once the
    cards before it are drawn)."""
    return end_of(cmd.run, layout, cmd.index, cmd.count)
