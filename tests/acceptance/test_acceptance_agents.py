"""Agents API sessions under interruption: a client that goes away mid-request, a long session
history, and an executor machine that is replaced. The Agents API is the SDK-validated stand-in
(in this process, so it counts what the ledger really sent); the ledger is a real `serve` process."""
import hashlib
import json
import shutil

from acceptance_stack import Gate, KillableRequest, q, wait_until, assert_exactly_once
from agents_standin import ITEM, message_item, turn_body


def _call_items(n, call_id, turn_id="turn_1"):
    """A function call and its output, as the session stores them."""
    call = {"id": f"item_{n:06d}", "type": "function_call", "call_id": call_id, "name": "create_draft",
            "arguments": json.dumps({"slug": call_id}), "status": "completed", "turn_id": turn_id}
    out = {"id": f"item_{n + 1:06d}", "type": "function_call_output", "call_id": call_id,
           "output": json.dumps({"post_id": int(call_id.split("_")[1])}), "status": "completed", "turn_id": turn_id}
    ITEM.validate_python(call)
    ITEM.validate_python(out)
    return [call, out]


def _history(triplets):
    """call, output, message per step: item ids are sequential, so outputs straddle page ends."""
    items = []
    for i in range(triplets):
        items += _call_items(3 * i, f"call_{i:03d}")
        items.append(message_item(3 * i + 2, text=f"step {i} done"))
    return items


def _stored_items(stack, session_id):
    from durable_ledger.store.agent_models import SessionBinding, SessionItem
    from durable_ledger.store.db import db, init_database

    init_database(stack.database_url)
    with db.connection_context():
        return [(i.item_id, i.item_type, i.call_id, i.status) for i in
                SessionItem.select().join(SessionBinding).where(SessionBinding.session_id == session_id)
                .order_by(SessionItem.item_id)]


def _bound(api, standin, job, session_id, items, owner="app-1", **session):
    standin.add_session(session_id, items=items, turns=[turn_body(session_id, "turn_1")], tenant=api.tenant, **session)
    api.job(job)
    token = api.lease(job, owner)["fencing_token"]
    api.call("PUT", f"/v1/jobs/{q(job)}/session", json={"session_id": session_id}, expect=201)
    return token


def test_acceptance_client_connection_closed_mid_run(stack, standin, uid):
    api = stack.api("s-client-drop")
    job, sid = f"agent-drop-{uid}", f"sess_drop_{uid}"
    items = _history(20)
    token = _bound(api, standin, job, sid, items)
    sync_url = f"{stack.ledger_url}/v1/jobs/{q(job)}/session/sync"

    # 1. The client goes away while the ledger is paging the session's items.
    gate = Gate(standin, "_page", lambda rows, *a: rows is standin.items[sid])
    try:
        client = KillableRequest("POST", sync_url, api.tokens["runner"], {})
        assert gate.entered.wait(30), "the ledger never reached the items page"
        client.kill()
        resynced = api.post(f"/v1/jobs/{q(job)}/session/sync", {})  # a new client (a restarted app)
    finally:
        gate.release()
    assert resynced["item_count"] == len(items) and resynced["session_status"] == "idle"

    # 2. The client goes away while its follow-up (the task for the agent) is being delivered.
    follow_url = f"{stack.ledger_url}/v1/jobs/{q(job)}/session/follow-up"
    task = {"message": "Write the article about durable steps.", "fencing_token": token}
    headers = {"Idempotency-Key": f"task-{uid}"}
    gate = Gate(standin, "_accept", lambda session_id, *a: session_id == sid)
    try:
        client = KillableRequest("POST", follow_url, api.tokens["runner"], task, headers)
        assert gate.entered.wait(30), "the follow-up never reached the Agents API"
        client.kill()
        # A new client re-syncs first (read state), then repeats its request with the same key.
        assert api.post(f"/v1/jobs/{q(job)}/session/sync", {})["item_count"] == len(items)
        retried = api.call("POST", f"/v1/jobs/{q(job)}/session/follow-up", json=task, headers=headers)
        assert retried.status_code in (200, 201), retried.text
    finally:
        gate.release()
    delivered = wait_until(lambda: (n := sum(c for k, c in standin.keys.items() if k and k.startswith(
        f"durable:{sid}:follow_up:"))) >= 2 and n, what="the abandoned delivery to finish")
    again = api.call("POST", f"/v1/jobs/{q(job)}/session/follow-up", json=task, headers=headers)
    assert again.status_code == 200 and again.json()["sent_now"] is False and again.json()["state"] == "sent"

    messages = standin.accepted_events(sid, "agent.session.input.message")
    assert len(messages) == 1, messages  # the task reached the agent once
    assert messages[0]["input"][0]["content"][0]["text"].endswith(task["message"])
    remote_keys = {k for k in standin.keys if k and k.startswith(f"durable:{sid}:")}
    assert len(remote_keys) == 1 and delivered == 2  # two deliveries, one Idempotency-Key, one message
    stored = _stored_items(stack, sid)
    assert [i[0] for i in stored] == [it["id"] for it in items]
    assert {i[3] for i in stored} == {"completed"}
    assert sum(1 for i in stored if i[1] == "function_call_output") == 20
    m = api.metrics()
    assert_exactly_once(m)
    print(f"\n[acceptance] client drop: killed mid-sync and mid-follow-up; items recovered {len(stored)}/{len(items)}; "
          f"follow-up deliveries {delivered} with 1 key -> messages accepted {len(messages)}; metrics {m}")


def test_acceptance_more_than_100_saved_session_items(stack, standin, uid):
    api = stack.api("s-many-items")
    job, sid = f"agent-long-{uid}", f"sess_long_{uid}"
    items = _history(50)  # 150 items: 50 function calls, their 50 outputs, 50 messages
    api.job(job)
    token = api.lease(job, "app-1")["fencing_token"]
    receipts = {}
    for i in range(50):  # what the runner executed and the ledger confirmed, one receipt per call
        call_id = f"call_{i:03d}"
        gate = api.begin(job, f"create_draft:{call_id}", token, {"slug": call_id}, target="wordpress:test")
        assert gate["decision"] == "dispatch"
        key = gate["operation"]["operation_key"]
        api.post(f"/v1/operations/{q(key)}/confirm", {"fencing_token": token, "remote_id": f"wp-{i}",
                                                      "receipt": {"call_id": call_id, "output": {"post_id": i}}})
        receipts[call_id] = f"wp-{i}"
    standin.add_session(sid, items=items, turns=[turn_body(sid, "turn_1")], tenant=api.tenant)
    api.call("PUT", f"/v1/jobs/{q(job)}/session", json={"session_id": sid}, expect=201)

    pages_before = standin.requests["GET items"]
    synced = api.post(f"/v1/jobs/{q(job)}/session/sync", {})
    pages = standin.requests["GET items"] - pages_before
    assert synced["item_count"] == 150 and pages == 2, (synced["item_count"], pages)
    again = api.post(f"/v1/jobs/{q(job)}/session/sync", {})  # idempotent: nothing doubles
    assert again["item_count"] == 150

    stored = _stored_items(stack, sid)
    assert [i[0] for i in stored] == [it["id"] for it in items]
    calls = {i[2] for i in stored if i[1] == "function_call"}
    outputs = {i[2] for i in stored if i[1] == "function_call_output"}
    ops = api.get(f"/v1/jobs/{q(job)}/operations")["operations"]
    ledger = {o["receipt"]["call_id"]: o["remote_id"] for o in ops if o["state"] == "CONFIRMED"}
    assert ledger == receipts
    assert calls == outputs == set(receipts)  # every call has its output and its receipt; none missed
    # The follow-up's recovery packet lists every confirmed operation from the ledger.
    r = api.call("POST", f"/v1/jobs/{q(job)}/session/follow-up", json={"message": "Continue.", "fencing_token": token},
                 headers={"Idempotency-Key": f"cont-{uid}"}, expect=201)
    packet = r.json()["packet"]
    assert {c["remote_id"] for c in packet["confirmed_operations"]} == set(receipts.values())
    m = api.metrics()
    assert_exactly_once(m)
    print(f"\n[acceptance] 150 items: paged in {pages} pages, stored {len(stored)}; calls {len(calls)}, outputs "
          f"{len(outputs)}, receipts {len(ledger)} all matched; metrics {m}")


def _digests(root):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_acceptance_executor_machine_replaced(stack, standin, uid, tmp_path):
    api = stack.api("s-machine-replaced")
    tenant = api.tenant
    job, sid = f"agent-exec-{uid}", f"sess_exec_{uid}"
    old_env = {"type": "self_hosted", "id": f"env_old_{uid}", "remote_url": "https://exec-1.internal",
               "workspace_directory": "/work", "capability_directories": []}
    token = _bound(api, standin, job, sid, [message_item(0)], environment=old_env)

    work = tmp_path / "exec-1" / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text(f"print('v1 {uid}')\n")
    (work / "README.md").write_text("# article tooling\n")
    (work / "poetry.lock").write_text(f"lock {uid}\n")
    (work / "report.xml").write_text("<testsuite tests='3' failures='0'/>")
    stack.cli("env", "snapshot", str(work), "--job", job, "--tenant", tenant, "--command", "pytest -q",
              "--test-report", str(work / "report.xml"))
    (work / "src" / "app.py").write_text(f"print('v2 {uid}')\n")  # edited after the tests ran
    stack.cli("env", "snapshot", str(work), "--job", job, "--tenant", tenant)
    expected = _digests(work)
    shutil.rmtree(tmp_path / "exec-1")  # the machine is gone, and its working directory with it

    # The agent asks to reconnect to the old environment id: the ledger records that as state and
    # answers nothing on its own; the id alone proves nothing about the files.
    standin.update_session(sid, status="requires_action",
                           required_actions=[{"type": "environment_connection", "environment_id": old_env["id"]}])
    synced = api.post(f"/v1/jobs/{q(job)}/session/sync", {"answer_actions": True, "fencing_token": token})
    assert [(a["type"], a["status"]) for a in synced["actions"]] == [("environment_connection", "environment_state")]
    assert synced["environment"]["state"] == "connection_required"
    assert synced["environment"]["reconnect_environment_id"] == old_env["id"]
    assert standin.accepted_events(sid) == []  # nothing answered for the agent
    r = api.call("POST", f"/v1/jobs/{q(job)}/session/follow-up", json={"message": "continue", "fencing_token": token},
                 headers={"Idempotency-Key": f"env-{uid}"})
    assert r.status_code == 409 and {"reason": "session_requires_action"} in r.json()["error"]["details"]["reasons"]

    # The new machine rebuilds the directory from the artifact store, digest by digest.
    new = tmp_path / "exec-2" / "work"
    out = json.loads(stack.cli("env", "restore", str(new), "--job", job, "--tenant", tenant).stdout)
    assert out["verified"] is True and out["files"] == len(expected) == 4
    assert _digests(new) == expected
    assert out["lock_files"] == {"poetry.lock": expected["poetry.lock"]}
    [report] = out["test_reports"]
    assert report["stale"] is True and report["changed_files"] == ["src/app.py"]  # retest before trusting it

    # A store that lost or corrupted a blob is refused, never half-restored as if fine.
    from durable_ledger.agents.artifacts import blob_path

    blob_path(expected["src/app.py"], stack.artifacts).write_bytes(b"tampered")
    bad = stack.cli("env", "restore", str(tmp_path / "exec-3"), "--job", job, "--tenant", tenant, check=False)
    assert bad.returncode != 0 and '"mismatched"' in bad.stdout and "src/app.py" in bad.stdout
    print(f"\n[acceptance] machine replaced: old environment {old_env['id']} -> connection_required, nothing "
          f"answered; restored {out['files']} files, all digests verified; test report stale "
          f"({report['changed_files']}); tampered blob refused")
