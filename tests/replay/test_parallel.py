"""Work spread over processes: each share in a process of its own, results in
the order of the shares, a failure in any share raised to the caller."""

from __future__ import annotations

import os

import pytest

from casino.audit.parallel import in_processes

pytestmark = pytest.mark.anyio


async def _square_all(share: list[int]) -> tuple[int, list[int]]:
    return os.getpid(), [n * n for n in share]


async def test_each_share_is_worked_in_a_process_of_its_own_and_comes_back_in_order() -> None:
    shares = [[1, 2], [3], [4, 5, 6]]
    results = await in_processes(_square_all, shares)
    assert [squares for _, squares in results] == [[1, 4], [9], [16, 25, 36]]
    pids = {pid for pid, _ in results}
    assert len(pids) == 3 and os.getpid() not in pids


async def test_one_share_is_worked_here() -> None:
    assert await in_processes(_square_all, [[7]]) == [(os.getpid(), [49])]


async def _refuse_odd(share: list[int]) -> int:
    if share[0] % 2:
        raise ValueError(f"{share[0]} is odd")
    return share[0]


async def test_a_failing_share_raises_its_exception_here() -> None:
    with pytest.raises(ValueError, match="3 is odd"):
        await in_processes(_refuse_odd, [[2], [3], [4]])
    assert await in_processes(_refuse_odd, [[2], [4]]) == [2, 4]
