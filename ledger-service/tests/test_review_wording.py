"""The review item says what was checked (issue 35 part 2), on both backends: what was asked, of
whom, and what it answered, or "not checked"; never "none found" when nobody was asked; and the
retry choice says it sends the request again and what is known against it."""

import re
from html import unescape
from urllib.parse import quote

import pytest
import responses

from conftest import auth
from durable_ledger.reconciliation import registry
from durable_ledger.reconciliation.wordpress import WordPressReconciler

EDITOR = auth("editor-token")
RUNNER = "runner:bootstrap-acme-runner"


def sign_in(app):
    page = app.test_client()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/console/").get_data(as_text=True)).group(1)
    page.post("/console/login", data={"token": "editor-token", "csrf": csrf})
    return page


def text_of(html, element_id):
    """The text of the element with ``element_id`` (tags dropped, spaces folded)."""
    m = re.search(rf'<(\w+)[^>]*id="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert m, element_id
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", m.group(2))).split())


def q(key):
    return quote(key, safe="")


@pytest.fixture
def tok(client):
    client.put("/v1/jobs/w1", json={}, headers=auth())
    return client.post("/v1/jobs/w1/lease", json={"owner": "n8n-exec-1", "ttl_s": 300},
                       headers=auth()).get_json()["fencing_token"]


def begin(client, tok, action="notify", target=None, payload=None):
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "w1", "action": action, "payload": payload or {"title": "Order 7 shipped"}, "fencing_token": tok,
        **({"target": target} if target else {})})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def answered_500(client, tok, key):
    r = client.post(f"/v1/operations/{q(key)}/outcome", headers=auth(), json={
        "fencing_token": tok, "http_status": 500, "error": {"message": "500 - Internal Server Error"}})
    assert r.get_json()["operation"]["state"] == "UNKNOWN", r.get_json()


NOT_ASKED = ("Not checked: there is no reconciler for generic.notify and no lookup was reported, so nobody was "
             "asked whether it was written.")


def test_review_item_no_reconciler_remote_answered_500_says_not_checked(app, client, tok):
    """Gated HTTP Request without Look Up: the remote committed and answered 500."""
    key = begin(client, tok)["operation"]["operation_key"]
    answered_500(client, tok, key)
    page = sign_in(app)
    for state in ("UNKNOWN", "NEEDS_REVIEW"):  # as it fell, then after the sweeper (or a reconcile request)
        html = page.get(f"/console/review/item/{q(key)}").get_data(as_text=True)
        assert text_of(html, "checked") == NOT_ASKED, state
        assert text_of(html, "no-candidates") == ("Not checked: nobody was asked, so no object was looked for. "
                                                  "If you know the object exists, enter its id below.")
        assert text_of(html, "retry-risk") == (
            "Allowing a retry sends the request again: the next run dispatches attempt 2 of 3. Known against it: "
            "the remote answered HTTP 500 after the request was sent: it may have been written; it was sent 1 time; "
            "no lookup was made.")
        assert text_of(html, "fail") == "It was not written: send it again (allow a retry)"
        assert "None found" not in html and "none found" not in html.lower()
        item = client.get(f"/v1/reviews/{q(key)}", headers=EDITOR).get_json()
        assert item["checked"] == {"asked": False, "of": None, "answer": None, "text": NOT_ASKED}
        assert item["retry"]["against"][-1] == "no lookup was made"
        r = client.post(f"/v1/operations/{q(key)}/reconcile", headers=auth()).get_json()
        assert r["outcome"] in ("no_reconciler", "applied")
    timeline = page.get("/console/jobs/w1").get_data(as_text=True)
    assert "no reconciler for generic.notify: the remote system was not asked" in timeline
    assert "reconciled with the remote system" not in timeline


PROXY = "http://proxy.test"


@pytest.fixture
def wordpress_reconciler():
    rec = WordPressReconciler(PROXY, "proxy-token")
    registry.register("wordpress.create_draft", rec)
    yield rec
    registry.unregister("wordpress.create_draft")


def test_review_item_reconciler_answered_undecidable_with_candidates(app, client, tok, wordpress_reconciler):
    key = begin(client, tok, "create_draft", "wordpress:plain", {"title": "Spring sale"})["operation"]["operation_key"]
    answered_500(client, tok, key)
    answer = {"site": "plain", "plugin": False, "key": key, "operation_key": key, "found": None, "match": "title",
              "candidates": [{"id": 7, "object_type": "post", "status": "draft", "title": "Spring sale",
                              "match": "title", "edit_url": "http://wp.test/wp-admin/post.php?post=7&action=edit"}]}
    with responses.RequestsMock() as mock:
        mock.get(f"{PROXY}/v1/sites/plain/operations/{q(key)}", json=answer)
        out = begin(client, tok, "create_draft", "wordpress:plain", {"title": "Spring sale"})
    assert (out["decision"], out["reconciliation"]["verdict"]) == ("needs_review", "undecidable")
    page = sign_in(app)
    html = page.get(f"/console/review/item/{q(key)}").get_data(as_text=True)
    assert text_of(html, "checked") == (
        "Asked WordPress site 'plain' through the publishing proxy, by title (no durable-ops plugin). It answered: "
        "undecidable, durable-ops plugin missing: 1 object(s) titled like the request; titles are not keys.")
    assert "#7" in text_of(html, "candidates") and 'id="no-candidates"' not in html
    assert text_of(html, "retry-risk") == (
        "Allowing a retry sends the request again: the next run dispatches attempt 2 of 3. Known against it: "
        "the remote answered HTTP 500 after the request was sent: it may have been written; it was sent 1 time; "
        "WordPress site 'plain' through the publishing proxy, by title (no durable-ops plugin) answered: undecidable, "
        "durable-ops plugin missing: 1 object(s) titled like the request; titles are not keys; "
        "1 candidate object listed.")
    timeline = page.get("/console/jobs/w1").get_data(as_text=True)
    assert ("reconciled with the remote system: undecidable → NEEDS_REVIEW (asked WordPress site &#39;plain&#39; "
            "through the publishing proxy, by title (no durable-ops plugin))") in timeline


def test_review_item_caller_lookup_reported_absent_is_the_callers_word(app, client, tok):
    key = begin(client, tok, "append_row", "sheet:orders")["operation"]["operation_key"]
    answered_500(client, tok, key)
    r = client.post(f"/v1/operations/{q(key)}/lookup-result", headers=auth(), json={
        "fencing_token": tok, "attempt": 1, "result": "absent", "evidence": {"searched": "column K"}})
    assert r.get_json()["decision"] == "dispatch"  # the caller's word allows the retry
    item = client.get(f"/v1/reviews/{q(key)}", headers=EDITOR).get_json()
    assert item["evidence"]["source"] == "caller_lookup" and item["evidence"]["reported_by"] == RUNNER
    assert item["evidence"]["caller_reported"] == {"searched": "column K"}
    assert item["checked"]["text"] == (
        f"Asked {RUNNER}, by its own lookup (reported via lookup-result; the caller's word, not checked by the "
        f"ledger). It answered: absent.")
    page = sign_in(app)
    timeline = page.get("/console/jobs/w1").get_data(as_text=True)
    assert f"reported by {RUNNER} via lookup-result: absent → FAILED" in timeline
    html = page.get(f"/console/review/item/{q(key)}").get_data(as_text=True)
    assert text_of(html, "checked") == item["checked"]["text"]
    assert f"Reported by {RUNNER} via lookup-result" in html


def test_review_item_reconciler_that_could_not_ask_says_so(app, client, tok, wordpress_reconciler):
    key = begin(client, tok, "create_draft", "wordpress:plain", {"title": "Spring sale"})["operation"]["operation_key"]
    answered_500(client, tok, key)
    with responses.RequestsMock() as mock:
        mock.get(f"{PROXY}/v1/sites/plain/operations/{q(key)}", status=502,
                 json={"error": {"code": "wordpress_unavailable"}})
        out = begin(client, tok, "create_draft", "wordpress:plain", {"title": "Spring sale"})
    assert (out["decision"], out["reason"]) == ("reconcile", "reconcile_failed")
    item = client.get(f"/v1/reviews/{q(key)}", headers=EDITOR).get_json()
    assert item["checked"]["text"] == (
        "Not checked: the ledger tried to ask WordPress through the publishing proxy, but the lookup could not be made "
        "(publishing proxy answered 502 wordpress_unavailable); no answer, it is asked again later.")
    assert item["retry"]["against"][-1] == "no lookup was made"
