"""The publishing proxy against the real WordPress: lost responses, read-back, site rights, and
the doors a hostile caller would try (every write must be one the ledger dispatched).

Every proxy write here is first gated through the ledger's own `begin` (in process, on the
proxy's ledger database) with the write as payload, as the article pipeline does.
"""
import base64
import hashlib
import io
import time
import uuid
from pathlib import Path

import pytest
import requests
from support.media import png_bytes
from support.netfaults import LossyProxy

from durable_ledger.auth import Principal
from durable_ledger.kernel.config import Config
from durable_ledger.gate.answers import answer_dict
from durable_ledger.approvals import rules as approvals
from durable_ledger import gate
from durable_ledger.jobs import jobs, leases
from durable_ledger.gate import outcomes as operations
from durable_ledger.kernel.digest import request_digest
from durable_ledger.gate.dispatch_auth import remote_job_id
from durable_ledger.kernel.errors import LedgerError
from durable_ledger.store.db import db
from durable_ledger.store.models import Operation
from durable_ledger.wordpress.proxy import create_proxy_app

TOKENS = ("acme:runner:runner-token:test+lossy+plain,"
          "acme:runner:prod-token:production,"
          "acme:editor:editor-token:test,"
          "acme:admin:admin-token,"
          "other:runner:other-token:test+lossy+plain")


@pytest.fixture(scope="module")
def lossy(wordpress_site):
    port = int(wordpress_site.url.rsplit(":", 1)[1])
    proxy = LossyProxy("127.0.0.1", port)
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def proxy_client(wordpress_site, wordpress_plain_site, lossy, tmp_path_factory):
    db_file = tmp_path_factory.mktemp("ledger") / "ledger.db"
    sites = {
        "test": {"url": wordpress_site.url, "user": wordpress_site.user, "app_password": wordpress_site.app_password},
        "lossy": {"url": lossy.url, "user": wordpress_site.user, "app_password": wordpress_site.app_password},
        "plain": {"url": wordpress_plain_site.url, "user": wordpress_plain_site.user,
                  "app_password": wordpress_plain_site.app_password},
        "production": {"url": "http://127.0.0.1:9", "user": "nobody", "app_password": "not-used-here"},
    }
    app = create_proxy_app({
        "sites": sites, "read_timeout": 20,
        "ledger": Config(database_url=f"sqlite:///{db_file}", bootstrap_tokens=TOKENS, log_level="WARNING"),
    })
    app.testing = True
    client = app.test_client()
    secrets = {wordpress_site.app_password, wordpress_plain_site.app_password}

    def call(method, path, token="runner-token", **kw):
        resp = client.open(path, method=method, headers={"Authorization": f"Bearer {token}"}, **kw)
        for secret in secrets:  # the app password never leaves the proxy
            assert secret not in resp.get_data(as_text=True)
        return resp

    return call


def _gate_answer(*args, **fields):
    """The gate's answer as the API renders it."""
    return answer_dict(gate.begin(*args, **fields))


def _uid():
    return uuid.uuid4().hex[:10]


def _drafts_titled(site, title):
    r = requests.get(site.rest(f"/wp/v2/posts?status=draft&context=edit&search={title}"), auth=site.auth, timeout=30)
    return [p["id"] for p in r.json() if p["title"]["raw"] == title]


IDENTITY = ("operation_key", "job_id", "fencing_token")


def _lease(job, tenant="acme", owner="w", takeover=False, pipeline="generic"):
    with db.connection_context():
        jobs.create_or_get_job(tenant, job, pipeline=pipeline)
        return leases.acquire_lease(tenant, job, owner, 600, takeover=takeover)[1].fencing_token


def _gate(write, action="create_draft", site="test", job=None, key=None, tenant="acme", post_id=None,
          requires_approval=False, pipeline="generic"):
    """begin() for exactly this write; returns the identity fields the proxy body carries."""
    job = job or f"job-{_uid()}"
    token = _lease(job, tenant, pipeline=pipeline)
    payload = {k: v for k, v in write.items() if k not in IDENTITY}
    if post_id is not None:
        payload["post_id"] = post_id
    with db.connection_context():
        out = _gate_answer(Principal(tenant, "runner", "test"), job, action, token, payload=payload,
                            operation_key=key, target=f"wordpress:{site}", requires_approval=requires_approval)
    assert out["decision"] == "dispatch", out
    return {"operation_key": out["operation"]["operation_key"], "job_id": job, "fencing_token": token}


def _wp_job(site, tenant, job):
    r = requests.get(site.rest(f"/durable/v1/jobs/{requests.utils.quote(remote_job_id(tenant, job), safe='')}"),
                     auth=site.auth, timeout=30)
    return r.json()


def test_proxy_lost_response_then_retry_returns_the_created_post(proxy_client, wordpress_site, lossy):
    uid = _uid()
    write = {"title": f"Lost {uid}", "content": "<p>hello</p>", "excerpt": "short"}
    draft = {**write, **_gate(write, site="lossy")}
    lossy.drop_responses = 1
    first = proxy_client("POST", "/v1/sites/lossy/drafts", json=draft)
    assert first.status_code == 200
    assert first.json["outcome"] == "unknown", first.json
    assert first.json["error"]["kind"] == "connection_reset"
    assert lossy.dropped >= 1

    # The write landed although nobody saw the answer: the reconciler finds it by key ...
    looked = proxy_client("GET", f"/v1/sites/lossy/operations/{draft['operation_key']}").json
    assert (looked["found"], looked["match"], looked["plugin"]) == (True, "operation_key", True)

    # ... and a retry of the still-SENT operation gets the very same post back, not a second one.
    retry = proxy_client("POST", "/v1/sites/lossy/drafts", json=draft)
    assert retry.json["outcome"] == "confirmed"
    assert retry.json["replayed"] is True
    assert retry.json["remote_id"] == looked["id"]
    assert retry.json["verified"] is True
    assert _drafts_titled(wordpress_site, f"Lost {uid}") == [looked["id"]]
    print(f"\n[count] lost response, key {draft['operation_key']}: posts in WordPress 1 (id {looked['id']})")


def test_proxy_lost_media_response_then_retry_returns_the_same_attachment(proxy_client, wordpress_site, lossy):
    uid = _uid()
    data = png_bytes(seed=int(uid[:6], 16))
    fields = {"alt_text": "A hero image"}
    ident = _gate({**fields, "file_sha256": hashlib.sha256(data).hexdigest()}, action="upload_media:hero",
                  site="lossy")
    form = {**fields, **{k: str(v) for k, v in ident.items()}}
    lossy.drop_responses = 1
    first = proxy_client("POST", "/v1/sites/lossy/media",
                         data={**form, "file": (io.BytesIO(data), f"lost-{uid}.png", "image/png")})
    assert first.json["outcome"] == "unknown"

    retry = proxy_client("POST", "/v1/sites/lossy/media",
                         data={**form, "file": (io.BytesIO(data), f"lost-{uid}.png", "image/png")})
    assert retry.json["outcome"] == "confirmed"
    assert retry.json["replayed"] is True
    assert retry.json["verification"]["alt_text"]["ok"] is True
    assert retry.json["verification"]["file_sha256"]["ok"] is True
    job = proxy_client("GET", f"/v1/sites/test/jobs/{ident['job_id']}").json
    assert [o["id"] for o in job["objects"]] == [retry.json["remote_id"]]
    files = [p for p in Path(wordpress_site.uploads_dir).rglob(f"lost-{uid}*") if p.is_file()]
    assert len(files) == 1
    print(f"\n[count] lost media response, key {form['operation_key']}: attachments 1, files in uploads 1")


def test_proxy_media_from_base64_json(proxy_client):
    uid = _uid()
    b64 = base64.b64encode(png_bytes(7)).decode()
    fields = {"filename": f"b64-{uid}.png", "alt_text": "alt", "title": f"B64 {uid}"}
    ident = _gate({**fields, "content_base64_sha256": hashlib.sha256(b64.encode()).hexdigest()},
                  action="upload_media", key=f"b64-{uid}")
    r = proxy_client("POST", "/v1/sites/test/media", json={**fields, "content_base64": b64, **ident})
    assert r.json["outcome"] == "confirmed", r.json
    assert r.json["verified"] is True
    assert r.json["media"]["source_url"].endswith(".png")
    # Other bytes under the same dispatched operation: refused before WordPress.
    other = base64.b64encode(png_bytes(8)).decode()
    r = proxy_client("POST", "/v1/sites/test/media", json={**fields, "content_base64": other, **ident})
    assert (r.status_code, r.json["error"]["code"]) == (422, "digest_mismatch")


def test_proxy_readback_catches_silently_dropped_featured_media(proxy_client):
    uid = _uid()
    write = {"title": f"FM {uid}", "featured_media": 987654, "excerpt": "kept"}
    r = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **_gate(write)})
    assert r.json["outcome"] == "confirmed"  # WordPress answered 201 ...
    assert r.json["verification"]["featured_media"] == {"sent": 987654, "stored": 0, "ok": False}
    assert r.json["verification"]["excerpt"]["ok"] is True
    assert r.json["verified"] is False  # ... but did not store what it was sent


def test_proxy_seo_fields_are_written_and_verified(proxy_client):
    uid = _uid()
    seo = {"title": f"SEO {uid}", "description": "desc", "focus_keyword": "kw"}
    write = {"title": f"Post {uid}", "seo": seo}
    ident = _gate(write)
    r = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **ident})
    assert r.json["verified"] is True
    assert r.json["verification"]["meta._yoast_wpseo_metadesc"]["stored"] == "desc"
    post_id = r.json["remote_id"]
    upd = {"seo": {"title": "New title"}, "seo_plugins": ["rank_math"]}
    upd_ident = _gate(upd, action="set_seo", job=ident["job_id"], post_id=post_id)
    r = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/seo", json={**upd, **upd_ident})
    assert r.json["outcome"] == "confirmed"
    assert r.json["verification"] == {"meta.rank_math_title": {"sent": "New title", "stored": "New title", "ok": True}}


def test_proxy_without_plugin_reports_dropped_seo_and_title_only_lookups(proxy_client):
    uid = _uid()
    write = {"title": f"Plain {uid}", "seo": {"title": "x"}}
    ident = _gate(write, site="plain", key=f"plain-{uid}")
    r = proxy_client("POST", "/v1/sites/plain/drafts", json={**write, **ident})
    assert r.json["outcome"] == "confirmed"
    assert (r.json["plugin"], r.json["idempotent"]) == (False, False)
    assert r.json["verification"]["meta.rank_math_title"]["ok"] is False  # unregistered meta: dropped
    looked = proxy_client("GET", f"/v1/sites/plain/operations/plain-{uid}?title=Plain {uid}").json
    assert looked["plugin"] is False
    assert looked["found"] is None  # no plugin: never found, never absent by key (issue 35)
    assert looked["operation_key"] == f"plain-{uid}"
    assert [(c["id"], c["match"]) for c in looked["candidates"]] == [(r.json["remote_id"], "title")]


def test_proxy_write_other_than_dispatched_is_refused_before_wordpress(proxy_client, wordpress_site):
    uid = _uid()
    ident = _gate({"title": f"One {uid}"}, key=f"dm-{uid}")
    assert proxy_client("POST", "/v1/sites/test/drafts", json={"title": f"One {uid}", **ident}).json[
        "outcome"] == "confirmed"
    ident2 = _gate({"title": f"Two {uid}"}, key=f"dm2-{uid}")
    r = proxy_client("POST", "/v1/sites/test/drafts", json={"title": f"Three {uid}", **ident2})
    assert (r.status_code, r.json["error"]["code"]) == (422, "digest_mismatch")
    assert _drafts_titled(wordpress_site, f"Three {uid}") == []
    print(f"\n[count] write with another body: drafts titled 'Three' in WordPress {len(_drafts_titled(wordpress_site, f'Three {uid}'))}")


def test_proxy_mu_plugin_still_refuses_a_key_reused_with_another_body(proxy_client):
    """Two ledger keys of one tenant that map to one WordPress key (`k` and `acme:k`): WordPress's
    own digest check answers, so the outcome is `failed`, and strict mode turns it into 422."""
    uid = _uid()
    first = {"title": f"Strict {uid}"}
    ok = proxy_client("POST", "/v1/sites/test/drafts?strict=1", json={**first, **_gate(first, key=f"st-{uid}")})
    assert (ok.status_code, ok.json["outcome"]) == (200, "confirmed")
    other = {"title": f"changed {uid}"}
    ident = _gate(other, key=f"acme:st-{uid}")
    strict = proxy_client("POST", "/v1/sites/test/drafts?strict=1", json={**other, **ident})
    assert (strict.status_code, strict.json["outcome"], strict.json["error"]["code"]) == (
        422, "failed", "durable_digest_mismatch")
    lenient = proxy_client("POST", "/v1/sites/test/drafts", json={**other, **ident})
    assert (lenient.status_code, lenient.json["outcome"]) == (200, "failed")  # the default contract


def test_proxy_stale_fencing_token_is_refused_and_writes_nothing(proxy_client, wordpress_site):
    uid = _uid()
    job = f"job-{uid}"
    write = {"title": f"Six {uid}"}
    ident = _gate(write, job=job)
    newer = _lease(job, owner="b", takeover=True)  # another worker takes the job over
    stale = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **ident})
    assert (stale.status_code, stale.json["error"]["code"]) == (409, "stale_fencing_token")
    # Claiming the new token does not help: the operation was dispatched under the old one.
    claimed = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **ident, "fencing_token": newer})
    assert (claimed.status_code, claimed.json["error"]["code"]) == (409, "stale_fencing_token")
    huge = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **ident, "fencing_token": 10**9})
    assert huge.status_code == 422
    assert _drafts_titled(wordpress_site, f"Six {uid}") == []
    assert _wp_job(wordpress_site, "acme", job)["fencing_token"] == 0  # the fence was never raised


def test_proxy_other_tenant_cannot_write_for_a_job_or_raise_its_fence(proxy_client, wordpress_site):
    """Tenant B, with rights on the same site, replays A's identity with a huge token."""
    uid = _uid()
    job = f"article-{uid}"
    write = {"title": f"A's draft {uid}"}
    a_ident = _gate(write, job=job)
    forged = {"title": f"B's forgery {uid}", **a_ident, "fencing_token": 10**6}
    r = proxy_client("POST", "/v1/sites/test/drafts", token="other-token", json=forged)
    unknown = proxy_client("POST", "/v1/sites/test/drafts", token="other-token",
                           json={"title": "x", "operation_key": f"nope-{uid}", "job_id": job})
    assert (r.status_code, r.json["error"]["code"]) == (403, "write_not_dispatched")
    assert (unknown.status_code, unknown.json["error"]["code"]) == (403, "write_not_dispatched")
    assert r.json["error"]["message"] == unknown.json["error"]["message"]  # no existence oracle
    # B's own dispatched operation, but naming A's job: refused too.
    b_ident = _gate({"title": f"B {uid}"}, tenant="other")
    r = proxy_client("POST", "/v1/sites/test/drafts", token="other-token",
                     json={"title": f"B {uid}", **b_ident, "job_id": job})
    assert (r.status_code, r.json["error"]["code"]) == (403, "write_not_dispatched")
    # B's job with the same name as A's: its fence in WordPress is its own.
    _lease(job, tenant="other")
    for owner in ("b1", "b2", "w"):  # B's token climbs above A's
        _lease(job, tenant="other", owner=owner, takeover=True)
    same_name = _gate({"title": f"B same name 2 {uid}"}, tenant="other", job=job)
    assert proxy_client("POST", "/v1/sites/test/drafts", token="other-token",
                        json={"title": f"B same name 2 {uid}", **same_name}).json["outcome"] == "confirmed"
    ok = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **a_ident})
    assert ok.json["outcome"] == "confirmed", ok.json  # A is not locked out by B's higher fence
    assert _drafts_titled(wordpress_site, f"B's forgery {uid}") == []
    assert _wp_job(wordpress_site, "acme", job)["fencing_token"] == a_ident["fencing_token"]
    # Lookups are per tenant: B does not see A's objects under the same job name.
    seen_by_b = proxy_client("GET", f"/v1/sites/test/jobs/{job}", token="other-token").json["objects"]
    assert ok.json["remote_id"] not in [o["id"] for o in seen_by_b]
    assert proxy_client("GET", f"/v1/sites/test/jobs/{job}?tenant=acme", token="other-token").status_code == 403
    seen_by_admin = proxy_client("GET", f"/v1/sites/test/jobs/{job}?tenant=acme", token="admin-token").json
    assert [o["id"] for o in seen_by_admin["objects"]] == [ok.json["remote_id"]]
    print(f"\n[count] cross-tenant forgeries: 3 refused, drafts written by B in A's job 0, A's fence "
          f"{a_ident['fencing_token']}")


def test_proxy_confirmed_operation_authorizes_nothing_new(proxy_client, wordpress_site):
    uid = _uid()
    write = {"title": f"Once {uid}"}
    ident = _gate(write)
    r = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **ident})
    with db.connection_context():
        operations.confirm(Principal("acme", "runner", "test"), ident["operation_key"], ident["fencing_token"],
                           r.json["remote_id"])
    again = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **ident})
    assert (again.status_code, again.json["error"]["code"], again.json["error"]["details"]["state"]) == (
        403, "write_not_dispatched", "CONFIRMED")
    assert len(_drafts_titled(wordpress_site, f"Once {uid}")) == 1


def test_proxy_token_limited_to_other_sites_gets_403(proxy_client):
    r = proxy_client("POST", "/v1/sites/test/drafts", token="prod-token",
                     json={"operation_key": "x", "job_id": "j", "title": "t"})
    assert (r.status_code, r.json["error"]["code"]) == (403, "site_not_allowed")
    r = proxy_client("GET", "/v1/sites/production/operations/x", token="runner-token")
    assert (r.status_code, r.json["error"]["code"]) == (403, "site_not_allowed")


def test_proxy_rejects_bad_tokens_roles_and_bodies(proxy_client):
    assert proxy_client("POST", "/v1/sites/test/drafts", token="nope", json={}).status_code == 401
    editor = proxy_client("POST", "/v1/sites/test/drafts", token="editor-token",
                          json={"operation_key": "x", "job_id": "j", "title": "t"})
    assert (editor.status_code, editor.json["error"]["code"]) == (403, "forbidden")
    publish = proxy_client("POST", "/v1/sites/test/drafts",
                           json={"operation_key": "x", "job_id": "j", "title": "t", "status": "publish"})
    assert (publish.status_code, publish.json["error"]["code"]) == (422, "validation_error")
    assert proxy_client("POST", "/v1/sites/test/drafts", data="nope",
                        content_type="application/json").json["error"]["code"] == "malformed_json"


def test_proxy_health_lists_sites_without_secrets(proxy_client):
    r = proxy_client("GET", "/health")
    assert r.json["status"] == "ok"
    assert r.json["sites"] == ["lossy", "plain", "production", "test"]


# ---------------------------------------------------------------- endpoints the article pipeline uses

def _draft(proxy_client, uid, job=None, **extra):
    write = {"title": f"Pipeline {uid}", "content": "<p>Body.</p>", **extra}
    ident = _gate(write, job=job, key=f"pl-{uid}:create_draft", pipeline="article")
    r = proxy_client("POST", "/v1/sites/test/drafts", json={**write, **ident})
    assert r.json["outcome"] == "confirmed", r.json
    return r.json["remote_id"]


def test_proxy_resource_pack_is_set_once_even_when_repeated(proxy_client, wordpress_site):
    uid = _uid()
    job = f"job-{uid}"
    post_id = _draft(proxy_client, uid, job=job)
    update = {"content": "<p>Body.</p>", "resource_pack": {"html": "<ul><li>link</li></ul>"}}
    ident = _gate(update, action="add_resource_pack", job=job, post_id=post_id)
    key = ident["operation_key"]
    first = proxy_client("POST", f"/v1/sites/test/posts/{post_id}?strict=1", json={**update, **ident})
    assert first.status_code == 200 and first.json["verified"] is True, first.json
    assert first.json["verification"]["resource_pack"] == {"sent": 1, "stored": 1, "ok": True}
    # a retry, and a caller that sends back the stored content: still exactly one pack
    proxy_client("POST", f"/v1/sites/test/posts/{post_id}", json={**update, **ident})
    stored = proxy_client("GET", f"/v1/sites/test/posts/{post_id}").json["post"]["content"]
    again_write = {**update, "content": stored}
    again = proxy_client("POST", f"/v1/sites/test/posts/{post_id}",
                         json={**again_write, **ident, "operation_key": key})
    assert again.status_code == 422  # another body than the one dispatched under this key
    again = proxy_client("POST", f"/v1/sites/test/posts/{post_id}", json={
        **again_write, **_gate(again_write, action="add_resource_pack:again", job=job, post_id=post_id),
        "operation_key": key + ":again"})
    assert again.json["verification"]["resource_pack"]["stored"] == 1, again.json
    content = requests.get(wordpress_site.rest(f"/wp/v2/posts/{post_id}&context=edit"), auth=wordpress_site.auth,
                           timeout=30).json()["content"]["raw"]
    assert content.count("<!-- durable:resource-pack ") == 1
    assert content.startswith("<p>Body.</p>")


def test_proxy_read_post_returns_raw_fields_and_edit_url(proxy_client):
    uid = _uid()
    post_id = _draft(proxy_client, uid, excerpt="Short.", seo={"title": "T", "description": "D", "focus_keyword": "k"})
    r = proxy_client("GET", f"/v1/sites/test/posts/{post_id}")
    assert r.status_code == 200
    post = r.json["post"]
    assert (post["title"], post["excerpt"].strip(), post["status"]) == (f"Pipeline {uid}", "Short.", "draft")
    assert post["meta"]["rank_math_title"] == "T" and post["content"] == "<p>Body.</p>"
    assert r.json["edit_url"].endswith(f"post={post_id}&action=edit")
    assert proxy_client("GET", "/v1/sites/test/posts/99999999").status_code == 404


def _wp_status(site, post_id):
    return requests.get(site.rest(f"/wp/v2/posts/{post_id}&context=edit"), auth=site.auth, timeout=30).json()


def _published(site, *post_ids):
    return [p for p in post_ids if _wp_status(site, p)["status"] == "publish"]


def test_proxy_publishes_only_the_approved_post_on_the_approved_site_once(proxy_client, wordpress_site):
    uid = _uid()
    job = f"job-{uid}"
    post_id = _draft(proxy_client, uid, job=job)
    other_post = _draft(proxy_client, _uid())
    content = _wp_status(wordpress_site, post_id)["content"]["raw"]
    body = {"content_sha256": hashlib.sha256(content.encode()).hexdigest(), "title": f"Pipeline {uid}"}
    payload = {**body, "post_id": post_id}
    runner = Principal("acme", "runner", "test")
    token = _lease(job, pipeline="article")
    with db.connection_context():
        halted = _gate_answer(runner, job, "publish", token, payload=payload, target="wordpress:test")
    assert (halted["decision"], halted["reason"]) == ("halt", "approval_required")
    key = halted["operation"]["operation_key"]
    ident = {"operation_key": key, "job_id": job, "fencing_token": token}
    refused = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish", json={**body, **ident})
    assert (refused.status_code, refused.json["error"]["details"]["state"]) == (403, "PREPARED")
    with db.connection_context():
        approvals.grant(Principal("acme", "approver", "ed"), job, 1, "publish", request_digest(payload),
                        "wordpress:test", time.time() + 600)
        go = _gate_answer(runner, job, "publish", token, payload=payload, target="wordpress:test")
    assert go["decision"] == "dispatch", go
    attempts = {
        "another post": proxy_client("POST", f"/v1/sites/test/posts/{other_post}/publish", json={**body, **ident}),
        "another site": proxy_client("POST", f"/v1/sites/plain/posts/{post_id}/publish", json={**body, **ident}),
        "another content": proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish",
                                        json={**body, **ident, "content_sha256": "0" * 64}),
        "another tenant": proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish", token="other-token",
                                       json={**body, **ident}),
    }
    assert {k: r.status_code for k, r in attempts.items()} == {
        "another post": 422, "another site": 403, "another content": 422, "another tenant": 403}
    assert _published(wordpress_site, post_id, other_post) == []
    published = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish?strict=1", json={**body, **ident})
    assert published.status_code == 200 and published.json["post"]["status"] == "publish", published.json
    with db.connection_context():
        operations.confirm(runner, key, token, post_id)
    again = proxy_client("POST", f"/v1/sites/test/posts/{other_post}/publish", json={**body, **ident})
    assert again.status_code in (403, 422)
    assert _published(wordpress_site, post_id, other_post) == [post_id]
    print(f"\n[count] publish attempts 6 (1 approved): published {len(_published(wordpress_site, post_id, other_post))}")


def test_a_publish_renamed_or_stripped_of_its_approval_need_publishes_nothing(proxy_client, wordpress_site):
    """Issue 22, defect 1, counted in WordPress: the PREPARED publish begun again as set_status
    (or without requires_approval) is refused, and the proxy publishes nothing; once an approval
    is revoked after its dispatch, a retried forward of the SENT publish is refused too."""
    uid = _uid()
    job = f"job-{uid}"
    post_id = _draft(proxy_client, uid, job=job)
    content = _wp_status(wordpress_site, post_id)["content"]["raw"]
    body = {"content_sha256": hashlib.sha256(content.encode()).hexdigest(), "title": f"Pipeline {uid}"}
    payload = {**body, "post_id": post_id}
    runner = Principal("acme", "runner", "test")
    token = _lease(job, pipeline="article")
    with db.connection_context():
        halted = _gate_answer(runner, job, "publish", token, payload=payload, target="wordpress:test")
        key = halted["operation"]["operation_key"]
        refusals = []
        for action in ("set_status", "update_post"):
            try:
                gate.begin(runner, job, action, token, payload=payload, target="wordpress:test", operation_key=key)
            except LedgerError as exc:
                refusals.append(exc.code)
        state = Operation.get(Operation.operation_key == key).state
    assert (halted["reason"], refusals, state) == ("approval_required", ["action_mismatch"] * 2, "PREPARED")
    ident = {"operation_key": key, "job_id": job, "fencing_token": token}
    refused = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish", json={**body, **ident})
    assert refused.status_code == 403
    with db.connection_context():
        approval = approvals.grant(Principal("acme", "approver", "ed"), job, 1, "publish", request_digest(payload),
                                   "wordpress:test", time.time() + 600)
        assert _gate_answer(runner, job, "publish", token, payload=payload, target="wordpress:test")["decision"] \
            == "dispatch"
        approvals.revoke(Principal("acme", "approver", "ed"), approval.id)
    after_revoke = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish", json={**body, **ident})
    assert (after_revoke.status_code, after_revoke.json["error"]["details"].get("reason")) == (403, "approval_required")
    assert _published(wordpress_site, post_id) == []
    print(f"\n[count] renamed / revoked publish: refusals {len(refusals) + 2}, published {len(_published(wordpress_site, post_id))}")


def test_proxy_refuses_to_publish_content_changed_after_approval(proxy_client, wordpress_site):
    uid = _uid()
    job = f"job-{uid}"
    post_id = _draft(proxy_client, uid, job=job)
    content = _wp_status(wordpress_site, post_id)["content"]["raw"]
    body = {"content_sha256": hashlib.sha256(content.encode()).hexdigest()}
    payload = {**body, "post_id": post_id}
    token = _lease(job, pipeline="article")
    with db.connection_context():
        approvals.grant(Principal("acme", "approver", "ed"), job, 1, "publish", request_digest(payload),
                        "wordpress:test", time.time() + 600)
        go = _gate_answer(Principal("acme", "runner", "test"), job, "publish", token, payload=payload,
                            target="wordpress:test")
    assert go["decision"] == "dispatch"
    # Someone edits the post in wp-admin after the approval.
    requests.post(wordpress_site.rest(f"/wp/v2/posts/{post_id}"), auth=wordpress_site.auth, timeout=30,
                  json={"content": "<p>Edited after approval.</p>"}).raise_for_status()
    r = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish", json={
        **body, "operation_key": go["operation"]["operation_key"], "job_id": job, "fencing_token": token})
    assert (r.status_code, r.json["error"]["code"], r.json["error"]["details"]["changed"]) == (
        409, "content_changed", ["content"])
    assert _published(wordpress_site, post_id) == []
