"""`casino run` as an operator sees it in a terminal (a pseudo-terminal of 120
columns read by a terminal emulator, pyte): every service's metrics, health and
readiness served on the loopback ports it prints, and the live console redrawn
in place, as ``top`` redraws, one line a table, never wrapped."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyte

from casino.cli.run import SERVICES
from casino.nats.server import free_port

COLUMNS, ROWS = 120, 40
TABLES = ("BAC000-1", "BAC001-1", "BJ002-1", "BJ003-1")


def served(url: str) -> tuple[int, bytes]:
    """The status and body served (a 503, not ready yet, is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_console_redraws_in_place_one_line_a_table_and_every_service_serves_its_metrics(tmp_path: Path) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "casino.cli.main", "run", "--coups", "8", "--var", str(tmp_path),
                             "--port", str(free_port()), "--seed", "3"],
                            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    screen = pyte.Screen(COLUMNS, ROWS)
    stream = pyte.ByteStream(screen)
    raw, answers = b"", {}
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal closed: the run has ended
                    break
                if not chunk:
                    break
                raw += chunk
                stream.feed(chunk)
            if not answers and b"dealing at" in raw:  # every service has started: ask each what it serves
                for name, port in re.findall(rb"^(\S+) +http://127\.0\.0\.1:(\d+)/metrics", raw, re.M):
                    answers[name.decode()] = [served(f"http://127.0.0.1:{int(port)}{path}")
                                              for path in ("/metrics", "/healthz", "/readyz")]
            if proc.poll() is not None and not ready:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        os.close(master)
    text = raw.decode(errors="replace")
    assert proc.returncode == 0, text
    assert set(answers) == {s.replace("_", "-") for s in SERVICES}, text
    for name, [(m_status, metrics), (h_status, _), (r_status, _)] in answers.items():
        assert m_status == h_status == 200 and r_status in (200, 503), name
        assert b"casino_ready{" in metrics and f'service="{name}"'.encode() in metrics, name

    assert raw.count(b"\x1b[J") >= 2, "the console was drawn once: nothing was redrawn"
    rows = [line.rstrip() for line in screen.display]
    headers = [i for i, line in enumerate(rows) if line.startswith("table ")]
    assert len(headers) == 1, "\n".join(rows)  # one block on the screen: every redraw was in place
    block = rows[headers[0] + 1:headers[0] + 1 + len(TABLES)]
    assert [line.split()[0] for line in block] == list(TABLES), "\n".join(rows)
    assert all(line.split()[-3] == "8" for line in block), "\n".join(rows)  # settled: every coup
    # the house's net in the table's currency, its sign always shown; the legend says what each column is
    assert all(line.split()[-2] == "EUR" and re.fullmatch(r"[+-]?[\d,]+\.\d\d", line.split()[-1]) for line in block), \
        "\n".join(rows)
    assert "house net: + house won" in text and "a coup every" not in text  # --coups: flat out
    assert rows[headers[0] + 1 + len(TABLES)] == "every coup dealt and settled", "\n".join(rows)
    assert sum(line.startswith(TABLES) for line in rows) == len(TABLES), "\n".join(rows)
