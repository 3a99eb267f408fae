"""The WordPress reconciler (reconciliation/wordpress.py) against the publishing proxy's answers,
and the proxy's lookup route against the plugin's and WordPress's (HTTP mocked with `responses`):
found only with this key's object, absent only when the plugin says so exactly, anything else
undecidable with the answer kept (issue 35). The real WordPress run is tests/reconcile."""

import json
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import responses

from durable_ledger.auth import Principal
from durable_ledger.reconciliation.verdicts import Absent, Found, ReconcilerError, Undecidable
from durable_ledger.reconciliation.wordpress import WordPressReconciler
from durable_ledger.wordpress.proxy import create_proxy_app

PROXY = "http://proxy.test"
KEY = "acme:j1:v1:create_draft"
LOOKUP = f"{PROXY}/v1/sites/test/operations/acme%3Aj1%3Av1%3Acreate_draft"
HTML = "<!doctype html><html><body><h1>502 Bad Gateway</h1></body></html>"


def op(title="Post A"):
    return SimpleNamespace(operation_key=KEY, job=SimpleNamespace(job_id="j1"), tenant="acme",
                           target="wordpress:test", action="create_draft",
                           request_summary={"title": title} if title is not None else {})


def lookup(body=None, status=200, text=None, content_type="application/json", error=None, title="Post A"):
    rec = WordPressReconciler(PROXY, "proxy-token")
    with responses.RequestsMock() as mock:
        if error is not None:
            mock.get(LOOKUP, body=error)
        elif text is not None:
            mock.get(LOOKUP, body=text, status=status, content_type=content_type)
        else:
            mock.get(LOOKUP, json=body, status=status)
        verdict = rec.lookup(op(title))
        asked = parse_qs(urlsplit(mock.calls[0].request.url).query)
    return verdict, asked


PLUGIN_HIT = {"found": True, "key": KEY, "object_type": "post", "id": 101, "status": "draft", "state": "done",
              "site": "test", "plugin": True, "operation_key": KEY, "match": "operation_key",
              "edit_url": "http://wp.test/wp-admin/post.php?post=101&action=edit"}
PLUGIN_MISS = {"found": False, "key": KEY, "object_type": None, "id": None, "status": None, "state": None,
               "site": "test", "plugin": True, "operation_key": KEY, "match": None, "edit_url": None}


def test_wordpress_reconciler_found_with_the_plugin():
    v, asked = lookup(PLUGIN_HIT)
    assert isinstance(v, Found) and v.remote_id == "101" and v.receipt["edit_url"].endswith("post=101&action=edit")
    assert v.evidence["reconciler"] == "wordpress" and asked["tenant"] == ["acme"]


def test_wordpress_reconciler_absent_only_when_the_plugin_says_found_false():
    v, _ = lookup(PLUGIN_MISS)
    assert isinstance(v, Absent) and v.definitive is True


def test_wordpress_reconciler_claim_in_progress_is_asked_again():
    with pytest.raises(ReconcilerError, match="in progress"):
        lookup({**PLUGIN_MISS, "state": "in_progress"})


@pytest.mark.parametrize("body", [
    {**PLUGIN_HIT, "id": None},  # found without an id
    {**PLUGIN_HIT, "id": ""},
    {**PLUGIN_HIT, "id": True},
    {**PLUGIN_HIT, "found": "true"},
    {**PLUGIN_HIT, "found": 1},
    {**PLUGIN_HIT, "operation_key": "acme:j2:v1:create_draft"},  # another key's object
    {**PLUGIN_MISS, "operation_key": "acme:j2:v1:create_draft"},
    {**PLUGIN_MISS, "found": None, "answered_key": "acme:other"},  # the proxy saw the plugin answer another key
    {**PLUGIN_MISS, "found": "false"},
    {k: v for k, v in PLUGIN_MISS.items() if k != "found"},  # found missing: no default verdict
    {**PLUGIN_MISS, "plugin": "yes"},
    {k: v for k, v in PLUGIN_MISS.items() if k != "plugin"},  # plugin unknown: before, "absent, not definitive"
    {"found": False},
    [PLUGIN_HIT],  # a bare list
    {"data": [PLUGIN_HIT]},  # wrapped
    {"object": "list", "data": [PLUGIN_HIT], "has_more": False},
    {"error": {"code": "wordpress_unavailable", "message": "x"}},
], ids=lambda b: str(b)[:70])
def test_wordpress_reconciler_an_answer_without_proof_is_undecidable(body):
    v, _ = lookup(body)
    assert isinstance(v, Undecidable) and not v.candidates, v
    assert v.evidence["detail"]


@pytest.mark.parametrize("candidates", [[], [{"id": 7, "object_type": "post", "status": "draft", "title": "Post A",
                                              "match": "title"}]], ids=["none", "same title"])
def test_wordpress_reconciler_without_plugin_is_always_undecidable(candidates):
    body = {"site": "test", "plugin": False, "key": KEY, "operation_key": KEY, "found": None, "match": "title",
            "candidates": candidates, "message": "durable-ops plugin missing"}
    v, asked = lookup(body)
    assert isinstance(v, Undecidable), v  # before: no candidates was Absent(False), "none found"
    assert [c["id"] for c in v.candidates] == [c["id"] for c in candidates]
    assert asked["title"] == ["Post A"] and v.evidence["lookup"] == "title"
    if not candidates:
        assert "does not prove nothing was written" in v.evidence["detail"]


def test_wordpress_reconciler_a_redacted_title_is_not_searched():
    body = {"site": "test", "plugin": False, "key": KEY, "operation_key": KEY, "found": None, "candidates": []}
    v, asked = lookup(body, title="Launch with key sk-[redacted]")
    assert "title" not in asked and isinstance(v, Undecidable)
    assert "redacted by the secret filter" in v.evidence["detail"]


@pytest.mark.parametrize("text, content_type", [(HTML, "text/html"), ("", "text/plain"), ("[]", "application/json")])
def test_wordpress_reconciler_a_200_that_is_not_an_object_is_undecidable_with_the_answer_kept(text, content_type):
    v, _ = lookup(text=text, content_type=content_type)
    assert isinstance(v, Undecidable) and v.evidence["body"] == text[:500] and v.evidence["status"] == 200


@pytest.mark.parametrize("status, text, content_type", [
    (502, '{"error": {"code": "wordpress_unavailable"}}', "application/json"), (502, HTML, "text/html"),
    (404, HTML, "text/html"), (404, '{"error": {"code": "site_not_found"}}', "application/json"),
    (429, "slow down", "text/plain"), (500, '{"error": ', "application/json")])
def test_wordpress_reconciler_other_statuses_are_no_verdict(status, text, content_type):
    with pytest.raises(ReconcilerError, match=f"answered {status}"):
        lookup(text=text, status=status, content_type=content_type)


@pytest.mark.parametrize("error", [requests.exceptions.ReadTimeout("slow"), requests.exceptions.ConnectionError()])
def test_wordpress_reconciler_slow_or_unreachable_is_no_verdict(error):
    with pytest.raises(ReconcilerError, match="unreachable"):
        lookup(error=error)


# --------------------------------------------------------------------- the proxy's lookup route

WP = "http://wp.test"


@pytest.fixture
def proxy():
    app = create_proxy_app({"sites": {"test": {"url": WP, "user": "u", "app_password": "pw"}},
                            "authenticate": lambda raw: Principal("acme", "runner", "r1")})
    app.testing = True
    return app.test_client()


def wordpress(mock, plugin=True, answer=None, posts=()):
    """A WordPress whose REST routes answer by `rest_route`; returns the routes asked."""
    asked = []

    def route(request):
        q = parse_qs(urlsplit(request.url).query)
        r = q["rest_route"][0]
        asked.append((r, q.get("search", [None])[0]))
        if r == "/durable/v1/status":
            return (200, {}, '{"plugin": "durable-ops"}') if plugin else (404, {}, '{"code": "rest_no_route"}')
        if r.startswith("/durable/v1/operations/"):
            return 200, {}, json.dumps(answer)
        if r in ("/wp/v2/posts", "/wp/v2/media"):
            return 200, {}, json.dumps(list(posts) if r == "/wp/v2/posts" else [])
        return 404, {}, "{}"

    mock.add_callback(responses.GET, WP + "/", callback=route, content_type="application/json")
    return asked


def ask(proxy, title=None):
    q = {"title": title} if title is not None else {}
    return proxy.get(f"/v1/sites/test/operations/{KEY}", query_string=q, headers={"Authorization": "Bearer x"})


def test_proxy_lookup_relays_the_plugin_answer_for_this_key(proxy):
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        wordpress(mock, answer={"found": True, "key": KEY, "id": 101, "object_type": "post", "status": "draft"})
        r = ask(proxy)
    assert r.status_code == 200
    assert (r.json["found"], r.json["id"], r.json["operation_key"], r.json["match"]) == (True, 101, KEY,
                                                                                       "operation_key")


def test_proxy_lookup_never_answers_found_for_another_keys_object(proxy):
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        wordpress(mock, answer={"found": True, "key": "acme:j2:v1:create_draft", "id": 202})
        r = ask(proxy)
    assert r.status_code == 200 and r.json["found"] is None and "id" not in r.json
    assert r.json["answered_key"] == "acme:j2:v1:create_draft"


def test_proxy_lookup_without_plugin_searches_titles_but_never_a_redacted_one(proxy):
    post = {"id": 7, "status": "draft", "title": {"raw": "Post A", "rendered": "Post A"}}
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        asked = wordpress(mock, plugin=False, posts=[post])
        r = ask(proxy, "Post A")
        searched = [a for a in asked if a[0] == "/wp/v2/posts"]
        assert r.json["found"] is None and [c["id"] for c in r.json["candidates"]] == [7]
        assert searched == [("/wp/v2/posts", "Post A")]
        asked.clear()
        r = ask(proxy, "Launch with sk-[redacted]")
    assert [a for a in asked if a[0].startswith("/wp/v2/")] == []  # nothing searched
    assert r.json["candidates"] == [] and r.json["found"] is None and "redacted" in r.json["message"]
