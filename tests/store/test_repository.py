"""The repository every service holds its aggregates through: a batch folded
once however often it comes, a commit folded once and not at all when the
stream took it for a duplicate, a guarded commit refused after another
writer's, and a command told recorded by its cause."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec
import pytest
from services.repository import Held, Repository

from casino.protocol import commands
from casino.rules import wagerbook
from casino.rules.errors import RuleViolation
from casino.store import subjects
from casino.store.envelope import Batch
from casino.store.eventstore import Conflict, InMemoryEventStore

SUBJECT = subjects.event("T", "T-shoe-1", "T-000001", "wager")
pytestmark = pytest.mark.anyio
PLACE = commands.PlaceWager("w1", "T", "T-000001", 1, "banker", 100)


class Counted(Held, kw_only=True):
    events: list[object] = msgspec.field(default_factory=list)


def _fold(held: Counted, event: object, causation: str) -> None:
    held.events.append((event, causation))


def _repository() -> tuple[InMemoryEventStore, Repository[Counted]]:
    store = InMemoryEventStore()
    return store, Repository(store, "wager", _fold)


async def _commit(repository: Repository[Counted], held: Counted, msg_id: str = "T-000001:w1",
                  expected: int | None = None) -> bool:
    ack = await repository.commit(held, SUBJECT, [wagerbook.PlayerSeated(1, "P1")], msg_id=msg_id, table="T",
                                  shoe="T-shoe-1", coup="T-000001", causation=PLACE.id,
                                  command=commands.digest(PLACE), expected=expected)
    return ack.duplicate


async def test_a_commit_is_folded_once_and_its_cause_kept() -> None:
    store, repository = _repository()
    held = Counted()
    assert await _commit(repository, held) is False
    assert len(held.events) == 1 and held.last_seq == 1 and held.applied == {PLACE.id: commands.digest(PLACE)}
    (stored,) = await store.read(SUBJECT)
    assert repository.take(held, stored.seq, stored.batch) is False  # the follower brings it again: folded already
    assert len(held.events) == 1


async def test_a_commit_the_stream_takes_for_a_duplicate_is_not_folded() -> None:
    _, repository = _repository()
    first, second = Counted(), Counted()
    await _commit(repository, first)
    assert await _commit(repository, second, expected=0) is True  # another instance's retry of the same write
    assert second.events == [] and second.last_seq == 0  # the record stands: the caller reads it back


async def test_a_commit_after_another_writers_is_a_conflict_and_changes_nothing() -> None:
    store, repository = _repository()
    stale, other = Counted(), Counted()
    await _commit(repository, other, msg_id="T-000001:other")
    with pytest.raises(Conflict):
        await _commit(repository, stale)
    assert stale.events == [] and len(await store.read(SUBJECT)) == 1
    await repository.catch_up(SUBJECT, stale.last_seq, _taker(repository, stale))
    assert stale.last_seq == other.last_seq and len(stale.events) == 1


def test_a_command_is_told_recorded_by_its_cause_and_an_id_used_again_is_refused() -> None:
    held = Counted(applied={PLACE.id: commands.digest(PLACE)})
    assert held.recorded(PLACE) is True
    assert held.recorded(commands.PlaceWager("w2", "T", "T-000001", 1, "banker", 100)) is False
    with pytest.raises(RuleViolation) as refused:
        held.recorded(commands.PlaceWager("w1", "T", "T-000001", 1, "banker", 500))
    assert refused.value.clause == "command id"


async def test_without_causes_a_long_lived_aggregate_keeps_none() -> None:
    repository = Repository(InMemoryEventStore(), "shoe", _fold, by_cause=False)
    held = Counted()
    await _commit(repository, held)
    assert len(held.events) == 1 and held.last_seq == 1 and held.applied == {}


def _taker(repository: Repository[Counted], held: Counted) -> Callable[[str, int, Batch], Awaitable[None]]:
    async def observe(subject: str, seq: int, batch: Batch) -> None:
        repository.take(held, seq, batch)
    return observe
