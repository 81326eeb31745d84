"""A bounded run of the simulated casino, and its event stream as raw JSON.

The run deals every ruleset's tables with the simulator's default habits on a
real nats-server; the stream is then read message by message with nats-py
alone and written as JSON lines (``subject``, ``seq`` and the stored batch as
it is on the wire), the record an examiner is handed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.store.jetstream import STREAM
from tests.e2e.casino import Casino
from tests.natsfixture import nats_server

RULESETS = ["baccarat-000-methods", "baccarat-001-styles", "blackjack-002-hole-card", "blackjack-003-no-hole-card"]
# Four tables of 000 (its four methods and their paths, the rarest taken a few
# times a thousand coups), one of each other ruleset.
TABLES = {**default_tables(4, RULESETS),
          **{f"BAC000-{n}": default_tables(1, RULESETS)["BAC000-1"] for n in (2, 3, 4)}}
COUPS = 200
SEED = 34


async def _deal_and_dump(url: str, out: Path) -> None:
    async with Casino(url, TABLES) as casino:
        await Simulator(casino.nc, TABLES, seed=SEED, patience=40).run(COUPS)
        js = casino.nc.jetstream()
        last = (await js.stream_info(STREAM)).state.last_seq
        with out.open("w", encoding="utf-8") as f:
            for seq in range(1, last + 1):
                msg = await js.get_msg(STREAM, seq, direct=True)
                f.write(json.dumps({"subject": msg.subject, "seq": seq, "batch": json.loads(msg.data or b"{}")}) + "\n")


def bounded_run(directory: Path) -> Path:
    """Deal the bounded run in a server of its own under ``directory``; the path of its raw record."""
    out = directory / "stream.jsonl"
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with nats_server(directory / "nats") as url:
                asyncio.run(_deal_and_dump(url, out))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)  # a loop of its own, whoever asks for the record
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return out



