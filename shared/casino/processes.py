"""The processes a launcher starts: each ends when its launcher dies (a
parent-death signal, on Linux), and each is started again with a backoff
when it exits while the launcher runs (``Supervised``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable

PR_SET_PDEATHSIG = 1
_prctl = None
if sys.platform.startswith("linux"):
    with_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _prctl = with_libc.prctl


def dies_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child sent SIGTERM when the thread that
    started it ends (a launcher killed with -9 takes every thread with it);
    a launcher already gone by then ends the child at once. None where the
    platform has no parent-death signal."""
    if _prctl is None:
        return None
    parent, prctl = os.getpid(), _prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the launcher died before the signal was set
            os._exit(1)

    return preexec


# The first restart comes this many seconds after an exit; each next in a row waits twice as long, up to
# BACKOFF_MOST. A child that has lived for STEADY seconds is started again at once the next time.
BACKOFF_FIRST, BACKOFF_MOST, STEADY = 0.5, 15.0, 30.0


class Child:
    """One process a launcher runs under a name, and how to start it again."""

    def __init__(self, name: str, start: Callable[[], subprocess.Popen[bytes]]) -> None:
        self.name, self._start = name, start
        self.restarts = 0
        self.backoff = BACKOFF_FIRST
        self.due: float | None = None  # when it is started again, once it has exited
        self.process = start()
        self.started = time.monotonic()

    def exited(self) -> int | None:
        return self.process.poll()

    def start_again(self) -> None:
        self.process = self._start()
        self.started, self.due = time.monotonic(), None
        self.restarts += 1


class Supervised:
    """Children watched from a thread of their own: one that exits while the
    launcher runs is started again after its backoff (0.5 s, doubling to
    15 s for one that keeps dying, at once again once it has lived 30 s),
    each exit and restart said on stderr."""

    def __init__(self, children: Iterable[Child] = (), every: float = 0.25) -> None:
        self.children: list[Child] = list(children)
        self.every = every
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._watch, name="children-watch", daemon=True)

    def add(self, child: Child) -> Child:
        with self.lock:
            self.children.append(child)
        return child

    def start(self) -> None:
        self.thread.start()

    def _watch(self) -> None:
        # The thread lives as long as the launcher: a child it started again is sent its
        # parent-death signal when this thread ends (``dies_with_parent``).
        while True:
            time.sleep(self.every)
            with self.lock:
                children = list(self.children)
            for child in children:
                if not self.stopping.is_set():
                    self._look_after(child)

    def _look_after(self, child: Child) -> None:
        status = child.exited()
        if status is None:
            return
        now = time.monotonic()
        if child.due is None:
            if now - child.started >= STEADY:
                child.backoff = BACKOFF_FIRST
            child.due = now + child.backoff
            print(f"{child.name} exited (status {status}): started again in {child.backoff:g} s",
                  file=sys.stderr, flush=True)
            child.backoff = min(BACKOFF_MOST, child.backoff * 2)
        if now < child.due:
            return
        try:
            child.start_again()
        except Exception as exc:  # asked again after the next backoff
            child.due = None
            print(f"{child.name} could not be started again ({exc})", file=sys.stderr, flush=True)
            return
        print(f"{child.name} started again (pid {child.process.pid})", file=sys.stderr, flush=True)

    def stop_restarting(self) -> None:
        """No more restarts (one under way ends as its process is stopped)."""
        self.stopping.set()
