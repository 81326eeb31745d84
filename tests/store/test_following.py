"""What a service keeps of each coup as its consumer delivers it: from the
coup's first message, only while deliveries follow one another."""

from __future__ import annotations

from casino.rules.shoe import RoundStarted
from casino.store import subjects
from casino.store.eventstore import Stored
from casino.store.following import Delivery, Following
from tests.store.test_eventstore_contract import DEALT, batch


def message(seq: int, coup: str, first: bool = False, table: str = "T1") -> Stored:
    subject = subjects.event(table, f"{table}-shoe-1", coup, "shoe" if first else "coup")
    return Stored(seq, subject, batch(RoundStarted(f"{table}-shoe-1", coup) if first else DEALT, table=table, coup=coup))


def follow(following: Following, *messages: tuple[Stored, int, int]) -> None:
    for m, consumer_seq, delivered in messages:
        following.take(m, Delivery(m.seq, consumer_seq, delivered, 0))


def test_a_coup_is_kept_from_its_first_message_while_deliveries_follow_one_another() -> None:
    following = Following(first=(RoundStarted,))
    follow(following, (message(1, "T1-000001"), 1, 1),  # joined in the middle of this coup
           (message(2, "T1-000002", first=True), 2, 1), (message(3, "T1-000002"), 3, 1))
    assert following.pop("T1-000001") is None
    assert [m.seq for m in following.pop("T1-000002") or []] == [2, 3]
    assert following.pop("T1-000002") is None  # popped once


def test_a_gap_or_a_redelivery_forgets_what_was_kept() -> None:
    for gap in [(message(3, "T1-000001"), 4, 1), (message(3, "T1-000001"), 3, 2)]:
        following = Following(first=(RoundStarted,))
        follow(following, (message(1, "T1-000001", first=True), 1, 1), (message(2, "T1-000001"), 2, 1), gap)
        assert following.pop("T1-000001") is None
    following = Following(first=(RoundStarted,))  # a coup's first message delivered again is not a start
    follow(following, (message(1, "T1-000001", first=True), 1, 2))
    assert following.pop("T1-000001") is None


def test_at_most_the_two_latest_coups_of_a_table_are_kept() -> None:
    following = Following(first=(RoundStarted,))
    follow(following, *((message(n, f"T1-00000{n}", first=True), n, 1) for n in range(1, 4)),
           (message(4, "T2-000001", first=True, table="T2"), 4, 1))
    assert sorted(following.coups) == ["T1-000002", "T1-000003", "T2-000001"]
