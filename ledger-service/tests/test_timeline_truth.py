"""The console tells the truth (issue 24, trap 4), on both backends: refused begins and refused
leases are on the job's timeline with their reason; "no reconciler" is said when nothing was
asked; the review form says what its confirm checks; links lead only to pages the role opens."""

import re
from urllib.parse import quote

import pytest

from conftest import auth
from durable_ledger.reconciliation import registry
from durable_ledger.store.db import db
from durable_ledger.store.models import AuditLog

N8N = {"X-N8N-Execution-Id": "41", "X-N8N-Workflow-Id": "wfA"}


def sign_in(app, token):
    page = app.test_client()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/console/").get_data(as_text=True)).group(1)
    page.post("/console/login", data={"token": token, "csrf": csrf})
    return page


@pytest.fixture
def tok(client):
    client.put("/v1/jobs/t1", json={}, headers=auth())
    return client.post("/v1/jobs/t1/lease", json={"owner": "n8n-exec-40", "ttl_s": 300},
                       headers=auth()).get_json()["fencing_token"]


def begin(client, tok, payload, action="notify", headers=None):
    return client.post("/v1/operations/begin", headers={**auth(), **(headers or {})}, json={
        "job_id": "t1", "action": action, "payload": payload, "fencing_token": tok})


def refusals():
    with db.connection_context():
        return [(r.action, r.detail) for r in AuditLog.select().where(AuditLog.action.startswith("refused:"))
                .order_by(AuditLog.id)]


def test_refused_begins_and_leases_are_on_the_timeline_with_their_reason(app, client, tok):
    assert begin(client, tok, {"title": "A", "fencing_token": tok}).get_json()["decision"] == "dispatch"
    assert begin(client, tok, {"title": "A", "fencing_token": 99}, headers=N8N).status_code == 422
    r = client.post("/v1/jobs/t1/lease", json={"owner": "n8n-exec-41"}, headers={**auth(), **N8N})
    assert r.status_code == 409
    new = client.post("/v1/jobs/t1/lease", json={"owner": "n8n-exec-42", "takeover": True},
                      headers=auth()).get_json()["fencing_token"]
    assert begin(client, tok, {"title": "B"}, action="other").status_code == 409  # the old token
    assert new == tok + 1
    rows = refusals()
    assert [a for a, _ in rows] == ["refused:digest_mismatch", "refused:lease_held", "refused:stale_fencing_token"]
    assert rows[0][1]["fields"] == {"changed": ["fencing_token"], "added": [], "removed": []}
    assert rows[0][1]["n8n"] == {"execution_id": "41", "workflow_id": "wfA"}
    assert (rows[2][1]["given"], rows[2][1]["current"]) == (tok, tok + 1)
    html = sign_in(app, "editor-token").get("/console/jobs/t1").get_data(as_text=True)
    for text in ("refused: digest_mismatch: this operation key was first used with another request "
                 "(top-level fields changed: fencing_token)",
                 "refused: lease_held: job &#39;t1&#39; is leased by &#39;n8n-exec-40&#39; until",
                 "refused: stale_fencing_token: fencing token 1 is older than the job&#39;s current token 2"):
        assert text in html, text


def test_lease_held_names_the_option_and_an_iso_expiry(client, tok):
    err = client.post("/v1/jobs/t1/lease", json={"owner": "n8n-exec-41"}, headers=auth()).get_json()["error"]
    d = err["details"]
    assert isinstance(d["expires_at"], float)  # kept for callers of earlier releases
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", d["expires_at_iso"])
    assert d["option"] == "takeover" and "Take Over" in err["message"] and d["expires_at_iso"] in err["message"]


def test_no_reconciler_is_said_when_nothing_was_asked(app, client, tok):
    key = begin(client, tok, {"title": "A"}).get_json()["operation"]["operation_key"]
    r = client.post(f"/v1/operations/{quote(key, safe='')}/reconcile", headers=auth()).get_json()
    assert (r["outcome"], r["operation"]["state"]) == ("no_reconciler", "NEEDS_REVIEW")
    html = sign_in(app, "editor-token").get("/console/jobs/t1").get_data(as_text=True)
    assert "no reconciler for generic.notify: the remote system was not asked" in html
    assert "reconciled with the remote system" not in html
    item = sign_in(app, "editor-token").get(f"/console/review/item/{quote(key, safe='')}").get_data(as_text=True)
    assert "not checked: there is no reconciler for generic.notify" in item and "checks it exists" not in item


class Verifies:
    def __init__(self):
        self.calls = 0

    def lookup(self, op):
        raise AssertionError("not asked in this test")

    def verify(self, op, remote_id):
        self.calls += 1
        return remote_id == "7"


def test_review_form_says_the_id_is_looked_up_when_a_reconciler_exists(app, client, tok):
    rec = Verifies()
    registry.register("generic.checked", rec)
    try:
        key = begin(client, tok, {"title": "A"}, action="checked").get_json()["operation"]["operation_key"]
        client.post(f"/v1/operations/{quote(key, safe='')}/unknown", headers=auth(), json={"fencing_token": tok})
        page = sign_in(app, "editor-token")
        html = page.get(f"/console/review/item/{quote(key, safe='')}").get_data(as_text=True)
        assert "looks it up on the remote system" in html
        csrf = re.search(r'name="csrf" value="([^"]+)"', html).group(1)
        page.post(f"/console/review/item/{quote(key, safe='')}/resolve",
                  data={"csrf": csrf, "decision": "confirm", "remote_id": "8", "expected_state": "UNKNOWN"})
        assert rec.calls == 1
        state = client.get(f"/v1/operations/{quote(key, safe='')}", headers=auth()).get_json()["operation"]["state"]
        assert state == "UNKNOWN"  # the id the remote does not have was refused
    finally:
        registry.unregister("generic.checked")


def test_timeline_links_only_to_pages_the_role_can_open(app, client, tok):
    key = begin(client, tok, {"title": "A"}).get_json()["operation"]["operation_key"]
    client.post(f"/v1/operations/{quote(key, safe='')}/unknown", headers=auth(), json={"fencing_token": tok})
    client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "t1", "action": "publish", "payload": {"t": 1}, "fencing_token": tok, "target": "x:1",
        "requires_approval": True})
    for token, allowed, other in (("approver-token", "/console/approvals/", "/console/review/item/"),
                                  ("editor-token", "/console/review/item/", "/console/approvals/")):
        page = sign_in(app, token)
        html = page.get("/console/jobs/t1").get_data(as_text=True)
        links = re.findall(r'href="(/console/[^"]+)"', html)
        assert any(link.startswith(allowed) for link in links), (token, links)
        assert not any(link.startswith(other) for link in links), (token, links)
        for link in set(links):
            assert page.get(link).status_code == 200, (token, link)
        assert ("an editor reviews it" in html) == (token == "approver-token")
        assert ("an approver decides" in html) == (token == "editor-token")
