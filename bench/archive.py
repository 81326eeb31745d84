"""Sealed shoes read back: four tables (the four rulesets, each from one deck
cut at half, so that shoes end every round or two) deal ``coups`` each with
every service and the archiver running, until every shoe but the last two
of each table is sealed and gone from the live stream. Then:

* a coup from a sealed shoe reconstructed (``casino replay coup``: the
  archive searched for its shoe, the seal opened, the coup replayed), each
  with nothing cached, p50 and p99 over ``samples`` coups chosen at random;
* the audit of the sealed shoes from their export files, in one process on
  one core (the chain, every shoe's commitment, every coup decided again),
  against merely reading and decoding the same files: coups a second, and
  their ratio.

    python -m bench.archive --coups 150
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import nats
from services import runner
from tests.variants import ruleset_variant

from bench.runs import span
from casino.audit import archive
from casino.audit.replay import replay_coup
from casino.cli.run import SHORT
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.nats.server import NatsServer
from casino.store import subjects
from casino.store.archive import SealStore


def small_shoes(folder: Path) -> dict[str, TableConfig]:
    """The four rulesets, each from one deck cut at half."""
    return {f"{short}-1": TableConfig(ruleset_variant(folder, ruleset, decks=1, penetration=0.5))
            for ruleset, short in SHORT.items()}


async def deal_and_seal(url: str, tables: dict[str, TableConfig], coups: int) -> None:
    running = [await runner.start(kind, url, tables=tables) for kind in runner.EVERY_KIND]
    nc = await nats.connect(url)
    try:
        await Simulator(nc, tables, seed=1).run(coups)
        dealer = next(r for r in running if r.kind == "dealer-policy")
        await dealer.service.finish_rounds()
        archiver = next(r for r in running if r.kind == "archiver").service
        store = archive.history(nc).live
        deadline = time.monotonic() + 300
        while True:  # the archiver's sweeps, asked for until every shoe but each table's last two is sealed
            await archiver.sweep()
            pending = [t for t in tables
                       if len({subjects.tokens(s)[1] for s in await store.subjects(subjects.table_filter(t))}
                              - {subjects.NO_COUP}) > 2]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"shoes of {pending} not sealed and removed within 300 s")
            await asyncio.sleep(0.5)
    finally:
        await nc.close()
        for r in reversed(running):
            await r.stop()


async def replay_times(url: str, coups: list[tuple[str, str]], samples: int) -> list[float]:
    """Seconds to reconstruct each of ``samples`` sealed coups, each on a history read afresh."""
    nc = await nats.connect(url)
    times = []
    try:
        for table, coup in random.Random(5).sample(coups, min(samples, len(coups))):
            start = time.perf_counter()
            r = replay_coup(await archive.history(nc).read(subjects.coup_filter(coup, table)))
            times.append(time.perf_counter() - start)
            if not r.settled:
                raise RuntimeError(f"{coup} replayed from its seal is not settled")
    finally:
        await nc.close()
    return times


def audit_rates(files: list[bytes], runs: int) -> dict[str, Any]:
    """Coups a second verifying the export files, and reading and decoding them."""
    def verify() -> int:
        return sum(archive.verify_export(io.BytesIO(f))[1].coups for f in files)

    def decode() -> int:
        coups = 0
        for f in files:
            _, seals, _ = archive.read_export(io.BytesIO(f))
            opened = [archive.open_seal(s) for s in seals]
            coups += len({subjects.tokens(m.subject)[2] for s in opened for m in s.stored()
                          if m.subject.endswith(".coup")})
        return coups

    out: dict[str, Any] = {}
    rates: dict[str, list[float]] = {"verify": [], "read_decode": []}
    for _ in range(runs):
        for name, work in (("verify", verify), ("read_decode", decode)):
            start = time.perf_counter()
            coups = work()
            rates[name].append(coups / (time.perf_counter() - start))
    for name, measured in rates.items():
        out[f"{name}_coups_per_s"], out[f"{name}_coups_per_s_range"], out["coups"] = \
            statistics.median(measured), span(measured), coups
    out["ratio"] = out["verify_coups_per_s"] / out["read_decode_coups_per_s"]
    out["ratio_range"] = span(v / r for v, r in zip(rates["verify"], rates["read_decode"], strict=True))
    return out


async def measure(coups: int = 150, runs: int = 3, samples: int = 200) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        from casino.nats.provision import provision

        nc = await nats.connect(server.url)
        await provision(nc)
        tables = small_shoes(Path(tmp))
        await deal_and_seal(server.url, tables, coups)
        seals = SealStore(nc)
        files, sealed_coups, shoes = [], [], 0
        for table in tables:
            kept = await seals.seals(table)
            shoes += len(kept)
            sealed_coups += [(table, f"{table}-{n:06d}") for k in kept if k.first_coup
                             for n in range(k.first_coup, k.last_coup + 1)]
            header, exported = await archive.export_table(seals, table)
            out = io.BytesIO()
            archive.write_export(out, header, exported)
            files.append(out.getvalue())
        await nc.close()
        times = sorted(await replay_times(server.url, sealed_coups, samples))
    return {"tables": len(tables), "coups_a_table": coups, "sealed_shoes": shoes, "sealed_coups": len(sealed_coups),
            "export_bytes": sum(len(f) for f in files),
            "replay": {"samples": len(times), "p50_ms": 1000 * times[len(times) // 2],
                       "p99_ms": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))]},
            "audit": audit_rates(files, runs)}


def summary(r: dict[str, Any]) -> str:
    a = r["audit"]
    return (f"sealed shoes: {r['sealed_shoes']} shoes of {r['sealed_coups']} coups at {r['tables']} tables, "
            f"{r['export_bytes'] / max(r['sealed_coups'], 1):.0f} bytes a coup exported; a sealed coup replayed "
            f"p50 {r['replay']['p50_ms']:.1f} / p99 {r['replay']['p99_ms']:.1f} ms ({r['replay']['samples']} coups); "
            f"audit from the files {a['verify_coups_per_s']:,.0f} coups/s on one core against "
            f"{a['read_decode_coups_per_s']:,.0f} reading and decoding them: ratio {a['ratio']:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.archive")
    p.add_argument("--coups", type=int, default=150, help="coups dealt at each of the four tables")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--samples", type=int, default=200)
    args = p.parse_args()
    r = asyncio.run(measure(args.coups, args.runs, args.samples))
    print(summary(r))
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
