"""Interruptions around a real WordPress write: a lost response, two competing workers, revoked
credentials or approval, and a user's cancel. Counted at the source: the durable-ops plugin's job
lookup and core's `wp/v2/posts`, plus the ledger's acceptance counters for the scenario's tenant."""
import threading
from datetime import datetime, timedelta, timezone

import requests
from acceptance_stack import q, assert_exactly_once
from durable_ledger.gate.dispatch_auth import remote_job_id, remote_key
from harness import Caller

import caller as steps


def _draft(stack, api, site, key, job_id, title, token):
    """The worker's write, through the publishing proxy (no ledger in between)."""
    return steps.send(stack.proxy_url, api.tokens["runner"], site, key, job_id, title, token)


def test_acceptance_remote_write_done_response_lost(stack, uid):
    api = stack.api("s-response-lost")
    job, title = f"lost-{uid}", f"Response lost {uid}"
    stack.lossy.drop_responses = 1  # WordPress writes; the answer never reaches the proxy
    dropped_before = stack.lossy.dropped
    first = Caller(stack.caller_config(job, "lossy", title, token=api.tokens["runner"]))
    done = first.wait_for("DONE")
    first.finish()
    key = done["operation"]["operation_key"]
    assert stack.lossy.dropped == dropped_before + 1
    assert (done["outcome"], done["operation"]["state"]) == ("unknown", "UNKNOWN"), done
    [post_id] = [o["id"] for o in stack.job_objects(job, api.tenant)]  # the write did happen

    # The retry: a new run (new lease, new fencing token) through the same gate.
    again = steps.run(stack.caller_config(job, "lossy", title, token=api.tokens["runner"]), say=lambda *a: None)

    assert again["decision"] == "reuse_receipt", again
    assert again["reconciliation"]["verdict"] == "found"
    assert again["receipt"]["remote_id"] == str(post_id)
    assert api.states(key) == ["SENT", "UNKNOWN", "CONFIRMED"]  # reconciled; never a second SENT
    assert [o["id"] for o in stack.job_objects(job, api.tenant)] == [post_id]
    assert stack.posts_titled(title) == [post_id]
    m = api.metrics()
    assert_exactly_once(m)
    print(f"\n[acceptance] response lost: dropped 1 response, op UNKNOWN -> reconciled found -> CONFIRMED; "
          f"posts in WordPress for {job}: 1; metrics {m}")


def test_acceptance_two_workers_resume_same_job(stack, uid):
    api = stack.api("s-two-workers")
    job, title = f"twins-{uid}", f"Two workers {uid}"
    api.job(job)
    barrier, packets = threading.Barrier(2), {}

    def resume(owner):
        barrier.wait()
        packets[owner] = api.post(f"/v1/jobs/{q(job)}/resume", {"owner": owner, "ttl_s": 600, "takeover": True})

    workers = [threading.Thread(target=resume, args=(o,)) for o in ("worker-a", "worker-b")]
    for t in workers:
        t.start()
    for t in workers:
        t.join(60)
    tokens = {o: p["fencing_token"] for o, p in packets.items()}
    assert len(set(tokens.values())) == 2, tokens  # each takeover issued its own, strictly larger token
    old_owner, new_owner = sorted(tokens, key=tokens.get)
    old, new = tokens[old_owner], tokens[new_owner]
    assert api.get(f"/v1/jobs/{q(job)}")["lease"]["owner"] == new_owner

    # Both go for the side effect at once; only the holder of the current token gets through.
    payload = {"title": title, "content": f"<p>{title}</p>"}
    barrier, answers = threading.Barrier(2), {}

    def begin(owner, token):
        barrier.wait()
        r = api.call("POST", "/v1/operations/begin", json={"job_id": job, "action": "create_draft",
                                                            "target": "wordpress:test", "fencing_token": token,
                                                            "payload": payload})
        answers[owner] = (r.status_code, r.json())

    racers = [threading.Thread(target=begin, args=(o, tokens[o])) for o in (old_owner, new_owner)]
    for t in racers:
        t.start()
    for t in racers:
        t.join(60)
    status, refused = answers[old_owner]
    assert (status, refused["error"]["code"]) == (409, "stale_fencing_token"), refused
    status, gate = answers[new_owner]
    assert status == 200 and gate["decision"] == "dispatch", gate
    key = gate["operation"]["operation_key"]
    written = _draft(stack, api, "test", key, job, title, new)
    assert written["outcome"] == "confirmed", written

    # The paused worker wakes up and writes anyway, straight to the proxy with its old token. The
    # proxy asks the ledger first; no such request reaches WordPress: the new worker's dispatched
    # (still SENT) write under the old token is a 409, a key the ledger never dispatched a 403...
    stale = steps.raw_send(stack.proxy_url, api.tokens["runner"], "test", key, job, title, old)
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "stale_fencing_token"), stale.text
    own = steps.raw_send(stack.proxy_url, api.tokens["runner"], "test", f"{key}:stale-worker", job,
                         f"{title} (stale)", old)
    assert (own.status_code, own.json()["error"]["code"]) == (403, "write_not_dispatched"), own.text
    steps.record(stack.ledger_url, api.tokens["runner"], key, new, written)
    # ...and once it is CONFIRMED, that key authorizes nothing new, whatever the token.
    for token in (old, new):
        late = steps.raw_send(stack.proxy_url, api.tokens["runner"], "test", key, job, title, token)
        assert (late.status_code, late.json()["error"]["code"]) == (403, "write_not_dispatched"), late.text
    # Behind the proxy, WordPress fences the job too (the durable-ops plugin's per-job high-water
    # mark, under the tenant-qualified job id): a write that bypassed the proxy is refused as well.
    bypass = stack.wordpress_client().create_post(
        {"title": f"{title} (stale)", "content": f"<p>{title}</p>", "status": "draft"},
        operation_key=remote_key(api.tenant, f"{key}:stale-bypass"), job_id=remote_job_id(api.tenant, job),
        fencing_token=old)
    assert bypass.outcome == "failed", (bypass.outcome, bypass.error)
    assert (bypass.http_status, bypass.error["code"]) == (409, "durable_stale_fencing_token"), bypass.error
    # ...and the ledger refuses its next step as well.
    r = api.call("POST", "/v1/operations/begin", json={"job_id": job, "action": "set_seo", "fencing_token": old,
                                                        "target": "wordpress:test", "payload": {"seo": {"title": "x"}}})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "stale_fencing_token")

    objects = stack.job_objects(job, api.tenant)
    assert [o["id"] for o in objects] == [written["remote_id"]]
    assert stack.posts_titled(title) == [written["remote_id"]] and stack.posts_titled(f"{title} (stale)") == []
    m = api.metrics()
    assert m["refusals_by_code"]["stale_fencing_token"] >= 2 and m["unauthorized_side_effects_refused"] >= 2
    assert_exactly_once(m)
    print(f"\n[acceptance] two workers: tokens old={old} new={new}; ledger 409 stale_fencing_token on begin, "
          f"proxy 409 stale_fencing_token / 403 write_not_dispatched, WordPress 409 durable_stale_fencing_token "
          f"behind it; posts for {job}: {len(objects)}; metrics {m}")


def test_acceptance_credentials_or_approval_revoked(stack, uid):
    api = stack.api("s-revoked")
    # (a) The site's application password is revoked while the job runs.
    job, title = f"revoked-{uid}", f"Revoked {uid}"
    api.job(job)
    token = api.lease(job, "exec-1")["fencing_token"]
    stack.revoke_app_password(stack.revocable["uuid"])
    draft = {"title": title, "content": f"<p>{title}</p>"}  # exactly the write _draft sends
    gate = api.begin(job, "create_draft", token, draft, target="wordpress:revocable")
    assert gate["decision"] == "dispatch"
    key = gate["operation"]["operation_key"]
    answer = _draft(stack, api, "revocable", key, job, title, token)
    assert answer["outcome"] == "failed" and answer["error"]["kind"] == "auth", answer
    assert answer["http_status"] in (401, 403)
    out = api.post(f"/v1/operations/{q(key)}/outcome", {"fencing_token": token, "http_status": answer["http_status"],
                                                        "error": answer["error"]})
    assert out["operation"]["state"] == "FAILED" and out["operation"]["retryable"] is False
    halted = api.get(f"/v1/jobs/{q(job)}")
    assert (halted["status"], halted["halt_reason"]) == ("halted", "authorization_revoked")

    # Execution stops: the same step, another step, a new lease, a resume: nothing dispatches.
    again = api.begin(job, "create_draft", token, draft, target="wordpress:revocable")
    other = api.begin(job, "upload_media:hero", token, {"file": "hero.png"}, target="wordpress:test")
    assert [(a["decision"], a["reason"]) for a in (again, other)] == [("halt", "authorization_revoked")] * 2
    packet = api.post(f"/v1/jobs/{q(job)}/resume", {"owner": "exec-2", "ttl_s": 600, "takeover": True})
    assert (packet["halted"], packet["halt_reason"], packet["next_allowed_actions"]) == \
        (True, "authorization_revoked", [])
    after_resume = api.begin(job, "upload_media:hero", packet["fencing_token"], {"file": "hero.png"},
                             target="wordpress:test")
    assert (after_resume["decision"], after_resume["reason"]) == ("halt", "authorization_revoked")
    r = api.call("POST", f"/v1/jobs/{q(job)}/reauthorize", json={"note": "runner tries"})
    assert r.status_code == 403  # only an approver lifts it
    assert stack.job_objects(job, api.tenant) == [] and stack.posts_titled(title) == []

    api.post(f"/v1/jobs/{q(job)}/reauthorize", {"note": "new application password issued"}, role="approver")
    packet = api.post(f"/v1/jobs/{q(job)}/resume", {"owner": "exec-3", "ttl_s": 600, "takeover": True})
    assert packet["halted"] is False
    retried = api.begin(job, "upload_media:hero", packet["fencing_token"], {"file": "hero.png"},
                        target="wordpress:test")
    assert retried["decision"] == "dispatch"  # a fresh step goes out only after the human's decision
    api.post(f"/v1/operations/{q(retried['operation']['operation_key'])}/fail",
             {"fencing_token": packet["fencing_token"], "retryable": True, "error": {"message": "not sent (test)"}})
    refused_a = api.metrics()["refusals_by_code"].get("job_halted", 0)
    assert refused_a == 3

    # (b) An approval revoked before publish.
    job2 = f"publish-{uid}"
    api.job(job2, {"pipeline": "article"})
    token2 = api.lease(job2, "exec-1")["fencing_token"]
    payload = {"post_id": 101, "status": "publish"}
    digest = api.begin(job2, "publish", token2, payload, target="wordpress:test")
    assert (digest["decision"], digest["reason"]) == ("halt", "approval_required")
    content_digest = digest["operation"]["request_hash"]
    expires = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    grant = {"job_id": job2, "task_version": 1, "action": "publish", "content_digest": content_digest,
             "target": "wordpress:test", "expires_at": expires, "note": "looks good"}
    r = api.call("POST", "/v1/approvals", json=grant)
    assert r.status_code == 403  # a runner cannot approve its own publish
    approval = api.post("/v1/approvals", grant, role="approver", expect=201)
    revoked = api.call("DELETE", f"/v1/approvals/{approval['id']}", role="approver", expect=200).json()
    assert revoked["live"] is False and revoked["revoked_at"]
    before = api.metrics()["unauthorized_side_effects_refused"]
    attempts = [
        api.begin(job2, "publish", token2, payload, target="wordpress:test"),
        api.begin(job2, "publish", token2, payload, target="wordpress:test", requires_approval=False),
        api.begin(job2, "publish", token2, payload, target="wordpress:test", operation_key=f"{job2}:publish:again"),
    ]
    assert [(a["decision"], a["reason"]) for a in attempts] == [("halt", "approval_required")] * 3, attempts
    assert {a["operation"]["state"] for a in attempts} == {"PREPARED"}
    m = api.metrics()
    assert m["unauthorized_side_effects_refused"] == before + 3
    assert m["refusals_by_code"]["approval_required"] == 4
    assert_exactly_once(m)
    published = requests.get(stack.wp.rest("/wp/v2/posts"), auth=stack.wp.auth, timeout=30,
                             params={"status": "publish", "search": uid}).json()
    assert published == []
    print(f"\n[acceptance] revoked: WordPress answered {answer['http_status']} -> job halted authorization_revoked; "
          f"3 later begins halted, resume halted until approver reauthorized; approval revoked -> 3 publish "
          f"attempts halted approval_required; posts in WordPress: 0; metrics {m}")


def test_acceptance_user_cancels(stack, uid):
    api = stack.api("s-cancel")
    job, title = f"cancel-{uid}", f"Cancelled {uid}"
    # The caller dies right after WordPress wrote the draft: the op is in flight (SENT).
    key, written = _crash_after_write(stack, api, job, title)
    assert api.operation(key)["operation"]["state"] == "SENT"

    cancelled = api.post(f"/v1/jobs/{q(job)}/cancel", {"reason": "user pressed stop"})
    assert [o["operation_key"] for o in cancelled["in_flight_left_to_reconcile"]] == [key]
    job_now = api.get(f"/v1/jobs/{q(job)}")
    assert job_now["status"] == "cancelled" and (job_now["lease"] is None or job_now["lease"]["live"] is False)

    token = api.lease(job, "late-runner", takeover=True)["fencing_token"]  # a lease is not a reopen
    for action in ("create_draft", "set_seo", "publish"):
        out = api.begin(job, action, token, {"title": title, "content": f"<p>{title}</p>"})
        assert (out["decision"], out["reason"]) == ("halt", "cancelled"), out
    r = api.call("POST", f"/v1/jobs/{q(job)}/resume", json={"owner": "exec-2", "ttl_s": 60, "takeover": True})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "invalid_transition")
    r = api.call("POST", f"/v1/jobs/{q(job)}/reauthorize", role="approver", json={"note": "undo?"})
    assert r.status_code == 409

    tally, _ = stack.sweep()  # reconciles the in-flight op (it may), never dispatches, never reopens
    mine = [i for i in tally["items"] if i["operation_key"] == key]
    assert [(i["from"], i["to"], i["verdict"]) for i in mine] == [("SENT", "CONFIRMED", "found")], tally
    again, _ = stack.sweep()
    assert [i for i in again["items"] if i["operation_key"] == key] == []
    assert api.get(f"/v1/jobs/{q(job)}")["status"] == "cancelled"
    assert api.states(key) == ["SENT", "CONFIRMED"]
    assert [o["id"] for o in stack.job_objects(job, api.tenant)] == [written["remote_id"]]
    assert stack.posts_titled(title) == [written["remote_id"]]

    report = api.get(f"/v1/jobs/{q(job)}/report")
    assert report["status"] == "cancelled"
    assert [(o["operation_key"], o["remote_id"]) for o in report["operations"]["completed"]] == \
        [(key, str(written["remote_id"]))]
    m = api.metrics()
    assert m["refusals_by_code"]["job_cancelled"] == 3 and m["unknown_operations_left"] == 0
    assert (m["operations_confirmed_twice"], m["duplicate_remote_ids"]) == (0, [])
    print(f"\n[acceptance] cancel: in-flight op left to reconcile, sweeper SENT->CONFIRMED (found), 3 begins halted "
          f"cancelled, resume 409; report lists remote id {written['remote_id']}; posts for {job}: 1; metrics {m}")


def _crash_after_write(stack, api, job, title):
    caller = Caller(stack.caller_config(job, "test", title, pause="after_write", token=api.tokens["runner"]))
    begun = caller.wait_for("BEGUN")
    assert begun["decision"] == "dispatch", begun
    written = caller.wait_for("WRITTEN")
    assert written["outcome"] == "confirmed", written
    caller.wait_for("PAUSE")
    caller.kill()
    return begun["operation"]["operation_key"], written
