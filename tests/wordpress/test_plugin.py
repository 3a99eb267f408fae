"""durable-ops.php against a real WordPress (6.1 by default; DURABLE_WP_VERSION=7.1.4 for the newer core;
DURABLE_WP_PLUGIN_ZIP for the regular plugin zip instead of the mu-plugin): counters prove exactly-once."""
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
import requests
from support.media import png_bytes

N = 20


def _uid():
    return uuid.uuid4().hex[:10]


def _headers(key=None, job=None, token=None):
    h = {}
    if key:
        h["Idempotency-Key"] = key
    if job:
        h["X-Durable-Job-Id"] = job
    if token is not None:
        h["X-Durable-Fencing-Token"] = str(token)
    return h


def _concurrently(n, fn):
    """Run fn(i) in n threads released together by a barrier; return the results in order."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def run(i):
        barrier.wait()
        results[i] = fn(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def _drafts_titled(site, title):
    r = requests.get(site.rest(f"/wp/v2/posts?status=draft&context=edit&search={title}&per_page=100"), auth=site.auth, timeout=30)
    r.raise_for_status()
    return [p for p in r.json() if p["title"]["raw"] == title]


def _lookup(site, key):
    r = requests.get(site.rest(f"/durable/v1/operations/{requests.utils.quote(key, safe='')}"), auth=site.auth, timeout=30)
    r.raise_for_status()
    return r.json()


def _job(site, job):
    r = requests.get(site.rest(f"/durable/v1/jobs/{job}"), auth=site.auth, timeout=30)
    r.raise_for_status()
    return r.json()


def _sql(site, statement):
    subprocess.run(["mysql", "-h127.0.0.1", "-uroot", site.db_name, "-e", statement], check=True)


def test_plugin_status_route(wordpress_site):
    r = requests.get(wordpress_site.rest("/durable/v1/status"), auth=wordpress_site.auth, timeout=10)
    assert r.status_code == 200
    assert r.json()["plugin"] == "durable-ops"
    assert r.json()["version"] == (Path(__file__).resolve().parents[2] / "VERSION").read_text().strip()
    print(f"\n[wordpress] WordPress {wordpress_site.wp_version}, durable-ops {r.json()['version']} "
          f"as {wordpress_site.plugin_mode} plugin")


def test_plugin_lookup_routes_validate_their_arguments(wordpress_site):
    """`args` with validate/sanitize callbacks: an identifier over 191 bytes is a 400 rest_invalid_param."""
    for route in ("operations", "jobs"):
        r = requests.get(wordpress_site.rest(f"/durable/v1/{route}/{'k' * 192}"), auth=wordpress_site.auth, timeout=10)
        assert r.status_code == 400 and r.json()["code"] == "rest_invalid_param", r.text
        ok = requests.get(wordpress_site.rest(f"/durable/v1/{route}/{'k' * 191}"), auth=wordpress_site.auth, timeout=10)
        assert ok.status_code == 200, ok.text


def test_plugin_concurrent_creates_one_key_make_one_post(wordpress_site):
    site, uid = wordpress_site, _uid()
    key, job, title = f"acme:job-{uid}:v1:create_draft", f"job-{uid}", f"Concurrent {uid}"
    body = {"title": title, "content": "<p>body</p>", "status": "draft"}

    def create(_i):
        with site.session() as s:
            r = s.post(site.rest("/wp/v2/posts"), json=body, headers=_headers(key, job, 1), timeout=60)
            return r.status_code, r.json()

    results = _concurrently(N, create)
    created = [b["id"] for st, b in results if st in (200, 201)]
    in_progress = [b for st, b in results if st == 409]
    assert len(created) + len(in_progress) == N, [st for st, _ in results]
    assert len(set(created)) == 1
    assert sum(1 for st, _ in results if st == 201) == 1
    assert all(b["code"] == "durable_in_progress" for b in in_progress)
    post_id = created[0]

    # Counted two independent ways: the lookup route and the core posts list.
    assert _lookup(site, key) == {**_lookup(site, key), "found": True, "id": post_id, "object_type": "post",
                                  "status": "draft", "state": "done"}
    assert [p["id"] for p in _drafts_titled(site, title)] == [post_id]
    assert [o["id"] for o in _job(site, job)["objects"]] == [post_id]
    print(f"\n[count] key={key}: {len(created)} x 2xx, {len(in_progress)} x 409, posts in WordPress: 1")

    # A retry after the first finished replays the same object.
    with site.session() as s:
        r = s.post(site.rest("/wp/v2/posts"), json=body, headers=_headers(key, job, 1), timeout=30)
    assert r.status_code == 200
    assert r.headers["Idempotent-Replayed"] == "true"
    assert r.json()["id"] == post_id
    assert len(_drafts_titled(site, title)) == 1


def test_plugin_concurrent_media_one_key_make_one_attachment(wordpress_site):
    site, uid = wordpress_site, _uid()
    key, job = f"acme:job-{uid}:v1:upload_media:hero", f"job-{uid}"
    data, name = png_bytes(seed=int(uid[:6], 16)), f"hero-{uid}.png"

    def upload(_i):
        with site.session() as s:
            r = s.post(site.rest("/wp/v2/media"), files={"file": (name, data, "image/png")},
                       data={"alt_text": "hero"}, headers=_headers(key, job, 1), timeout=60)
            return r.status_code, r.json()

    results = _concurrently(N, upload)
    ids = {b["id"] for st, b in results if st in (200, 201)}
    assert len(ids) == 1
    assert all(b["code"] == "durable_in_progress" for st, b in results if st not in (200, 201))
    media_id = ids.pop()
    files = [p for p in Path(site.uploads_dir).rglob(f"hero-{uid}*") if p.is_file()]
    assert len(files) == 1, files
    assert files[0].read_bytes() == data
    attachments = [o for o in _job(site, job)["objects"] if o["object_type"] == "attachment"]
    assert [a["id"] for a in attachments] == [media_id]
    r = requests.get(site.rest(f"/wp/v2/media?search=hero-{uid}"), auth=site.auth, timeout=30)
    assert [m["id"] for m in r.json()] == [media_id]
    print(f"\n[count] key={key}: attachments 1, files in uploads 1")

    with site.session() as s:
        r = s.post(site.rest("/wp/v2/media"), files={"file": (name, data, "image/png")},
                   data={"alt_text": "hero"}, headers=_headers(key, job, 1), timeout=30)
    assert (r.status_code, r.json()["id"], r.headers.get("Idempotent-Replayed")) == (200, media_id, "true")
    assert len([p for p in Path(site.uploads_dir).rglob(f"hero-{uid}*") if p.is_file()]) == 1


def test_plugin_same_key_different_body_is_422(wordpress_site):
    site, uid = wordpress_site, _uid()
    key = f"k-{uid}"
    r1 = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, json={"title": f"A {uid}", "status": "draft"},
                       headers=_headers(key), timeout=30)
    r2 = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, json={"title": f"B {uid}", "status": "draft"},
                       headers=_headers(key), timeout=30)
    assert r1.status_code == 201
    assert (r2.status_code, r2.json()["code"]) == (422, "durable_digest_mismatch")
    assert _drafts_titled(site, f"B {uid}") == []


def test_plugin_media_same_key_different_file_is_422(wordpress_site):
    site, uid = wordpress_site, _uid()
    key = f"m-{uid}"
    first = requests.post(site.rest("/wp/v2/media"), auth=site.auth, headers=_headers(key), timeout=30,
                          files={"file": (f"a-{uid}.png", png_bytes(1), "image/png")})
    second = requests.post(site.rest("/wp/v2/media"), auth=site.auth, headers=_headers(key), timeout=30,
                           files={"file": (f"a-{uid}.png", png_bytes(2), "image/png")})
    assert first.status_code == 201
    assert (second.status_code, second.json()["code"]) == (422, "durable_digest_mismatch")
    assert len([p for p in Path(site.uploads_dir).rglob(f"a-{uid}*") if p.is_file()]) == 1


def test_plugin_lower_fencing_token_after_higher_is_409_and_writes_nothing(wordpress_site):
    site, uid = wordpress_site, _uid()
    job = f"job-{uid}"
    newer = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, json={"title": f"New {uid}", "status": "draft"},
                          headers=_headers(f"{job}:new", job, 5), timeout=30)
    assert newer.status_code == 201
    stale = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, json={"title": f"Old {uid}", "status": "draft"},
                          headers=_headers(f"{job}:old", job, 4), timeout=30)
    assert stale.status_code == 409
    assert stale.json()["code"] == "durable_stale_fencing_token"
    assert stale.json()["data"]["details"] == {"given": 4, "current": 5}
    stale_media = requests.post(site.rest("/wp/v2/media"), auth=site.auth, headers=_headers(f"{job}:oldm", job, 3),
                                files={"file": (f"old-{uid}.png", png_bytes(3), "image/png")}, timeout=30)
    assert stale_media.status_code == 409
    stale_update = requests.post(site.rest(f"/wp/v2/posts/{newer.json()['id']}"), auth=site.auth,
                                 json={"title": "overwritten"}, headers=_headers(None, job, 4), timeout=30)
    assert stale_update.status_code == 409

    assert _lookup(site, f"{job}:old")["found"] is False
    assert _drafts_titled(site, f"Old {uid}") == []
    assert list(Path(site.uploads_dir).rglob(f"old-{uid}*")) == []
    objects = _job(site, job)["objects"]
    assert [(o["id"], o["title"]) for o in objects] == [(newer.json()["id"], f"New {uid}")]


def test_plugin_failed_validation_does_not_burn_the_key(wordpress_site):
    site, uid = wordpress_site, _uid()
    key = f"v-{uid}"
    bad = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, headers=_headers(key), timeout=30,
                        json={"title": f"V {uid}", "status": "draft", "id": 1})
    # Refused inside the controller (after validation, after our claim): rest_post_exists.
    assert (bad.status_code, bad.json()["code"]) == (400, "rest_post_exists")
    assert _lookup(site, key)["state"] is None  # the claim was released
    good = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, headers=_headers(key), timeout=30,
                         json={"title": f"V {uid}", "status": "draft"})
    assert good.status_code == 201


def test_plugin_lookup_finds_post_by_meta_when_claim_row_is_gone(wordpress_site):
    """The meta written in the same wp_insert_post call is the fallback evidence."""
    site, uid = wordpress_site, _uid()
    key = f"meta-{uid}"
    r = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, headers=_headers(key, f"job-{uid}"), timeout=30,
                      json={"title": f"M {uid}", "status": "draft"})
    assert r.status_code == 201
    _sql(site, f"DELETE FROM wp_durable_operations WHERE op_key='{key}'")
    found = _lookup(site, key)
    assert (found["found"], found["id"], found["source"]) == (True, r.json()["id"], "meta")


def test_plugin_requires_edit_posts_for_lookups(wordpress_site):
    r = requests.get(wordpress_site.rest("/durable/v1/jobs/anything"), timeout=10)
    assert r.status_code == 401


@pytest.mark.parametrize("meta_key", ["rank_math_title", "_yoast_wpseo_metadesc"])
def test_plugin_seo_meta_is_writable_over_rest(wordpress_site, meta_key):
    site, uid = wordpress_site, _uid()
    r = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, timeout=30,
                      json={"title": f"S {uid}", "status": "draft", "meta": {meta_key: f"seo {uid}"}})
    assert r.status_code == 201
    assert r.json()["meta"][meta_key] == f"seo {uid}"


def test_plugin_concurrent_fenced_writes_land_in_token_order(wordpress_site):
    """Under the per-job lock, an accepted write never follows an accepted higher token."""
    site, uid = wordpress_site, _uid()
    job = f"job-{uid}"

    def create(i):
        token = i + 1
        r = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, timeout=60,
                          json={"title": f"F{token} {uid}", "status": "draft"},
                          headers=_headers(f"{job}:op{token}", job, token))
        return token, r.status_code, r.json()

    results = _concurrently(12, create)
    accepted = sorted((b["id"], token) for token, st, b in results if st == 201)
    rejected = [b["code"] for _t, st, b in results if st != 201]
    assert accepted, results
    assert set(rejected) <= {"durable_stale_fencing_token"}
    tokens_in_write_order = [token for _id, token in accepted]
    assert tokens_in_write_order == sorted(tokens_in_write_order)
    assert max(t for _i, t in accepted) == 12  # the highest token always gets through
    assert len(_job(site, job)["objects"]) == len(accepted)



def test_plugin_in_progress_claim_answers_409_and_an_abandoned_one_is_taken_over(wordpress_site):
    site, uid = wordpress_site, _uid()
    key, body = f"stuck-{uid}", {"title": f"Stuck {uid}", "status": "draft"}
    # Seed a claim as a worker that died mid-request would leave it; learn the body's hash from a 422.
    _sql(site, "INSERT INTO wp_durable_operations (op_key, job_id, request_hash, state, claim_id, created_at, updated_at)"
               f" VALUES ('{key}', 'j', 'x', 'in_progress', 'dead', UTC_TIMESTAMP(), UTC_TIMESTAMP())")
    probe = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, json=body, headers=_headers(key), timeout=30)
    given = probe.json()["data"]["details"]["given_hash"]
    _sql(site, f"UPDATE wp_durable_operations SET request_hash = '{given}' WHERE op_key = '{key}'")

    busy = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, json=body, headers=_headers(key), timeout=30)
    assert (busy.status_code, busy.json()["code"]) == (409, "durable_in_progress")
    looked = _lookup(site, key)
    assert (looked["found"], looked["state"]) == (False, "in_progress")

    # Older than the claim TTL (300 s): the next request takes the claim over and writes once.
    _sql(site, f"UPDATE wp_durable_operations SET updated_at = UTC_TIMESTAMP() - INTERVAL 1 HOUR WHERE op_key = '{key}'")
    taken = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, json=body, headers=_headers(key), timeout=30)
    assert taken.status_code == 201
    again = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, json=body, headers=_headers(key), timeout=30)
    assert (again.status_code, again.json()["id"]) == (200, taken.json()["id"])
    assert len(_drafts_titled(site, f"Stuck {uid}")) == 1
