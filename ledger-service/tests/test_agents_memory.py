"""Bounded memory: syncing a 10,000-item session holds one page at a time.

SQLite only (the measurement is about our Python process, not the database server). The peak
is printed (run with -s) and asserted against the 1,000-item peak: it must not grow with history.
"""

import tracemalloc

import pytest
from agents_standin import StandIn, SyntheticItems, bound_job, clear_agent_tables, configure
from conftest import auth

from durable_ledger.agents.openai_client import get_client
from durable_ledger.store.agent_models import SessionBinding, SessionItem
from durable_ledger.agents.sync import full_sync
from durable_ledger.store.db import db


@pytest.fixture
def backend(tmp_path):
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def standin(monkeypatch, database, tmp_path):
    s = StandIn().start()
    s.validate_pages = False  # validation cost is the stand-in's, not ours; the 250-item test validates
    s.default_tenant = "acme"  # sessions are bound only for the tenant in their metadata
    configure(monkeypatch, s, tmp_path)
    clear_agent_tables()
    yield s
    s.stop()


def _peak_sync(client, standin, job_id, count):
    session_id = f"sess_{job_id}"
    standin.add_session(session_id, items=SyntheticItems(count))
    bound_job(client, auth(), job_id=job_id, session_id=session_id, lease=False)
    with db.connection_context():
        binding = SessionBinding.get(SessionBinding.session_id == session_id)
        get_client()  # build the client outside the measurement
        tracemalloc.start()
        try:
            binding, _ = full_sync(get_client(), binding)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert SessionItem.select().where(SessionItem.binding == binding.id).count() == count
    return binding, peak


def test_sync_memory_high_water_mark_10k_items(client, standin):
    _, peak_1k = _peak_sync(client, standin, "small", 1_000)
    binding, peak_10k = _peak_sync(client, standin, "large", 10_000)
    assert binding.item_count == 10_000
    print(f"\nsync memory high-water mark (tracemalloc peak): 1,000 items {peak_1k / 1e6:.2f} MB; "
          f"10,000 items {peak_10k / 1e6:.2f} MB")
    assert peak_10k < 1.5 * peak_1k + 1_000_000  # flat: one page, not the history
