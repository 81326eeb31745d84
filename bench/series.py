"""Series each service's /metrics holds as the coups go by: every service and
the archiver running against a real nats-server, the four rulesets' tables
dealing ``2 * coups`` each, each service scraped once every table has settled
``coups`` and again after all of them. Every label comes from a bounded set,
so the second figure is the first, within the few series a bet or a
refusal's clause first seen in the later coups adds.

    python -m bench.series --coups 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import nats
from prometheus_client.parser import text_string_to_metric_families
from services import runner

from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import Simulator
from casino.nats.server import NatsServer, free_port


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return str(r.read().decode())


def count(text: str) -> int:
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


def labels(text: str) -> set[str]:
    return {v for family in text_string_to_metric_families(text) for s in family.samples for v in s.labels.values()}


def samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(s.name, tuple(sorted(s.labels.items()))) for family in text_string_to_metric_families(text)
            for s in family.samples}


def settled(text: str) -> float:
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "casino_coup_duration_seconds_count")


async def measure(coups: int = 200, tables_a_ruleset: int = 1) -> dict[str, Any]:
    """Each service's series after ``coups`` and after ``2 * coups`` a table,
    and every label value seen (for a check that none names a shoe or coup)."""
    tables = default_tables(len(SHORT) * tables_a_ruleset, list(SHORT))
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        from casino.nats.provision import provision

        nc = await nats.connect(server.url)
        await provision(nc)
        ports = {kind: free_port() for kind in runner.EVERY_KIND}
        running = [await runner.start(kind, server.url, tables=tables, http_port=port)
                   for kind, port in ports.items()]
        try:
            dealing = asyncio.ensure_future(Simulator(nc, tables, seed=5).run(2 * coups))
            while settled(await asyncio.to_thread(scrape, ports["settlement"])) < coups * len(tables):
                if dealing.done():
                    dealing.result()  # raises what stopped the dealing
                    break
                await asyncio.sleep(0.2)
            first = {kind: await asyncio.to_thread(scrape, port) for kind, port in ports.items()}
            await asyncio.wait_for(dealing, 60 + coups * 5)
            second = {kind: await asyncio.to_thread(scrape, port) for kind, port in ports.items()}
        finally:
            await nc.close()
            for r in reversed(running):
                await r.stop()
    return {"tables": len(tables), "coups_a_table": coups,
            "settled": {"first": settled(first["settlement"]), "second": settled(second["settlement"])},
            "series_per_service": {kind: {"first": count(first[kind]), "second": count(second[kind])}
                                   for kind in runner.EVERY_KIND},
            "most_added": max(count(second[k]) - count(first[k]) for k in runner.EVERY_KIND),
            "label_values": sorted(set().union(*(labels(t) for t in second.values()))),
            # the names of the labels each series added after the first scrape has, by service
            "added_labels": {kind: sorted({tuple(k for k, _ in added) for _, added in
                                           samples(second[kind]) - samples(first[kind])}) for kind in runner.EVERY_KIND}}


def summary(r: dict[str, Any]) -> str:
    per = ", ".join(f"{k} {v['first']}/{v['second']}" for k, v in r["series_per_service"].items())
    return (f"metric series per service after {r['coups_a_table']} and {2 * r['coups_a_table']} coups at each of "
            f"{r['tables']} tables: {per}; at most {r['most_added']} added")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.series")
    p.add_argument("--coups", type=int, default=200, help="coups a table before the first scrape (as many again before the second)")
    args = p.parse_args()
    r = asyncio.run(measure(args.coups))
    print(summary(r))
    print(json.dumps({k: v for k, v in r.items() if k != "label_values"}, indent=2))


if __name__ == "__main__":
    main()
