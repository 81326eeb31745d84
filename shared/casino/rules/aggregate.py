"""The two pieces every aggregate shares: asking before acting, and following a
step with the steps the dealer takes without waiting for anyone."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from casino.rules.errors import RuleViolation

S = TypeVar("S")
E = TypeVar("E")


def violation(step: Callable[[], object]) -> RuleViolation | None:
    """The ``RuleViolation`` that ``step`` raises, or None if it is allowed."""
    try:
        step()
    except RuleViolation as exc:
        return exc
    return None


def with_follow_ups(
    events: list[E],
    state: S,
    evolve: Callable[[S, E], S],
    follow_up: Callable[[S], list[E]],
) -> tuple[list[E], S]:
    """``events`` and then every automatic step they make due, in order; and the
    state after all of them (so the caller need not fold them again)."""
    for e in events:
        state = evolve(state, e)
    out = list(events)
    while step := follow_up(state):
        for e in step:
            state = evolve(state, e)
        out += step
    return out, state
