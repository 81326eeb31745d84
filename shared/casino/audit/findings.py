"""What verification finds: a difference between the record and the rules, named by coup and stream sequence."""

from __future__ import annotations

import msgspec


class Finding(msgspec.Struct, frozen=True):
    """A difference between what is recorded and what the rules give."""

    coup: str
    seq: int
    what: str
