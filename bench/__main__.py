"""`make bench`: each figure beside the baseline it is judged against, as a ratio.

Writes the same figures to var/bench/latest.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from bench import replay


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("--coups", type=int, default=50, help="coups per table dealt for the replay benchmark")
    p.add_argument("--runs", type=int, default=5, help="timed runs; the median is reported")
    p.add_argument("--out", default="var/bench/latest.json")
    args = p.parse_args()
    results = {"replay": asyncio.run(replay.measure(args.coups, args.runs))}
    r = results["replay"]
    print(f"{'benchmark':<10} {'figure':<38} {'value':>10} {'baseline':<44} {'value':>10} {'ratio':>6}")
    print(f"{'replay':<10} {'coups replayed and verified per s':<38} {r['coups_per_s']:>10.1f} "
          f"{'coups read raw per s (ordered consumer)':<44} {r['raw_coups_per_s']:>10.1f} {r['ratio']:>6.2f}")
    print(f"(median of {r['runs']} runs over {r['coups']} coups, {r['messages']} stream messages)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written to {out}")


main()
