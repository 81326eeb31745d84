"""Every clause a recorded step cites is the clause that requires that step,
or the setting that decides it: each (document, procedure, event) → clause
pairing of a bounded run is one that docs/clauses.md lists, and each pairing
listed there is one the run shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conformance.outsider import read_record

DOC = Path(__file__).resolve().parents[2] / "docs" / "clauses.md"
HEADING = "## Which clause each recorded step cites"


def cited(raw: Path) -> set[tuple[str, str, str, str]]:
    """(document, procedure in force, event type, clause) of every recorded event that cites a clause."""
    record = read_record(raw)
    documents: dict[str, str] = {}  # table -> the document its ruleset deals under
    for _, _, events in record:
        for env in events:
            if env["data"]["type"] == "ruleset.recorded":
                documents[env["table"]] = json.loads(env["data"]["content"])["document"]
    procedure: dict[str, str] = {}  # coup -> the procedure in force
    out = set()
    for subject, _, events in record:
        for env in events:
            e = env["data"]
            if e["type"] == "baccarat.coup_opened":
                procedure[env["coup"]] = e["procedure"]
            if "clause" in e:
                # The shoe's record: its own messages, and what a coup's message carries of it.
                kind = "shoe" if subject.endswith(".shoe") or e["type"].startswith("shoe.") else \
                    procedure.get(env["coup"], "-")
                out.add((documents[env["table"]], kind, e["type"], e["clause"]))
            if e["type"] == "baccarat.procedure_fell_back":
                procedure[env["coup"]] = e["procedure"]
    return {(d, "-" if d in ("002", "003") and p != "shoe" else p, t, c) for d, p, t, c in out}


def documented() -> dict[tuple[str, str, str, str], str]:
    """Each listed pairing, and how often a bounded run shows it (``every run``, ``now and then``)."""
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index(HEADING):].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.fullmatch(r"00[0-3]", cells[0]):
            rows[(cells[0], cells[1], cells[2], cells[3])] = cells[4]
    return rows


def test_every_clause_a_recorded_step_cites_is_the_one_docs_clauses_md_lists_for_it(raw_record: Path) -> None:
    seen, listed = cited(raw_record), documented()
    assert listed, f"no pairing table under {HEADING!r} in {DOC}"
    assert not seen - set(listed), f"cited but not listed in docs/clauses.md: {sorted(seen - set(listed))}"
    always = {row for row, often in listed.items() if often == "every run"}
    assert not always - seen, f"listed as seen in every run, and not cited in this one: {sorted(always - seen)}"
