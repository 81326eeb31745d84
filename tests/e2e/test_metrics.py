"""Each service serves /metrics, /healthz and /readyz; the figures a pit boss
and an operator watch are there and count what happened."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request

import nats
import pytest
from bench import series
from prometheus_client.parser import text_string_to_metric_families
from services import runner
from services.projections import service as projections_service

from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.metrics import Metrics
from casino.nats.partitions import PARTITIONS
from casino.nats.server import free_port
from casino.protocol import commands
from casino.readmodels.projections import Projector, TableStatus, Takings
from casino.store import subjects

pytestmark = pytest.mark.anyio
TABLES = default_tables(4, ["baccarat-000-methods", "baccarat-001-styles", "blackjack-002-hole-card",
                            "blackjack-003-no-hole-card"])


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(text: str, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples(text).items()
               if n == name and all(dict(ls).get(k) == want for k, want in labels.items()))


async def test_metrics_health_and_readiness_of_every_service(nats_url: str) -> None:
    ports = {kind: free_port() for kind in (*runner.KINDS, "projections")}
    running = [await runner.start(kind, nats_url, tables=TABLES, http_port=port) for kind, port in ports.items()]
    nc = await nats.connect(nats_url)
    try:
        for port in ports.values():
            assert await asyncio.to_thread(get, port, "/healthz") == (200, "alive\n")
            # Nothing else: not faststream's AsyncAPI page, whose scripts come from a CDN a casino cannot reach.
            assert (await asyncio.to_thread(get, port, "/docs/asyncapi"))[0] == 404
        assert all({path for path, _ in r.app.routes} == {"/metrics", "/healthz", "/readyz"} for r in running)
        await Simulator(nc, TABLES, seed=3).run(3)
        refused = commands.PlaceWager(id="x", table="BAC000-1", coup="BAC000-1-000001", seat=99, bet="banker", amount=5)
        await nc.request(subjects.command("BAC000-1", "wager"), commands.encoder.encode(refused), timeout=5)
        await asyncio.sleep(4.5)  # two rounds of the consumer watch
        text = {kind: (await asyncio.to_thread(get, port, "/metrics"))[1] for kind, port in ports.items()}
        for kind, port in ports.items():
            assert await asyncio.to_thread(get, port, "/readyz") == (200, "ready\n"), kind
    finally:
        await nc.close()
        for r in reversed(running):
            await r.stop()

    dealer, shoe, wager = text["dealer-policy"], text["shoe"], text["wager"]
    settlement, projections = text["settlement"], text["projections"]
    assert total(dealer, "casino_coups_dealt_total") == 12
    assert total(dealer, "casino_coups_dealt_total", table="BJ002-1", game="blackjack") == 3
    assert total(dealer, "casino_cards_dealt_total") >= 12 * 4
    assert total(wager, "casino_commands_refused_total", clause="wager book") == 1  # betting closed
    assert total(wager, "casino_wagered_minor_units_total") > 0
    assert total(settlement, "casino_paid_out_minor_units_total") >= 0
    assert total(settlement, "casino_coup_duration_seconds_count") == 12
    assert total(shoe, "casino_reshuffles_total") >= 0 and "casino_reshuffles_total" in shoe
    assert {dict(ls)["table"] for (n, ls) in samples(projections) if n == "casino_house_net_minor_units"} == set(TABLES)
    assert 0 < total(projections, "casino_shoe_penetration_ratio", table="BAC000-1") < 1
    assert total(settlement, "casino_consumer_pending_messages", consumer="settlement") == 0
    assert total(projections, "casino_consumer_ack_pending_messages") == 0  # each batch acknowledged by its last
    assert total(dealer, "casino_ready", service="dealer-policy") == 1
    assert "casino_event_handling_seconds_count" in settlement
    assert total(projections, "casino_coups_verified_total") == 12
    # Followed from their first message: settled and verified without reading a coup back.
    assert total(settlement, "casino_coups_read_back_total", service="settlement") == 0
    assert total(projections, "casino_coups_read_back_total", service="projections") == 0
    assert total(projections, "casino_verification_failures_total") == 0
    assert total(projections, "casino_table_coup_open") == 0  # every coup settled
    for kind in ("shoe", "wager", "dealer-policy", "settlement"):  # alone, each owns every table
        assert total(text[kind], "casino_partitions_owned") == PARTITIONS, kind
    for kind in ("shoe", "wager", "dealer-policy"):  # and these follow no events back
        assert total(text[kind], "casino_event_handling_seconds_count") == 0, kind
    # Commands are answered from nats-py subscriptions and timed by the service itself.
    assert total(dealer, "casino_command_seconds_count", service="dealer-policy") >= 12 * 2  # open and close each coup
    assert total(wager, "casino_command_seconds_count", service="wager") >= 12 * 3  # open, a wager, close
    assert total(shoe, "casino_command_seconds_count", service="shoe") >= 12 * 2  # start and end of each round


async def test_a_service_folding_its_history_at_start_is_alive_and_not_ready(
        nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long history takes a while to fold at start: the startup probe sees the
    process alive meanwhile (and does not restart it), the readiness probe not ready."""
    from services.projections.service import Projections

    folding, done = asyncio.Event(), asyncio.Event()
    fold = Projections.open

    async def slow(self: Projections, store: object) -> object:
        folding.set()
        await done.wait()
        return await fold(self, store)  # type: ignore[arg-type]

    monkeypatch.setattr(Projections, "open", slow)
    port = free_port()
    starting = asyncio.ensure_future(runner.start("projections", nats_url, http_port=port))
    try:
        await asyncio.wait_for(folding.wait(), 10)
        assert await asyncio.to_thread(get, port, "/healthz") == (200, "alive\n")
        assert (await asyncio.to_thread(get, port, "/readyz"))[0] == 503
        assert not starting.done()
    finally:
        done.set()
        await (await starting).stop()



async def test_every_service_holds_as_many_series_after_twice_the_coups() -> None:
    """Every label comes from a bounded set (table, game, procedure, bet,
    clause, service, consumer): each service scraped after N coups a table and
    again after 2N holds the same series, within a handful (a bet or a
    refusal's clause first seen in the later coups), and no label names a shoe,
    a coup or a subject (``make bench`` reports the same figures at 200 coups)."""
    figures = await series.measure(coups=8)
    assert figures["settled"]["first"] >= 8 * 4 and figures["settled"]["second"] == 16 * 4
    for kind, counted in figures["series_per_service"].items():
        # A short run: a bet (a blackjack double, split or insurance) may be first placed in the later coups.
        assert counted["first"] > 0 and counted["second"] - counted["first"] <= 16, (kind, counted)
        assert all({"bet", "clause"} & set(names) for names in figures["added_labels"][kind]), (kind, figures)
    assert not [v for v in figures["label_values"] if "-shoe-" in v or "-0000" in v or v.startswith("casino.")]


async def test_metrics_and_health_answer_while_the_service_is_busy_and_health_says_when_it_stalls(
        nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The routes are served beside the service, not behind its work: with its
    event loop held (a long fold, a busy machine) a scrape and a probe are
    answered; held past ``STALLED_AFTER``, /healthz says it has stalled."""
    monkeypatch.setattr(runner, "STALLED_AFTER", 2.0)
    port = free_port()
    running = await runner.start("projections", nats_url, tables=TABLES, http_port=port)
    try:
        assert await asyncio.to_thread(get, port, "/healthz") == (200, "alive\n")
        answers: list[tuple[int, str]] = []

        def probe() -> None:  # from another thread, while the loop is held
            time.sleep(0.5)
            answers.append(get(port, "/metrics"))
            answers.append(get(port, "/healthz"))
            time.sleep(3.0)
            answers.append(get(port, "/healthz"))

        prober = threading.Thread(target=probe)
        prober.start()
        time.sleep(5.0)  # the event loop held, as a long synchronous step would
        prober.join()
        (metrics_status, text), held, stalled = answers
        assert metrics_status == 200 and "casino_ready" in text
        assert held == (200, "alive\n")
        assert stalled[0] == 503 and stalled[1].startswith("stalled"), stalled
        await asyncio.sleep(1.5)  # the loop turns again
        assert await asyncio.to_thread(get, port, "/healthz") == (200, "alive\n")
    finally:
        await running.stop()


def test_the_projections_set_the_gauges_of_the_tables_a_write_changed_and_no_others() -> None:
    """Each write sets the gauges of the tables whose keys it changed (a
    shoe's stats by its shoe's table), not the whole floor's: the work a
    write costs does not grow with the number of tables."""
    projector = Projector()
    for table in ("T1", "T2", "T3"):
        projector.table_status[table] = TableStatus(table, phase="betting", shoe=f"{table}-shoe-1",
                                                    last_event_at=1.0)
        projector.takings[table] = Takings(table, house_net=5)
    changed = {("table_status", "T1"), ("shoe_stats", "T2-shoe-1"), ("takings", "T1")}
    assert projections_service._tables_of(changed) == {"T1", "T2"}
    metrics = Metrics("projections")
    projections_service._gauges(projector, metrics, projections_service._tables_of(changed))
    seen = {s.labels["table"] for f in metrics.registry.collect() if f.name in ("casino_table_coup_open", "casino_house_net_minor_units")
            for s in f.samples}
    assert seen == {"T1", "T2"}
