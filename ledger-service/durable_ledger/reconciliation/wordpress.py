"""WordPress reconciler: asks the publishing proxy by operation key.

With the durable-ops mu-plugin, "no object claimed this key" is definitive: the plugin claims
the key before writing, so a late-arriving original request carries the same Idempotency-Key
and is deduplicated by WordPress itself when we dispatch again under that key:

    original:  POST (key K) ........................ arrives late -> claim exists -> replay
    ledger:              lookup K -> absent -> dispatch (key K) -> claims K, creates post

Without the plugin (hosted WordPress), absence proves nothing and a same-titled post proves
nothing either: both go to an editor, never to an automatic retry or confirm.
"""

import json
from urllib.parse import quote

import requests

from ..kernel.secrets import REDACTED
from .verdicts import Absent, Found, ReconcilerError, Undecidable

BODY_KEPT = 500  # characters of an answer that is not the proxy's kept as evidence


def site_of(target, default_site):
    parts = (target or "").split(":")
    if len(parts) >= 2 and parts[0] == "wordpress" and parts[1]:
        return parts[1]
    return default_site


def searchable_title(op):
    """The request's title if a title search can mean anything: a title the secret filter
    redacted in the stored summary is not the title that was sent, so searching it proves nothing."""
    title = (op.request_summary or {}).get("title")
    if not isinstance(title, str) or not title.strip() or REDACTED in title:
        return None
    return title


def _is_id(value):
    return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, str) and value.strip() != ""))


class WordPressReconciler:
    name = "wordpress"
    verifies = True

    def __init__(self, proxy_url, proxy_token, default_site="default", timeout=(3.0, 15.0), session=None):
        self.proxy_url = proxy_url.rstrip("/")
        self.proxy_token = proxy_token
        self.default_site = default_site
        self.timeout = timeout
        self.session = session or requests.Session()

    def _get(self, path, **params):
        """The proxy's JSON object, or (None, what it answered) for a 200 that is not one."""
        try:
            r = self.session.get(self.proxy_url + path, params=params or None, timeout=self.timeout,
                                 headers={"Authorization": f"Bearer {self.proxy_token}"})
        except requests.RequestException as exc:
            raise ReconcilerError(f"publishing proxy unreachable: {type(exc).__name__}") from exc
        try:
            body = json.loads(r.content) if r.content else None
        except ValueError:
            body = None
        if r.status_code != 200:
            code = (body.get("error") or {}).get("code") if isinstance(body, dict) and isinstance(
                body.get("error"), dict) else None
            raise ReconcilerError(f"publishing proxy answered {r.status_code} {code or ''}".strip())
        if not isinstance(body, dict):
            return None, {"status": r.status_code, "content_type": r.headers.get("Content-Type", ""),
                          "body": r.text[:BODY_KEPT]}
        return body, None

    def lookup(self, op):
        site = site_of(op.target, self.default_site)
        title = searchable_title(op)
        # The proxy qualifies keys by tenant; a reconciler token of another tenant must be admin.
        params = {"title": title, "tenant": op.tenant} if title else {"tenant": op.tenant}
        body, other = self._get(f"/v1/sites/{quote(site, safe='')}/operations/{quote(op.operation_key, safe='')}",
                                **params)
        evidence = {"reconciler": self.name, "proxy": self.proxy_url, "site": site, "lookup": "operation_key"}
        if body is None:
            return Undecidable({**evidence, **other, "detail": "the publishing proxy answered 200 with a body that "
                                                               "is not a JSON object: proof of nothing"})
        evidence["plugin"] = body.get("plugin")
        if body.get("plugin") is True:
            return self._by_key(op, body, evidence)
        if body.get("plugin") is False:
            return self._by_title(op, body, evidence, title)
        return Undecidable({**evidence, "answer": _kept(body),
                            "detail": "the proxy did not say whether the durable-ops plugin answered: proof of nothing"})

    def _by_key(self, op, body, evidence):
        """The plugin claims the key before writing: its found / not found is proof, when it says so exactly."""
        named = body.get("operation_key", op.operation_key)
        if named != op.operation_key:
            return Undecidable({**evidence, "answer": _kept(body),
                                "detail": "the proxy answered for another operation key: proof of nothing"})
        if body.get("found") is True and _is_id(body.get("id")):
            return Found(str(body["id"]), {"object_type": body.get("object_type"), "status": body.get("status"),
                                           "site": evidence["site"], "edit_url": body.get("edit_url"),
                                           "reconciled": True}, evidence)
        if body.get("found") is False and body.get("state") == "in_progress":
            raise ReconcilerError("WordPress still holds the key's claim in progress; ask again shortly")
        if body.get("found") is False:
            return Absent(True, {**evidence, "detail": "the durable-ops plugin answered: no WordPress object "
                                                       "claimed this operation key"})
        return Undecidable({**evidence, "answer": _kept(body),
                            "detail": "the durable-ops plugin's answer is neither found with an id nor found: false"})

    def _by_title(self, op, body, evidence, title):
        """No plugin: nothing in WordPress is bound to the key. Titles are not keys, and finding
        no title proves nothing either (the post may have been renamed, or its title redacted here)."""
        candidates = [{**c, "site": evidence["site"]} for c in body.get("candidates") or [] if isinstance(c, dict)]
        evidence.update(lookup="title", title=title)
        raw = (op.request_summary or {}).get("title")
        if title is None:
            why = ("the request's title was redacted by the secret filter, so it was not searched"
                   if isinstance(raw, str) and REDACTED in raw else "the request has no title to search")
        elif candidates:
            why = f"{len(candidates)} object(s) titled like the request; titles are not keys"
        else:
            why = "the title search listed no object with this title; that does not prove nothing was written"
        evidence["detail"] = f"durable-ops plugin missing: {why}"
        return Undecidable(evidence, candidates)

    def verify(self, op, remote_id):
        """For an editor's confirm: does the object exist on the site? (By job, so drafts count.)

        Without the plugin nothing is bound to the job: the proxy answers the objects titled like
        the request instead (the same candidates the editor was shown), and the id must be one of them.
        """
        site = site_of(op.target, self.default_site)
        title = searchable_title(op)
        params = {"title": title, "tenant": op.tenant} if title else {"tenant": op.tenant}
        body, _other = self._get(f"/v1/sites/{quote(site, safe='')}/jobs/{quote(op.job.job_id, safe='')}", **params)
        if body is None:
            return False
        objects = (body.get("objects") or body.get("items") or []) + (body.get("candidates") or [])
        return any(isinstance(o, dict) and str(o.get("id")) == str(remote_id) for o in objects)


def _kept(body):
    return json.dumps(body, default=str, sort_keys=True)[:BODY_KEPT]


class IdempotentUpdateReconciler:
    """For writes that set a value (SEO meta): repeating the same write is harmless, so a
    lost outcome is settled by writing again. Never used for creates."""

    name = "idempotent_update"
    verifies = False

    def lookup(self, op):
        # Nothing is asked: the evidence says so (the console never words this as "absent at the remote").
        return Absent(True, {"reconciler": self.name, "not_asked": True,
                             "detail": f"{op.action} sets values idempotently; re-applying it is safe"})

    def verify(self, op, remote_id):
        return True
