"""Reconciliation against real processes: WordPress (with and without the mu-plugin), the
publishing proxy, the ledger, and callers that are SIGKILLed between steps."""
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

from harness import Stack  # noqa: E402


@pytest.fixture(scope="session")
def stack(wordpress_site, wordpress_plain_site, tmp_path_factory):
    with Stack(tmp_path_factory.mktemp("reconcile"), wordpress_site, wordpress_plain_site) as s:
        yield s
