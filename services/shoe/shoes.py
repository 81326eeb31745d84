"""The shoe service's tables: each table's shoe and the secret order of the
shoe in play (services.shoe.held), folded from the stream and from the
steps the coups' records carry (services.shoe.carrying), and what is
recorded of it, reaching
the world only through the service's ports: the event store, the secret
store of shuffled orders, each table's order source (services.shoe.orders),
the clock. The handlers (services.shoe.service, services.shoe.readers) work
through it."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from casino.config import rulesets
from casino.metrics import Metrics, count_recorded
from casino.nats.partitions import within
from casino.protocol.commands import RECORD_FIRST, SHUFFLING_MACHINE, ShoeCommand
from casino.protocol.service import Clock, TableLocks, log, utc_now
from casino.rules import shoe as dealing_shoe
from casino.rules.errors import RuleViolation
from casino.rules.runs import Run, end_of
from casino.store import subjects
from casino.store.envelope import Batch, step_digest
from casino.store.eventstore import Appended, EventStore, Stored, latest_at_table
from services.repository import Repository
from services.shoe.carrying import carries_steps, carry_into, given_of
from services.shoe.held import TableShoe, fold
from services.shoe.orders import OrderSource, OwnShuffle
from services.shoe.secrets import SecretStore, ShuffleSource, secure_shuffle


class Shoes:
    """Each table's shoe as the shoe service holds it, folded from the stream
    and recorded through the repository, each filled from the table's order
    source (services.shoe.orders) as it is shuffled."""

    producer = "shoe"

    def __init__(self, store: EventStore, secrets_: SecretStore, shuffle: ShuffleSource = secure_shuffle,
                 clock: Clock = utc_now, orders: Mapping[str, Callable[[], OrderSource]] | None = None) -> None:
        """``orders``: each table of the tables file, and where its orders come
        from, picked as the service is wired (services.shoe.app; None: the
        service's own shuffle at every table)."""
        self.store, self.secrets, self.shuffle, self.orders = store, secrets_, shuffle, orders
        # A table's shoe lives as long as the table: a retry is told by the shoe's state, not by its causes.
        self.repository: Repository[TableShoe] = Repository(store, self.producer, fold, clock=clock, by_cause=False)
        self.tables: dict[str, TableShoe] = {}
        self.folding = TableLocks()
        self.metrics: Metrics | None = None

    # ---- state ----------------------------------------------------------

    def let_go(self, parts: set[int]) -> None:
        """Hold the tables of partitions ``parts`` no more (services.ownership): another
        instance owns them, or this one takes them and folds each afresh at its next command."""
        for name in within(self.tables, parts):
            del self.tables[name]

    async def rebuild(self, table: str) -> TableShoe:
        """Fold one table's shoe from the stream, the table's lock held."""
        async with self.folding(table):
            t = self.tables[table] = self.tables[table].anew()
            history, t.shuffles = await self._since_last_round_ended(table)
            for msg in history:
                if subjects.tokens(msg.subject)[3] == "coup":
                    carry_into(t, msg.seq, msg.batch)
                else:
                    await self._observe_into(t, msg.subject, msg.seq, msg.batch)
        return t

    async def confirmed(self, table: str, t: TableShoe, after: str, digest: str = "",
                        staged: bool = False) -> TableShoe:
        """The table's shoe once ``after`` (the shoe's last step the coup's
        record carries, as the dealer-policy read it) is known: the step given
        and pending confirmed by it, or, where it is no step this instance
        knows, the shoe folded again from the record (another instance gave
        it, or it is staged and not yet recorded: folded again then too).

        A step is named by what asked for it, so two instances asked alike
        (a dealer-policy's stale ask, then its ask again) may give steps of
        one name, each decided on its own shoe. The pending step is confirmed
        by its name and its ``digest`` (``envelope.step_digest``, as the
        record holds it) together: a step given here that differs from the
        one recorded was decided on a shoe behind the record, and the shoe is
        folded again (as ``carry_into`` finds it where the record comes first).

        ``staged``: the coup's steps before the command are staged at the
        dealer-policy, not yet recorded (``DrawCard``'s and ``EndRound``'s
        ``unrecorded``), so ``after`` may name a step staged with them. Given
        here, it is pending, and the command's step follows it in the same
        append. Given by another instance, this shoe cannot know the cards it
        took: the command is refused (``RECORD_FIRST``), and asked again once
        the dealer-policy has recorded it."""
        if after and after == t.pending and digest and digest != step_digest(given_of(t, after)):
            log.warning("table %s: step %s was recorded as another instance decided it: the shoe is folded again "
                        "from the record", table, after)
            t.stale = True
        if t.stale:
            t = await self.rebuild(table)
        if not after or after in t.given or after in t.given_before:
            if after and after == t.pending:
                t.pending = ""
            return t
        t = await self.rebuild(table)
        if staged and after not in t.given and after not in t.given_before:
            raise RuleViolation(RECORD_FIRST, f"step {after} is in no record of table {table}'s shoe: the coup's "
                                              "steps before this one are recorded first")
        return t

    async def settled(self, table: str, t: TableShoe) -> TableShoe:
        """The table's shoe with no step given and unconfirmed: a step that
        goes on without it (the coup's round ended, another coup's card) finds
        it in the coup's record, or else it was never recorded and never will
        be (the coup has moved on under its guard), and the shoe is folded
        again from the record without it."""
        if not t.pending and not t.stale:
            return t
        if not t.stale:  # a stale shoe has said why already
            log.warning("table %s: step %s was given to a coup's append that is not confirmed: the shoe is folded "
                        "again from the record", table, t.pending)
        return await self.rebuild(table)

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
            # The cards the shoe gave its coups' appends to carry, in stream order with its own.
            coups = await self.store.read(subjects.event(table, subjects.shoe_id(table, number), "*", "coup"))
            held = sorted(shoe + [m for m in coups if carries_steps(m)], key=lambda m: m.seq)
            history[:0] = held
            if any(isinstance(env.data, dealing_shoe.RoundEnded) for msg in held for env in msg.batch.events):
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
            if self.orders is not None and table not in self.orders:
                raise RuleViolation("tables", f"table {table} is not in the shoe service's tables file")
            rules = rulesets.load(ruleset)
            orders = OwnShuffle(self.shuffle) if self.orders is None else self.orders[table]()
            if self.metrics is not None:
                orders.watched(self.metrics, table)
            self.tables[table] = TableShoe(rules=rules.shoe, document=rules.document, orders=orders)
            await self.rebuild(table)
        return self.tables[table]

    async def commit(self, table: str, t: TableShoe, events: list[dealing_shoe.AnyShoeEvent], coup: str, msg_id: str,
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

    def ending(self, t: TableShoe, state: dealing_shoe.ShoeState, ending: dealing_shoe.EndRound | dealing_shoe.EndHeld,
               coup: str, next_coup: str | None) -> list[dealing_shoe.AnyShoeEvent]:
        """The round's end decided on ``state``, and the next coup's round
        started with it (``next_coup``) where the shoe can deal it at once;
        not where it cannot (a reshuffle or a burn due first, decided as the
        next coup opens)."""
        events = dealing_shoe.decide(t.rules, state, ending, t.document)
        if next_coup is None or not_next(next_coup, coup) is not None:
            return events
        after = dealing_shoe.copy(state)
        for event in events:
            after = dealing_shoe.evolve(after, event)
        try:
            return events + dealing_shoe.decide(t.rules, after, dealing_shoe.StartRound(next_coup), t.document)
        except RuleViolation:
            return events

    def run_ended(self, t: TableShoe, state: dealing_shoe.ShoeState, coup: str, run: Run | None, first: int,
                  count: int, next_coup: str | None,
                  drawn: list[dealing_shoe.AnyShoeEvent] | None = None) -> list[dealing_shoe.AnyShoeEvent]:
        """The round's end (``ending``) where ``state`` (after ``drawn``, not
        yet applied to it) holds every card of a run with its pickup, ``count``
        cards from the round's ``first`` and each further card its rule calls
        for: the coup's last (casino.rules.runs). None else, and none where the
        run's pickup is not the layout's cards (the round is then ended as the
        dealer-policy asks, ``EndRound``)."""
        if run is None or run.pickup is None:
            return []
        if drawn:
            state = dealing_shoe.copy(state)
            for event in drawn:
                state = dealing_shoe.evolve(state, event)
        if state.round != coup:
            return []
        layout = state.layout
        if len(layout) < end_of(run, layout, first, count):
            return []
        try:
            return self.ending(t, state, dealing_shoe.EndRound(coup, run.pickup.around(layout[first:])), coup,
                               next_coup)
        except RuleViolation:
            return []

    async def reshuffled_after(self, table: str, t: TableShoe, causation: str) -> None:
        """002 (9), 003 7.8: the round completed with the cut card out, the cards
        are reshuffled now, not when the next coup opens (a next round asked
        first reshuffles as it starts, as before)."""
        if t.state.reshuffle and t.state.round is None:
            try:
                await self.reshuffle(table, t, subjects.NO_COUP, causation)
            except RuleViolation as exc:  # the machine's order not reported yet: the next round's
                if exc.clause != SHUFFLING_MACHINE:  # start reshuffles once it is
                    raise

    async def reshuffle(self, table: str, t: TableShoe, coup: str, causation: str, replaced: str = "") -> None:
        """End the shoe in play (revealing it) and fill a new one with the
        table's next order (services.shoe.orders) and burn; at a card-reading
        shoe, with the order its shuffling machine reported (none, shuffled by
        hand), its burn cards read; an order kept for it before and
        ``replaced`` by that machine's report recorded so as the new shoe is
        filled."""
        if t.state.active and (t.order is not None or t.state.hand_shuffled):
            reveal = dealing_shoe.EndShoe(*t.order) if t.order is not None else dealing_shoe.EndShoe((), "")
            ended = dealing_shoe.decide(t.rules, t.state, reveal, t.document)
            await self.commit(table, t, ended, coup, f"{t.state.shoe_id}:end", causation)
        new = subjects.shoe_id(table, t.shuffles + 1)
        order = await t.orders.order(self.secrets, table, new, t.rules.decks)
        events = dealing_shoe.fill(t.rules, t.state, new, *order, t.document, t.orders.recorded)
        if replaced:
            events = [dealing_shoe.OrderReplaced(new, replaced), *events]
        await self.commit(table, t, events, coup, f"{new}:shuffle", causation)
        # Only now: a shuffle that lost its race to another instance's step in
        # the shoe in play leaves the order of the shoe in play to deal from.
        t.order = order if order[0] else None


def not_next(coup: str, last_round: str) -> str | None:
    """Why ``coup`` is not the table's next coup after its last round (the
    first coup where there has been none), or None where it is."""
    number, last = subjects.coup_number(coup), subjects.coup_number(last_round) if last_round else 0
    if number is None or last is None or number == last + 1:
        return None
    if number <= last:
        return f"coup {coup} does not come after {last_round}, the round the shoe dealt last at this table"
    return (f"coup {coup} is not the table's next coup: the shoe dealt its last round for "
            f"{last_round or 'no coup yet'}, so the next is number {last + 1}")


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
