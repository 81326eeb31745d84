"""Reading ruleset files: the I/O beside the pure ``casino.rules.ruleset``."""

from __future__ import annotations

import hashlib
import tomllib
from functools import lru_cache
from pathlib import Path
from time import monotonic

import msgspec

from casino.rules.ruleset import BaccaratRules, BlackjackRules, Ruleset, RulesetError, parse_ruleset

BUILT_IN = Path(__file__).parents[1] / "rulesets"


def available() -> list[str]:
    """Names of the rulesets shipped with the product."""
    return sorted(p.stem for p in BUILT_IN.glob("*.toml"))


RECHECK_S = 1.0
# name or path: when its file was last looked at, the file, its stamp then
_stamps: dict[str, tuple[float, Path, int]] = {}


def load(name_or_path: str) -> Ruleset:
    """Load a ruleset by built-in name or from a TOML file path (read again
    when the file changes, which is looked at once a second at most: a
    verification loads the ruleset of every coup)."""
    now = monotonic()
    seen = _stamps.get(name_or_path)
    if seen is not None and now - seen[0] < RECHECK_S:
        return _load(seen[1], seen[2], name_or_path)
    path = Path(name_or_path)
    if not path.suffix:
        path = BUILT_IN / f"{name_or_path}.toml"
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        _stamps.pop(name_or_path, None)
        raise RulesetError(f"no ruleset {name_or_path!r} (built in: {', '.join(available())})") from None
    _stamps[name_or_path] = (now, path, stamp)
    return _load(path, stamp, name_or_path)


@lru_cache(maxsize=64)
def _load(path: Path, stamp: int, name_or_path: str) -> Ruleset:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RulesetError(f"no ruleset {name_or_path!r} (built in: {', '.join(available())})") from None
    except tomllib.TOMLDecodeError as exc:
        raise RulesetError(f"{path}: not valid TOML: {exc}") from None
    try:
        return parse_ruleset(data)
    except RulesetError as exc:
        raise RulesetError(f"{path.name}: {exc}") from None


def content(rules: Ruleset) -> str:
    """A ruleset's full content as recorded (``ruleset.recorded``): its JSON
    text, every setting in the order the ruleset declares them, defaults included."""
    return msgspec.json.encode(rules).decode()


def digest(text: str) -> str:
    """The digest every ``coup.configured`` names: the first 16 hexadecimal
    digits of the SHA-256 of a ruleset's recorded content (UTF-8)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_digests: dict[int, tuple[Ruleset, str]] = {}  # by the ruleset object: the object, its digest


def digest_of(rules: Ruleset) -> str:
    """``digest(content(rules))``, worked out once for each ruleset object (a
    verification asks it of every coup, the dealer-policy at every opening)."""
    hit = _digests.get(id(rules))
    if hit is None or hit[0] is not rules:
        if len(_digests) >= 256:
            _digests.clear()
        hit = _digests[id(rules)] = (rules, digest(content(rules)))
    return hit[1]


def from_content(text: str) -> Ruleset:
    """The ruleset a record holds, validated as a ruleset file is."""
    try:
        rules: Ruleset = msgspec.json.decode(text, type=BaccaratRules | BlackjackRules)
    except msgspec.ValidationError as exc:
        raise RulesetError(str(exc)) from None
    return rules
