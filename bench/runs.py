"""Figures over several runs: each is the median of the runs, and the range
of the runs (their lowest and highest) is given beside it."""

from __future__ import annotations

from collections.abc import Iterable


def span(values: Iterable[float]) -> list[float]:
    """The lowest and the highest of the runs' values."""
    ordered = sorted(values)
    return [ordered[0], ordered[-1]]
