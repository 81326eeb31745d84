"""Spreading independent work over the machine's cores, one process per share.

Verifying a whole casino is the same work for every table, each table on its
own. ``in_processes`` forks one process per share; each runs its share on an
event loop of its own (with its own connections) and sends its result back
through a pipe. A forked process starts with nothing read yet: it shares no
records with the others, so none of them pays for copying pages the others
touch. Where processes cannot be forked, or there is one share, the work is
done here.
"""

from __future__ import annotations

import asyncio
import gc
import os
import pickle
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

S = TypeVar("S")
R = TypeVar("R")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


async def in_processes(work: Callable[[S], Coroutine[Any, Any, R]], shares: Sequence[S]) -> list[R]:
    """``[await work(share) for share in shares]``, every share in a forked
    process of its own; the results (which must pickle) in the order of the
    shares. An exception in a share is raised here, once every process has ended."""
    if len(shares) <= 1 or not hasattr(os, "fork"):
        return [await work(share) for share in shares]
    children = [_fork(work, share) for share in shares]  # all forked before any thread is started
    results = await asyncio.gather(*(asyncio.to_thread(_gather, pid, fd) for pid, fd in children))
    for ok, value in results:
        if not ok:
            raise value
    return [value for _, value in results]


def _fork(work: Callable[[S], Coroutine[Any, Any, R]], share: S) -> tuple[int, int]:
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    # The child: runs its share on a loop of its own (the parent's loop, inherited
    # but not running here, is never touched), never returns into the caller's
    # code and never runs its exit handlers. What it inherited is left out of its
    # garbage collections: a collection walking the parent's objects would copy
    # every page they are on.
    gc.freeze()
    os.close(read)
    try:
        try:
            out = pickle.dumps((True, asyncio.run(work(share))), pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # the parent raises it
            try:
                out = pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
            except Exception:
                out = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")), pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write, "wb") as pipe:
            pipe.write(out)
    finally:
        os._exit(0)


def _gather(pid: int, fd: int) -> tuple[bool, Any]:
    with os.fdopen(fd, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    if not data:
        return False, RuntimeError(f"worker process {pid} ended without a result")
    result: tuple[bool, Any] = pickle.loads(data)
    return result
