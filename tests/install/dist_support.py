"""Paths and artifact lookup for the install tests (tests/install)."""
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
DIST = REPO / "dist"


def version() -> str:
    return (REPO / "VERSION").read_text().strip()


def artifact(pattern: str) -> Path:
    found = sorted(DIST.glob(pattern))
    if len(found) != 1:
        pytest.fail(f"expected exactly one dist/{pattern}, found {[p.name for p in found]}: run `make dist`")
    return found[0]
