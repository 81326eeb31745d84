"""How the services are put together: each service's pieces import one way
(no circle inside ``services/``, type-only imports counted), no module works
on the service handed to it (``svc``), each service dispatches its commands
by a table of handlers, and the wiring (``services/runner.py``) imports no
service and switches on no kind."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in SERVICES.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def _imports(tree: ast.Module, known: set[str]) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names & known - {"services"}


def test_no_import_circle_inside_the_services() -> None:
    modules = _modules()
    graph = {name: _imports(tree, set(modules)) - {name} for name, tree in modules.items()}
    circles = []

    def walk(start: str, name: str, path: list[str]) -> None:
        for after in sorted(graph[name]):
            if after == start:
                circles.append(" -> ".join([*path, start]))
            elif after not in path and after > start:
                walk(start, after, [*path, after])

    for name in sorted(graph):
        walk(name, name, [name])
    assert circles == []


# Where a service is built and hosted (its wiring, its consumer, the runner's
# pieces), and so handed round; its handlers are not.
HOSTING = ("app", "consumer", "__main__")


def test_no_handler_module_is_handed_the_service() -> None:
    handed = [f"{name}: {node.name}" for name, tree in _modules().items() for node in ast.walk(tree)
              if name.count(".") == 2 and name.rsplit(".", 1)[1] not in HOSTING
              and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
              and any(a.arg in ("svc", "service") for a in node.args.args)]
    assert handed == []


def test_the_runner_imports_no_service_and_switches_on_no_kind() -> None:
    source = (SERVICES / "runner.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = _imports(tree, set(_modules()))
    assert {name for name in imported if name.count(".") >= 1 and name.split(".")[1] not in
            ("runner", "wiring", "messaging", "followers", "ownership", "repository")} == set()
    assert "kind ==" not in source
