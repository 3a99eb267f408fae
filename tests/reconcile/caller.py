"""A caller of the gate, as n8n or an agent would run it: begin -> create the draft through the
publishing proxy -> record the outcome. Run as a subprocess so a test can SIGKILL it mid-step.

    python caller.py '{"ledger": URL, "proxy": URL, "token": T, "job_id": J, "site": S,
                       "title": T, "pause": "before_send"|"after_write"|null}'

Prints one line per step (`BEGUN {...}`, `WRITTEN {...}`, `DONE {...}`, `DECISION {...}`).
With `pause`, it prints `PAUSE <point>` and blocks on stdin at that point: the test kills it
there, which is exactly "the process died between two steps".
"""
import json
import sys
import uuid
from urllib.parse import quote

import requests


def _say(tag, body=None):
    print(tag if body is None else f"{tag} {json.dumps(body)}", flush=True)


def _post(url, token, body, timeout=60):
    r = requests.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    if r.status_code >= 300:
        raise RuntimeError(f"POST {url} -> {r.status_code} {r.text[:300]}")
    return r.json()


def take_lease(ledger, token, job_id, owner=None):
    h = {"Authorization": f"Bearer {token}"}
    requests.put(f"{ledger}/v1/jobs/{quote(job_id, safe='')}", json={}, headers=h, timeout=30).raise_for_status()
    lease = _post(f"{ledger}/v1/jobs/{quote(job_id, safe='')}/lease", token,
                  {"owner": owner or f"caller-{uuid.uuid4().hex[:8]}", "ttl_s": 600, "takeover": True})
    return lease["fencing_token"]


def begin(ledger, token, job_id, site, title, fencing_token):
    return _post(f"{ledger}/v1/operations/begin", token, {
        "job_id": job_id, "action": "create_draft", "target": f"wordpress:{site}", "fencing_token": fencing_token,
        "payload": {"title": title, "content": f"<p>{title}</p>"}})


def draft_body(key, job_id, title, fencing_token):
    """The draft write; its digest (without operation_key, job_id, fencing_token) is begin's payload."""
    return {"operation_key": key, "job_id": job_id, "fencing_token": fencing_token,
            "title": title, "content": f"<p>{title}</p>"}


def send(proxy, token, site, key, job_id, title, fencing_token):
    return _post(f"{proxy}/v1/sites/{quote(site, safe='')}/drafts", token,
                 draft_body(key, job_id, title, fencing_token))


def raw_send(proxy, token, site, key, job_id, title, fencing_token):
    """The same write, answered as is (for a test that expects the proxy to refuse it)."""
    return requests.post(f"{proxy}/v1/sites/{quote(site, safe='')}/drafts",
                         json=draft_body(key, job_id, title, fencing_token),
                         headers={"Authorization": f"Bearer {token}"}, timeout=60)


def record(ledger, token, key, fencing_token, answer):
    """The proxy's outcome -> the ledger (confirm / fail / unknown)."""
    base = f"{ledger}/v1/operations/{quote(key, safe='')}"
    if answer["outcome"] == "confirmed":
        return _post(base + "/confirm", token, {"fencing_token": fencing_token, "remote_id": answer["remote_id"],
                                                "receipt": {"site": answer["site"], "replayed": answer["replayed"]}})
    if answer["outcome"] == "failed":
        return _post(base + "/fail", token, {"fencing_token": fencing_token, "retryable": bool(answer["retryable"]),
                                             "error": answer["error"]})
    return _post(base + "/unknown", token, {"fencing_token": fencing_token, "error": answer["error"]})


def run(cfg, pause=lambda point: None, say=_say):
    """One pass of the step. Returns the final begin decision and what was done."""
    ledger, proxy, token = cfg["ledger"], cfg["proxy"], cfg["token"]
    job_id, site, title = cfg["job_id"], cfg["site"], cfg["title"]
    fence = take_lease(ledger, token, job_id)
    gate = begin(ledger, token, job_id, site, title, fence)
    say("BEGUN", {"decision": gate["decision"], "reason": gate.get("reason"), "operation": gate["operation"]})
    if gate["decision"] != "dispatch":
        say("DECISION", gate)
        return gate
    key = gate["operation"]["operation_key"]
    if cfg.get("pause") == "before_send":
        pause("before_send")
    answer = send(proxy, token, site, key, job_id, title, fence)
    say("WRITTEN", {"outcome": answer["outcome"], "remote_id": answer["remote_id"], "error": answer["error"]})
    if cfg.get("pause") == "after_write":
        pause("after_write")
    recorded = record(ledger, token, key, fence, answer)
    say("DONE", {"decision": "dispatch", "outcome": answer["outcome"], "remote_id": answer["remote_id"],
                 "operation": recorded["operation"]})
    return {**gate, "outcome": answer["outcome"], "remote_id": answer["remote_id"], "operation": recorded["operation"]}


def _block(point):
    _say("PAUSE", {"point": point})
    sys.stdin.readline()  # the test kills us here


if __name__ == "__main__":
    run(json.loads(sys.argv[1]), pause=_block)
