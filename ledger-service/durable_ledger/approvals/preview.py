"""What an approval covers, read back from WordPress through the publishing proxy.

The ledger stores only an operation's request digest and a redacted summary. For the article
pipeline's publish the payload is ``{post_id, content_sha256, title, featured_media}`` (the
publish write, docs/proxy.md), so the post as it stands in WordPress is the evidence: the page
recomputes the digest from the read-back (the payload's keys, with ``content_sha256`` =
sha256 of the stored raw content) and says whether it still equals the operation's digest.
If it does not, the content changed after the step asked for approval: approving is refused.

Bodies are WordPress HTML written by a model or an editor: they are sanitised here (nh3) and
shown only inside ``<iframe sandbox srcdoc>`` under a CSP without scripts (console.py).
"""

import hashlib
from urllib.parse import quote

import nh3
import requests
from markupsafe import escape

from ..kernel.digest import request_digest
from ..kernel.errors import ContentChanged
from ..reconciliation.wordpress import site_of

SEO_FIELDS = (("SEO title", ("rank_math_title", "_yoast_wpseo_title")),
              ("SEO description", ("rank_math_description", "_yoast_wpseo_metadesc")),
              ("Focus keyword", ("rank_math_focus_keyword", "_yoast_wpseo_focuskw")))
ALLOWED_TAGS = {"p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "strong", "em", "b", "i", "u",
                "blockquote", "a", "img", "figure", "figcaption", "table", "thead", "tbody", "tr", "th", "td",
                "code", "pre", "hr", "span", "div", "sup", "sub", "small", "dl", "dt", "dd"}
ALLOWED_ATTRS = {"a": {"href", "title"}, "img": {"src", "alt", "width", "height"}, "*": {"class"}}


def is_publish_preview(op):
    s = op.request_summary or {}
    return isinstance(s, dict) and isinstance(s.get("post_id"), int) and "content_sha256" in s \
        and (op.target or "").startswith("wordpress:")


def sanitize(html):
    return nh3.clean(html or "", tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRS, url_schemes={"http", "https"},
                     link_rel="noopener noreferrer")


def frame_document(body_html, title):
    """The srcdoc of the sandboxed frame: sanitised body, a CSP of its own, no script anywhere."""
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src http: https: data:; "
            "style-src 'unsafe-inline'\">"
            "<style>body{font:16px/1.6 Georgia,serif;margin:1rem 1.2rem;color:#1d2327}img{max-width:100%;height:auto}"
            "h1{font:600 1.5rem system-ui,sans-serif}</style></head><body>"
            f"<h1>{escape(title or '')}</h1>{sanitize(body_html)}</body></html>")


class _Proxy:
    def __init__(self, cfg, timeout=(3.0, 15.0)):
        self.url, self.token, self.timeout = cfg.proxy_url.rstrip("/"), cfg.proxy_token, timeout

    def get(self, path):
        r = requests.get(self.url + path, headers={"Authorization": f"Bearer {self.token}"}, timeout=self.timeout)
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        return r.status_code, body


def readback_digest(summary, post):
    """The digest the publish payload would have with the post as stored now, or None when the
    summary lacks a value it cannot be rebuilt from (a truncated or non-scalar field)."""
    payload = {}
    for k, v in summary.items():
        if k == "post_id":
            payload[k] = post.get("id")
        elif k == "content_sha256":
            payload[k] = hashlib.sha256((post.get("content") or "").encode("utf-8")).hexdigest()
        elif k in ("title", "featured_media"):
            payload[k] = post.get(k)
        elif isinstance(v, (int, float, bool)) or v is None or (isinstance(v, str) and not v.endswith("...")):
            payload[k] = v
        else:
            return None
    return request_digest(payload)


def publish_preview(op, cfg):
    """The draft behind a publish operation, as WordPress holds it now. Never raises: a preview
    that cannot be read says why (``problem``) and the page does not offer Approve."""
    summary = op.request_summary or {}
    site = site_of(op.target, cfg.proxy_default_site)
    out = {"site": site, "post_id": summary.get("post_id"), "problem": None, "matches": None}
    if not cfg.proxy_url:
        out["problem"] = "the ledger has no DURABLE_PROXY_URL: it cannot read the draft back"
        return out
    proxy = _Proxy(cfg)
    try:
        status, body = proxy.get(f"/v1/sites/{quote(site, safe='')}/posts/{int(summary['post_id'])}")
    except requests.RequestException as exc:
        out["problem"] = f"the publishing proxy is unreachable ({type(exc).__name__})"
        return out
    if status != 200 or not isinstance(body.get("post"), dict):
        code = (body.get("error") or {}).get("code") if isinstance(body, dict) else None
        out["problem"] = f"reading post {summary.get('post_id')} on '{site}' answered {status} {code or ''}".strip()
        return out
    post = body["post"]
    meta = post.get("meta") if isinstance(post.get("meta"), dict) else {}
    seo = []
    for label, keys in SEO_FIELDS:
        value = next((meta.get(k) for k in keys if meta.get(k)), None)
        seo.append({"label": label, "value": value, "source": next((k for k in keys if meta.get(k)), None)})
    digest = readback_digest(summary, post)
    stored_sha = hashlib.sha256((post.get("content") or "").encode("utf-8")).hexdigest()
    changed = [name for name, same in (
        ("content", summary.get("content_sha256") in (None, stored_sha)),
        ("title", "title" not in summary or summary.get("title") == post.get("title")),
        ("featured image", "featured_media" not in summary or summary.get("featured_media") == post.get("featured_media")),
    ) if not same]
    out.update(title=post.get("title"), excerpt=post.get("excerpt"), status=post.get("status"),
               link=post.get("link"), edit_url=body.get("edit_url"), modified=post.get("modified_gmt"),
               seo=seo, featured_media=post.get("featured_media"), image=None, changed=changed,
               readback_digest=digest, matches=(digest == op.request_hash) if digest else None,
               frame=frame_document(post.get("content"), post.get("title")))
    if digest is None:
        out["problem"] = "the request summary does not hold every field of the payload; the read-back cannot be compared"
    media_id = post.get("featured_media")
    if isinstance(media_id, int) and media_id > 0:
        try:
            status, mbody = proxy.get(f"/v1/sites/{quote(site, safe='')}/media/{media_id}")
            if status == 200 and isinstance(mbody.get("media"), dict):
                m = mbody["media"]
                src = m.get("source_url")
                out["image"] = {"id": media_id, "alt": m.get("alt_text") or "", "title": m.get("title"),
                                "src": src if isinstance(src, str) and src.startswith(("http://", "https://")) else None}
        except requests.RequestException:
            pass
    return out


def check_unchanged(cfg):
    """The ``check_content`` for approvals.decisions.approve: refuse when the read-back moved."""
    def check(op):
        if not is_publish_preview(op):
            return
        p = publish_preview(op, cfg)
        if p["matches"] is not True:
            raise ContentChanged(
                "the draft in WordPress is not what this step asked to publish"
                + (f" ({p['problem']})" if p["problem"] else "; it was edited after the preview was shown")
                + ": nothing was approved", {"operation_key": op.operation_key, "site": p["site"],
                                             "post_id": p["post_id"], "readback_digest": p.get("readback_digest")})
    return check
