"""A service taking up a table reads the table's latest coup or shoe, not its
whole history: the dealer-policy the latest coup, the shoe service the shoe
in play back to the last round's end. It then holds what an instance that
dealt the whole history holds, and the tables deal on. (With a history of
months a start that read everything would take minutes.)"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
import pytest
from services.dealer_policy.service import DealerPolicyService
from services.dealer_policy.table import TableCoup, carry
from services.shoe.held import TableShoe
from services.shoe.secrets import JetStreamSecrets, MemorySecrets, secure_shuffle
from services.shoe.service import ShoeService

from casino.audit.verify import verify_coup
from casino.cli.run import APPROVALS
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.nats.provision import provision
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules import shoe as dealing_shoe
from casino.store import subjects
from casino.store.envelope import Batch, Envelope, type_of, version_of
from casino.store.eventstore import EventStore, InMemoryEventStore, latest_at_table
from casino.store.jetstream import JetStreamEventStore
from tests.e2e.casino import Casino
from tests.store.test_eventstore_contract import DEALT, batch
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
TABLE = "T-1"


def small_shoe(tmp_path: Path, name: str) -> str:
    """A built-in ruleset dealt from one deck (two for blackjack, whose rounds
    take more cards than one deck leaves behind the cut card): a new shoe every
    few coups."""
    return ruleset_variant(tmp_path, name, decks=2 if name.startswith("blackjack") else 1)


def filters_of(store: EventStore, *methods: str) -> list[str]:
    """The filters ``store`` is asked with from now on, by ``methods`` (``read``, ``last``)."""
    filters: list[str] = []
    for method in methods:
        asked = getattr(store, method)

        async def recorded(filter_: str, *args: object, asked: Any = asked, **kwargs: object) -> object:
            filters.append(filter_)
            return await asked(filter_, *args, **kwargs)

        setattr(store, method, recorded)
    return filters


def reads_of(store: EventStore) -> list[str]:
    """The filters ``store`` is read with from now on."""
    return filters_of(store, "read")


def catch_ups_of(store: EventStore) -> list[str]:
    """The filters ``store`` is read with from now on, whole or as stored (as a catch-up reads)."""
    return filters_of(store, "read", "scan_raw")


def as_carried(reply: commands.Reply, step: str, coup: str) -> Batch:
    """What a dealer-policy's append carries of the shoe's step ``step`` (``Reply.carried``)."""
    return Batch(tuple(Envelope(f"{step}:{i}", type_of(e), version_of(type_of(e)), TABLE, e.shoe_id, coup, step,
                                coup, "dealer-policy", datetime.now(UTC), e) for i, e in enumerate(reply.carried)))


async def record_carried(store: EventStore, reply: commands.Reply, step: str, coup: str, shoe: str, expected: int) -> int:
    """Record what the shoe gave the coup's append to carry, as the dealer-policy does: the coup's last sequence."""
    if not reply.carried:
        return expected
    subject = subjects.event(TABLE, shoe, coup, "coup")
    return (await store.append(subject, as_carried(reply, step, coup), expected=expected, msg_id=step)).seq


def deciding(t: TableCoup) -> tuple[object, ...]:
    """What a table's next decisions depend on."""
    return (t.number, t.coup, t.shoe, t.state, t.last_seq, t.seen, t.applied, carry(t))


def shoe_held(t: TableShoe) -> tuple[object, ...]:
    return t.state, t.order, t.last_seq, t.shuffles, t.last_round


@pytest.mark.parametrize("ruleset", ["baccarat-000-methods", "baccarat-001-styles", "blackjack-003-no-hole-card"])
async def test_a_start_reads_the_latest_coup_and_shoe_and_holds_what_the_whole_history_gives(
        nats_url: str, tmp_path: Path, ruleset: str) -> None:
    tables = {TABLE: TableConfig(small_shoe(tmp_path, ruleset), approvals=APPROVALS if "baccarat" in ruleset else ())}
    async with Casino(nats_url, tables) as casino:
        await Simulator(casino.nc, tables, seed=11, patience=40).run(24)
        running = casino.service("dealer-policy").service.tables[TABLE]
        await casino.recorded(running.coup, dealing_shoe.RoundEnded)
        shoes = {subjects.tokens(m.subject)[1] for m in await casino.store.read(subjects.table_filter(TABLE))}
        assert len(shoes) >= 3, shoes  # the history spans shoes, or the test proves nothing

        dealer = DealerPolicyService(JetStreamEventStore(casino.nc), Peer(casino.nc), tables)
        dealer_reads = reads_of(dealer.store)
        await dealer.rebuild()
        # The latest coup's record under its shoe and the one before (what was filed before its opening
        # is under the shoe each card came from), and nothing of the history before it.
        before = subjects.shoe_id(TABLE, (subjects.shoe_number(TABLE, running.shoe) or 1) - 1)
        assert dealer_reads == [subjects.event(TABLE, s, running.coup, "coup") for s in (before, running.shoe)]
        assert deciding(dealer.tables[TABLE]) == deciding(running)

        shoe = ShoeService(JetStreamEventStore(casino.nc), JetStreamSecrets(casino.nc.jetstream()))
        shoe_reads = reads_of(shoe.store)
        again = await shoe.handle(commands.StartRound(id="again", table=TABLE, coup=running.coup, ruleset=tables[TABLE].ruleset))
        assert again.ok
        assert shoe_reads and all(f.startswith(f"{subjects.EVENTS}.{TABLE}.{TABLE}-shoe-") for f in shoe_reads)
        read = {subjects.tokens(f)[1] for f in shoe_reads}
        assert len(read) <= 2 and len(read) < len(shoes - {subjects.NO_COUP}), (read, shoes)  # not the history
        assert shoe_held(shoe.tables[TABLE]) == shoe_held(casino.service("shoe").service.tables[TABLE])

        # Both restarted from the latest shoe, the table deals on across more shoes.
        for kind in ("dealer-policy", "shoe"):
            await casino.stop(kind)
            await casino.start(kind)
        await Simulator(casino.nc, tables, seed=12, patience=40).run(12)
        coups = sorted({subjects.tokens(m.subject)[2] for m in await casino.store.read(subjects.aggregate_filter("coup", TABLE))})
        assert coups == [f"{TABLE}-{n:06d}" for n in range(1, 37)]
        for coup in coups:
            assert verify_coup(await casino.store.read(subjects.coup_filter(coup))) == []


async def test_a_round_dealt_on_from_a_new_shoe_is_folded_from_the_shoe_before(tmp_path: Path) -> None:
    """003 7.9: the cut card out first in a round, the round goes on from a new
    shoe; restarted before it ends, the service reads back to the shoe where
    the last round ended and holds the round being dealt."""
    ruleset = small_shoe(tmp_path, "blackjack-003-no-hole-card")
    store, secrets = InMemoryEventStore(), MemorySecrets()
    first = ShoeService(store, secrets, secure_shuffle)
    n = 0
    while first.tables.get(TABLE) is None or first.tables[TABLE].state.shoe_id == subjects.shoe_id(TABLE, 1):
        n += 1
        coup = f"{TABLE}-{n:06d}"
        started = await first.handle(commands.StartRound(id=f"{coup}:start", table=TABLE, coup=coup, ruleset=ruleset))
        assert started.ok
        drawn = await first.handle(commands.DrawCard(id=f"{coup}:draw", table=TABLE, coup=coup, ruleset=ruleset, index=0))
        await record_carried(store, drawn, f"{coup}:draw", coup, started.shoe, 0)
        if first.tables[TABLE].state.shoe_id == subjects.shoe_id(TABLE, 1):
            await first.handle(commands.EndRound(id=f"{coup}:end", table=TABLE, coup=coup, ruleset=ruleset,
                                          pickup=drawn.cards, after=f"{coup}:draw"))
    cut = [e.data for m in await store.read(subjects.aggregate_filter("shoe", TABLE)) for e in m.batch.events
           if isinstance(e.data, dealing_shoe.CutCardReached)]
    assert [e.clause for e in cut] == ["003 7.9"]  # the round goes on from shoe 2, not ended
    assert first.tables[TABLE].state.round == coup

    second = ShoeService(store, secrets, secure_shuffle)
    filters = reads_of(store)
    assert (await second.handle(commands.StartRound(id="again", table=TABLE, coup=coup, ruleset=ruleset))).ok
    # Each shoe's own records, and its coups' (the cards a card-reading shoe gave them to carry).
    assert filters == [subjects.event(TABLE, subjects.shoe_id(TABLE, k), "*", aggregate)
                       for k in (2, 1) for aggregate in ("shoe", "coup")]
    assert shoe_held(second.tables[TABLE]) == shoe_held(first.tables[TABLE])
    end = await second.handle(commands.EndRound(id=f"{coup}:end", table=TABLE, coup=coup, ruleset=ruleset,
                                         pickup=drawn.cards, after=f"{coup}:draw"))
    assert end.ok and second.tables[TABLE].last_round == coup


@pytest.mark.parametrize(("kind", "shoes"), [("memory", "one deck"), ("jetstream", "one deck"),
                                             ("memory", "continuous shuffler")])
async def test_the_latest_coup_and_shoe_event_are_found_in_the_shoe_in_play_as_the_whole_table_gives_them(
        request: pytest.FixtureRequest, tmp_path: Path, kind: str, shoes: str) -> None:
    """Rounds across shoes (one deck, a round going on into a new shoe under
    003 7.9; or a continuous shuffler, a shoe a round), each coup filed under
    the shoe it opened in as the dealer-policy files it: after every append
    the lookup through the shoe in play finds what the table's whole history
    gives; where a start most often falls (a round ended) it matches no
    wildcard over the table's shoes."""
    ruleset = small_shoe(tmp_path, "blackjack-003-no-hole-card") if shoes == "one deck" else \
        ruleset_variant(tmp_path, "baccarat-001-styles", shuffler="continuous_shuffler", burn="none")
    if kind == "memory":
        went_on = await _latest_through_the_shoe_in_play(InMemoryEventStore(), ruleset)
    else:
        nc = await nats.connect(request.getfixturevalue("nats_url"))
        try:
            await provision(nc)
            went_on = await _latest_through_the_shoe_in_play(JetStreamEventStore(nc), ruleset)
        finally:
            await nc.close()
    assert went_on >= 1 if shoes == "one deck" else went_on == 0  # or the test proves nothing


async def _latest_through_the_shoe_in_play(store: EventStore, ruleset: str) -> int:
    """100 rounds of 1 to 6 cards; how many went on into a new shoe."""
    shoe = ShoeService(store, MemorySecrets(), secure_shuffle)
    lasts = filters_of(store, "last")

    async def same_as_the_whole_table() -> None:
        for aggregate in ("coup", "shoe"):
            found = await latest_at_table(store, TABLE, aggregate)
            whole = await store.last(subjects.aggregate_filter(aggregate, TABLE))
            assert (found and found.seq) == (whole and whole.seq), aggregate

    async def record_coup(coup: str, opened_in: str, expected: int, step: str) -> int:
        ack = await store.append(subjects.event(TABLE, opened_in, coup, "coup"), batch(DEALT, table=TABLE, coup=coup),
                                 expected=expected, msg_id=f"{coup}:{step}")
        await same_as_the_whole_table()
        return ack.seq

    went_on, rnd = 0, random.Random(5)
    for n in range(1, 101):
        coup = f"{TABLE}-{n:06d}"
        started = await shoe.handle(commands.StartRound(id=f"{coup}:start", table=TABLE, coup=coup, ruleset=ruleset))
        assert started.ok and started.shoe
        await same_as_the_whole_table()
        seq = await record_coup(coup, started.shoe, 0, "open")
        cards, after = [], ""
        for k in range(rnd.choice([1, 2, 4, 6])):
            drawn = await shoe.handle(commands.DrawCard(id=f"{coup}:draw:{k}", table=TABLE, coup=coup, ruleset=ruleset,
                                                 index=k, after=after))
            assert drawn.ok, drawn
            cards += drawn.cards
            seq = await record_carried(store, drawn, f"{coup}:draw:{k}", coup, started.shoe, seq)
            after = f"{coup}:draw:{k}" if drawn.carried else after
            await same_as_the_whole_table()
        await record_coup(coup, started.shoe, seq, "result")
        if shoe.tables[TABLE].state.shoe_id != started.shoe:
            went_on += 1  # no coup in the shoe in play yet: the table is matched whole
        else:
            lasts.clear()
            await latest_at_table(store, TABLE, "coup")
            await latest_at_table(store, TABLE, "shoe")
            assert not any(f.startswith(f"{subjects.EVENTS}.{TABLE}.*.*") for f in lasts), lasts
        assert (await shoe.handle(commands.EndRound(id=f"{coup}:end", table=TABLE, coup=coup, ruleset=ruleset,
                                             pickup=tuple(cards), after=after))).ok
        await same_as_the_whole_table()
    assert shoe.tables[TABLE].shuffles >= 3
    return went_on


async def test_shoes_named_otherwise_are_looked_for_over_the_whole_table() -> None:
    store = InMemoryEventStore()
    await store.append(subjects.event(TABLE, "odd", subjects.NO_COUP, "shoe"), batch(DEALT), expected=0, msg_id="a")
    await store.append(subjects.event(TABLE, "odd", f"{TABLE}-000001", "coup"), batch(DEALT), expected=0, msg_id="b")
    found = await latest_at_table(store, TABLE, "coup")
    assert found is not None and found.msg_id == "b"
    assert await latest_at_table(store, "T-2", "coup") is None
