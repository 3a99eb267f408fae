"""Unit tests of the proxy's WordPress HTTP client (HTTP mocked with `responses`).

The behaviour against a real WordPress is covered in tests/wordpress/ at the repository root.
"""
import base64
import json

import pytest
import requests
import responses
from urllib3.exceptions import NewConnectionError, ProtocolError

from durable_ledger.wordpress.proxy.sites import load_sites
from durable_ledger.wordpress.client import WordPressClient, seo_meta, verify_fields

URL = "http://wp.test"
PASSWORD = "abcd efgh ijkl mnop"


@pytest.fixture
def wp():
    return WordPressClient(URL, "admin", PASSWORD, connect_timeout=2, read_timeout=7)


def _post(id_=11, **extra):
    return {"id": id_, "status": "draft", "title": {"raw": "Hello", "rendered": "Hello"},
            "content": {"raw": "<p>x</p>"}, "excerpt": {"raw": "short"}, "featured_media": 0,
            "categories": [1], "tags": [], "meta": {}, **extra}


def _mock_create(status=201, body=None, headers=None, readback=None):
    responses.post(f"{URL}/", json=body if body is not None else _post(), status=status, headers=headers or {})
    responses.get(f"{URL}/", json=readback if readback is not None else _post())


@responses.activate
def test_wordpress_client_create_sends_durable_headers_and_forces_draft(wp):
    _mock_create()
    result = wp.create_post({"title": "Hello", "status": "publish"}, operation_key="acme:j1:v1:create_draft",
                            job_id="j1", fencing_token=3)
    sent = responses.calls[0].request
    assert sent.headers["Idempotency-Key"] == "acme:j1:v1:create_draft"
    assert sent.headers["X-Durable-Job-Id"] == "j1"
    assert sent.headers["X-Durable-Fencing-Token"] == "3"
    assert sent.headers["Authorization"] == "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    assert json.loads(sent.body)["status"] == "draft"
    assert "rest_route=%2Fwp%2Fv2%2Fposts" in sent.url or "rest_route=/wp/v2/posts" in sent.url
    assert responses.calls[0].request.req_kwargs["timeout"] == (2, 7)
    assert (result.outcome, result.remote_id, result.http_status, result.replayed) == ("confirmed", 11, 201, False)
    assert "context=edit" in responses.calls[1].request.url
    assert result.verified is True


@responses.activate
def test_wordpress_client_replay_is_confirmed_and_marked(wp):
    _mock_create(status=200, headers={"Idempotent-Replayed": "true"})
    result = wp.create_post({"title": "Hello"}, operation_key="k")
    assert (result.outcome, result.replayed) == ("confirmed", True)


@responses.activate
def test_wordpress_client_readback_flags_dropped_fields(wp):
    _mock_create(readback=_post(featured_media=0, meta={"rank_math_title": ""}))
    result = wp.create_post({"title": "Hello", "featured_media": 42, "excerpt": "short",
                             "meta": {"rank_math_title": "SEO"}}, operation_key="k")
    assert result.outcome == "confirmed"
    assert result.verification["featured_media"] == {"sent": 42, "stored": 0, "ok": False}
    assert result.verification["excerpt"]["ok"] is True
    assert result.verification["meta.rank_math_title"]["ok"] is False
    assert result.verified is False


@pytest.mark.parametrize("exc, kind", [
    (requests.exceptions.ReadTimeout("slow"), "timeout"),
    (requests.exceptions.ConnectionError(ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))),
     "connection_reset"),
    (requests.exceptions.ChunkedEncodingError("broken"), "connection_reset"),
])
@responses.activate
def test_wordpress_client_lost_answer_after_send_is_unknown_never_failed(wp, exc, kind):
    responses.post(f"{URL}/", body=exc)
    result = wp.create_post({"title": "Hello"}, operation_key="k", job_id="j", fencing_token=1)
    assert (result.outcome, result.error["kind"], result.remote_id) == ("unknown", kind, None)


@responses.activate
def test_wordpress_client_connection_never_opened_is_a_retryable_failure(wp):
    refused = NewConnectionError(None, "Connection refused")
    responses.post(f"{URL}/", body=requests.exceptions.ConnectionError(
        requests.packages.urllib3.exceptions.MaxRetryError(None, "/", refused)))
    result = wp.create_post({"title": "Hello"}, operation_key="k")
    assert (result.outcome, result.retryable, result.error["kind"]) == ("failed", True, "connect_failed")


@pytest.mark.parametrize("status, code, outcome, retryable", [
    (409, "durable_in_progress", "unknown", False),
    (409, "durable_stale_fencing_token", "failed", False),
    (422, "durable_digest_mismatch", "failed", False),
    (400, "rest_invalid_param", "failed", True),
    (401, "rest_not_logged_in", "failed", False),
    (403, "rest_cannot_create", "failed", False),
    (500, "internal_server_error", "unknown", False),
    (502, None, "unknown", False),
])
@responses.activate
def test_wordpress_client_classifies_http_errors(wp, status, code, outcome, retryable):
    responses.post(f"{URL}/", json={"code": code, "message": "m", "data": {"status": status}}, status=status)
    result = wp.create_post({"title": "Hello"}, operation_key="k")
    assert (result.outcome, result.retryable, result.http_status) == (outcome, retryable, status)
    if status in (401, 403):
        assert result.error["kind"] == "auth"


@responses.activate
def test_wordpress_client_media_upload_verifies_alt_text_and_bytes(wp):
    media = {"id": 5, "alt_text": "alt", "title": {"raw": "t"}, "source_url": "http://cdn.test/a.png",
             "media_details": {}}
    responses.post(f"{URL}/", json=media, status=201)
    responses.get(f"{URL}/", json=media)
    responses.get("http://cdn.test/a.png", body=b"PNGBYTES")
    result = wp.upload_media(b"PNGBYTES", "a.png", "image/png", {"alt_text": "alt", "title": "t"},
                             operation_key="m", job_id="j", fencing_token=2)
    assert result.verified is True
    assert result.verification["file_sha256"]["ok"] is True
    assert responses.calls[0].request.headers["Idempotency-Key"] == "m"
    # The file is fetched without the site's credentials (it may live on a CDN).
    assert "Authorization" not in responses.calls[2].request.headers


@responses.activate
def test_wordpress_client_plugin_status_absent_is_none(wp):
    responses.get(f"{URL}/", json={"code": "rest_no_route"}, status=404)
    assert wp.plugin_status() is None


def test_wordpress_client_rest_url_encodes_keys_once(wp):
    url = wp.rest("/durable/v1/operations/acme:job 1:v1&x")
    assert url == f"{URL}/?rest_route=/durable/v1/operations/acme:job+1:v1%26x"


def test_wordpress_client_never_shows_the_password(wp):
    assert PASSWORD not in repr(wp)


def test_wordpress_client_seo_meta_maps_both_plugins():
    assert seo_meta({"title": "T", "description": None, "focus_keyword": "k"}) == {
        "rank_math_title": "T", "rank_math_focus_keyword": "k", "_yoast_wpseo_title": "T", "_yoast_wpseo_focuskw": "k"}
    assert seo_meta({"description": "D"}, ["yoast"]) == {"_yoast_wpseo_metadesc": "D"}


def test_wordpress_client_verify_fields_compares_lists_unordered():
    report = verify_fields({"categories": [2, 1], "title": "A "}, {"categories": [1, 2], "title": {"raw": "A"}})
    assert all(v["ok"] for v in report.values())


def test_proxy_sites_load_from_env_and_json(tmp_path):
    f = tmp_path / "sites.json"
    f.write_text(json.dumps({"production": {"url": "https://prod.test/", "user": "u", "app_password_env": "PROD_PW"}}))
    env = {"WORDPRESS_URL": "http://wp.test", "WORDPRESS_USER": "admin", "WORDPRESS_APP_PASSWORD": PASSWORD,
           "DURABLE_PROXY_SITES": str(f), "PROD_PW": "secret-pw",
           "WORDPRESS_SITES": json.dumps({"test": {"url": "http://t.test", "user": "t", "app_password": "p"}})}
    sites = load_sites(env)
    assert sorted(sites) == ["default", "production", "test"]
    assert sites["production"].url == "https://prod.test"
    assert sites["production"].app_password == "secret-pw"
    assert "secret-pw" not in repr(sites["production"]) and PASSWORD not in repr(sites["default"])


def test_proxy_sites_missing_password_is_a_config_error():
    with pytest.raises(ValueError, match="app_password"):
        load_sites({"WORDPRESS_URL": "http://wp.test", "WORDPRESS_USER": "admin"})
