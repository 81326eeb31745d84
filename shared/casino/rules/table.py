"""Seat geometry: where the seats are, seen from the dealer.

The seeds speak of "the dealer's left", "the seat nearest to the right of the
dealer", "clockwise", "counter-clockwise" and "the lowest numbered seat". Seats
are labels (a casino may skip numbers), listed from the dealer's left to the
dealer's right. Seen from above with the dealer facing the players, moving from
the dealer's left towards the dealer's right is clockwise (002 (4), 003 7.3), and
from the dealer's right towards the left is counter-clockwise (000 8.8, 002 (8)).
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from casino.rules.errors import RuleViolation


class Table(msgspec.Struct, frozen=True):
    """The seats of one table, from the dealer's left to the dealer's right."""

    seats: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.seats:
            raise ValueError("a table needs at least one seat")
        if len(set(self.seats)) != len(self.seats):
            raise ValueError("seat labels must be unique")
        if any(s < 1 for s in self.seats):
            raise ValueError("seat labels are positive numbers")

    def check_seat(self, seat: int) -> None:
        """Refuse a seat the table does not have."""
        if seat not in self.seats:
            raise RuleViolation("ruleset seats", f"seat {seat} does not exist at this table")

    def clockwise(self, among: Collection[int] | None = None) -> list[int]:
        """Seats from the dealer's left to the dealer's right (002 (4), 003 7.3)."""
        return [s for s in self.seats if among is None or s in among]

    def counter_clockwise(self, among: Collection[int] | None = None) -> list[int]:
        """Seats from the dealer's right to the dealer's left (002 (8), 003 7.7)."""
        return self.clockwise(among)[::-1]

    def nearest_dealers_right(self, among: Collection[int]) -> int:
        """The seat nearest to the right of the dealer (000 8.7)."""
        return self.counter_clockwise(among)[0]

    @staticmethod
    def lowest_numbered(among: Collection[int]) -> int:
        """The seat with the lowest number (000 8.15, 8.25; 001 8.9(b))."""
        return min(among)

    def counter_clockwise_from(self, start: int, among: Collection[int]) -> list[int]:
        """``among``, beginning at ``start`` and moving counter-clockwise around the
        table, passing the dealer's position from the left end to the right end."""
        ring = self.counter_clockwise(set(among) | {start})
        i = ring.index(start)
        return [s for s in ring[i:] + ring[:i] if s in among]
