"""Fault-injection acceptance suite: one test per interruption the product promises to survive,
against real processes (ledger, proxy, WordPress, PostgreSQL) killed by signal where one dies."""
import os
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

from acceptance_stack import AcceptanceStack  # noqa: E402
from agents_standin import StandIn  # noqa: E402
from support import wordpress as _wp  # noqa: E402

wordpress_site = _wp.wordpress_site

PG_ADMIN_DSN = os.environ.get("DURABLE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


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


@pytest.fixture(scope="session")
def pg_url():
    """A throwaway PostgreSQL database (unique name, dropped WITH (FORCE) at the end)."""
    import psycopg2

    name = f"durable_accept_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(PG_ADMIN_DSN)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    yield f"{PG_ADMIN_DSN.rsplit('/', 1)[0]}/{name}"
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()
