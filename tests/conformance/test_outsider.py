"""An outsider's check of a bounded run: the raw stream read as JSON and the
rules re-derived by ``tests/conformance/outsider.py``, which imports nothing of
the product (tableau, deal and pick-up orders, faces, offers and their order,
000 8.18, cut cards and burns, commitments, payouts, the recorded rulesets)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from tests.conformance import outsider
from tests.conformance.outsider import by_coup, check, read_record


def test_the_outsiders_checker_imports_nothing_of_the_product() -> None:
    tree = ast.parse(Path(outsider.__file__).read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "hashlib", "json", "collections", "pathlib", "typing"}, imported


def test_a_bounded_run_read_as_raw_json_conforms_to_the_rules_as_an_outsider_derives_them(raw_record: Path) -> None:
    record = read_record(raw_record)
    coups, shoes = by_coup(record)
    assert len(coups) >= 1400 and sum(1 for s in shoes.values() if any(e["type"] == "shoe.ended" for e in s)) >= 6
    findings = check(record)
    assert findings == [], "\n".join(findings[:40])


def test_the_outsiders_checker_finds_a_record_altered_anywhere(raw_record: Path) -> None:
    """The checker is not blind: a card, a payout, an offer and a ruleset changed each give a finding."""
    lines = raw_record.read_text(encoding="utf-8").splitlines()
    changes = {
        "baccarat.coup_resulted": lambda d: d.update(winner="tie" if d["winner"] != "tie" else "banker"),
        "settlement.coup_settled": lambda d: d["payouts"][0].update(returned=d["payouts"][0]["returned"] + 1),
        "baccarat.offer_order": lambda d: d.update(seats=d["seats"][::-1] + [99]),
        "ruleset.recorded": lambda d: d.update(content=d["content"].replace('"tie_pays":8', '"tie_pays":9')),
        "shoe.card_drawn": lambda d: d.update(card="AS" if d["card"] != "AS" else "KD"),
    }
    for kind, change in changes.items():
        altered = []
        done = False
        for line in lines:
            m = json.loads(line)
            for env in m["batch"]["events"]:
                if not done and env["data"]["type"] == kind:
                    change(env["data"])
                    done = True
            altered.append((m["subject"], m["seq"], m["batch"]["events"]))
        assert done, kind
        assert check(altered), f"a changed {kind} went unnoticed"
    # 000 8.2, 001 8.5: a change of procedure with the supervisor who directed it dropped.
    altered, done = [], False
    for line in lines:
        m = json.loads(line)
        for env in m["batch"]["events"]:
            d = env["data"]
            if (not done and d["type"] == "baccarat.coup_opened" and d["procedure"] != d["in_force"]
                    and not d["coup_id"].endswith("-000001")):
                d["supervisor"], done = "", True
        altered.append((m["subject"], m["seq"], m["batch"]["events"]))
    assert done
    assert any("no supervisor directed it" in f for f in check(altered)), "an undirected change went unnoticed"
