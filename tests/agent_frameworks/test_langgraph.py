"""LangGraph: a refund node calling a gated function (`durable_ledger.integrations.langgraph.gated_tool`)
or a plain one, checkpointed by SqliteSaver or PostgresSaver; a crashed process is resumed from
the thread's checkpoint. Writes counted at the refunds API."""

import pytest
from conftest import Agent
from localhost import postgres_url

ORDER = {"order_id": "C-2077", "amount_cents": 1299}


@pytest.fixture
def saver(request, tmp_path, pg_database):
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'checkpoints.db'}"
    return "postgres:" + postgres_url(pg_database("agent_frameworks_cp"))


def graph(ledger, remote, tmp_path, saver, **cfg):
    url, db = ledger
    return Agent("graph_agent.py", url, db, remote, tmp_path, thread="refund-C-2077", saver=saver, order=ORDER, **cfg)


@pytest.mark.parametrize("ledger, saver", [("sqlite", "sqlite"), ("postgres", "postgres"), ("http", "sqlite")],
                         indirect=True)
def test_crash_after_the_write_then_resume_writes_once(ledger, remote, tmp_path, saver):
    agent = graph(ledger, remote, tmp_path, saver, gated=True, approval=True)
    (asked,) = agent.run(mode="run")["interrupts"]                   # interrupt() with the ledger's request
    assert asked["approval_required"] and asked["digest"]
    agent.run(mode="approve")
    agent.crash_after_write(mode="resume")
    assert remote.writes() == 1
    done = agent.run(mode="resume")                                  # the node runs again from its start
    assert done["interrupts"] == [] and done["receipts"][0]["remote_id"] == "rf-1"
    assert remote.writes() == 1


def test_plain_node_crash_after_the_write_then_resume_writes_twice(remote, tmp_path):
    agent = Agent("graph_agent.py", "", "", remote, tmp_path, thread="plain", saver=f"sqlite:{tmp_path / 'cp.db'}",
                  order=ORDER, gated=False, approval=True)
    assert agent.run(mode="run")["interrupts"]
    agent.crash_after_write(mode="resume")
    done = agent.run(mode="resume")
    assert done["receipts"] and remote.writes() == 2


@pytest.mark.parametrize("gated, writes", [(True, 1), (False, 2)])
def test_the_same_refund_twice_in_one_run(remote, tmp_path, gated, writes):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    done = Agent("graph_agent.py", url, url, remote, tmp_path, thread="twice", saver=f"sqlite:{tmp_path / 'cp.db'}",
                 order=ORDER, gated=gated, approval=False, twice=True).run(mode="run")
    assert len(done["receipts"]) == 2 and remote.writes() == writes


def test_an_approval_for_other_arguments_is_refused(remote, tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    agent = Agent("graph_agent.py", url, url, remote, tmp_path, thread="changed", saver=f"sqlite:{tmp_path / 'cp.db'}",
                  order=ORDER, gated=True, approval=True)
    (first,) = agent.run(mode="run")["interrupts"]
    agent.run(mode="approve")                                        # approved for 1299
    done = agent.run(mode="resume", update={"amount_cents": 9900})  # resumed with another amount
    (asked,) = done["interrupts"]
    assert asked["payload"]["amount_cents"] == 9900 and asked["digest"] != first["digest"]
    assert done["receipts"] == [] and remote.writes() == 0


def test_an_expired_approval_is_refused(pg_database, remote, tmp_path):
    url = postgres_url(pg_database("agent_frameworks"))
    agent = Agent("graph_agent.py", url, url, remote, tmp_path, thread="expired", saver=f"sqlite:{tmp_path / 'cp.db'}",
                  order=ORDER, gated=True, approval=True)
    agent.run(mode="run")
    agent.run(mode="approve")
    agent.expire_approvals()
    done = agent.run(mode="resume")
    assert done["interrupts"][0]["approval_required"] and done["receipts"] == [] and remote.writes() == 0
