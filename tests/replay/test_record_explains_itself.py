"""The recipes docs/replay.md gives for recomputing a commitment and a
ruleset's digest from the record alone are the ones the code uses."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from casino import rulesets
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

    from casino.replay import _DESCRIBE
    from casino.store.envelope import AnyEvent

    undescribed = [k.__name__ for k in get_args(AnyEvent) if k not in _DESCRIBE]
    assert not undescribed, undescribed
