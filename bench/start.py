"""Start: how long the dealer-policy and the shoe service take to take up
every table of a store with a history (the dealer-policy from each table's
latest coup, the shoe service from its shoe in play), against folding each
table's whole history, on a store left by tables dealing flat out. The two
folds are checked to hold the same. Beside them, the projections' first fold
of the whole stream (no checkpoint yet, or a new version of the fold) page by
page, against reading the stream whole: time, and the peak of memory allocated
while folding (traced in a run of its own)."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client
from services.dealer_policy.service import DealerPolicyService
from services.dealer_policy.table import carry
from services.shoe.app import orders_of
from services.shoe.carrying import carry_into
from services.shoe.held import TableShoe
from services.shoe.secrets import JetStreamSecrets
from services.shoe.service import ShoeService

from bench.load import casino, stop_players, warmed
from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import Simulator
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.protocol.service import Peer
from casino.readmodels.projections import Projector, fold_stream
from casino.store import subjects
from casino.store.jetstream import JetStreamEventStore


async def dealer_latest(nc: Client, tables: dict[str, TableConfig]) -> DealerPolicyService:
    service = DealerPolicyService(JetStreamEventStore(nc), Peer(nc), tables)
    await service.rebuild()
    return service


async def dealer_whole(nc: Client, tables: dict[str, TableConfig]) -> DealerPolicyService:
    service = DealerPolicyService(JetStreamEventStore(nc), Peer(nc), tables)
    for name in tables:
        service.tables[name] = service.new_table(name)
        for msg in await service.store.read(subjects.aggregate_filter("coup", name)):
            await service.observe(msg.subject, msg.seq, msg.batch)
    return service


async def shoe_latest(nc: Client, tables: dict[str, TableConfig]) -> ShoeService:
    service = ShoeService(JetStreamEventStore(nc), JetStreamSecrets(nc.jetstream()))
    for name, config in tables.items():
        await service.table(name, config.ruleset)
    return service


async def shoe_whole(nc: Client, tables: dict[str, TableConfig]) -> ShoeService:
    service = ShoeService(JetStreamEventStore(nc), JetStreamSecrets(nc.jetstream()))
    for name, config in tables.items():
        rules = rulesets.load(config.ruleset)
        service.tables[name] = TableShoe(rules=rules.shoe, document=rules.document,
                                         orders=orders_of(config.source, service.shuffle))
        t = service.tables[name]
        for msg in await service.store.read(subjects.table_filter(name)):  # the shoe's, and what its coups carry
            if subjects.tokens(msg.subject)[3] == "shoe":
                await service.observe(msg.subject, msg.seq, msg.batch)
            elif subjects.tokens(msg.subject)[3] == "coup" and not msg.unreadable:
                carry_into(t, msg.seq, msg.batch)
    return service


async def timed(fold: Callable[[Client, dict[str, TableConfig]], Awaitable[Any]], nc: Client,
                tables: dict[str, TableConfig], runs: int) -> tuple[float, Any]:
    """The median of ``runs`` folds, in seconds, and the last fold."""
    seconds, service = [], None
    for _ in range(runs):
        start = time.perf_counter()
        service = await fold(nc, tables)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), service


async def projections_paged(nc: Client, tables: dict[str, TableConfig]) -> Projector:
    projector = Projector()

    async def folded(changed: set[tuple[str, str]]) -> None:
        projector.forget_ended_shoes()

    await fold_stream(projector, JetStreamEventStore(nc), folded)
    return projector


async def projections_whole(nc: Client, tables: dict[str, TableConfig]) -> Projector:
    projector = Projector()
    projector.fold(await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>"))
    projector.forget_ended_shoes()
    return projector


async def peak_mib(fold: Callable[[Client, dict[str, TableConfig]], Awaitable[Any]], nc: Client,
                   tables: dict[str, TableConfig]) -> float:
    """The most memory the fold had allocated at once."""
    tracemalloc.start()
    try:
        await fold(nc, tables)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def held(dealer: DealerPolicyService, shoe: ShoeService) -> dict[str, tuple[object, ...]]:
    """What each table's next decisions depend on."""
    return {name: (t.number, t.coup, t.shoe, t.state, t.last_seq, carry(t),
                   shoe.tables[name].state, shoe.tables[name].order, shoe.tables[name].shuffles,
                   shoe.tables[name].last_round) for name, t in dealer.tables.items()}


async def measure(tables_count: int, seconds: float, runs: int) -> dict[str, Any]:
    tables = default_tables(tables_count, list(SHORT))
    async with casino(tables) as (nc, _, _):
        sim = Simulator(nc, tables, seed=1, patience=40)
        task = asyncio.create_task(sim.run(None))
        await warmed(sim, seconds)  # ``seconds`` of dealing once the services deal, however busy the machine
        stop_players(sim, task)
        await asyncio.sleep(3)  # what is in flight lands (a coup left in hand stays so, for every fold alike)
        messages = (await nc.jetstream().stream_info("CASINO")).state.messages
        out: dict[str, Any] = {"tables": tables_count, "runs": runs, "messages": messages}
        services = {}
        for name, latest, whole in (("dealer_policy", dealer_latest, dealer_whole), ("shoe", shoe_latest, shoe_whole)):
            latest_s, services[name, "latest"] = await timed(latest, nc, tables, runs)
            whole_s, services[name, "whole"] = await timed(whole, nc, tables, runs)
            out[name] = {"latest_s": latest_s, "whole_history_s": whole_s, "ratio": latest_s / whole_s}
        paged_s, paged = await timed(projections_paged, nc, tables, runs)
        whole_s, whole = await timed(projections_whole, nc, tables, runs)
        out["projections"] = {"paged_s": paged_s, "whole_s": whole_s,
                              "paged_peak_mib": await peak_mib(projections_paged, nc, tables),
                              "whole_peak_mib": await peak_mib(projections_whole, nc, tables)}
        out["coups"] = sum(t.number for t in services["dealer_policy", "whole"].tables.values())
        out["same_state"] = (held(services["dealer_policy", "latest"], services["shoe", "latest"])
                             == held(services["dealer_policy", "whole"], services["shoe", "whole"])
                             and paged.everything() == whole.everything())
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.start")
    p.add_argument("--tables", type=int, default=16)
    p.add_argument("--seconds", type=float, default=60, help="seconds of dealing flat out before the folds are timed")
    p.add_argument("--runs", type=int, default=3, help="folds timed each way; the median is reported")
    args = p.parse_args()
    r = asyncio.run(measure(args.tables, args.seconds, args.runs))
    print(json.dumps(r, indent=2))
    for name in ("dealer_policy", "shoe"):
        f = r[name]
        print(f"{name}: {f['latest_s']:.3f} s from each table's latest coup or shoe against {f['whole_history_s']:.3f} s "
              f"for the whole history = {f['ratio']:.3f} ({r['coups']:,} coups, {r['messages']:,} messages)")
    f = r["projections"]
    print(f"projections' first fold: {f['paged_s']:.2f} s page by page, at most {f['paged_peak_mib']:.0f} MiB allocated, "
          f"against {f['whole_s']:.2f} s and {f['whole_peak_mib']:.0f} MiB reading the stream whole")
    if not r["same_state"]:
        raise SystemExit("a fold from the latest coup, shoe or page does not hold what the whole history gives")


if __name__ == "__main__":
    main()
