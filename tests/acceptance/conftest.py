"""Fault-injection acceptance suite: one test per interruption the product promises to survive,
against real processes (ledger, proxy, WordPress, PostgreSQL) killed by signal where one dies."""
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

from acceptance_stack import AcceptanceStack  # noqa: E402
from agents_standin import StandIn  # noqa: E402


@pytest.fixture(scope="session")
def standin():
    """The Agents API stand-in. The ledger binds a session only for the tenant named in its
    metadata (`durable_tenant`, docs/agents.md): `add_session(..., tenant=T)` creates it for T,
    and `update_session` keeps the metadata, as the real API does (both in StandIn)."""
    s = StandIn().start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def stack(wordpress_site, standin, tmp_path_factory):
    with AcceptanceStack(tmp_path_factory.mktemp("acceptance"), wordpress_site, standin) as s:
        yield s


@pytest.fixture
def uid():
    return uuid.uuid4().hex[:10]
