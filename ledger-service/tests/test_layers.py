"""The layout holds: no import loops, SQL only in the store, core without Flask, short functions.

Read from the source with `ast` (nothing is imported), so a violation fails here with the file
and line instead of showing up later as a tangle.
"""

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "durable_ledger"
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX))\b", re.I)
MAX_FUNCTION_LINES = 60


def modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        yield name, path, ast.parse(path.read_text(), str(path))


def _resolve(name, path, node, known):
    """The project modules an import refers to: `from . import x` names module x when there is
    one (and the package only for names that are not modules)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    base = package.split(".")
    if node.level:
        base = base[:len(base) - node.level + 1]
    target = ".".join(base + ([node.module] if node.module else []))
    submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
    return submodules + ([target] if len(submodules) < len(node.names) else [])


def import_graph(top_level_only=True):
    mods = {name: (path, tree) for name, path, tree in modules()}
    graph = {}
    for name, (path, tree) in mods.items():
        nodes = tree.body if top_level_only else list(ast.walk(tree))
        deps = set()
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(t for t in _resolve(name, path, node, mods) if t in mods and t != name)
        graph[name] = deps
    return graph


def cycles(graph):
    found, state = [], {}

    def visit(n, stack):
        state[n] = "open"
        for m in sorted(graph[n]):
            if state.get(m) == "open":
                found.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m, stack + [m])
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    return found


def test_no_import_loops():
    # Package faces (`__init__` re-exporting their modules) are where Python resolves a loop
    # anyway; a loop through one is still a loop, so they are not excluded.
    assert cycles(import_graph(top_level_only=False)) == []


def test_sql_and_backend_checks_live_in_the_store():
    offenders = []
    for name, path, tree in modules():
        if name.startswith("durable_ledger.store"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                offenders.append(f"{path.name}:{node.lineno} SQL text")
            if isinstance(node, ast.Name) and node.id in ("is_sqlite", "SqliteDatabase", "execute_sql"):
                offenders.append(f"{path.name}:{node.lineno} {node.id}")
            if isinstance(node, ast.Attribute) and node.attr in ("execute_sql", "is_sqlite"):
                offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert offenders == []


def test_core_does_not_speak_http():
    for name, path, tree in modules():
        if not (name.startswith("durable_ledger.core") or name.startswith("durable_ledger.store")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(n.split(".")[0] in ("flask", "werkzeug") for n in names), f"{path}:{node.lineno}"


def test_store_does_not_import_core():
    graph = import_graph(top_level_only=False)
    for name, deps in graph.items():
        if name.startswith("durable_ledger.store"):
            assert not [d for d in deps if d.startswith(("durable_ledger.core", "durable_ledger.api"))], name


def test_the_decision_table_is_pure():
    graph = import_graph(top_level_only=False)
    assert graph["durable_ledger.core.gate.decide"] == {"durable_ledger.core.states"}


def test_no_function_over_sixty_lines():
    long = []
    for _name, path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
