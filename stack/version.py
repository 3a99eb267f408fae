#!/usr/bin/env python3
"""One version for every artifact: the top-level VERSION file.

    python3 stack/version.py check   # exit 1 and list the files that disagree with VERSION
    python3 stack/version.py sync    # write VERSION into every place below

The places (each a regex whose group 1 is the version):
  ledger-service/pyproject.toml          version = "X"           (the wheel / sdist)
  ledger-service/durable_ledger/__init__ __version__ = "X"       (/health, OpenAPI, User-Agent)
  n8n-nodes-durable/package.json         "version": "X"          (npm pack)
  n8n-nodes-durable/package-lock.json    the root package's version (twice)
  ledger-service/durable_ledger/wordpress/durable-ops.php  header `Version: X` and DURABLE_OPS_VERSION
  ledger-service/durable_ledger/wordpress/readme.txt    Stable tag: X           (plugin zip)
Stdlib only (system python3).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VERSION_FILE = REPO / "VERSION"
SEMVER = re.compile(r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?")

# (path, pattern, expected count); group 1 is the version.
PLACES = [
    ("ledger-service/pyproject.toml", r'(?m)^version = "([^"]+)"$', 1),
    ("ledger-service/durable_ledger/__init__.py", r'(?m)^__version__ = "([^"]+)"$', 1),
    ("n8n-nodes-durable/package.json", r'(?m)^\t"version": "([^"]+)"', 1),
    # the root package: top-level "version" and packages[""].version (the 3rd-level tab indent)
    ("n8n-nodes-durable/package-lock.json", r'(?m)^\t"version": "([^"]+)"', 1),
    ("n8n-nodes-durable/package-lock.json", r'"packages": \{\s*"": \{\s*"name": "n8n-nodes-durable",\s*"version": "([^"]+)"', 1),
    ("ledger-service/durable_ledger/wordpress/durable-ops.php", r"(?m)^ \* Version: (\S+)$", 1),
    ("ledger-service/durable_ledger/wordpress/durable-ops.php", r"(?m)^const DURABLE_OPS_VERSION\s+= '([^']+)';", 1),
    ("ledger-service/durable_ledger/wordpress/readme.txt", r"(?m)^Stable tag: (\S+)$", 1),
]


def version() -> str:
    v = VERSION_FILE.read_text().strip()
    if not SEMVER.fullmatch(v):
        raise SystemExit(f"VERSION {v!r} is not MAJOR.MINOR.PATCH")
    return v


def found() -> list[tuple[str, str | None]]:
    """[(place, version found or None when the pattern does not match exactly once)]"""
    out = []
    for rel, pattern, count in PLACES:
        text = (REPO / rel).read_text()
        hits = re.findall(pattern, text)
        out.append((f"{rel} /{pattern[:40]}/", hits[0] if len(hits) == count else None))
    return out


def check() -> int:
    want, bad = version(), []
    for place, got in found():
        if got != want:
            bad.append(f"  {place}: {got!r}")
    if bad:
        print(f"version mismatch (VERSION is {want}; run `python3 stack/version.py sync`):", *bad, sep="\n",
              file=sys.stderr)
        return 1
    print(want)
    return 0


def sync() -> int:
    want = version()
    for rel, pattern, _count in PLACES:
        path = REPO / rel
        text = path.read_text()
        new = re.sub(pattern, lambda m: m.group(0)[: m.start(1) - m.start(0)] + want + m.group(0)[m.end(1) - m.start(0):],
                     text)
        if new != text:
            path.write_text(new)
            print(f"updated {rel}")
    return check()


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "check"
    sys.exit({"check": check, "sync": sync}.get(cmd, lambda: (print(__doc__), 2)[1])())
