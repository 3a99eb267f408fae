"""The publishing proxy against the real WordPress: lost responses, read-back, site rights."""
import base64
import io
import uuid
from pathlib import Path

import pytest
import requests
from support.media import png_bytes
from support.netfaults import LossyProxy

from durable_ledger.config import Config
from durable_ledger.proxy import create_proxy_app

TOKENS = ("acme:runner:runner-token:test+lossy+plain,"
          "acme:runner:prod-token:production,"
          "acme:editor:editor-token:test")


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


def _uid():
    return uuid.uuid4().hex[:10]


def _drafts_titled(site, title):
    r = requests.get(site.rest(f"/wp/v2/posts?status=draft&context=edit&search={title}"), auth=site.auth, timeout=30)
    return [p["id"] for p in r.json() if p["title"]["raw"] == title]


def test_proxy_lost_response_then_retry_returns_the_created_post(proxy_client, wordpress_site, lossy):
    uid = _uid()
    draft = {"operation_key": f"acme:job-{uid}:v1:create_draft", "job_id": f"job-{uid}", "fencing_token": 1,
             "title": f"Lost {uid}", "content": "<p>hello</p>", "excerpt": "short"}
    lossy.drop_responses = 1
    first = proxy_client("POST", "/v1/sites/lossy/drafts", json=draft)
    assert first.status_code == 200
    assert first.json["outcome"] == "unknown", first.json
    assert first.json["error"]["kind"] == "connection_reset"
    assert lossy.dropped >= 1

    # The write landed although nobody saw the answer: the reconciler finds it by key ...
    looked = proxy_client("GET", f"/v1/sites/lossy/operations/{draft['operation_key']}").json
    assert (looked["found"], looked["match"], looked["plugin"]) == (True, "operation_key", True)

    # ... and a retry through the proxy gets the very same post back, not a second one.
    retry = proxy_client("POST", "/v1/sites/lossy/drafts", json={**draft, "fencing_token": 2})
    assert retry.json["outcome"] == "confirmed"
    assert retry.json["replayed"] is True
    assert retry.json["remote_id"] == looked["id"]
    assert retry.json["verified"] is True
    assert _drafts_titled(wordpress_site, f"Lost {uid}") == [looked["id"]]
    print(f"\n[count] lost response, key {draft['operation_key']}: posts in WordPress 1 (id {looked['id']})")


def test_proxy_lost_media_response_then_retry_returns_the_same_attachment(proxy_client, wordpress_site, lossy):
    uid = _uid()
    data = png_bytes(seed=int(uid[:6], 16))
    form = {"operation_key": f"acme:job-{uid}:v1:upload_media:hero", "job_id": f"job-{uid}",
            "fencing_token": "1", "alt_text": "A hero image"}
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
    job = proxy_client("GET", f"/v1/sites/test/jobs/job-{uid}").json
    assert [o["id"] for o in job["objects"]] == [retry.json["remote_id"]]
    files = [p for p in Path(wordpress_site.uploads_dir).rglob(f"lost-{uid}*") if p.is_file()]
    assert len(files) == 1
    print(f"\n[count] lost media response, key {form['operation_key']}: attachments 1, files in uploads 1")


def test_proxy_media_from_base64_json(proxy_client):
    uid = _uid()
    body = {"operation_key": f"b64-{uid}", "job_id": f"job-{uid}", "filename": f"b64-{uid}.png",
            "content_base64": base64.b64encode(png_bytes(7)).decode(), "alt_text": "alt", "title": f"B64 {uid}"}
    r = proxy_client("POST", "/v1/sites/test/media", json=body)
    assert r.json["outcome"] == "confirmed"
    assert r.json["verified"] is True
    assert r.json["media"]["source_url"].endswith(".png")


def test_proxy_readback_catches_silently_dropped_featured_media(proxy_client):
    uid = _uid()
    r = proxy_client("POST", "/v1/sites/test/drafts", json={
        "operation_key": f"fm-{uid}", "job_id": f"job-{uid}", "title": f"FM {uid}", "featured_media": 987654,
        "excerpt": "kept"})
    assert r.json["outcome"] == "confirmed"  # WordPress answered 201 ...
    assert r.json["verification"]["featured_media"] == {"sent": 987654, "stored": 0, "ok": False}
    assert r.json["verification"]["excerpt"]["ok"] is True
    assert r.json["verified"] is False  # ... but did not store what it was sent


def test_proxy_seo_fields_are_written_and_verified(proxy_client):
    uid = _uid()
    seo = {"title": f"SEO {uid}", "description": "desc", "focus_keyword": "kw"}
    r = proxy_client("POST", "/v1/sites/test/drafts", json={
        "operation_key": f"seo-{uid}", "job_id": f"job-{uid}", "title": f"Post {uid}", "seo": seo})
    assert r.json["verified"] is True
    assert r.json["verification"]["meta._yoast_wpseo_metadesc"]["stored"] == "desc"
    post_id = r.json["remote_id"]
    upd = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/seo", json={
        "job_id": f"job-{uid}", "seo": {"title": "New title"}, "seo_plugins": ["rank_math"]})
    assert upd.json["outcome"] == "confirmed"
    assert upd.json["verification"] == {"meta.rank_math_title": {"sent": "New title", "stored": "New title", "ok": True}}


def test_proxy_without_plugin_reports_dropped_seo_and_title_only_lookups(proxy_client):
    uid = _uid()
    r = proxy_client("POST", "/v1/sites/plain/drafts", json={
        "operation_key": f"plain-{uid}", "job_id": f"job-{uid}", "title": f"Plain {uid}", "seo": {"title": "x"}})
    assert r.json["outcome"] == "confirmed"
    assert (r.json["plugin"], r.json["idempotent"]) == (False, False)
    assert r.json["verification"]["meta.rank_math_title"]["ok"] is False  # unregistered meta: dropped
    looked = proxy_client("GET", f"/v1/sites/plain/operations/plain-{uid}?title=Plain {uid}").json
    assert looked["plugin"] is False
    assert looked["found"] is False  # never claims a match by key
    assert [(c["id"], c["match"]) for c in looked["candidates"]] == [(r.json["remote_id"], "title")]


def test_proxy_same_key_different_body_fails_422(proxy_client):
    uid = _uid()
    base = {"operation_key": f"dm-{uid}", "job_id": f"job-{uid}"}
    assert proxy_client("POST", "/v1/sites/test/drafts", json={**base, "title": "one"}).json["outcome"] == "confirmed"
    r = proxy_client("POST", "/v1/sites/test/drafts", json={**base, "title": "two"}).json
    assert (r["outcome"], r["http_status"], r["error"]["code"]) == ("failed", 422, "durable_digest_mismatch")
    assert r["retryable"] is False


def test_proxy_stale_fencing_token_fails_and_writes_nothing(proxy_client, wordpress_site):
    uid = _uid()
    job = f"job-{uid}"
    ok = proxy_client("POST", "/v1/sites/test/drafts", json={
        "operation_key": f"{job}:a", "job_id": job, "fencing_token": 7, "title": f"Seven {uid}"}).json
    assert ok["outcome"] == "confirmed"
    stale = proxy_client("POST", "/v1/sites/test/drafts", json={
        "operation_key": f"{job}:b", "job_id": job, "fencing_token": 6, "title": f"Six {uid}"}).json
    assert (stale["outcome"], stale["http_status"], stale["error"]["code"]) == (
        "failed", 409, "durable_stale_fencing_token")
    assert _drafts_titled(wordpress_site, f"Six {uid}") == []
    assert proxy_client("GET", f"/v1/sites/test/operations/{job}:b").json["found"] is False


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

def _draft(proxy_client, uid, **extra):
    r = proxy_client("POST", "/v1/sites/test/drafts", json={
        "operation_key": f"pl-{uid}:create_draft", "job_id": f"job-{uid}", "title": f"Pipeline {uid}",
        "content": "<p>Body.</p>", **extra})
    assert r.json["outcome"] == "confirmed", r.json
    return r.json["remote_id"]


def test_proxy_strict_mode_status_follows_the_outcome(proxy_client):
    uid = _uid()
    body = {"operation_key": f"st-{uid}", "job_id": f"job-{uid}", "title": f"Strict {uid}"}
    ok = proxy_client("POST", "/v1/sites/test/drafts?strict=1", json=body)
    assert (ok.status_code, ok.json["outcome"]) == (200, "confirmed")
    other = proxy_client("POST", "/v1/sites/test/drafts?strict=1", json={**body, "title": "changed"})
    assert (other.status_code, other.json["outcome"]) == (422, "failed")  # durable_digest_mismatch
    lenient = proxy_client("POST", "/v1/sites/test/drafts", json={**body, "title": "changed"})
    assert (lenient.status_code, lenient.json["outcome"]) == (200, "failed")  # the default contract


def test_proxy_resource_pack_is_set_once_even_when_repeated(proxy_client, wordpress_site):
    uid = _uid()
    post_id = _draft(proxy_client, uid)
    key = f"pl-{uid}:add_resource_pack"
    update = {"operation_key": key, "job_id": f"job-{uid}", "content": "<p>Body.</p>",
              "resource_pack": {"html": "<ul><li>link</li></ul>"}}
    first = proxy_client("POST", f"/v1/sites/test/posts/{post_id}?strict=1", json=update)
    assert first.status_code == 200 and first.json["verified"] is True, first.json
    assert first.json["verification"]["resource_pack"] == {"sent": 1, "stored": 1, "ok": True}
    # a retry, and a caller that sends back the stored content: still exactly one pack
    proxy_client("POST", f"/v1/sites/test/posts/{post_id}", json=update)
    stored = proxy_client("GET", f"/v1/sites/test/posts/{post_id}").json["post"]["content"]
    again = proxy_client("POST", f"/v1/sites/test/posts/{post_id}", json={**update, "content": stored})
    assert again.json["verification"]["resource_pack"]["stored"] == 1
    content = requests.get(wordpress_site.rest(f"/wp/v2/posts/{post_id}&context=edit"), auth=wordpress_site.auth,
                           timeout=30).json()["content"]["raw"]
    assert content.count("<!-- durable:resource-pack ") == 1
    assert f"post={post_id} op={key}" in content and content.startswith("<p>Body.</p>")


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


def test_proxy_publish_needs_an_operation_the_ledger_dispatched(proxy_client, wordpress_site):
    import time

    from durable_ledger.db import db
    from durable_ledger.models import Job, Operation

    uid = _uid()
    post_id = _draft(proxy_client, uid)
    key = f"pl-{uid}:publish"
    body = {"operation_key": key, "job_id": f"job-{uid}"}
    refused = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish", json=body)
    assert (refused.status_code, refused.json["error"]["code"]) == (403, "approval_required")
    now = time.time()
    with db.connection_context():
        job = Job.create(tenant="acme", job_id=f"job-{uid}", pipeline="article", created_at=now, updated_at=now)
        op = Operation.create(tenant="acme", operation_key=key, job=job, task_version=1, action="publish",
                              request_hash="0" * 64, state="PREPARED", fencing_token=1, requires_approval=True,
                              created_at=now, updated_at=now)
    unapproved = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish", json=body)
    assert unapproved.status_code == 403  # PREPARED: the approval did not match
    with db.connection_context():
        Operation.update(state="SENT").where(Operation.id == op.id).execute()  # what begin does after approval
    published = proxy_client("POST", f"/v1/sites/test/posts/{post_id}/publish?strict=1", json=body)
    assert published.status_code == 200 and published.json["post"]["status"] == "publish", published.json
    st = requests.get(wordpress_site.rest(f"/wp/v2/posts/{post_id}&context=edit"), auth=wordpress_site.auth, timeout=30)
    assert st.json()["status"] == "publish"
