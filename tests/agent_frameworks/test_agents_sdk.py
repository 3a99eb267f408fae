"""The OpenAI Agents SDK: a refund tool, gated (`durable_ledger.integrations.agents_sdk.gated_tool`)
or plain, driven by a scripted model; the RunState saved at the approval interruption is what
every resumed process starts from. Writes counted at the refunds API."""

import pytest
from conftest import Agent

ORDER = {"order_id": "C-1042", "amount_cents": 2500, "note": "damaged"}


def sdk(ledger, remote, tmp_path, **cfg):
    url, db = ledger
    return Agent("sdk_agent.py", url, db, remote, tmp_path, job_id="refund-C-1042", **cfg)


def test_crash_after_the_write_then_resume_writes_once(ledger, remote, tmp_path):
    agent = sdk(ledger, remote, tmp_path, gated=True, approval=True, calls=[ORDER])
    first = agent.run(mode="run")
    (asked,) = first["interruptions"]
    assert asked["ledger"]["digest"] and asked["ledger"]["operation_key"].startswith("refund-C-1042:")
    if ledger[0].startswith("http"):
        assert asked["ledger"]["console"] == f"{ledger[0]}/console/approvals/" + \
            asked["ledger"]["operation_key"].replace(":", "%3A")
    agent.crash_after_write(mode="resume", approve="ledger")        # the SDK's approve, bound to the digest
    assert remote.writes() == 1
    done = agent.run(mode="resume", approve="synced")               # the same saved RunState, again
    assert done["final"] == "done"
    assert done["outputs"][0]["remote_id"] == "rf-1" and done["outputs"][0]["found_by"] == "lookup"
    assert remote.writes() == 1


def test_plain_tool_crash_after_the_write_then_resume_writes_twice(remote, tmp_path):
    agent = Agent("sdk_agent.py", "", "", remote, tmp_path, job_id="refund-C-1042", gated=False, approval=True,
                  calls=[ORDER])
    assert agent.run(mode="run")["interruptions"]
    agent.crash_after_write(mode="resume", approve="sdk")
    done = agent.run(mode="resume", approve="sdk")
    assert done["final"] == "done"
    assert remote.writes() == 2


@pytest.mark.parametrize("gated, writes", [(True, 1), (False, 2)])
def test_the_same_refund_asked_twice_in_one_run(remote, tmp_path, gated, writes):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    again = {**ORDER, "note": "asked again"}  # another call id, other free text, the same business arguments
    done = Agent("sdk_agent.py", url, url, remote, tmp_path, job_id="refund-twice", gated=gated, approval=False,
                 calls=[ORDER, again]).run(mode="run")
    assert done["final"] == "done" and len(done["outputs"]) == 2
    assert remote.writes() == writes
    if gated:
        assert done["outputs"][0]["remote_id"] == done["outputs"][1]["remote_id"]


def test_an_approval_for_other_arguments_is_refused(pg_database, remote, tmp_path):
    from localhost import postgres_url
    url = postgres_url(pg_database("agent_frameworks"))
    agent = Agent("sdk_agent.py", url, url, remote, tmp_path, job_id="refund-changed", gated=True, approval=True,
                  calls=[ORDER])
    agent.run(mode="run")
    (approved,) = agent.run(mode="resume", approve="ledger-only")["approved"]   # approved for 2500
    changed = {**ORDER, "amount_cents": 9900}
    again = agent.run(mode="run", calls=[changed])                   # the job runs again, asking for 9900
    (asked,) = again["interruptions"]
    assert asked["ledger"]["digest"] != approved["digest"]
    done = agent.run(mode="resume", approve="sdk", calls=[changed])  # approved in the SDK only
    (refused,) = done["outputs"]
    assert refused["sent"] is False and refused["reason"] == "approval_required"
    assert refused["digest"] == asked["ledger"]["digest"]
    assert remote.writes() == 0


@pytest.mark.parametrize("ledger", ["http"], indirect=True)
def test_an_expired_approval_is_refused(ledger, remote, tmp_path):
    agent = sdk(ledger, remote, tmp_path, gated=True, approval=True, calls=[ORDER])
    agent.run(mode="run")
    agent.run(mode="resume", approve="ledger-only")
    agent.expire_approvals()
    waiting = agent.run(mode="resume", approve="synced")             # the ledger still waits: still interrupted
    assert waiting["interruptions"] and not waiting["outputs"]
    done = agent.run(mode="resume", approve="sdk")                   # the SDK's approval alone
    assert done["outputs"][0]["reason"] == "approval_required"
    assert remote.writes() == 0
