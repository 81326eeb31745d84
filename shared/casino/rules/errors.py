"""The one error a dealing step raises when it is not allowed."""

from __future__ import annotations


class RuleViolation(Exception):
    """A step the rules forbid, with the clause that forbids it.

    ``clause`` names the document and clause (``"000 8.11"``, ``"003 7.9"``) or,
    for a standard game rule the seeds take for granted, ``"game rules: ..."``;
    for a ruleset setting it is ``"ruleset <field>"``.
    """

    def __init__(self, clause: str, reason: str) -> None:
        super().__init__(f"{clause}: {reason}")
        self.clause = clause
        self.reason = reason
