"""Which clause governs each dealing step under each method (000) or style (001).

Where no clause of the texts requires a step, it cites what does decide it: a
ruleset setting (``setting <name>``), or ``game rules`` for a step of the
standard game the texts take for granted (docs/clauses.md lists every pairing).
"""

from __future__ import annotations

_A, _B, _C, _D, _SA, _SB = "method_a", "method_b", "method_c", "method_d", "style_a", "style_b"
GAME_RULES = "game rules"
UNFILLED_ROLE = "setting unfilled_role"  # 001 8.9(d) refers to a rule 8.18 we do not have

CLAUSES: dict[str, dict[str, str]] = {
    "procedure": {_A: "000 8.2", _B: "000 8.4", _C: "000 8.15", _D: "000 8.25", _SA: "001 8.5", _SB: "001 8.5"},
    "order": {_B: "000 8.5", _C: "000 8.15", _D: "000 8.25", _SB: "001 8.9"},
    "first": {_B: "000 8.5", _SB: "001 8.9(a)"},
    "first_tied": {_B: "000 8.7", _SB: "001 8.9(b)"},
    "next_equal": {_B: "000 8.8", _SB: "001 8.9(b)"},
    "next_lower": {_B: "000 8.6", _SB: "001 8.9(c)"},
    "all_declined": {_B: "000 8.10.2", _C: "000 8.16", _D: "000 8.26", _SB: "001 8.9(d)"},
    "no_wager": {_B: "000 8.10.1", _C: "000 8.16", _D: "000 8.26", _SB: "001 8.9(d)"},
    "holder": {_B: "000 8.9", _C: "000 8.21", _D: "000 8.30", _SB: "001 8.11(c)"},
    "plays_player": {_C: "000 8.17.2", _D: "000 8.27.2"},
    # Each card dealt, by the procedure's dealing clause (the third cards too).
    "dealt": {_A: "000 8.3.1", _B: "000 8.5", _C: "000 8.19", _D: "000 8.28", _SA: "001 8.6", _SB: "001 8.12"},
    "deals": {_A: "000 8.1", _B: "000 8.1", _C: "000 8.19", _D: "000 8.28", _SA: "001 8.7", _SB: "001 8.11(b)"},
    "pass": {_B: "000 8.5", _SB: "001 8.11(b)"},
    "expose": {_B: "000 8.13", _C: "000 8.23", _D: "000 8.32", _SB: "001 8.11(a)"},
    # Cards given back unexposed: the dealer collects them and places them face up (Style B: returned to the dealer).
    "return": {_B: "000 8.14.1", _C: "000 8.24.1", _D: "000 8.33.1", _SB: "001 8.11(b)"},
    "breach": {_B: "000 8.12", _C: "000 8.22", _D: "000 8.31", _SB: "001 8.11(b)"},
    # Style B: the dealer turns over what a Banker or Player gave back unexposed, and announces (no clause of 001).
    "turn_over": {_B: "000 8.14.2", _C: "000 8.24.2", _D: "000 8.33.2", _SB: GAME_RULES},
    "turn_over_unfilled": {_B: "000 8.14.2", _C: "000 8.24.2", _D: "000 8.33.2", _SB: UNFILLED_ROLE},
    "announce": {_A: "000 8.3.2", _B: "000 8.14.3", _C: "000 8.24.3", _D: "000 8.33.3", _SA: "001 8.6", _SB: GAME_RULES},
    "forfeit": {_C: "000 8.20", _D: "000 8.29"},
}


def choice(procedure: str) -> str:
    """The clause that makes ``procedure`` the casino's choice among those the
    table may use: 000 8.2 for a method, 001 8.5 for a style."""
    return "000 8.2" if procedure.startswith("method") else "001 8.5"


def clause(step: str, procedure: str) -> str:
    """The clause for ``step`` under ``procedure``."""
    return CLAUSES[step].get(procedure, CLAUSES[step].get(_B, "game rules"))
