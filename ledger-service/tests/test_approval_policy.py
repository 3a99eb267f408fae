"""Approval policies (N of M, approvers and groups, the runner that asked), who decided, and the
approval request's signed links, attacked on both backends (issue 38).

The tokens: runner ``alice`` (the runner that asks: same name as approver alice), approvers
alice (legal), bob (editors), carol (legal, editors), dave (no group), and an approver of
another tenant. Every attack counts the decisions recorded in the database, not the pages.
"""

import re
import threading
import time
from urllib.parse import quote, urlsplit

import pytest
from conftest import auth

from durable_ledger.approvals import request_links
from durable_ledger.auth import create_token, load_bootstrap_tokens
from durable_ledger.kernel.config import Config
from durable_ledger.store.db import db
from durable_ledger.store.models import ApiToken, Approval, ApprovalDenial, AuditLog

TOKENS = {"alice": ("approver", "legal"), "bob": ("approver", "editors"), "carol": ("approver", "legal,editors"),
          "dave": ("approver", None)}
PAYLOAD = {"title": "Ten tips", "post_id": 7}
TWO_OF_THREE = {"approvals_needed": 2, "approvers": ["alice", "bob", "carol"], "requester_may_approve": False}


@pytest.fixture
def people(client):
    with db.connection_context():
        for name, (role, groups) in TOKENS.items():
            create_token("acme", role, name=name, raw=f"{name}-token", groups=groups)
        create_token("acme", "runner", name="alice", raw="runner-alice-token")
        create_token("other", "approver", name="alice", raw="other-alice-token", groups="legal")
    return {name: auth(f"{name}-token") for name in TOKENS}


@pytest.fixture
def tok(client, people):
    client.put("/v1/jobs/j1", json={"pipeline": "generic"}, headers=auth())
    return client.post("/v1/jobs/j1/lease", json={"owner": "w1"}, headers=auth()).get_json()["fencing_token"]


def begin(client, tok, policy=TWO_OF_THREE, runner="runner-alice-token", **extra):
    body = {"job_id": "j1", "action": "send_newsletter", "payload": PAYLOAD, "fencing_token": tok,
            "target": "mail:list-1", **extra}
    if policy is not None:
        body["approval_policy"] = policy
    return client.post("/v1/operations/begin", headers=auth(runner), json=body)


def halted(client, tok, policy=TWO_OF_THREE):
    r = begin(client, tok, policy)
    out = r.get_json()
    assert (r.status_code, out["decision"], out["reason"]) == (200, "halt", "approval_required"), out
    return out["operation"]["operation_key"], out["operation"]["request_hash"]


def url(key, verb):
    return f"/v1/operations/{quote(key, safe='')}/{verb}"


def approve(client, who, key, digest):
    return client.post(url(key, "approve"), headers=who, json={"content_digest": digest})


def deny(client, who, key, digest, reason="no"):
    return client.post(url(key, "deny"), headers=who, json={"content_digest": digest, "reason": reason})


def decisions():
    """(approvals, denials) recorded, as (approver, door) pairs."""
    with db.connection_context():
        return ([(a.approver_name, a.door) for a in Approval.select().order_by(Approval.id)],
                [(d.denied_by, d.door) for d in ApprovalDenial.select().order_by(ApprovalDenial.id)])


# ---------------------------------------------------------------------------------- the policy


def test_two_of_three_counts_distinct_allowed_approvers_once_each(client, tok, people):
    key, digest = halted(client, tok)
    assert approve(client, people["carol"], key, digest).status_code == 201
    again = approve(client, people["carol"], key, digest)
    assert (again.status_code, again.get_json()["created"]) == (200, False)  # the same approver counts once
    assert begin(client, tok).get_json()["reason"] == "approval_required"  # 1 of 2
    view = client.get(url(key, "approvals"), headers=auth()).get_json()
    assert (view["status"], view["policy"]["approvals"], view["policy"]["approved_by"]) == ("waiting", 1, ["carol"])
    assert view["policy"]["requested_by"] == "alice"
    assert approve(client, people["bob"], key, digest).status_code == 201
    assert begin(client, tok).get_json()["decision"] == "dispatch"
    view = client.get(url(key, "approvals"), headers=auth()).get_json()
    assert [(d["name"], d["decision"], d["door"]) for d in view["decided_by"]] == \
        [("carol", "approved", "api"), ("bob", "approved", "api")]
    assert decisions()[0] == [("carol", "api"), ("bob", "api")]


def test_an_approver_of_another_group_is_refused_403_in_the_api_and_the_console(app, client, tok, people):
    key, digest = halted(client, tok, {"approvals_needed": 1, "groups": ["legal"]})
    for verb in (approve, deny):
        r = verb(client, people["bob"], key, digest)
        assert (r.status_code, r.get_json()["error"]["code"]) == (403, "approver_not_allowed")
        assert r.get_json()["error"]["details"]["reason"] == "not_listed"
    page, csrf = sign_in(app, "bob-token")
    html = page.get(f"/console/approvals/{quote(key, safe='')}").get_data(as_text=True)
    assert 'id="policy-refusal"' in html and 'id="approve-form"' not in html
    shown = "PREPARED:0:0"
    r = page.post(f"/console/approvals/{quote(key, safe='')}/approve", data={"digest": digest, "csrf": csrf,
                                                                             "shown": shown})
    assert r.status_code == 403 and "approver_not_allowed" in r.get_data(as_text=True)
    assert decisions() == ([], [])
    assert approve(client, people["alice"], key, digest).status_code == 201  # legal
    assert begin(client, tok, {"approvals_needed": 1, "groups": ["legal"]}).get_json()["decision"] == "dispatch"


def test_the_runner_that_asked_may_not_approve_under_its_own_name(client, tok, people):
    key, digest = halted(client, tok)  # runner "alice" asked; requester_may_approve: false
    r = approve(client, people["alice"], key, digest)
    assert (r.status_code, r.get_json()["error"]["code"]) == (403, "approver_not_allowed")
    assert r.get_json()["error"]["details"]["reason"] == "requester"
    assert approve(client, people["bob"], key, digest).status_code == 201
    assert approve(client, people["carol"], key, digest).status_code == 201
    assert decisions()[0] == [("bob", "api"), ("carol", "api")]


def test_a_grant_by_an_approver_the_policy_does_not_allow_is_not_counted(client, tok, people):
    """POST /v1/approvals binds by digest before the step exists: the gate's count filters it."""
    key, digest = halted(client, tok, {"approvals_needed": 1, "groups": ["legal"]})
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    grant = {"job_id": "j1", "task_version": 1, "action": "send_newsletter", "content_digest": digest,
             "target": "mail:list-1", "expires_at": expires}
    assert client.post("/v1/approvals", headers=people["bob"], json=grant).status_code == 201
    assert begin(client, tok, {"approvals_needed": 1, "groups": ["legal"]}).get_json()["reason"] == "approval_required"
    assert client.post("/v1/approvals", headers=people["carol"], json=grant).status_code == 201
    assert begin(client, tok, {"approvals_needed": 1, "groups": ["legal"]}).get_json()["decision"] == "dispatch"


def test_a_denial_by_any_allowed_approver_stops_it_and_cannot_be_outvoted(client, tok, people):
    key, digest = halted(client, tok)
    assert approve(client, people["carol"], key, digest).status_code == 201
    assert deny(client, people["bob"], key, digest, "wrong list").status_code == 201
    out = begin(client, tok).get_json()
    assert (out["reason"], out["denial"]["reason"]) == ("approval_denied", "wrong list")
    r = approve(client, people["carol"], key, digest)  # carol's approval was revoked by the denial
    assert (r.status_code, r.get_json()["error"]["code"]) == (409, "decision_changed")
    assert approve(client, people["bob"], key, digest).status_code == 201  # bob changed his mind
    assert begin(client, tok).get_json()["reason"] == "approval_required"  # 1 of 2: carol's was revoked
    assert approve(client, people["carol"], key, digest).status_code == 201
    assert begin(client, tok).get_json()["decision"] == "dispatch"


def test_a_later_begin_with_another_policy_is_refused_409_and_recorded(client, tok, people):
    key, digest = halted(client, tok)
    r = begin(client, tok, {"approvals_needed": 1})
    assert (r.status_code, r.get_json()["error"]["code"]) == (409, "approval_policy_changed")
    assert begin(client, tok, None).get_json()["reason"] == "approval_required"  # none named: the stored one
    assert begin(client, tok, dict(TWO_OF_THREE, approvers=["carol", "bob", "alice"])).status_code == 200  # same rule
    with db.connection_context():
        assert AuditLog.select().where(AuditLog.action.endswith("approval_policy_changed")).count() == 1
    assert approve(client, people["bob"], key, digest).status_code == 201
    assert begin(client, tok, {"approvals_needed": 1}).status_code == 409  # still: lowering the bar is refused
    assert begin(client, tok).get_json()["reason"] == "approval_required"


def test_the_same_approver_twice_at_once_counts_once_and_three_at_once_make_exactly_two(app, client, tok, people):
    key, digest = halted(client, tok, {"approvals_needed": 2, "approvers": ["alice", "bob", "carol", "dave"]})
    results, barrier = [], threading.Barrier(6)

    def click(who):
        c = app.test_client()
        barrier.wait()
        r = approve(c, people[who], key, digest)
        results.append((who, r.status_code, (r.get_json() or {}).get("created")))
    threads = [threading.Thread(target=click, args=(w,)) for w in ("bob", "bob", "bob", "carol", "dave", "dave")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 6 and all(s in (200, 201) for _, s, _ in results), results
    approvals = decisions()[0]
    assert len(approvals) == 2 and len(set(approvals)) == 2, approvals  # the policy's count, never a third
    assert sum(1 for _, s, created in results if s == 201 and created) == 2
    assert begin(client, tok, None).get_json()["decision"] == "dispatch"


# ---------------------------------------------------------------------------------- the links


def sign_in(app, token):
    page = app.test_client()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/console/").get_data(as_text=True)).group(1)
    assert page.post("/console/login", data={"token": token, "csrf": csrf}).status_code == 302
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/console/jobs").get_data(as_text=True)).group(1)
    return page, csrf


def wait_request(client, tok, key, **extra):
    r = client.post(url(key, "wait"), headers=auth("runner-alice-token"), json={
        "fencing_token": tok, "resume_url": "http://127.0.0.1:5678/webhook-waiting/1?signature=s", **extra})
    assert r.status_code in (200, 201), r.get_json()  # 200: the same execution registered again
    return r.get_json()["request"]


def path_of(link):
    parts = urlsplit(link)
    return parts.path + ("?" + parts.query if parts.query else "")


def test_the_wait_answers_the_request_message_with_signed_links(client, tok, people):
    key, digest = halted(client, tok)
    req = wait_request(client, tok, key)
    assert req["link"].startswith("http://localhost/console/a/") and req["approve_link"] == req["link"] + "?intent=approve"
    assert req["deny_link"] == req["link"] + "?intent=deny"
    s = req["summary"]
    assert (s["job_id"], s["operation_key"], s["title"], s["digest_prefix"], s["requested_by"]) == \
        ("j1", key, "Ten tips", digest[:12], "alice")
    assert s["policy"] == {"approvals_needed": 2, "approvers": ["alice", "bob", "carol"], "groups": [],
                           "requester_may_approve": False}
    assert req["text"].rstrip().endswith(req["link"]) and "Ten tips" in req["text"]
    assert req["approve_link"].replace("&", "&amp;") in req["html"] or req["approve_link"] in req["html"]
    buttons = [b for block in req["slack_blocks"] if block["type"] == "actions" for b in block["elements"]]
    assert [b["url"] for b in buttons] == [req["link"], req["approve_link"], req["deny_link"]]
    assert wait_request(client, tok, key, link_expires_in_s=120)["expires_at"] < req["expires_at"]


def test_a_mail_scanner_following_every_link_decides_nothing(app, client, tok, people):
    key, digest = halted(client, tok)
    req = wait_request(client, tok, key)
    scanner = app.test_client()  # not signed in
    for link in (req["link"], req["approve_link"], req["deny_link"]):
        for method in (scanner.get, scanner.head):
            r = method(path_of(link))
            assert r.status_code in (200, 302)  # the sign-in form (which comes back to the link), or home
    page, _ = sign_in(app, "bob-token")  # a scanner in the approver's own browser session
    for link in (req["approve_link"], req["deny_link"]):
        html = page.get(path_of(link)).get_data(as_text=True)
        assert 'id="intent"' in html and 'id="approve-form"' in html
    assert decisions() == ([], [])
    assert scanner.post(path_of(req["link"]) + "/approve", data={"digest": digest}).status_code in (302, 403)
    assert decisions() == ([], [])


def test_the_one_tap_link_decides_after_confirmation_with_door_link(app, client, tok, people):
    key, digest = halted(client, tok)
    req = wait_request(client, tok, key)
    page, csrf = sign_in(app, "bob-token")
    html = page.get(path_of(req["approve_link"])).get_data(as_text=True)
    shown = re.search(r'name="shown" value="([^"]+)"', html).group(1)
    assert "0 of 2" in html
    r = page.post(path_of(req["link"]) + "/approve", data={"digest": digest, "csrf": csrf, "shown": shown})
    assert r.status_code == 302
    page2, csrf2 = sign_in(app, "carol-token")
    html = page2.get(f"/console/approvals/{quote(key, safe='')}").get_data(as_text=True)
    assert "1 of 2" in html and "bob" in html
    assert "1 of 2" in page2.get("/console/approvals").get_data(as_text=True)
    assert decisions()[0] == [("bob", "link")]
    out = client.get(url(key, "approvals"), headers=auth()).get_json()
    assert [(d["name"], d["door"]) for d in out["decided_by"]] == [("bob", "link")]


def test_a_forwarded_link_opened_by_another_tenant_or_role_shows_nothing_and_decides_nothing(app, client, tok, people):
    key, digest = halted(client, tok)
    req = wait_request(client, tok, key)
    other, other_csrf = sign_in(app, "other-alice-token")  # same name, same group, another tenant
    assert other.get(path_of(req["approve_link"])).status_code == 404
    assert other.post(path_of(req["link"]) + "/approve", data={"digest": digest, "csrf": other_csrf,
                                                               "shown": "PREPARED:0:0"}).status_code == 404
    editor, editor_csrf = sign_in(app, "editor-token")
    assert editor.get(path_of(req["approve_link"])).status_code == 403
    assert editor.post(path_of(req["link"]) + "/approve", data={"digest": digest, "csrf": editor_csrf,
                                                                "shown": "PREPARED:0:0"}).status_code == 403
    assert decisions() == ([], [])


def test_expired_forged_and_altered_links_are_refused_with_a_page(app, client, tok, people):
    key, digest = halted(client, tok)
    req = wait_request(client, tok, key)
    with app.app_context():
        from durable_ledger.web.context import config
        cfg = config()
        with db.connection_context():
            expired = request_links.sign(cfg, "acme", key, digest, time.time() - 1)
            other_digest = request_links.sign(cfg, "acme", key, "0" * 64, time.time() + 3600)
            other_key = request_links.sign(cfg, "acme", "acme:j1:v1:unknown", digest, time.time() + 3600)
    forged = request_links.sign(Config(secret_key="not-the-ledger"), "acme", key, digest, time.time() + 3600)
    token = req["link"].rsplit("/", 1)[1]
    altered = token[:-3] + ("AAA" if token[-3:] != "AAA" else "BBB")
    page, csrf = sign_in(app, "bob-token")
    for who in (app.test_client(), page):
        r = who.get(f"/console/a/{expired}?intent=approve")
        assert r.status_code == 410 and 'data-reason="expired"' in r.get_data(as_text=True)
        for bad in (forged, altered, "x"):
            r = who.get(f"/console/a/{bad}?intent=approve")
            assert r.status_code == 400 and 'data-reason="invalid"' in r.get_data(as_text=True)
    assert page.get(f"/console/a/{other_digest}?intent=approve").status_code == 409
    assert page.get(f"/console/a/{other_key}?intent=approve").status_code == 404
    for bad in (expired, forged, altered, other_digest):
        r = page.post(f"/console/a/{bad}/approve", data={"digest": digest, "csrf": csrf, "shown": "PREPARED:0:0"})
        assert r.status_code in (400, 409, 410)
    assert decisions() == ([], [])


# ---------------------------------------------------------------------------------- tokens


def test_tokens_carry_a_name_and_groups_and_old_bootstrap_forms_still_load(database):
    with db.connection_context():
        assert load_bootstrap_tokens("acme:runner:t-old,acme:approver:t-sites:site-a+site-b,"
                                     "acme:approver:t-named::erin:legal|editors,acme:approver:t-nogroup:*:frank") == 4
        rows = {t.token_hash: t for t in ApiToken.select()}
    from durable_ledger.auth import authenticate, hash_token
    with db.connection_context():
        old, sites = authenticate("t-old"), authenticate("t-sites")
        named, plain = authenticate("t-named"), authenticate("t-nogroup")
    assert (old.name, old.groups, sites.sites) == ("bootstrap-acme-runner", frozenset(), frozenset({"site-a", "site-b"}))
    assert (named.name, named.groups, named.sites) == ("erin", frozenset({"legal", "editors"}), None)
    assert (plain.name, plain.groups) == ("frank", frozenset())
    assert rows[hash_token("t-named")].groups == "editors,legal"
    with pytest.raises(ValueError):
        load_bootstrap_tokens("acme:approver:t:*:n:g:extra")


def test_who_decided_is_on_the_timeline_the_review_item_and_the_pending_list(app, client, tok, people):
    key, digest = halted(client, tok)
    assert approve(client, people["bob"], key, digest).status_code == 201
    pending = client.get("/v1/approvals/pending", headers=people["carol"]).get_json()["pending"]
    assert [(p["policy"]["approvals"], [d["name"] for d in p["decided_by"]]) for p in pending] == [(1, ["bob"])]
    page, csrf = sign_in(app, "carol-token")
    html = page.get(f"/console/approvals/{quote(key, safe='')}").get_data(as_text=True)
    shown = re.search(r'name="shown" value="([^"]+)"', html).group(1)
    assert page.post(f"/console/approvals/{quote(key, safe='')}/approve",
                     data={"digest": digest, "csrf": csrf, "shown": shown}).status_code == 302
    sent = begin(client, tok).get_json()
    assert sent["decision"] == "dispatch"
    r = client.post(url(key, "unknown"), headers=auth("runner-alice-token"), json={"fencing_token": tok})
    assert r.status_code == 200, r.get_json()
    item = client.get(f"/v1/reviews/{quote(key, safe='')}", headers=auth("editor-token")).get_json()
    assert [(d["name"], d["decision"], d["door"]) for d in item["decided_by"]] == \
        [("bob", "approved", "api"), ("carol", "approved", "console")]
    editor, _ = sign_in(app, "editor-token")
    assert "carol</strong> approved" in editor.get(f"/console/review/item/{quote(key, safe='')}").get_data(as_text=True)
    timeline = page.get("/console/jobs/j1").get_data(as_text=True)
    assert "approval granted for send_newsletter by bob (api)" in timeline
    assert "by carol (console)" in timeline and "(2 of 2)" in timeline


def test_token_create_takes_name_and_groups(database, tmp_path):
    import json
    import subprocess
    import sys
    env = {"DURABLE_DATABASE_URL": database, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "durable_ledger.cli", "token", "create", "--tenant", "acme", "--role",
                          "approver", "--name", "gina", "--groups", "legal,editors"], env=env, capture_output=True,
                         text=True, check=True)
    raw = out.stdout.strip()
    listed = subprocess.run([sys.executable, "-m", "durable_ledger.cli", "token", "list", "--tenant", "acme"], env=env,
                            capture_output=True, text=True, check=True).stdout
    assert raw.startswith("dl_") and raw not in listed
    from durable_ledger.auth import authenticate
    with db.connection_context():
        who = authenticate(raw)
    assert (who.name, who.groups) == ("gina", frozenset({"legal", "editors"}))
    assert [json.loads(line)["groups"] for line in listed.splitlines()] == ["editors,legal"]


def test_a_batch_begin_stores_its_policy_and_a_runner_cannot_name_the_requester(client, tok, people):
    item = {"job_id": "j1", "action": "send_newsletter", "payload": PAYLOAD, "fencing_token": tok,
            "target": "mail:list-1", "approval_policy": TWO_OF_THREE}
    r = client.post("/v1/operations/batch", headers=auth("runner-alice-token"), json={"begin": [item]})
    slot = r.get_json()["begin"][0]
    assert (r.status_code, slot["decision"], slot["reason"]) == (200, "halt", "approval_required"), slot
    key = slot["operation"]["operation_key"]
    assert client.get(url(key, "approvals"), headers=auth()).get_json()["policy"]["requested_by"] == "alice"
    forged = dict(item, approval_policy={**TWO_OF_THREE, "requested_by": "nobody"})
    r = begin(client, tok, forged["approval_policy"])
    assert (r.status_code, r.get_json()["error"]["code"]) == (422, "validation_error")
    for bad in ({"approvals_needed": 0}, {"approvals_needed": 11}, {"approvers": "alice"}):
        assert begin(client, tok, bad).status_code == 422


SERVED_TOKENS = ("acme:runner:run-tok:*:asker,acme:approver:a1-tok:*:ann:legal,acme:approver:a2-tok:*:ben:legal,"
                 "acme:approver:a3-tok:*:cy:legal,acme:approver:a4-tok:*:dee:editors")


def test_served_approvers_clicking_at_once_record_the_policys_count_and_one_resume(database, tmp_path):
    """`durable-ledger serve` (2 processes x 4 threads): a 2-of-legal step, eight clicks at once
    (ann twice, ben twice, cy twice, dee of another group twice). Exactly two approvals are
    recorded, by two distinct legal approvers; dee is refused 403 both times; the step dispatches
    once."""
    import requests
    from servers import LedgerServer

    with LedgerServer(database, SERVED_TOKENS, workers=2, threads=4, log_path=tmp_path / "ledger.log") as srv:
        run = requests.Session()
        run.headers["Authorization"] = "Bearer run-tok"
        assert run.put(f"{srv.url}/v1/jobs/s1", json={"pipeline": "generic"}).status_code == 201
        tok = run.post(f"{srv.url}/v1/jobs/s1/lease", json={"owner": "w"}).json()["fencing_token"]
        body = {"job_id": "s1", "action": "publish", "payload": PAYLOAD, "fencing_token": tok,
                "approval_policy": {"approvals_needed": 2, "groups": ["legal"]}}
        out = run.post(f"{srv.url}/v1/operations/begin", json=body).json()
        key, digest = out["operation"]["operation_key"], out["operation"]["request_hash"]
        results, barrier = [], threading.Barrier(8)

        def click(token):
            barrier.wait()
            r = requests.post(f"{srv.url}{url(key, 'approve')}", headers={"Authorization": f"Bearer {token}"},
                              json={"content_digest": digest}, timeout=60)
            results.append((token, r.status_code))
        threads = [threading.Thread(target=click, args=(t,)) for t in ("a1-tok", "a2-tok", "a3-tok", "a4-tok") * 2]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(s for t, s in results if t == "a4-tok") == [403, 403]
        assert all(s in (200, 201) for t, s in results if t != "a4-tok") and len(results) == 8, results
        assert sum(1 for _, s in results if s == 201) == 2
        with db.connection_context():
            names = [a.approver_name for a in Approval.select()]
        assert len(names) == 2 and len(set(names)) == 2 and set(names) <= {"ann", "ben", "cy"}, names
        first = run.post(f"{srv.url}/v1/operations/begin", json=body).json()
        again = run.post(f"{srv.url}/v1/operations/begin", json=body).json()
        assert (first["decision"], again["decision"]) == ("dispatch", "reconcile")
