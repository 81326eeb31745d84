"""Text a terminal supplies (a breach note, an approval's reference, a bet's
name) and how any recorded text is shown.

On the way in, ``Text`` is printable and bounded: no control character (an
escape sequence could clear an officer's screen and draw a false verdict),
no bidirectional override or invisible formatting character (which could
make one record read as another). On the way out, ``escaped`` shows any
character of those that a record holds anyway (one written before the rule)
as a visible escape, so what is printed is what is recorded.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

# C0 and C1 controls, DEL, and Unicode's invisible formatting characters:
# zero-width, bidirectional marks, embeddings, overrides and isolates, line
# and paragraph separators, the byte order mark.
_HIDDEN = r"\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
TEXT_MOST = 200
Text = Annotated[str, msgspec.Meta(pattern=f"^[^{_HIDDEN}]*$", max_length=TEXT_MOST)]
# A name among a ruleset's (a bet, a procedure): lower-case letters, digits and '_'.
Name = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9_]{0,40}$")]

_SHOWN = re.compile(f"[{_HIDDEN}]")


def escaped(text: str, keep_newlines: bool = True) -> str:
    """``text`` with every control and invisible formatting character shown
    as an escape (``\\x1b``, ``\\u202e``); newlines kept where ``keep_newlines``."""
    def shown(m: re.Match[str]) -> str:
        c = m.group()
        if c == "\n" and keep_newlines:
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    return _SHOWN.sub(shown, text)


def money(minor: int, currency: str = "", signed: bool = False) -> str:
    """An amount in a table's minor unit (a hundredth) as a person reads it:
    ``EUR 1,234.50``; ``signed``, with its sign always shown (``+``/``-``),
    for a net, which is always the house's (positive: the house won it)."""
    sign = "-" if minor < 0 else "+" if signed and minor > 0 else ""
    return f"{currency + ' ' if currency else ''}{sign}{abs(minor) // 100:,}.{abs(minor) % 100:02d}"
