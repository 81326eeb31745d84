"""docs/clauses.md covers every numbered clause of the regulations, with code that
exists and a test that exists and cites the clause in its name."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REGULATIONS = ROOT / "docs" / "regulations"
TABLE = ROOT / "docs" / "clauses.md"

# How each document numbers its clauses.
PATTERNS = {
    "000": re.compile(r"^\s*(8\.\d+(?:\.\d+)?)\s", re.M),
    "001": re.compile(r"^(8\.\d+)$", re.M),
    "002": re.compile(r"\((\d+)\) [A-Z]"),
    "003": re.compile(r"^(7\.\d+) ", re.M),
}


def regulation_clauses() -> set[str]:
    found = set()
    for doc, pattern in PATTERNS.items():
        [path] = REGULATIONS.glob(f"{doc}-*.txt")
        for number in pattern.findall(path.read_text(encoding="utf-8")):
            found.add(f"{doc} ({number})" if doc == "002" else f"{doc} {number}")
    return found


def table_rows() -> list[tuple[str, str, list[str]]]:
    rows = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.match(r"^00[0-3] ", cells[0]):
            rows.append((cells[0], cells[2].strip("`"), re.findall(r"`(test_\w+)`", cells[3])))
    return rows


def defined_tests() -> set[str]:
    names = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
    return names


def cites(test: str, clause: str) -> bool:
    doc, number = clause.split(" ", 1)
    digits = re.sub(r"[^0-9a-z]+", "_", number).strip("_")
    return f"_{doc}_" in test and re.search(rf"_{digits}(_|$)", test) is not None


def test_the_regulations_are_read_in_full() -> None:
    clauses = regulation_clauses()
    assert {"000 8.1", "000 8.33.3", "001 8.12", "002 (11)", "003 7.10"} <= clauses
    assert len(clauses) == 50 + 8 + 11 + 8


def test_every_clause_of_the_regulations_is_in_the_table() -> None:
    in_table = {clause for clause, _, _ in table_rows()}
    assert regulation_clauses() - in_table == set()


def test_every_code_reference_resolves() -> None:
    for clause, ref, _ in table_rows():
        module, _, name = ref.partition(":")
        obj: object = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
        assert obj is not None, clause


def test_every_listed_test_exists_and_cites_its_clause() -> None:
    names = defined_tests()
    for clause, _, tests in table_rows():
        assert tests, clause
        for test in tests:
            assert test in names, (clause, test)
            assert cites(test, clause), (clause, test)
