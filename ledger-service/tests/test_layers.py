"""The layout holds: features as packages over a kernel, imports pointing down only, no import
loops, SQL and the ORM only in the store, Flask only in the HTTP modules, short functions.

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


# The floors, top to bottom: a module imports only from its own package and the floors below it
# (docs/architecture.md draws them). The package root (`durable_ledger.__version__`) is everyone's.
FLOORS = ["integrations", "cli", "app", "service", "openapi", "client", "console", "wordpress", "agents", "gate", "approvals",
          "reconciliation", "jobs", "web", "auth", "store", "kernel"]

# Modules that speak HTTP (import Flask or Werkzeug): the shared plumbing, the app, the console, the
# publishing proxy, and each feature's routes. Everything else is plain Python.
HTTP_PACKAGES = ("web", "console", "wordpress.proxy")
HTTP_MODULES = ("app", "service", "openapi")


def _floor(name):
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def test_no_import_loops():
    # Package faces (`__init__` re-exporting their modules) are where Python resolves a loop
    # anyway; a loop through one is still a loop, so they are not excluded.
    assert cycles(import_graph(top_level_only=False)) == []


def test_every_package_is_on_a_floor():
    assert {_floor(n) for n, _, _ in modules()} - {None} == set(FLOORS)


def test_imports_point_down_only():
    up = []
    for name, deps in import_graph(top_level_only=False).items():
        here = _floor(name)
        for dep in deps:
            there = _floor(dep)
            if there is not None and there != here and FLOORS.index(there) <= FLOORS.index(here):
                up.append(f"{name} -> {dep}")
    assert up == []


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


def _speaks_http(name):
    rel = name.removeprefix("durable_ledger.")
    return (rel in HTTP_MODULES or rel.startswith(tuple(p + "." for p in HTTP_PACKAGES)) or rel in HTTP_PACKAGES
            or rel.rsplit(".", 1)[-1].endswith("routes"))


ORM_METHODS = {"select", "update", "delete", "insert", "insert_many", "create", "get", "get_or_none", "get_by_id",
               "get_or_create", "replace", "save", "delete_instance", "raw"}
MODEL_MODULES = ("models", "agent_models", "wait_models")


def model_classes():
    """The names of the store's tables (classes deriving from a model class, transitively)."""
    bases = {"Model", "BaseModel"}
    found = set()
    for name, _path, tree in modules():
        if _floor(name) == "store":
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) in bases | found for b in node.bases):
                    found.add(node.name)
    return found - {"BaseModel"}


def orm_calls_outside_the_store():
    """Where a module outside store/ imports peewee or the store's tables, or calls a query method
    on a table's class or saves a row."""
    tables = model_classes()
    found = []
    for name, path, tree in modules():
        if _floor(name) == "store":
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                if any(n.split(".")[0] in ("peewee", "playhouse") or n.endswith(tuple(f"store.{m}" for m in MODEL_MODULES))
                       or n in MODEL_MODULES for n in names):
                    found.append(f"{path.relative_to(PKG)}:{node.lineno} import")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ORM_METHODS:
                owner = node.func.value
                if (isinstance(owner, ast.Name) and owner.id in tables) or node.func.attr in ("save", "delete_instance"):
                    found.append(f"{path.relative_to(PKG)}:{node.lineno} .{node.func.attr}()")
    return found


def test_the_tables_are_queried_in_the_store_only():
    assert {"Job", "Operation", "Approval", "SessionBinding", "ApprovalWait", "ConsoleSession"} <= model_classes()
    assert orm_calls_outside_the_store() == []


def test_only_the_http_modules_speak_http():
    offenders = []
    for name, path, tree in modules():
        if _speaks_http(name):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(n.split(".")[0] in ("flask", "werkzeug") for n in names):
                    offenders.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert offenders == []


def test_the_kernel_and_the_store_import_no_feature():
    graph = import_graph(top_level_only=False)
    for name, deps in graph.items():
        if _floor(name) == "kernel":
            assert all(_floor(d) in ("kernel", None) for d in deps), name
        if _floor(name) == "store":
            assert all(_floor(d) in ("store", "kernel", None) for d in deps), name


def test_the_decision_table_is_pure():
    graph = import_graph(top_level_only=False)
    assert graph["durable_ledger.gate.decide"] == {"durable_ledger.kernel.states", "durable_ledger.kernel.budgets"}
    assert graph["durable_ledger.kernel.budgets"] == set() and graph["durable_ledger.kernel.states"] == set()


def test_no_function_over_sixty_lines():
    long = []
    for _name, path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
