"""HTTP client for one WordPress site (REST API + the durable-ops plugin).

Every write carries `Idempotency-Key`, `X-Durable-Job-Id` and `X-Durable-Fencing-Token`, and
its result is classified into an outcome the ledger understands:

    confirmed  2xx with an object id (a replay by the plugin counts: the object exists)
    failed     WordPress proved nothing was written (400/422 validation, 401/403 auth,
               409 stale fencing token, 422 digest mismatch) or the connection never opened
    unknown    the request may have been written: read timeout, connection reset after the
               request was sent, 5xx, 409 in-progress. Never "failed": a blind retry could
               create a second object; the caller reconciles (lookup by key) instead.

After a confirmed write the object is read back (context=edit) and every field that was sent is
compared with what WordPress stored, because HTTP 201 is not proof that excerpt, featured media
or SEO meta were applied (WordPress drops an invalid featured_media silently, and unregistered
meta keys are ignored).

The application password stays inside the requests.Session (basic auth); it is never logged,
never put into results and never into exception messages.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass, field
from urllib.parse import urlencode

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import NewConnectionError

log = logging.getLogger(__name__)

SEO_META = {
    "rank_math": {"title": "rank_math_title", "description": "rank_math_description",
                  "focus_keyword": "rank_math_focus_keyword"},
    "yoast": {"title": "_yoast_wpseo_title", "description": "_yoast_wpseo_metadesc",
              "focus_keyword": "_yoast_wpseo_focuskw"},
}

# WordPress error codes that prove the request wrote nothing.
_NOTHING_WRITTEN_409 = {"durable_stale_fencing_token", "durable_object_missing"}


@dataclass
class WriteResult:
    outcome: str  # confirmed | failed | unknown
    http_status: int | None = None
    remote_id: int | None = None
    body: dict | None = None
    replayed: bool = False
    retryable: bool = False
    error: dict | None = None  # {"kind", "code", "message"}
    verification: dict = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return all(v["ok"] for v in self.verification.values())

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verified"] = self.verified if self.verification else None
        return d


def seo_meta(seo: dict | None, plugins=("rank_math", "yoast")) -> dict:
    """Maps {title, description, focus_keyword} to the Rank Math / Yoast meta keys."""
    meta = {}
    for plugin in plugins:
        for name, key in SEO_META[plugin].items():
            if seo and seo.get(name) is not None:
                meta[key] = seo[name]
    return meta


def _raw(value):
    """WordPress returns rendered fields as {"raw", "rendered"} in context=edit."""
    if isinstance(value, dict) and "raw" in value:
        return value["raw"]
    return value


def _same(sent, stored) -> bool:
    if isinstance(sent, list) and isinstance(stored, list):
        return sorted(sent) == sorted(stored)
    if isinstance(sent, str) and isinstance(stored, str):
        return sent.strip() == stored.strip()
    return sent == stored


def verify_fields(sent: dict, stored: dict) -> dict:
    """{field: {sent, stored, ok}} for every sent field, meta keys flattened as meta.<key>."""
    report = {}
    for name, value in sent.items():
        if name == "meta":
            stored_meta = stored.get("meta") or {}
            for key, mval in value.items():
                got = stored_meta.get(key)
                report[f"meta.{key}"] = {"sent": mval, "stored": got, "ok": _same(mval, got)}
            continue
        got = _raw(stored.get(name))
        report[name] = {"sent": value, "stored": got, "ok": _same(value, got)}
    return report


class WordPressClient:
    """One site. Thread-safe enough for a Flask worker: requests.Session pools connections."""

    def __init__(self, url: str, user: str, app_password: str, *, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0, session: requests.Session | None = None):
        self.url = url.rstrip("/")
        self.timeout = (connect_timeout, read_timeout)
        self.session = session or requests.Session()
        self.session.auth = (user, app_password)
        # No transport-level retries: a retried POST is exactly the duplicate we prevent.
        self.session.mount("http://", HTTPAdapter(max_retries=0, pool_maxsize=16))
        self.session.mount("https://", HTTPAdapter(max_retries=0, pool_maxsize=16))
        self.session.headers["User-Agent"] = "durable-ledger-proxy"

    def __repr__(self):  # never show credentials
        return f"WordPressClient({self.url!r})"

    # ------------------------------------------------------------------ urls

    def rest(self, route: str, **params) -> str:
        """Plain permalinks work everywhere: /?rest_route=/wp/v2/posts&context=edit."""
        query = {"rest_route": route, **{k: v for k, v in params.items() if v is not None}}
        return f"{self.url}/?{urlencode(query, doseq=True, safe='/:')}"

    @staticmethod
    def _durable_headers(operation_key, job_id, fencing_token) -> dict:
        h = {}
        if operation_key:
            h["Idempotency-Key"] = operation_key
        if job_id:
            h["X-Durable-Job-Id"] = job_id
        if fencing_token is not None:
            h["X-Durable-Fencing-Token"] = str(int(fencing_token))
        return h

    # ------------------------------------------------------------------ writes

    def _send(self, method: str, url: str, **kw) -> WriteResult | requests.Response:
        try:
            return self.session.request(method, url, timeout=self.timeout, **kw)
        except requests.exceptions.ConnectTimeout as exc:
            return self._not_sent("connect_timeout", exc)
        except requests.exceptions.ReadTimeout:
            # The request was sent; WordPress may be writing right now.
            return WriteResult("unknown", error={"kind": "timeout", "code": None,
                                                  "message": f"no answer within {self.timeout[1]} s"})
        except requests.exceptions.ConnectionError as exc:
            if _never_connected(exc):
                return self._not_sent("connect_failed", exc)
            return WriteResult("unknown", error={"kind": "connection_reset", "code": None,
                                                  "message": "connection dropped after the request was sent"})
        except requests.exceptions.ChunkedEncodingError:
            return WriteResult("unknown", error={"kind": "connection_reset", "code": None,
                                                  "message": "the answer was cut off"})
        except requests.RequestException as exc:
            # Anything else: we cannot prove the request did not reach WordPress.
            return WriteResult("unknown", error={"kind": "transport", "code": None, "message": type(exc).__name__})

    @staticmethod
    def _not_sent(kind, exc) -> WriteResult:
        return WriteResult("failed", retryable=True,
                           error={"kind": kind, "code": None, "message": type(exc).__name__})

    def _classify(self, resp: requests.Response) -> WriteResult:
        status = resp.status_code
        try:
            body = resp.json()
        except ValueError:
            body = None
        replayed = resp.headers.get("Idempotent-Replayed") == "true"
        if 200 <= status < 300 and isinstance(body, dict) and body.get("id"):
            return WriteResult("confirmed", status, int(body["id"]), body, replayed)
        code = body.get("code") if isinstance(body, dict) else None
        err = {"kind": "http", "code": code,
               "message": (body.get("message") if isinstance(body, dict) else None) or resp.reason}
        if isinstance(body, dict) and isinstance(body.get("data"), dict) and body["data"].get("details"):
            err["details"] = body["data"]["details"]
        if status in (400, 422) or (status == 409 and code in _NOTHING_WRITTEN_409):
            retryable = status == 400 and code != "durable_bad_header"
            return WriteResult("failed", status, body=None, retryable=retryable, error=err)
        if status in (401, 403):
            return WriteResult("failed", status, retryable=False, error={**err, "kind": "auth"})
        if status == 404 or status == 405 or status == 413:
            return WriteResult("failed", status, retryable=False, error=err)
        # 409 durable_in_progress, 5xx, 2xx without an id, anything else: cannot prove either way.
        return WriteResult("unknown", status, error=err)

    def _write(self, method, url, *, readback_route, sent_fields, **kw) -> WriteResult:
        resp = self._send(method, url, **kw)
        if isinstance(resp, WriteResult):
            return resp
        result = self._classify(resp)
        if result.outcome == "confirmed":
            stored = self.get(readback_route.format(id=result.remote_id))
            if stored is not None:
                result.body = stored
            result.verification = verify_fields(sent_fields, result.body or {})
        return result

    def create_post(self, fields: dict, *, operation_key=None, job_id=None, fencing_token=None) -> WriteResult:
        body = {**fields, "status": "draft"}  # publishing is a separate, approval-gated action
        return self._write("POST", self.rest("/wp/v2/posts"), json=body,
                           headers=self._durable_headers(operation_key, job_id, fencing_token),
                           readback_route="/wp/v2/posts/{id}", sent_fields=body)

    def update_post(self, post_id: int, fields: dict, *, job_id=None, fencing_token=None) -> WriteResult:
        return self._write("POST", self.rest(f"/wp/v2/posts/{int(post_id)}"), json=fields,
                           headers=self._durable_headers(None, job_id, fencing_token),
                           readback_route="/wp/v2/posts/{id}", sent_fields=fields)

    def upload_media(self, content: bytes, filename: str, mime_type: str, fields: dict | None = None, *,
                     operation_key=None, job_id=None, fencing_token=None) -> WriteResult:
        fields = {k: v for k, v in (fields or {}).items() if v is not None}
        result = self._write("POST", self.rest("/wp/v2/media"), data=fields,
                             files={"file": (filename, content, mime_type)},
                             headers=self._durable_headers(operation_key, job_id, fencing_token),
                             readback_route="/wp/v2/media/{id}", sent_fields=fields)
        if result.outcome == "confirmed":
            sent = hashlib.sha256(content).hexdigest()
            stored = self._stored_file_sha256(result.body or {})
            result.verification["file_sha256"] = {"sent": sent, "stored": stored, "ok": sent == stored}
        return result

    def _stored_file_sha256(self, media: dict) -> str | None:
        """Digest of the original upload (WordPress serves a '-scaled' copy for huge images)."""
        url = media.get("source_url")
        original = (media.get("media_details") or {}).get("original_image")
        if url and original:
            url = url.rsplit("/", 1)[0] + "/" + original
        if not url:
            return None
        try:
            # Not through self.session: uploads may live on a CDN that must never see our auth.
            resp = requests.get(url, timeout=self.timeout)
        except requests.RequestException:
            return None
        return hashlib.sha256(resp.content).hexdigest() if resp.status_code == 200 else None

    # ------------------------------------------------------------------ reads

    def get(self, route: str, **params):
        """GET a REST route in context=edit; None when it is missing (404) or unreachable."""
        try:
            resp = self.session.get(self.rest(route, context="edit", **params), timeout=self.timeout)
        except requests.RequestException:
            return None
        if resp.status_code != 200:
            return None
        return resp.json()

    def _get_json(self, route: str, **params):
        """(status, json) without swallowing errors: lookups must tell 404 from 'unreachable'."""
        resp = self.session.get(self.rest(route, **params), timeout=self.timeout)
        try:
            body = resp.json()
        except ValueError:
            body = None
        return resp.status_code, body

    def read_post(self, post_id: int):
        """(status, json) of a post in context=edit; raises on transport errors."""
        return self._get_json(f"/wp/v2/posts/{int(post_id)}", context="edit")

    def read_media(self, media_id: int):
        """(status, json) of an attachment in context=edit; raises on transport errors."""
        return self._get_json(f"/wp/v2/media/{int(media_id)}", context="edit")

    def plugin_status(self) -> dict | None:
        """The durable-ops status document, or None when the plugin is not installed."""
        status, body = self._get_json("/durable/v1/status")
        if status == 200 and isinstance(body, dict) and body.get("plugin") == "durable-ops":
            return body
        if status in (401, 403):
            raise PermissionError(f"WordPress refused the proxy's credentials ({status})")
        return None

    def lookup_operation(self, key: str) -> dict:
        status, body = self._get_json("/durable/v1/operations/" + key)  # urlencode() in rest() escapes it once
        if status != 200:
            raise LookupError(f"lookup by key answered {status}")
        return body

    def lookup_job(self, job_id: str) -> dict:
        status, body = self._get_json("/durable/v1/jobs/" + job_id)
        if status != 200:
            raise LookupError(f"lookup by job answered {status}")
        return body

    def find_by_title(self, title: str) -> list[dict]:
        """Degraded mode (no plugin): drafts and media whose title equals `title` exactly."""
        found = []
        for route, kind, statuses in (("/wp/v2/posts", "post", "draft,pending,private,publish,future"),
                                      ("/wp/v2/media", "attachment", None)):
            status, body = self._get_json(route, search=title, status=statuses, context="edit", per_page=100)
            if status != 200:
                raise LookupError(f"title search on {route} answered {status}")
            for obj in body:
                if (_raw(obj.get("title")) or "").strip() == title.strip():
                    found.append({"id": obj["id"], "object_type": kind, "status": obj.get("status"),
                                  "title": _raw(obj.get("title")), "match": "title"})
        return found


def _never_connected(exc: requests.exceptions.ConnectionError) -> bool:
    """True only when the TCP connection was never opened (so no byte of the request left).

    requests wraps urllib3's MaxRetryError whose `reason` is NewConnectionError for refused or
    unresolvable hosts; a reset after sending surfaces as ProtocolError instead.
    """
    cur = exc
    for _ in range(8):
        if isinstance(cur, (NewConnectionError, ConnectionRefusedError)):
            return True
        first_arg = cur.args[0] if cur.args and isinstance(cur.args[0], BaseException) else None
        nxt = getattr(cur, "reason", None) or first_arg or cur.__cause__
        if not isinstance(nxt, BaseException) or nxt is cur:
            return False
        cur = nxt
    return False
