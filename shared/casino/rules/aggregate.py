"""The two pieces every aggregate shares: asking before acting, and following a
step with the steps the dealer takes without waiting for anyone."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from casino.rules.errors import RuleViolation

S = TypeVar("S")
E = TypeVar("E")
C = TypeVar("C")


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
    evolving: Mapping[type, Callable[[S, Any], S]],
    follow_up: Callable[[C, S], list[E]],
    context: C,
) -> tuple[list[E], S]:
    """``events`` and then every automatic step they make due
    (``follow_up(context, state)``, until it gives none), in order; and the
    state after all of them, each event applied by its type's entry in
    ``evolving`` (an event with none leaves the state as it is)."""
    out = step = events
    while True:
        for e in step:
            after = evolving.get(type(e))
            if after is not None:
                state = after(state, e)
        step = follow_up(context, state)
        if not step:
            return out, state
        out = out + step  # a new list: the caller's ``events`` are left as they are
