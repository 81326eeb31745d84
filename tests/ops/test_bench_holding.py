"""The memory benchmark's history is filed as the services file a coup: the
same subjects, one for each service that writes to it, under the shoe named
as the shoe service names its shoes; a server restarted on it holds every
message, and a subject per coup and aggregate."""

from __future__ import annotations

import pytest
from bench import holding

from casino.simulator import Simulator
from casino.store import subjects
from tests.e2e.casino import Casino
from tests.e2e.test_wager_books import TABLES

pytestmark = pytest.mark.anyio


def shape(subject: str) -> tuple[str, str]:
    """A subject as a kind: whether it names a coup, and its aggregate."""
    _, _, coup, aggregate = subjects.tokens(subject)
    return ("coup" if coup != subjects.NO_COUP else "between coups"), aggregate


async def test_the_history_has_the_subjects_dealt_coups_have(nats_url: str) -> None:
    async with Casino(nats_url, TABLES) as casino:
        await Simulator(casino.nc, TABLES, seed=9, patience=40).run(3)
        table = next(iter(TABLES))
        dealt = {m.subject for m in await casino.store.read(subjects.table_filter(table))}
    per_coup = {subjects.tokens(s)[3] for s in dealt if shape(s)[0] == "coup"}
    assert per_coup == set(holding.AGGREGATES)
    written = list(holding.history(2 * holding.TABLES * holding.COUPS_A_SHOE))
    assert {shape(s) for s in written} == {shape(s) for s in dealt}
    first = [s for s in written if subjects.tokens(s)[0] == "BAC-1"]
    shoes = {subjects.tokens(s)[1] for s in first}
    assert shoes == {subjects.shoe_id("BAC-1", 1), subjects.shoe_id("BAC-1", 2)}
    coups = {subjects.tokens(s)[2] for s in first} - {subjects.NO_COUP}
    assert len(coups) == 2 * holding.COUPS_A_SHOE and len(set(written)) == len(written)


async def test_a_restarted_server_holds_the_whole_history_each_way() -> None:
    own = await holding.one_run(200)
    same = await holding.one_run(200, own_subjects=False)
    shoes = holding.TABLES  # 200 coups round 16 tables: each table's first shoe
    assert own["messages"] == same["messages"] == 200 * len(holding.AGGREGATES) + shoes
    for figures in (own, same):
        assert figures["heap_mib"] > 0 and figures["rss_mib"] > figures["heap_mib"]
        assert figures["running_heap_mib"] > 0 and figures["killed_heap_mib"] > 0
        assert figures["ready_s"] > 0 and figures["killed_ready_s"] > 0
    assert len(set(holding.history(200))) == own["messages"]
    assert len(set(holding.history(200, own_subjects=False))) == holding.TABLES * (len(holding.AGGREGATES) + 1)
