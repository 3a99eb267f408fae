"""The console's doors in a real headless Chromium against a real ledger (`durable-ledger serve`,
two server workers, so a token cached by one worker and a session read by the other are both
in play). No WordPress is needed: the steps here are generic ones (a sheet row, a newsletter).

- what a caller stored on lookup-result (hostile links, a forged source, verdict and n8n
  execution) is shown as the caller's report and never as a link;
- an Approve clicked on a page opened before a denial given through the API is refused;
- a session cookie copied before sign-out, or before its token is revoked, signs nobody in;
- unknown routes answer with the security headers.

Screenshots go to pytest's tmp dir; with DURABLE_SCREENSHOTS_DIR=docs/img they are kept there.
"""
import secrets
import uuid
from urllib.parse import quote

import pytest
import requests
from harness import LedgerServer, TENANT
import test_console_browser
from test_console_browser import Shots, _navigated

browser = test_console_browser.browser  # the Chromium fixture, shared

HOSTILE = ["javascript:alert(1)", "data:text/html,<script>alert(2)</script>", "//evil.example/x", "vbscript:x"]
HEADERS = ("Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy", "Cache-Control")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    work = tmp_path_factory.mktemp("console-doors")
    tokens = {role: f"{role}-{secrets.token_hex(8)}" for role in ("runner", "editor", "approver")}
    spec = ",".join(f"{TENANT}:{role}:{raw}" for role, raw in tokens.items())
    server = LedgerServer(f"sqlite:///{work / 'ledger.db'}", spec, workers=2, threads=4, log_path=work / "ledger.log")
    server.env["DURABLE_TOKEN_CACHE_TTL_S"] = "300"  # a revoked token stays cached in the workers
    with server:
        server.tokens, server.db_url = tokens, f"sqlite:///{work / 'ledger.db'}"
        yield server


def _api(ledger, method, path, token="runner", headers=None, **kw):
    r = requests.request(method, ledger.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {ledger.tokens[token]}", **(headers or {})})
    assert r.status_code < 300, (path, r.status_code, r.text)
    return r.json()


def _job(ledger, job):
    _api(ledger, "PUT", f"/v1/jobs/{job}", json={"pipeline": "generic"})
    return _api(ledger, "POST", f"/v1/jobs/{job}/lease", json={"owner": "w1", "ttl_s": 600})["fencing_token"]


def _sign_in(browser, ledger, role, expect):
    browser.delete_all_cookies()
    browser.get(f"{ledger.url}/console/")
    browser.find_element("id", "token").send_keys(ledger.tokens[role])
    _navigated(browser, browser.find_element("id", "sign-in").click, expect)


def _signed_out(session, ledger, path="/console/approvals", tries=6):
    """Ask several times: two workers answer in turn, each must refuse the cookie."""
    return [session.get(ledger.url + path, timeout=30).text.count('id="token"') for _ in range(tries)]


def test_console_caller_reports_are_labelled_and_never_linked_in_chromium(ledger, browser, tmp_path):
    from selenium.webdriver.common.by import By

    shots, job = Shots(browser, tmp_path), f"sheet-{uuid.uuid4().hex[:8]}"
    tok = _job(ledger, job)
    body = {"job_id": job, "action": "append_row", "target": "sheet:orders", "payload": {"order": 7},
            "fencing_token": tok}
    key = _api(ledger, "POST", "/v1/operations/begin", json=body)["operation"]["operation_key"]
    assert _api(ledger, "POST", "/v1/operations/begin", json=body)["decision"] == "reconcile"
    forged = {"source": "wordpress_reconciler", "verdict": "found", "n8n": {"execution_id": "999"},
              "candidates": [{"id": "row-7", "edit_url": u, "link": u} for u in HOSTILE]}
    out = _api(ledger, "POST", f"/v1/operations/{quote(key, safe='')}/lookup-result",
               headers={"X-N8N-Execution-Id": "4242", "X-N8N-Workflow-Id": "wfA"},
               json={"fencing_token": tok, "attempt": 1, "result": "found", "remote_id": "row-7", "evidence": forged,
                     "receipt": {"edit_url": HOSTILE[0], "link": "https://sheets.example/orders#row-7"}})
    assert out["decision"] == "reuse_receipt"

    _sign_in(browser, ledger, "editor", "/console/review")
    browser.get(f"{ledger.url}/console/jobs/{job}")
    hrefs = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "a[href]")]
    assert [h for h in hrefs if not h.startswith(("http://", "https://"))] == []
    assert [h for h in hrefs if "example" in h] == ["https://sheets.example/orders#row-7"]
    text = browser.find_element(By.ID, "timeline").text
    assert "reported by runner:bootstrap-acme-runner via lookup-result: found → CONFIRMED" in text
    assert "n8n execution #4242" in text and "#999" not in text and "reconciled with the remote system" not in text
    assert HOSTILE[0] in browser.find_element(By.ID, "operations").text  # the value, as text
    shots.take("console-timeline-caller-report", 760, scroll_to="steps")
    browser.get(f"{ledger.url}/console/review/item/{quote(key, safe='')}")
    hrefs = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "a[href]")]
    assert [h for h in hrefs if not h.startswith(ledger.url)] == []  # console links only
    assert "Reported by runner:bootstrap-acme-runner via lookup-result" in browser.find_element(By.ID, "reported-by").text
    shots.take("console-review-item-caller-report", 900)


def test_console_stale_approve_and_ended_sessions_in_chromium(ledger, browser, tmp_path):
    from selenium.webdriver.common.by import By

    shots, job = Shots(browser, tmp_path), f"mail-{uuid.uuid4().hex[:8]}"
    tok = _job(ledger, job)
    halted = _api(ledger, "POST", "/v1/operations/begin", json={
        "job_id": job, "action": "send_newsletter", "target": "mail:list-1", "payload": {"title": "Ten tips"},
        "fencing_token": tok, "requires_approval": True})
    assert halted["reason"] == "approval_required"
    key, digest = halted["operation"]["operation_key"], halted["operation"]["request_hash"]

    _sign_in(browser, ledger, "approver", "/console/approvals")
    browser.get(f"{ledger.url}/console/approvals/{quote(key, safe='')}")
    _api(ledger, "POST", f"/v1/operations/{quote(key, safe='')}/deny", token="approver",
         json={"content_digest": digest, "reason": "off-brand tone"})  # meanwhile, through the API
    _navigated(browser, browser.find_element(By.ID, "approve").click, "/console/approvals/")
    flash = browser.find_element(By.CSS_SELECTOR, ".flash.error").text
    assert "Not approved" in flash and "denied by approver:bootstrap-acme-approver meanwhile: off-brand tone" in flash
    pending = _api(ledger, "GET", "/v1/approvals/pending", token="approver")["pending"]
    assert [p["status"] for p in pending if p["operation"]["operation_key"] == key] == ["denied"]
    shots.take("console-approval-refused-stale", 760)

    # a cookie copied before sign-out: refused by every worker after it
    copied = requests.Session()
    copied.cookies.set("session", browser.get_cookie("session")["value"])
    assert _signed_out(copied, ledger) == [0] * 6  # signed in, on both workers
    _navigated(browser, browser.find_element(By.ID, "sign-out").click, "/console/")
    assert _signed_out(copied, ledger) == [1] * 6

    # a cookie of a token revoked from outside the server (the workers still cache the token)
    from durable_ledger.auth import create_token, revoke_token
    from durable_ledger.store.db import db, init_database

    init_database(ledger.db_url)
    with db.connection_context():
        ledger.tokens["leaky"] = create_token(TENANT, "approver", name="leaky")
    _sign_in(browser, ledger, "leaky", "/console/approvals")
    copied = requests.Session()
    copied.cookies.set("session", browser.get_cookie("session")["value"])
    assert _signed_out(copied, ledger) == [0] * 6
    with db.connection_context():
        assert revoke_token(ledger.tokens["leaky"]) == 1
    assert _signed_out(copied, ledger) == [1] * 6
    browser.refresh()
    assert browser.find_elements(By.ID, "token")  # the browser itself is signed out too

    # unknown routes and errors carry the headers
    for path in ("/console/no-such-page", "/review/nope", "/console/jobs?q=%00"):
        r = requests.get(ledger.url + path, timeout=30)
        assert r.status_code in (404, 422) and [h for h in HEADERS if h not in r.headers] == [], path
    shots.take("console-signed-out", 500)
