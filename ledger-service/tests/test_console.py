"""Deciding on waiting operations (core, HTTP API) and the console pages, on both backends.

The WordPress read-back of a publish preview is exercised against a real proxy and WordPress in
tests/reconcile/test_console_browser.py; here the gated step is a generic one (no read-back).
"""

import re
import threading
import time
from html import unescape
from urllib.parse import quote

import pytest
from conftest import auth

from durable_ledger.approvals import preview
from durable_ledger.auth import Principal, create_token
from durable_ledger.approvals import decisions as approval_decisions, waits as approval_waits
from durable_ledger.store.db import db
from durable_ledger.kernel.errors import ContentChanged, OperationNotFound
from durable_ledger.store.models import Approval, ApprovalDenial, AuditLog

APPROVER, EDITOR = auth("approver-token"), auth("editor-token")
PAYLOAD = {"title": "<script>alert('t')</script> Ten tips", "post_id": 7, "channel": "newsletter"}


@pytest.fixture
def tok(client):
    client.put("/v1/jobs/j1", json={"pipeline": "generic"}, headers=auth())
    return client.post("/v1/jobs/j1/lease", json={"owner": "w1"}, headers=auth()).get_json()["fencing_token"]


@pytest.fixture
def decisions_seen(monkeypatch):
    seen = []
    monkeypatch.setattr(approval_waits, "decision_made", lambda *a: seen.append(a))
    return seen


def begin(client, tok, payload=PAYLOAD, action="send_newsletter"):
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "j1", "action": action, "payload": payload, "fencing_token": tok,
        "target": "mail:list-1", "requires_approval": True})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def halted(client, tok):
    out = begin(client, tok)
    assert (out["decision"], out["reason"]) == ("halt", "approval_required")
    return out["operation"]["operation_key"], out["operation"]["request_hash"]


def op_url(key, verb):
    return f"/v1/operations/{quote(key, safe='')}/{verb}"


def test_console_approve_binds_the_operation_and_lifts_the_gate(client, tok, decisions_seen):
    key, digest = halted(client, tok)
    t0 = time.time()
    r = client.post(op_url(key, "approve"), headers=APPROVER, json={"content_digest": digest, "note": "ok"})
    assert r.status_code == 201, r.get_json()
    a = r.get_json()["approval"]
    assert (a["job_id"], a["task_version"], a["action"], a["content_digest"], a["target"], a["approved_by"]) == \
        ("j1", 1, "send_newsletter", digest, "mail:list-1", "approver:bootstrap-acme-approver")
    with db.connection_context():
        expires = Approval.get_by_id(a["id"]).expires_at
        granted = [x for x in AuditLog.select() if x.action == "approval_granted"]
    assert 24 * 3600 - 5 < expires - t0 < 24 * 3600 + 5  # DURABLE_APPROVAL_TTL_S default
    assert granted[0].actor == "approver:bootstrap-acme-approver" and granted[0].detail["operation_key"] == key
    assert decisions_seen == [("acme", key, "approved", "ok")]
    out = begin(client, tok)
    assert out["decision"] == "dispatch"
    # a late second click, after the workflow used the approval: still one approval, no error
    r = client.post(op_url(key, "approve"), headers=APPROVER, json={"content_digest": digest})
    assert (r.status_code, r.get_json()["created"]) == (200, False)
    with db.connection_context():
        assert Approval.select().count() == 1


def test_console_approve_refuses_a_digest_other_than_shown(client, tok, decisions_seen):
    key, digest = halted(client, tok)
    other = "0" * 64
    for verb, body in (("approve", {"content_digest": other}), ("deny", {"content_digest": other, "reason": "x"})):
        r = client.post(op_url(key, verb), headers=APPROVER, json=body)
        assert (r.status_code, r.get_json()["error"]["code"]) == (409, "content_changed")
    with db.connection_context():
        assert Approval.select().count() == 0 and ApprovalDenial.select().count() == 0
    assert decisions_seen == []
    assert begin(client, tok)["reason"] == "approval_required"


def test_console_content_check_refuses_before_anything_is_written(database, client, tok):
    key, digest = halted(client, tok)

    def changed(op):
        raise ContentChanged("edited in WordPress", {})
    with db.connection_context():
        with pytest.raises(ContentChanged):
            approval_decisions.approve(Principal("acme", "approver", "a"), key, digest, check_content=changed)
        assert Approval.select().count() == 0


def test_console_deny_halts_with_the_reason_until_approved(client, tok, decisions_seen):
    key, digest = halted(client, tok)
    r = client.post(op_url(key, "deny"), headers=APPROVER, json={"content_digest": digest, "reason": "wrong list"})
    assert r.status_code == 201, r.get_json()
    assert r.get_json()["denial"]["denied_by"] == "approver:bootstrap-acme-approver"
    out = begin(client, tok)
    assert (out["decision"], out["reason"], out["denial"]["reason"]) == ("halt", "approval_denied", "wrong list")
    assert "denied" in out["message"]
    assert out["operation"]["state"] == "PREPARED"
    again = client.post(op_url(key, "deny"), headers=APPROVER, json={"content_digest": digest, "reason": "again"})
    assert (again.status_code, again.get_json()["created"]) == (200, False)
    with db.connection_context():
        assert ApprovalDenial.select().count() == 1
        assert [x.actor for x in AuditLog.select() if x.action == "approval_denied"] == \
            ["approver:bootstrap-acme-approver"]
    # the approver changes their mind: an approval of the same digest lifts the denial
    r = client.post(op_url(key, "approve"), headers=APPROVER, json={"content_digest": digest})
    assert r.status_code == 201
    assert begin(client, tok)["decision"] == "dispatch"
    assert decisions_seen == [("acme", key, "denied", "wrong list"), ("acme", key, "approved", None)]


def test_console_deny_revokes_an_unused_approval(client, tok):
    key, digest = halted(client, tok)
    client.post(op_url(key, "approve"), headers=APPROVER, json={"content_digest": digest})
    r = client.post(op_url(key, "deny"), headers=APPROVER, json={"content_digest": digest, "reason": "changed mind"})
    assert r.status_code == 201
    assert begin(client, tok)["reason"] == "approval_denied"


def test_console_deny_needs_a_reason(client, tok):
    key, digest = halted(client, tok)
    for body in ({"content_digest": digest}, {"content_digest": digest, "reason": ""}):
        assert client.post(op_url(key, "deny"), headers=APPROVER, json=body).status_code == 422
    with db.connection_context(), pytest.raises(Exception) as exc:
        approval_decisions.deny(Principal("acme", "approver", "a"), key, digest, "   ")
    assert exc.value.code == "validation_error"


def test_console_concurrent_double_submit_makes_one_approval(app, client, tok, decisions_seen):
    key, digest = halted(client, tok)
    results, barrier = [], threading.Barrier(6)

    def click():
        c = app.test_client()
        barrier.wait()
        r = c.post(op_url(key, "approve"), headers=APPROVER, json={"content_digest": digest})
        results.append((r.status_code, (r.get_json() or {}).get("created")))
    threads = [threading.Thread(target=click) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [(200, False)] * 5 + [(201, True)], results
    with db.connection_context():
        assert Approval.select().count() == 1
    assert len(decisions_seen) == 1


def test_console_decisions_need_the_approver_role_and_the_tenant(client, tok):
    key, digest = halted(client, tok)
    for h in (auth(), EDITOR):
        r = client.post(op_url(key, "approve"), headers=h, json={"content_digest": digest})
        assert r.status_code == 403
    assert client.get("/v1/approvals/pending", headers=auth()).status_code == 403
    with db.connection_context(), pytest.raises(OperationNotFound):
        approval_decisions.approve(Principal("other", "approver", "x"), key, digest)
    create_token("other", "approver", raw="other-approver")
    r = client.post(op_url(key, "approve"), headers=auth("other-approver"), json={"content_digest": digest})
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "operation_not_found")
    pending = client.get("/v1/approvals/pending", headers=APPROVER).get_json()["pending"]
    assert [(p["operation"]["operation_key"], p["status"]) for p in pending] == [(key, "waiting")]
    assert client.get("/v1/approvals/pending", headers=auth("other-approver")).get_json()["pending"] == []


def test_console_nothing_to_approve_for_a_step_that_never_waited(client, tok):
    out = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "j1", "action": "create_draft", "payload": {"a": 1}, "fencing_token": tok}).get_json()
    r = client.post(op_url(out["operation"]["operation_key"], "approve"), headers=APPROVER,
                    json={"content_digest": out["operation"]["request_hash"]})
    assert (r.status_code, r.get_json()["error"]["code"]) == (409, "invalid_transition")


# ------------------------------------------------------------------------------ the pages


def sign_in(app, token):
    page = app.test_client()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/console/").get_data(as_text=True)).group(1)
    r = page.post("/console/login", data={"token": token, "csrf": csrf})
    # signing in starts a new session, with a new CSRF token
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/console/jobs").get_data(as_text=True)).group(1)
    return page, csrf, r


def test_console_sign_in_roles_and_navigation(app, client, tok):
    page = app.test_client()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/console/").get_data(as_text=True)).group(1)
    r = page.post("/console/login", data={"token": "runner-token", "csrf": csrf})  # runners cannot sign in
    assert r.status_code == 302 and "Set-Cookie" not in r.headers or "token_sha256" not in r.headers["Set-Cookie"]
    assert "Sign-in refused" in page.get("/console/").get_data(as_text=True)
    assert page.get("/console/jobs").get_data(as_text=True).count('id="token"') == 1  # still the sign-in form
    assert page.post("/console/login", data={"token": "approver-token"}).status_code == 403  # no CSRF token
    page, csrf, r = sign_in(app, "approver-token")
    assert r.headers["Location"].endswith("/console/approvals")
    cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "approver-token" not in cookie
    html = page.get("/console/approvals").get_data(as_text=True)
    assert "Approvals" in html and "Jobs" in html and "Review queue" not in html
    assert page.get("/console/review").status_code == 403
    page, csrf, r = sign_in(app, "editor-token")
    assert r.headers["Location"].endswith("/console/review")
    html = page.get("/console/jobs").get_data(as_text=True)
    assert "Review queue" in html and ">Approvals<" not in html
    assert page.get("/console/approvals").status_code == 403
    resp = page.get("/console/jobs")
    assert "script-src" not in resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
    assert resp.headers["X-Frame-Options"] == "DENY" and resp.headers["X-Content-Type-Options"] == "nosniff"
    # the old review URLs still answer (redirect into the console)
    assert page.get("/review").headers["Location"].endswith("/console/review")


def test_console_approve_in_the_page_with_csrf_and_double_submit(app, client, tok):
    key, digest = halted(client, tok)
    page, csrf, _ = sign_in(app, "approver-token")
    listing = page.get("/console/approvals").get_data(as_text=True)
    assert "send_newsletter" in listing and "<script>alert" not in listing and "&lt;script&gt;" in listing
    item = page.get(f"/console/approvals/{quote(key, safe='')}").get_data(as_text=True)
    assert digest in item and "mail:list-1" in item and "runner:bootstrap-acme-runner" in item
    assert "<script>alert" not in item
    url = f"/console/approvals/{quote(key, safe='')}/approve"
    assert page.post(url, data={"digest": digest}).status_code == 403  # no CSRF token
    assert page.post(url, data={"digest": digest, "csrf": "forged"}).status_code == 403
    with db.connection_context():
        assert Approval.select().count() == 0
    shown = hidden_fields(item, "approve-form")["shown"]
    r = page.post(url, data={"digest": "1" * 64, "csrf": csrf, "shown": shown})  # the page showed another digest
    assert "Not approved" in page.get(r.headers["Location"]).get_data(as_text=True)
    r = page.post(url, data={"digest": digest, "csrf": csrf})  # a form without the state it showed
    assert "Not approved" in page.get(r.headers["Location"]).get_data(as_text=True)
    for _ in range(2):
        r = page.post(url, data={"digest": digest, "csrf": csrf, "expires_in_h": "8", "shown": shown})
        assert r.status_code == 302 and r.headers["Location"].endswith("/console/approvals")
    flashes = page.get("/console/approvals").get_data(as_text=True)
    assert "already approved" in flashes
    with db.connection_context():
        [a] = list(Approval.select())
        assert a.content_digest == digest and 8 * 3600 - 60 < a.expires_at - a.created_at <= 8 * 3600


def test_console_deny_in_the_page(app, client, tok):
    key, digest = halted(client, tok)
    page, csrf, _ = sign_in(app, "approver-token")
    url = f"/console/approvals/{quote(key, safe='')}/deny"
    shown = hidden_fields(page.get(f"/console/approvals/{quote(key, safe='')}").get_data(as_text=True), "deny-form")
    r = page.post(url, data={**shown, "reason": ""})
    assert "Not denied" in page.get(r.headers["Location"]).get_data(as_text=True)
    r = page.post(url, data={**shown, "reason": "<b>off-brand</b>"})
    html = page.get("/console/approvals").get_data(as_text=True)
    assert "denied" in html and "&lt;b&gt;off-brand&lt;/b&gt;" in html
    assert begin(client, tok)["reason"] == "approval_denied"
    jobs = page.get("/console/jobs").get_data(as_text=True)
    assert "approval denied" in jobs and ">waiting for approval<" not in jobs


def test_console_other_tenants_ids_are_not_found(app, client, tok):
    key, _ = halted(client, tok)
    create_token("other", "approver", raw="other-approver")
    page, _, _ = sign_in(app, "other-approver")
    assert page.get("/console/jobs/j1").status_code == 404
    assert page.get(f"/console/approvals/{quote(key, safe='')}").status_code == 404
    assert "j1" not in page.get("/console/jobs").get_data(as_text=True)
    assert page.get("/console/approvals").get_data(as_text=True).count("send_newsletter") == 0


def test_console_jobs_list_filters_search_and_pages(app, client, tok):
    halted(client, tok)  # j1 waits for an approval
    for i in range(30):
        client.put(f"/v1/jobs/batch-{i:02d}", json={}, headers=auth())
    client.put("/v1/jobs/lost-1", json={}, headers=auth())
    t = client.post("/v1/jobs/lost-1/lease", json={"owner": "w"}, headers=auth()).get_json()["fencing_token"]
    k = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "lost-1", "action": "create_draft", "payload": {"a": 1}, "fencing_token": t}).get_json()
    client.post(op_url(k["operation"]["operation_key"], "unknown"), headers=auth(), json={"fencing_token": t})
    page, _, _ = sign_in(app, "editor-token")

    def ids(query):
        return re.findall(r'<a href="/console/jobs/([^"]+)"><code>', page.get("/console/jobs" + query).get_data(as_text=True))
    assert len(ids("")) == 25 and len(ids("?page=2")) == 7
    assert ids("?approval=1") == ["j1"]
    assert ids("?unknown=1") == ["lost-1"]
    assert sorted(ids("?q=BATCH-0")) == [f"batch-0{i}" for i in range(10)]
    assert ids("?status=cancelled") == []
    assert "older" in page.get("/console/jobs").get_data(as_text=True)


def test_console_timeline_shows_each_event_in_order(app, client, tok):
    key, digest = halted(client, tok)
    client.post(op_url(key, "approve"), headers=APPROVER, json={"content_digest": digest})
    assert begin(client, tok)["decision"] == "dispatch"
    client.post(op_url(key, "confirm"), headers=auth(), json={"fencing_token": tok, "remote_id": "m-1",
                                                             "receipt": {"api_key": "plain-secret-1"}})
    assert begin(client, tok)["decision"] == "reuse_receipt"
    page, _, _ = sign_in(app, "editor-token")
    html = page.get("/console/jobs/j1").get_data(as_text=True)
    assert "plain-secret-1" not in html and "<script>alert" not in html
    order = ["job created", "lease acquired by w1", "prepared; waiting for an approval", "approval granted",
             "approval used", "sent (attempt", "confirmed: remote id m-1", "receipt reused"]
    positions = [html.find(text) for text in order]
    assert -1 not in positions, list(zip(order, positions))
    assert positions == sorted(positions), list(zip(order, positions))


def test_console_preview_body_is_sanitised_and_framed():
    doc = preview.frame_document('<p onclick="x()">Hi</p><script>alert(1)</script><img src=x onerror=alert(2)>'
                                 '<a href="javascript:alert(3)">l</a><iframe src="https://evil"></iframe>',
                                 "<script>alert('title')</script>")
    assert "<script" not in doc.replace("&lt;script", "") and "onerror" not in doc and "onclick" not in doc
    assert "javascript:" not in doc and "<iframe" not in doc and "default-src 'none'" in doc
    assert "&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;" in doc


def test_console_readback_digest_is_the_publish_payload_digest():
    import hashlib

    from durable_ledger.kernel.digest import request_digest

    content = "<p>Body</p>"
    payload = {"post_id": 5, "content_sha256": hashlib.sha256(content.encode()).hexdigest(), "title": "T",
               "featured_media": 9}
    post = {"id": 5, "content": content, "title": "T", "featured_media": 9}
    assert preview.readback_digest(payload, post) == request_digest(payload)
    assert preview.readback_digest(payload, {**post, "content": "<p>Edited</p>"}) != request_digest(payload)


# ------------------------------------------------------------------- the doors (issue 22)
#
# Each test below failed on the console before these doors were closed (see the report of the
# change): a 500 for CR/LF in `next`, pager links built from every query argument, an empty CSRF
# field that matched a session without a token, a cookie that outlived its sign-out, a click on
# a page opened before a denial that lifted it, answers without the security headers, and
# caller-stored links and evidence rendered as if the ledger had vouched for them.

def hidden_fields(html, form_id):
    form = re.search(rf'<form[^>]*id="{form_id}".*?</form>', html, re.S).group(0)
    return {n: unescape(v) for n, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form)}


def session_rows():
    from durable_ledger.store.console_sessions import ConsoleSession

    with db.connection_context():
        return list(ConsoleSession.select().order_by(ConsoleSession.id))


def login_form_csrf(page):
    return re.search(r'name="csrf" value="([^"]+)"', page.get("/console/").get_data(as_text=True)).group(1)


def test_console_next_is_a_relative_console_path_or_home(app, client, tok):
    bad = ["/console/jobs\r\nSet-Cookie: pwned=1", "/console/jobs\nX: y", "/console/\x7f", "/console/\x1b[31m",
           "//evil.example/console", "/\\evil.example", "/console\\..\\x", "https://evil.example/console",
           "javascript:alert(1)", "/v1/jobs", "/consolex", "/console/../v1/jobs", "console/jobs", " /console/jobs",
           "/console/jobs\u2028"]
    answers = []
    for nxt in bad + ["/console/jobs?page=2&q=j"]:
        page = app.test_client()
        r = page.post("/console/login", data={"token": "approver-token", "csrf": login_form_csrf(page), "next": nxt})
        answers.append((r.status_code, r.headers.get("Location")))
    assert answers[:-1] == [(302, "/console/approvals")] * len(bad)
    assert answers[-1] == (302, "/console/jobs?page=2&q=j")
    # a refused sign-in goes back the same way
    page = app.test_client()
    r = page.post("/console/login", data={"token": "nope", "csrf": login_form_csrf(page), "next": "/console/x\r\nX: y"})
    assert (r.status_code, r.headers["Location"]) == (302, "/console/")


def test_console_jobs_pager_gets_only_the_filters(app, client, tok):
    for i in range(30):
        client.put(f"/v1/jobs/pg-{i:02d}", json={}, headers=auth())
    page, _, _ = sign_in(app, "editor-token")
    seen = {}
    for query in ("?_method=DELETE", "?endpoint=x", "?_external=1", "?_anchor=top", "?_scheme=https",
                  "?q=pg&bogus=1&_external=1", "?values=1&page=1"):
        r = page.get("/console/jobs" + query)
        hrefs = re.findall(r'<a href="([^"]*)" id="(?:next|prev)"', r.get_data(as_text=True))
        seen[query] = (r.status_code, hrefs)
    assert seen == {
        "?_method=DELETE": (200, ["/console/jobs?page=2"]), "?endpoint=x": (200, ["/console/jobs?page=2"]),
        "?_external=1": (200, ["/console/jobs?page=2"]), "?_anchor=top": (200, ["/console/jobs?page=2"]),
        "?_scheme=https": (200, ["/console/jobs?page=2"]),
        "?q=pg&bogus=1&_external=1": (200, ["/console/jobs?page=2&amp;q=pg"]),
        "?values=1&page=1": (200, ["/console/jobs?page=2"])}


def test_console_an_empty_or_missing_csrf_never_matches(app, client, tok):
    key, digest = halted(client, tok)
    # login CSRF: a cross-site form has no cookie of ours (SameSite=Strict), so no session
    victim = app.test_client()
    answers = [victim.post("/console/login", data={"token": "approver-token", "csrf": ""}).status_code,
               victim.post("/console/login", data={"token": "approver-token"}).status_code]
    assert answers == [403, 403]
    assert victim.get("/console/approvals").get_data(as_text=True).count('id="token"') == 1  # not signed in
    # a session that never rendered a page (sign-in redirect not followed) has a token all the same
    page = app.test_client()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/console/").get_data(as_text=True)).group(1)
    assert page.post("/console/login", data={"token": "approver-token", "csrf": csrf}).status_code == 302
    url = f"/console/approvals/{quote(key, safe='')}/approve"
    assert page.post(url, data={"digest": digest, "csrf": ""}).status_code == 403
    assert page.post(url, data={"digest": digest}).status_code == 403
    assert page.post(url, data={"digest": digest, "csrf": csrf}).status_code == 403  # the pre-session token
    assert page.post("/console/logout", data={"csrf": ""}).status_code == 403
    with db.connection_context():
        assert Approval.select().count() == 0
    assert page.get("/console/approvals").status_code == 200  # still signed in


def test_console_sign_out_ends_the_session_for_every_copy_of_the_cookie(app, client, tok):
    key, digest = halted(client, tok)
    page, csrf, _ = sign_in(app, "approver-token")
    copied = page.get_cookie("session").value
    r = page.post("/console/logout", data={"csrf": csrf})
    assert r.status_code == 302
    thief = app.test_client()
    thief.set_cookie("session", copied)
    assert thief.get("/console/approvals").get_data(as_text=True).count('id="token"') == 1  # the sign-in form
    r = thief.post(f"/console/approvals/{quote(key, safe='')}/approve", data={"digest": digest, "csrf": csrf})
    assert r.status_code == 302 and r.headers["Location"] == "/console/"
    with db.connection_context():
        assert Approval.select().count() == 0
    [row] = session_rows()
    assert (row.tenant, row.ended_reason) == ("acme", "signed_out") and row.ended_at is not None


def test_console_revoking_the_token_ends_its_sessions_in_every_worker(app, client, tok):
    from durable_ledger.auth import _cache, hash_token, revoke_token

    with db.connection_context():
        raw = create_token("acme", "approver", name="leaky")
    page, _, _ = sign_in(app, raw)
    other, _, _ = sign_in(app, "approver-token")
    copied = page.get_cookie("session").value
    assert page.get("/console/approvals").status_code == 200
    principal = _cache.get(hash_token(raw), 60)
    with db.connection_context():
        assert revoke_token(raw) == 1
    # another server process still has the token in its cache for DURABLE_TOKEN_CACHE_TTL_S
    _cache.put(hash_token(raw), principal)
    thief = app.test_client()
    thief.set_cookie("session", copied)
    assert thief.get("/console/approvals").get_data(as_text=True).count('id="token"') == 1
    assert sorted((s.ended_reason or "live") for s in session_rows()) == ["live", "token_revoked"]
    assert other.get("/console/approvals").status_code == 200  # another token's session is untouched


def test_console_decision_forms_are_refused_when_the_decision_changed(app, client, tok, decisions_seen):
    key, digest = halted(client, tok)
    page, _, _ = sign_in(app, "approver-token")
    shown = page.get(f"/console/approvals/{quote(key, safe='')}").get_data(as_text=True)
    approve_form, deny_form = hidden_fields(shown, "approve-form"), hidden_fields(shown, "deny-form")
    # meanwhile another approver denies through the API
    r = client.post(op_url(key, "deny"), headers=APPROVER, json={"content_digest": digest, "reason": "off-brand"})
    assert r.status_code == 201, r.get_json()
    r = page.post(f"/console/approvals/{quote(key, safe='')}/approve", data={**approve_form, "expires_in_h": "8"})
    flashed = page.get(r.headers["Location"]).get_data(as_text=True)
    assert "Not approved" in flashed and "denied" in flashed and "off-brand" in flashed
    with db.connection_context():
        assert Approval.select().count() == 0
        assert [d.lifted_at for d in ApprovalDenial.select()] == [None]
    assert begin(client, tok)["reason"] == "approval_denied"
    # the page that shows the denial lifts it, deliberately
    shown = page.get(f"/console/approvals/{quote(key, safe='')}").get_data(as_text=True)
    r = page.post(f"/console/approvals/{quote(key, safe='')}/approve", data=hidden_fields(shown, "approve-form"))
    assert r.headers["Location"].endswith("/console/approvals")
    with db.connection_context():
        assert Approval.select().count() == 1 and ApprovalDenial.get().lifted_at is not None
    # the deny form opened before that approval no longer revokes it
    r = page.post(f"/console/approvals/{quote(key, safe='')}/deny", data={**deny_form, "reason": "late"})
    flashed = page.get(r.headers["Location"]).get_data(as_text=True)
    assert "Not denied" in flashed and "approved" in flashed
    with db.connection_context():
        assert [a.revoked_at for a in Approval.select()] == [None] and ApprovalDenial.select().count() == 1
    assert begin(client, tok)["decision"] == "dispatch"


def test_console_security_headers_on_every_answer(app, client, tok, monkeypatch):
    page, csrf, _ = sign_in(app, "editor-token")
    answers = {
        "unknown route": page.get("/console/no-such-page"),
        "unknown old route": page.get("/review/no-such-page"),
        "unknown job": page.get("/console/jobs/nope"),
        "no csrf": page.post("/console/logout", data={}),
        "wrong method": page.delete("/console/jobs"),
        "bad query": page.get("/console/jobs?q=%00"),
        "signed out": app.test_client().get("/console/review"),
    }
    from durable_ledger.jobs import timeline

    app.config["PROPAGATE_EXCEPTIONS"] = False
    monkeypatch.setattr(timeline, "list_jobs", lambda *a, **k: 1 / 0)
    answers["internal error"] = page.get("/console/jobs")
    statuses = {name: r.status_code for name, r in answers.items()}
    assert statuses == {"unknown route": 404, "unknown old route": 404, "unknown job": 404, "no csrf": 403,
                        "wrong method": 405, "bad query": 422, "signed out": 200, "internal error": 500}
    missing = {name: [h for h in ("Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options",
                                  "Referrer-Policy", "Cache-Control") if h not in r.headers]
               for name, r in answers.items()}
    assert missing == {name: [] for name in answers}
    assert {r.headers["X-Frame-Options"] for r in answers.values()} == {"DENY"}


# ----------------------------------------------------- what callers stored (links and evidence)

HOSTILE = ["javascript:alert(1)", "JavaScript:alert(2)", " javascript:alert(3)", "data:text/html,<b>x</b>",
           "java\tscript:alert(4)", "vbscript:x", "//evil.example/x", "/relative", "https:", "http://"]


def hrefs(html):
    return [unescape(h) for h in re.findall(r'href="([^"]*)"', html)]


def unsafe_hrefs(html):
    return [h for h in hrefs(html) if not (h.startswith(("http://", "https://")) or
                                           (h.startswith("/") and not h.startswith("//")))]


@pytest.fixture
def sheet_op(client, tok):
    """An append_row left SENT (no server-side reconciler: begin asks for a lookup)."""
    def begin_row():
        return client.post("/v1/operations/begin", headers=auth(), json={
            "job_id": "j1", "action": "append_row", "target": "sheet:orders", "payload": {"o": 1},
            "fencing_token": tok}).get_json()
    key = begin_row()["operation"]["operation_key"]
    assert begin_row()["reconciliation"] == {"outcome": "no_reconciler"}
    return key


def lookup(client, key, tok, result, headers=None, **extra):
    r = client.post(op_url(key, "lookup-result"), headers={**auth(), **(headers or {})},
                    json={"fencing_token": tok, "attempt": 1, "result": result, **extra})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def test_console_links_a_caller_stored_are_rendered_only_when_http(app, client, tok, sheet_op):
    candidates = [{"id": "row-1", "edit_url": u, "link": u} for u in HOSTILE]
    lookup(client, sheet_op, tok, "found", remote_id="row-1",
           receipt={"edit_url": "javascript:alert(5)", "link": "data:text/html,<b>y</b>"},
           evidence={"candidates": candidates + [{"id": "row-1", "edit_url": "https://sheets.example/r/1"}]})
    page, _, _ = sign_in(app, "editor-token")
    timeline = page.get("/console/jobs/j1").get_data(as_text=True)
    item = page.get(f"/console/review/item/{quote(sheet_op, safe='')}").get_data(as_text=True)
    assert (unsafe_hrefs(timeline), unsafe_hrefs(item)) == ([], [])
    assert "javascript:alert(5)" in timeline  # shown, as text
    # candidates a reconciler stored (a WordPress answer, say) go through the same check
    from durable_ledger.store.models import Operation

    with db.connection_context():
        Operation.update(state="NEEDS_REVIEW", evidence={"candidates": candidates + [
            {"id": "7", "edit_url": "https://wp.example/wp-admin/post.php?post=7", "link": "http://wp.example/?p=7"}]}
        ).where(Operation.operation_key == sheet_op).execute()
    item = page.get(f"/console/review/item/{quote(sheet_op, safe='')}").get_data(as_text=True)
    assert unsafe_hrefs(item) == []
    assert [h for h in hrefs(item) if "example" in h] == ["https://wp.example/wp-admin/post.php?post=7",
                                                          "http://wp.example/?p=7"]
    assert "javascript:alert(1)" in item  # the value is there for the editor to read


def test_console_caller_evidence_is_labelled_as_the_callers(app, client, tok, sheet_op):
    forged = {"source": "wordpress_reconciler", "reconciled": "found by the WordPress plugin", "verdict": "found",
              "review": "confirm", "n8n": {"execution_id": "999", "workflow_id": "wfX"}, "detail": "row 1 has it"}
    lookup(client, sheet_op, tok, "found", remote_id="row-1", evidence=forged)
    with db.connection_context():
        from durable_ledger.store.models import Operation, OperationEvent

        op = Operation.get(Operation.operation_key == sheet_op)
        [ev] = [e for e in OperationEvent.select() if e.to_state == "CONFIRMED"]
    runner = "runner:bootstrap-acme-runner"
    assert op.evidence == {"source": "caller_lookup", "reported_by": runner, "caller_reported": forged}
    assert ev.detail == {"reconciled": "found", "source": "caller_lookup", "reported_by": runner,
                         "caller_reported": forged}  # no n8n: the request carried no X-N8N-Execution-Id
    page, _, _ = sign_in(app, "editor-token")
    html = page.get("/console/jobs/j1").get_data(as_text=True)
    assert f"reported by {runner} via lookup-result: found → CONFIRMED" in html
    assert "n8n execution" not in html and "reconciled with the remote system" not in html
    assert "reviewed by an editor" not in html
    item = page.get(f"/console/review/item/{quote(sheet_op, safe='')}").get_data(as_text=True)
    assert f"Reported by {runner} via lookup-result" in item


def test_console_what_the_ledger_saw_stays_labelled_apart(app, client, tok, sheet_op):
    forged = {"verdict": "found", "n8n": {"execution_id": "999"}, "source": "n8n"}
    lookup(client, sheet_op, tok, "undecidable", evidence=forged,
           headers={"X-N8N-Execution-Id": "123", "X-N8N-Workflow-Id": "wf1"})
    with db.connection_context():
        from durable_ledger.store.models import Operation

        op = Operation.get(Operation.operation_key == sheet_op)
    assert op.state == "NEEDS_REVIEW"
    assert (op.evidence["source"], op.evidence["verdict"], op.evidence["caller_reported"]) == \
        ("caller_lookup", "undecidable", forged)
    page, _, _ = sign_in(app, "editor-token")
    html = page.get("/console/jobs/j1").get_data(as_text=True)
    assert re.findall(r"n8n execution #(\d+)", html) == ["123"]  # the header the ledger saw, never the 999 reported
    item = page.get(f"/console/review/item/{quote(sheet_op, safe='')}").get_data(as_text=True)
    assert "Reported by runner:bootstrap-acme-runner via lookup-result" in item


def test_console_a_session_ends_at_its_expiry(app, client, tok):
    from durable_ledger.store.console_sessions import ConsoleSession

    page, _, _ = sign_in(app, "approver-token")
    assert page.get("/console/approvals").status_code == 200
    [row] = session_rows()
    assert 12 * 3600 - 60 < row.expires_at - row.created_at <= 12 * 3600  # DURABLE_CONSOLE_SESSION_TTL_S
    with db.connection_context():
        ConsoleSession.update(expires_at=time.time() - 1).execute()
    assert page.get("/console/approvals").get_data(as_text=True).count('id="token"') == 1


def test_console_every_post_without_the_token_is_refused(app, client, tok):
    """One check covers every form the console takes (console/base.py install_csrf): each POST
    route under the console's paths, found in the app's URL map, refuses a missing or forged
    token before its view runs, signed in or not, and nothing is written."""
    from durable_ledger.console.base import SESSION_PREFIXES

    key, digest = halted(client, tok)
    posts = sorted(re.sub(r"<(?:\w+:)?(\w+)>", quote(key, safe=""), r.rule) for r in app.url_map.iter_rules()
                   if "POST" in r.methods and r.rule.startswith(SESSION_PREFIXES))
    assert {"/console/login", "/console/logout", f"/console/approvals/{quote(key, safe='')}/approve",
            f"/console/approvals/{quote(key, safe='')}/deny"} <= set(posts), posts
    assert any("/resolve" in p for p in posts), posts
    page, csrf, _ = sign_in(app, "admin-token")
    form = {"digest": digest, "reason": "r", "decision": "abandon", "token": "admin-token"}
    for path in posts:
        for who, data in ((page, form), (page, {**form, "csrf": "forged"}), (page, {**form, "csrf": ""}),
                          (app.test_client(), form)):
            r = who.post(path, data=data)
            assert r.status_code == 403 and "the form expired" in r.get_data(as_text=True), (path, r.status_code)
    with db.connection_context():
        assert Approval.select().count() == 0 and ApprovalDenial.select().count() == 0
    assert page.get("/console/jobs").status_code == 200  # still signed in: the logout was refused too
    r = page.post(f"/console/approvals/{quote(key, safe='')}/deny", data={**form, "csrf": csrf})
    assert r.status_code == 302  # the same form with the page's token is taken
