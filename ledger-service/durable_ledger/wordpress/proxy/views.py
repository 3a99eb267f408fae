"""Publishing proxy routes. Thin: parse, check the token's site rights, call the client, shape."""
from __future__ import annotations

import hashlib
import logging

import requests
from flask import Blueprint, current_app, g, jsonify, request
from marshmallow import ValidationError

from ... import __version__
from ...auth import bearer_from_header
from ...gate.dispatch_auth import remote_job_id, remote_key
from ...kernel.errors import (
    ContentChanged,
    Forbidden,
    MalformedJson,
    PostNotFound,
    SiteNotAllowed,
    SiteNotFound,
    ValidationFailed,
    WordPressUnavailable,
)
from ...kernel.secrets import REDACTED
from ..client import seo_meta
from .media import media_bytes
from .packs import count_packs, with_resource_pack
from .schemas import DraftSchema, MediaSchema, PostUpdateSchema, PublishSchema, SeoUpdateSchema

log = logging.getLogger("durable_ledger.proxy")
bp = Blueprint("proxy", __name__)

POST_FIELDS = ("id", "status", "link", "title", "excerpt", "featured_media", "categories", "tags", "meta", "date_gmt")
READ_FIELDS = POST_FIELDS + ("content", "modified_gmt")
MEDIA_FIELDS = ("id", "status", "source_url", "title", "alt_text", "caption", "mime_type", "post")
# Filled in from the ledger's record, never from the caller: see gate/dispatch_auth.py.
IDENTITY = ("operation_key", "job_id", "fencing_token")


def _registry():
    return current_app.config["PROXY_SITES"]


def _site(name: str, *roles: str):
    """Authenticate, authorise the site, return its client. 403 before 404: no site enumeration."""
    raw = bearer_from_header(request.headers.get("Authorization"))
    principal = current_app.config["PROXY_AUTHENTICATE"](raw)
    principal.require(*roles)
    if not principal.may_use_site(name):
        raise SiteNotAllowed(f"this token may not use the WordPress site '{name}'", {"site": name})
    if name not in _registry().sites:
        raise SiteNotFound(f"no WordPress site profile '{name}'", {"site": name})
    g.principal = principal
    return _registry().client(name)


def _load(schema, data):
    try:
        return schema.load(data)
    except ValidationError as exc:
        raise ValidationFailed("invalid request body", exc.messages) from exc


def _json_body():
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise MalformedJson("the request body must be a JSON object")
    return body


def _write_of(raw: dict, **extra) -> dict:
    """The write as the ledger digests it: the body as sent, without the identity fields."""
    return {**{k: v for k, v in raw.items() if k not in IDENTITY}, **extra}


def _authorize(site: str, data: dict, write: dict, publish: bool = False):
    """Ask the ledger whether it dispatched exactly this write; refusals never reach WordPress."""
    try:
        return current_app.config["PROXY_AUTHORIZE"](
            g.principal.tenant, data["operation_key"], f"wordpress:{site}", write,
            job_id=data.get("job_id"), fencing_token=data.get("fencing_token"), publish=publish)
    except Exception as exc:
        log.warning("write refused site=%s key=%s tenant=%s actor=%s: %s", site, data.get("operation_key"),
                    g.principal.tenant, g.principal.actor, getattr(exc, "code", type(exc).__name__))
        raise


def _plugin(name: str, writing: bool = False) -> bool | None:
    try:
        return _registry().has_plugin(name)
    except requests.RequestException as exc:
        raise WordPressUnavailable(f"WordPress site '{name}' is unreachable", {"site": name}) from exc
    except PermissionError as exc:
        if writing:
            # Revoked credentials: send the write anyway, so WordPress's own 401/403 becomes the
            # answer (outcome failed, kind auth: the caller halts). A 502 here would read as
            # "unknown" and send the job into reconciliation instead of stopping it.
            return None
        raise WordPressUnavailable(str(exc), {"site": name}) from exc


def _edit_url(site: str, obj_id) -> str | None:
    """Where an editor opens the object in wp-admin (posts and attachments share post.php)."""
    if not obj_id:
        return None
    return f"{_registry().sites[site].url}/wp-admin/post.php?post={int(obj_id)}&action=edit"


def _with_edit_urls(site: str, objects) -> list:
    return [{**o, "edit_url": _edit_url(site, o.get("id"))} for o in objects or []]


def _strict_status(result) -> int:
    """`?strict=1`: the HTTP status follows `outcome` (the body is the same).

    For callers that branch on the status, like n8n's HTTP Request error output, whose error
    classification then matches the ledger's: 4xx that proves nothing was written -> fail,
    401/403 -> halt, 502/504 (written or not, unprovable) -> unknown, reconciled on the next run.
    A connection that never opened is 503: also reconciled first (the lookup proves absence).
    """
    if result.outcome == "confirmed":
        return 200
    if result.outcome == "failed":
        status = result.http_status
        return status if status and 400 <= status < 500 else 503
    return 504 if (result.error or {}).get("kind") == "timeout" else 502


def _answer(site, kind, key, result, plugin, fields):
    obj = result.body or {}
    body = {
        "site": site, "operation_key": key, "outcome": result.outcome, "http_status": result.http_status,
        "remote_id": result.remote_id, "replayed": result.replayed, "retryable": result.retryable,
        "error": result.error, kind: {k: obj.get(k) for k in fields if k in obj} if result.remote_id else None,
        "verification": result.verification, "verified": result.verified if result.verification else None,
        "plugin": plugin, "idempotent": plugin,
    }
    log.info("write site=%s kind=%s key=%s outcome=%s http=%s id=%s replayed=%s verified=%s",
             site, kind, key, result.outcome, result.http_status, result.remote_id, result.replayed,
             body["verified"])
    strict = request.args.get("strict", "").lower() in ("1", "true", "yes")
    return jsonify(body), _strict_status(result) if strict else 200


@bp.get("/health")
def health():
    return jsonify({"status": "ok", "service": "publishing-proxy", "version": __version__,
                    "sites": _registry().names()})


@bp.post("/v1/sites/<site>/drafts")
def create_draft(site):
    client = _site(site, "runner")
    raw = _json_body()
    data = _load(DraftSchema(), raw)
    grant = _authorize(site, data, _write_of(raw))
    fields = {k: data[k] for k in ("title", "content", "excerpt", "featured_media", "categories", "tags")
              if data.get(k) is not None}
    meta = seo_meta(data.get("seo"), data["seo_plugins"])
    if meta:
        fields["meta"] = meta
    plugin = _plugin(site, writing=True)
    result = client.create_post(fields, operation_key=grant.remote_key, job_id=grant.remote_job_id,
                                fencing_token=grant.fencing_token)
    return _answer(site, "post", data["operation_key"], result, plugin, POST_FIELDS)


@bp.post("/v1/sites/<site>/media")
def upload_media(site):
    client = _site(site, "runner")
    upload = request.files.get("file")
    raw = request.form.to_dict() if upload is not None or request.form else _json_body()
    data = _load(MediaSchema(), raw)
    write = _write_of(raw)
    if "content_base64" in write:  # bound by its digest: the ledger never needs to see the bytes
        write["content_base64_sha256"] = hashlib.sha256(str(write.pop("content_base64")).encode()).hexdigest()
    if upload is not None:
        write["file_sha256"] = hashlib.sha256(upload.read()).hexdigest()
        upload.stream.seek(0)
    grant = _authorize(site, data, write)  # before any URL is fetched: a refused caller fetches nothing
    cfg = current_app.config
    content, filename, mime = media_bytes(data, upload, cfg["PROXY_MAX_MEDIA_BYTES"], client.timeout,
                                          media_hosts=_registry().sites[site].media_hosts)
    plugin = _plugin(site, writing=True)
    extra = {k: data[k] for k in ("alt_text", "title", "caption", "description") if data.get(k) is not None}
    result = client.upload_media(content, filename, mime, extra, operation_key=grant.remote_key,
                                 job_id=grant.remote_job_id, fencing_token=grant.fencing_token)
    return _answer(site, "media", data["operation_key"], result, plugin, MEDIA_FIELDS)


@bp.post("/v1/sites/<site>/posts/<int:post_id>/seo")
def update_seo(site, post_id):
    client = _site(site, "runner")
    raw = _json_body()
    data = _load(SeoUpdateSchema(), raw)
    grant = _authorize(site, data, _write_of(raw, post_id=post_id))
    plugin = _plugin(site, writing=True)
    result = client.update_post(post_id, {"meta": seo_meta(data["seo"], data["seo_plugins"])},
                                job_id=grant.remote_job_id, fencing_token=grant.fencing_token)
    return _answer(site, "post", data.get("operation_key"), result, plugin, POST_FIELDS)


@bp.post("/v1/sites/<site>/posts/<int:post_id>")
def update_post(site, post_id):
    """Fenced update that sets values. A resource pack is bound to the post id and operation key:
    content = the given body (any earlier pack stripped) + exactly one pack block, so a repeat
    rewrites the same content instead of appending a second pack."""
    client = _site(site, "runner")
    raw = _json_body()
    data = _load(PostUpdateSchema(), raw)
    grant = _authorize(site, data, _write_of(raw, post_id=post_id))
    fields = {k: data[k] for k in ("title", "content", "excerpt", "featured_media") if data.get(k) is not None}
    if data.get("resource_pack"):
        fields["content"] = with_resource_pack(fields["content"], data["resource_pack"]["html"], post_id,
                                               data["operation_key"])
    plugin = _plugin(site, writing=True)
    result = client.update_post(post_id, fields, job_id=grant.remote_job_id, fencing_token=grant.fencing_token)
    if data.get("resource_pack") and result.outcome == "confirmed":
        stored = (result.body or {}).get("content")
        found = count_packs(stored.get("raw", "") if isinstance(stored, dict) else stored or "", post_id,
                            data["operation_key"])
        result.verification["resource_pack"] = {"sent": 1, "stored": found, "ok": found == 1}
    return _answer(site, "post", data.get("operation_key"), result, plugin, READ_FIELDS)


@bp.post("/v1/sites/<site>/posts/<int:post_id>/publish")
def publish_post(site, post_id):
    """Publish exactly what was approved. The ledger moved the publish operation to SENT only after
    an approval matched its digest; the digest covers the post id and the content digest (and the
    title / featured image when sent), so this post, on this site, with this content. The stored
    post is read back first: content edited after the approval is refused, not published."""
    client = _site(site, "runner")
    raw = _json_body()
    data = _load(PublishSchema(), raw)
    grant = _authorize(site, data, _write_of(raw, post_id=post_id), publish=True)
    _check_unchanged(client, site, post_id, data)
    plugin = _plugin(site, writing=True)
    result = client.update_post(post_id, {"status": "publish"}, job_id=grant.remote_job_id,
                                fencing_token=grant.fencing_token)
    return _answer(site, "post", data["operation_key"], result, plugin, POST_FIELDS)


def _check_unchanged(client, site: str, post_id: int, data: dict) -> None:
    try:
        status, body = client.read_post(post_id)
    except requests.RequestException as exc:
        raise WordPressUnavailable(f"WordPress site '{site}' is unreachable", {"site": site}) from exc
    if status == 404:
        raise PostNotFound(f"no post {post_id} on '{site}'", {"site": site, "post_id": post_id})
    if status != 200 or not isinstance(body, dict):
        raise WordPressUnavailable(f"reading post {post_id} on '{site}' answered {status}", {"site": site})
    stored = {k: (v.get("raw") if isinstance(v, dict) and "raw" in v else v) for k, v in body.items()}
    differs = []
    if hashlib.sha256((stored.get("content") or "").encode("utf-8")).hexdigest() != data["content_sha256"]:
        differs.append("content")
    if data.get("title") is not None and stored.get("title") != data["title"]:
        differs.append("title")
    if data.get("featured_media") is not None and stored.get("featured_media") != data["featured_media"]:
        differs.append("featured_media")
    if differs:
        raise ContentChanged("the post changed after it was approved; nothing was published: approve it again",
                             {"site": site, "post_id": post_id, "changed": differs})


@bp.get("/v1/sites/<site>/posts/<int:post_id>")
def read_post(site, post_id):
    """Read-back for verification steps: the stored post in edit context (raw title, excerpt,
    content, meta), straight from WordPress."""
    client = _site(site, "runner", "editor")
    try:
        status, body = client.read_post(post_id)
    except requests.RequestException as exc:
        raise WordPressUnavailable(f"WordPress site '{site}' is unreachable", {"site": site}) from exc
    if status == 404:
        raise PostNotFound(f"no post {post_id} on '{site}'", {"site": site, "post_id": post_id})
    if status != 200 or not isinstance(body, dict):
        raise WordPressUnavailable(f"reading post {post_id} on '{site}' answered {status}", {"site": site})
    post = {k: (v.get("raw") if isinstance(v, dict) and "raw" in v else v) for k, v in body.items() if k in READ_FIELDS}
    return jsonify({"site": site, "post": post, "edit_url": _edit_url(site, post_id)})


@bp.get("/v1/sites/<site>/media/<int:media_id>")
def read_media(site, media_id):
    """Read-only: one attachment (its file URL, alt text, title), e.g. a draft's featured image
    for the approvals preview."""
    client = _site(site, "runner", "editor")
    try:
        status, body = client.read_media(media_id)
    except requests.RequestException as exc:
        raise WordPressUnavailable(f"WordPress site '{site}' is unreachable", {"site": site}) from exc
    if status == 404 or (status == 200 and not isinstance(body, dict)):
        raise PostNotFound(f"no media {media_id} on '{site}'", {"site": site, "media_id": media_id})
    if status != 200:
        raise WordPressUnavailable(f"reading media {media_id} on '{site}' answered {status}", {"site": site})
    media = {k: (v.get("raw") if isinstance(v, dict) and "raw" in v else v) for k, v in body.items() if k in MEDIA_FIELDS}
    return jsonify({"site": site, "media": media, "edit_url": _edit_url(site, media_id)})


def _lookup_tenant() -> str:
    """Lookups see the caller's tenant only; an admin token (the ledger's reconciler serving
    several tenants) may name the tenant with `?tenant=`."""
    wanted = request.args.get("tenant")
    if not wanted or wanted == g.principal.tenant:
        return g.principal.tenant
    if g.principal.role != "admin":
        raise Forbidden("only an admin token may look up another tenant's objects", {"tenant": wanted})
    return wanted


def _searchable_title():
    """The `title` to search by, or None: a title the ledger's secret filter redacted is not the
    title that was sent, and searching for it proves nothing (issue 35)."""
    title = request.args.get("title")
    return title if title and REDACTED not in title else None


def _by_plugin(site, client, key):
    """The plugin's answer for ``key``, relayed only when it is about ``key``: an answer for
    another key (a plugin bug, a proxy in front that rewrote the path) never reads as found."""
    asked = remote_key(_lookup_tenant(), key)
    found = client.lookup_operation(asked)
    if not isinstance(found, dict):
        raise LookupError("the plugin's lookup answer is not a JSON object")
    if found.get("key") != asked:
        return {"site": site, "plugin": True, "found": None, "operation_key": key, "match": None,
                "answered_key": found.get("key"),
                "message": "the durable-ops plugin answered for another key: not evidence about this one"}
    hit = found.get("found") is True and bool(found.get("id"))
    return {**found, "site": site, "plugin": True, "operation_key": key, "match": "operation_key" if hit else None,
            "edit_url": _edit_url(site, found.get("id")) if hit else None}


@bp.get("/v1/sites/<site>/operations/<path:key>")
def lookup_operation(site, key):
    """Reconciler's question: did this operation's write land? Degraded mode never claims a key match."""
    client = _site(site, "runner", "editor")
    title = _searchable_title()
    try:
        if _plugin(site):
            return jsonify(_by_plugin(site, client, key))
        candidates = _with_edit_urls(site, client.find_by_title(title)) if title else []
    except (requests.RequestException, LookupError) as exc:
        raise WordPressUnavailable(f"lookup on '{site}' failed: {exc}", {"site": site}) from exc
    searched = "results matched by title only, never by key" if title else (
        "the title was redacted, so nothing was searched" if request.args.get("title") else "no title to search")
    return jsonify({"site": site, "plugin": False, "key": key, "operation_key": key, "found": None,
                    "match": "title" if title else None, "candidates": candidates,
                    "message": f"durable-ops plugin missing: {searched}"})


@bp.get("/v1/sites/<site>/jobs/<path:job_id>")
def lookup_job(site, job_id):
    client = _site(site, "runner", "editor")
    try:
        if _plugin(site):
            job = client.lookup_job(remote_job_id(_lookup_tenant(), job_id))
            return jsonify({**job, "objects": _with_edit_urls(site, job.get("objects")), "site": site, "plugin": True})
        title = _searchable_title()
        candidates = _with_edit_urls(site, client.find_by_title(title)) if title else []
    except (requests.RequestException, LookupError) as exc:
        raise WordPressUnavailable(f"lookup on '{site}' failed: {exc}", {"site": site}) from exc
    return jsonify({"site": site, "plugin": False, "job_id": job_id, "objects": [], "candidates": candidates,
                    "match": "title" if title else None,
                    "message": "durable-ops plugin missing: results matched by title only, never by job"})
