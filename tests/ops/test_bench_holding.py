"""The memory benchmark's history is filed as the services file a coup: the
same subjects, one for each service that writes to it, under the shoe named
as the shoe service names its shoes, and (``--as-dealt``) about as many
messages of about the sizes on each; a server restarted on it holds every
message, and a subject per coup and aggregate."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

import pytest
from bench import holding

from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
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
    shoes = {subjects.tokens(s)[1] for s in first} - {subjects.NO_COUP}  # the ruleset is filed under no shoe
    assert shoes == {subjects.shoe_id("BAC-1", 1), subjects.shoe_id("BAC-1", 2)}
    coups = {subjects.tokens(s)[2] for s in first} - {subjects.NO_COUP}
    assert len(coups) == 2 * holding.COUPS_A_SHOE and len(set(written)) == len(written)


async def test_a_restarted_server_holds_the_whole_history_each_way() -> None:
    own = await holding.one_run(200)
    same = await holding.one_run(200, own_subjects=False)
    shoes = rulesets = holding.TABLES  # 200 coups round 16 tables: each table's first shoe, and its ruleset
    assert own["messages"] == same["messages"] == 200 * len(holding.AGGREGATES) + shoes + rulesets
    for figures in (own, same):
        assert figures["heap_mib"] > 0 and figures["rss_mib"] > figures["heap_mib"]
        assert figures["running_heap_mib"] > 0 and figures["killed_heap_mib"] > 0
        assert figures["ready_s"] > 0 and figures["killed_ready_s"] > 0
    assert len(set(holding.history(200))) == own["messages"]
    assert len(set(holding.history(200, own_subjects=False))) == holding.TABLES * (len(holding.AGGREGATES) + 2)


async def test_the_history_as_dealt_has_the_messages_dealt_coups_have(nats_url: str) -> None:
    tables = default_tables(2, ["baccarat-000-methods"])
    async with Casino(nats_url, tables) as casino:
        await Simulator(casino.nc, tables, seed=5, patience=40).run(12)
        stored = [m for t in tables for m in await casino.store.read(subjects.table_filter(t))]
        dealt = [await casino.nc.jetstream().get_msg("CASINO", m.seq) for m in stored]
    counts: Counter[tuple[str, str]] = Counter()
    sizes: dict[str, list[int]] = defaultdict(list)
    for m in dealt:
        assert m.subject is not None and m.data is not None
        counts[holding.kind(m.subject), m.subject] += 1  # the message with its headers, as the benchmark counts it
        sizes[holding.kind(m.subject)].append(len(m.data) + sum(len(k) + len(v) + 4 for k, v in (m.headers or {}).items()))
    for kind, (count, size) in holding.AS_DEALT.items():
        per_subject = [n for (k, _), n in counts.items() if k == kind]
        assert abs(statistics.mean(per_subject) - count) <= 1.5, (kind, statistics.mean(per_subject))
        if kind != "between":  # a few messages a shoe, of whatever the shoe did between its coups
            assert abs(statistics.mean(sizes[kind]) - size) <= 0.4 * size, (kind, statistics.mean(sizes[kind]))
    written = list(holding.as_dealt(holding.history(holding.TABLES * holding.COUPS_A_SHOE)))
    by_subject: dict[str, list[int]] = defaultdict(list)
    for subject, body, _ in written:
        by_subject[subject].append(len(body))
    for subject, bodies in by_subject.items():
        count, size = holding.AS_DEALT[holding.kind(subject)]
        assert bodies == [size] * count
