"""The test kit, loaded as a pytest plugin by every suite (`addopts = -p support.kit` in its
pytest.ini; the ledger's own suite too): the services a test needs, as fixtures, each started,
awaited and stopped one way (stack/services.py, stack/localhost.py, support/wordpress.py).

    wordpress_site, wordpress_plain_site   a real WordPress per session (with / without durable-ops)
    pg_url                                 a throwaway PostgreSQL database per session (its URL)
    pg_database                            factory: pg_database("n8n_retry") -> name, dropped at teardown
    ledger_server                          factory: ledger_server(database_url, tokens, **kw) -> started
                                           LedgerServer (serve), stopped at teardown
    service                                factory: service(name, args, env, ready=url) -> started
                                           Service (own process group, log in tmp_path), stopped at teardown
    port                                   a free port (in this suite's slice when suites run side by side)

A suite's conftest may define a fixture of the same name to change it (the ledger's pg_url also
closes its connection pool first). Stacks outside pytest (make demo, the soak) use the same
modules directly.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from localhost import free_port, postgres_database, postgres_url
from services import LedgerServer, Service
from support.wordpress import wordpress_plain_site, wordpress_site  # noqa: F401  (fixtures)


@pytest.fixture
def port():
    return free_port()


@pytest.fixture(scope="session")
def pg_url():
    with postgres_database("durable_test") as name:
        yield postgres_url(name)


@pytest.fixture
def pg_database():
    with ExitStack() as stack:
        yield lambda prefix="durable_test": stack.enter_context(postgres_database(prefix))


@pytest.fixture
def ledger_server(tmp_path):
    started = []

    def start(database_url, tokens, **kw):
        timeout = kw.pop("timeout", 60)
        kw.setdefault("log_path", tmp_path / f"ledger-{len(started)}.log")
        server = LedgerServer(database_url, tokens, **kw).start(timeout=timeout)
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture
def service(tmp_path):
    started = []

    def start(name, args, env, ready=None, timeout=60, cwd=None):
        svc = Service.start(name, args, env, tmp_path / f"{name}.log", ready=ready, timeout=timeout, cwd=cwd)
        started.append(svc)
        return svc

    yield start
    for svc in reversed(started):
        if svc.alive():
            svc.stop()
