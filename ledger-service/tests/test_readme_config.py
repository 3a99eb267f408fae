"""The README's configuration table names every DURABLE_* variable the package reads."""

import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "durable_ledger"
README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_durable_variable_is_in_the_readme_table():
    read = set()
    for path in PKG.rglob("*.py"):
        read |= set(re.findall(r"\b(DURABLE_[A-Z0-9_]+)\b", path.read_text(encoding="utf-8")))
    table = "\n".join(line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| `"))
    documented = set(re.findall(r"`(DURABLE_[A-Z0-9_]+)`", table))
    assert read, "no DURABLE_* variable found in the package"
    assert sorted(read - documented) == []


def test_serve_default_port_is_the_documented_one():
    from durable_ledger.cli import build_parser

    args = build_parser().parse_args(["serve"])
    assert args.port == 8787
    assert "| `DURABLE_HOST`, `DURABLE_PORT` | `127.0.0.1`, `8787` |" in README.read_text(encoding="utf-8")
