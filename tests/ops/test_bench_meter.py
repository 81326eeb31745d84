"""The benchmarks' per-process figures measure what they are named for: time
on a core, time runnable but waiting for one, and time in the kernel. Each is
read off a child process doing one kind of work. The work is measured in
time on a core (``process_time``), and the meter starts once the child's
interpreter is up: on a busy machine a process gets less of a core in the
same wall time, and waits longer to start, but does the same work."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bench.load import Meter

SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: sum(range(10000))\n"
KERNEL = "import os, time\nt = time.process_time()\nwhile time.process_time() - t < {s}: os.urandom(1 << 16)\n"


@contextmanager
def children(code: str, count: int = 1, cpu: int | None = None) -> Iterator[Meter]:
    """``count`` children each running ``code`` (optionally all on one core), a
    meter started on them; the block ends once all have done their work."""
    prefix = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n" if cpu is not None else ""
    ready = "import sys\nprint('ready', flush=True)\nsys.stdin.readline()\n"
    done = "print('done', flush=True)\nimport time\ntime.sleep(60)\n"
    procs = [subprocess.Popen([sys.executable, "-c", prefix + ready + code + done], stdout=subprocess.PIPE,
                              stdin=subprocess.PIPE) for _ in range(count)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        meter = Meter({f"child{i}": p.pid for i, p in enumerate(procs)})
        for p in procs:  # all begin together
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == b"done\n"
        yield meter
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_time_on_a_core_is_the_cpu_a_process_used() -> None:
    with children(SPIN.format(s=0.4)) as meter:
        spent = meter.per_coup(1)
    assert 350 <= spent["cpu_ms_per_coup"]["child0"] <= 2000
    assert spent["kernel_ms_per_coup"]["child0"] < 100


def test_a_sleeping_process_neither_runs_nor_waits() -> None:
    with children("import time\ntime.sleep(0.4)\n") as meter:
        spent = meter.per_coup(1)
    assert spent["cpu_ms_per_coup"]["child0"] < 100
    assert spent["wait_ms_per_coup"]["child0"] < 200


def test_two_processes_on_one_core_each_wait_for_it() -> None:
    with children(SPIN.format(s=0.3), count=2, cpu=min(os.sched_getaffinity(0))) as meter:
        spent = meter.per_coup(1)
    for child in ("child0", "child1"):  # each spins 300 ms on the core, and waits while the other does
        assert spent["cpu_ms_per_coup"][child] >= 290
        assert spent["wait_ms_per_coup"][child] >= 100


def test_kernel_time_is_counted_apart() -> None:
    with children(KERNEL.format(s=0.4)) as meter:
        spent = meter.per_coup(1)
    assert spent["kernel_ms_per_coup"]["child0"] >= 0.5 * spent["cpu_ms_per_coup"]["child0"] > 0


def test_figures_are_per_coup() -> None:
    with children(SPIN.format(s=0.4)) as meter:
        one, ten = meter.per_coup(1), meter.per_coup(10)
    assert ten["cpu_ms_per_coup"]["child0"] <= one["cpu_ms_per_coup"]["child0"] / 10 + 1
