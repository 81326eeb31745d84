"""The recipes docs/replay.md gives for recomputing a commitment and a
ruleset's digest from the record alone are the ones the code uses."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from casino.config import rulesets
from casino.rules import shoe

DOC = (Path(__file__).resolve().parents[2] / "docs" / "replay.md").read_text(encoding="utf-8")


def test_the_documented_commitment_example_is_what_the_shoe_publishes() -> None:
    m = re.search(r"printf '([^:']+):([^']+)' \| sha256sum\n\s+([0-9a-f]{64})", DOC)
    assert m is not None, "the worked example is missing from docs/replay.md"
    salt, cards, published = m.groups()
    assert shoe.commitment(tuple(cards.split(" ")), salt) == published
    assert hashlib.sha256(f"{salt}:{cards}".encode()).hexdigest() == published


def test_the_documented_digest_is_the_sha256_of_the_recorded_content() -> None:
    m = re.search(r"sha256sum \| cut -c1-16\n\s+([0-9a-f]{16})\n\n\(the digest of `([a-z0-9-]+)`", DOC)
    assert m is not None, "the digest example is missing from docs/replay.md"
    digest, name = m.groups()
    content = rulesets.content(rulesets.load(name))
    assert rulesets.digest(content) == digest == hashlib.sha256(content.encode()).hexdigest()[:16]
    assert rulesets.from_content(content) == rulesets.load(name)  # the content is the whole ruleset


def test_a_replay_describes_every_kind_of_event_in_words() -> None:
    from typing import get_args

    from casino.audit.replay import _DESCRIBE
    from casino.store.envelope import AnyEvent

    undescribed = [k.__name__ for k in get_args(AnyEvent) if k not in _DESCRIBE]
    assert not undescribed, undescribed


@pytest.mark.anyio
async def test_coups_verify_under_their_recorded_ruleset_after_the_file_has_changed(
        nats_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ruleset a coup was dealt under is in the record: a ruleset file
    changed since (tie paid 9 to 1, not 8) does not change what the coups
    verify against; without the record, the changed file is reported."""
    from casino.audit.audits import verify_history
    from casino.cli.simulator import Simulator
    from casino.config.tables import TableConfig
    from casino.rules.ruleset import BaccaratRules
    from casino.store import subjects
    from casino.store.envelope import RulesetRecorded
    from tests.e2e.casino import Casino
    from tests.variants import ruleset_variant

    path = Path(ruleset_variant(tmp_path, "baccarat-000-methods", tie_pays=8))
    tables = {"B": TableConfig(str(path))}
    async with Casino(nats_url, tables) as casino:
        await Simulator(casino.nc, tables, seed=2, patience=40).run(3)
        stored = await casino.store.read(f"{subjects.EVENTS}.>")
    recorded = [e.data for m in stored for e in m.batch.events if isinstance(e.data, RulesetRecorded)]
    assert [(r.table, r.name) for r in recorded] == [("B", str(path))]
    dealt_under = rulesets.from_content(recorded[0].content)
    assert isinstance(dealt_under, BaccaratRules) and dealt_under.tie_pays == 8
    path.write_text(path.read_text(encoding="utf-8").replace("tie_pays = 8", "tie_pays = 9"), encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    later = rulesets.monotonic() + rulesets.RECHECK_S
    monkeypatch.setattr(rulesets, "monotonic", lambda: later)  # the file looked at again a second later
    assert rulesets.load(str(path)).tie_pays == 9  # type: ignore[union-attr]
    report = verify_history(stored)
    assert (report.coups, report.findings) == (3, [])
    without = [m for m in stored if subjects.tokens(m.subject)[3] != "ruleset"]
    findings = verify_history(without).findings
    assert len(findings) == 3 and all("neither the record nor the file" in f.what for f in findings)
