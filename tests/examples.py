"""How many random examples a property test draws: its own number in `make
test`, that many times ``CASINO_SOAK_EXAMPLES`` under `make soak`."""

from __future__ import annotations

import os


def examples(n: int) -> int:
    return n * int(os.environ.get("CASINO_SOAK_EXAMPLES", "1"))
