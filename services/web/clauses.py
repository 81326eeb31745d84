"""The regulations' text, clause by clause, for the links from each recorded
step to the clause it followed: the four documents as copied verbatim into
docs/regulations/ (``NNN-<name>.txt``)."""

from __future__ import annotations

import re
from pathlib import Path

from markupsafe import Markup, escape

from casino.rules.text import escaped

# A clause as the record cites it: the document, then its numbers ("000 8.19, 8.28", "001 8.9(a)",
# "002 (4)(a)"); a number with no document before it is no clause of these.
CITED = re.compile(r"\b(00[0-3])\b|(\d+(?:\.\d+)+(?:\([0-9a-z]+\))*|(?:\(\d+\))+(?:\([a-z]\))*)")


# A clause's number as a link names it: "8.19", "8.9(a)", "(4)(a)"; a few digits to each part.
NUMBER = re.compile(r"\d{1,3}(?:\.\d{1,3}){0,5}(?:\([0-9a-z]{1,3}\)){0,3}|(?:\(\d{1,3}\)){1,3}(?:\([a-z]\)){0,2}")


class Regulations:
    def __init__(self, directory: Path) -> None:
        self.texts = {p.name[:3]: p.read_text(encoding="utf-8") for p in sorted(directory.glob("[0-9][0-9][0-9]-*.txt"))}
        if not self.texts:
            raise FileNotFoundError(f"no regulation in {directory} (NNN-<name>.txt)")

    def text(self, document: str, number: str) -> str | None:
        """The clause's text, its sub-clauses with it; None where the document has no such clause."""
        text = self.texts.get(document)
        if text is None or not NUMBER.fullmatch(number):
            return None
        inline = re.match(r"\((\d+)\)", number)
        if inline:  # numbered in the running text: "(1) ... (2) ..."
            n = int(inline.group(1))
            start = re.search(rf"\({n}\)\s", text)
            if start is None:
                return None
            end = re.compile(rf"\({n + 1}\)\s").search(text, start.end())
            return text[start.start():end.start() if end else len(text)].strip()
        base = number.split("(")[0]
        depth = base.count(".")
        start = re.compile(rf"^{re.escape(base)}(?![.\d])", re.M).search(text)
        if start is None:
            return None
        end = re.compile(rf"^\d+(?:\.\d+){{0,{depth}}}(?![.\d])", re.M).search(text, start.end())
        return text[start.start():end.start() if end else len(text)].strip()


def linked(clause: str) -> Markup:
    """A recorded clause as HTML: its text escaped (and shown inert), each
    regulation it cites a link to that clause's text."""
    out, document, at = [], "", 0
    for m in CITED.finditer(clause):
        if m.group(1):
            document = m.group(1)
        elif document:
            out += [escape(escaped(clause[at:m.start()])),
                    Markup('<a class="clause" href="/clause/{}/{}">{}</a>').format(document, m.group(2), m.group(2))]
            at = m.end()
    return Markup("").join([*out, escape(escaped(clause[at:]))])
