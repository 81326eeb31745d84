"""Where a table's cards come from is wired, not said on the wire: the shoe
service picks each table's order source from its tables file
(services.shoe.orders), the dealer-policy its card source
(services.dealer_policy.sources), and no command to the shoe names it."""

from __future__ import annotations

import asyncio
import typing

import msgspec
import pytest
from services.dealer_policy.sources import ReadingShoe, ShuffledShoe, source_of
from services.shoe.app import order_sources
from services.shoe.secrets import MemorySecrets, secure_shuffle
from services.shoe.service import ShoeService

from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.rules import shoe as dealing_shoe
from casino.rules.cards import full_set
from casino.rules.errors import RuleViolation
from casino.store import subjects
from casino.store.eventstore import InMemoryEventStore

RULES = "baccarat-000-methods"
TABLES = {"S1": TableConfig(RULES), "R1": TableConfig(RULES, cards="read", shuffle="recognised"),
          "H1": TableConfig(RULES, cards="read", shuffle="hand")}


def test_no_command_to_the_shoe_names_where_the_cards_come_from() -> None:
    for command in typing.get_args(commands.ShoeCommand):
        assert "source" not in {f.name for f in msgspec.structs.fields(command)}, command.__name__


def test_each_table_is_filled_from_the_source_its_tables_file_names() -> None:
    """A shuffled table's shoe is the service's own shuffle, committed to; a
    hand-shuffled table's commits to no order, and its burn card is read
    before the deal; a recognised machine's table waits for the machine's
    order, and is filled with it as it comes. Nobody's command said which:
    the same StartRound at each."""
    store, secrets = InMemoryEventStore(), MemorySecrets()
    shoe = ShoeService(store, secrets, orders=order_sources(TABLES, secure_shuffle))

    def start(table: str) -> commands.Reply:
        coup = f"{table}-000001"
        return asyncio.run(shoe.handle(commands.StartRound(f"{coup}:start", table, coup, RULES)))

    def shuffled(table: str) -> dealing_shoe.ShoeShuffled:
        stored = asyncio.run(store.read(subjects.aggregate_filter("shoe", table)))
        return next(e.data for m in stored for e in m.batch.events if isinstance(e.data, dealing_shoe.ShoeShuffled))

    assert start("S1").ok
    assert shuffled("S1").source == "" and shuffled("S1").commitment
    with pytest.raises(RuleViolation) as burn:
        start("H1")
    assert burn.value.clause == "setting shoe.burn"  # filled: the card-reading shoe reads the burn card first
    assert shuffled("H1").source == "hand" and not shuffled("H1").commitment
    with pytest.raises(RuleViolation) as waits:
        start("R1")
    assert waits.value.clause == commands.SHUFFLING_MACHINE
    made = tuple(reversed(full_set(shoe.tables["R1"].rules.decks)))
    assert asyncio.run(shoe.handle(commands.ShuffleMade("order-1", "R1", made))).ok  # filled with it at once
    kept = asyncio.run(secrets.get("R1", subjects.shoe_id("R1", 1)))
    assert kept is not None and kept[0] == made
    assert shuffled("R1").source == "recognised"
    assert shuffled("R1").commitment == dealing_shoe.commitment(made, kept[1])
    for table in ("S1", "H1"):  # only a recognised machine's table takes an order
        with pytest.raises(RuleViolation) as refused:
            asyncio.run(shoe.handle(commands.ShuffleMade("order-2", table, made)))
        assert refused.value.clause == commands.SHUFFLING_MACHINE


def test_a_table_not_in_the_shoe_services_tables_file_is_refused_naming_it() -> None:
    shoe = ShoeService(InMemoryEventStore(), MemorySecrets(), orders=order_sources(TABLES, secure_shuffle))
    with pytest.raises(RuleViolation) as refused:
        asyncio.run(shoe.handle(commands.StartRound("X1-000001:start", "X1", "X1-000001", RULES)))
    assert refused.value.clause == "tables" and "X1" in refused.value.reason


def test_the_dealer_policy_waits_for_a_read_tables_cards_and_asks_the_shoe_for_a_shuffled_ones() -> None:
    assert isinstance(source_of(TABLES["S1"]), ShuffledShoe)
    assert isinstance(source_of(TABLES["R1"]), ReadingShoe)
    assert isinstance(source_of(TABLES["H1"]), ReadingShoe)
    waiting = commands.Waiting("card", 1)
    assert ReadingShoe().told(waiting).kind == "read" and ShuffledShoe().told(waiting) == waiting
