"""The durable_ledger package's import graph, read with ast (nothing imported): one line per
module with the project modules it imports (at any depth in the file), then totals.

    python stack/import_graph.py [path/to/ledger-service] [--packages]

``--packages``: the graph between the package's subpackages (kernel, store, gate...) instead.
"""

import ast
import sys
from pathlib import Path


def modules(pkg):
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg.parent).with_suffix("")
        yield ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts), path


def graph(root):
    pkg = Path(root) / "durable_ledger"
    mods = dict(modules(pkg))
    out = {}
    for name, path in mods.items():
        deps = set()
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")
                if node.level:
                    base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                deps.update(subs + ([target] if len(subs) < len(node.names) else []))
        out[name] = sorted(d for d in deps if d in mods and d != name)
    return out


def packages(g):
    def top(n):
        parts = n.split(".")
        return parts[1] if len(parts) > 1 else "(root)"
    out = {}
    for name, deps in g.items():
        out.setdefault(top(name), set()).update(top(d) for d in deps if top(d) != top(name))
    return {k: sorted(v) for k, v in sorted(out.items())}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    g = graph(args[0] if args else Path(__file__).resolve().parents[1] / "ledger-service")
    if "--packages" in sys.argv:
        g = packages(g)
    for name, deps in g.items():
        print(f"{name} -> {', '.join(deps)}" if deps else name)
    print(f"# {len(g)} modules, {sum(len(d) for d in g.values())} arrows")


if __name__ == "__main__":
    main()
