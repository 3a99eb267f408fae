"""WordPress reconciler: asks the publishing proxy by operation key.

With the durable-ops mu-plugin, "no object claimed this key" is definitive: the plugin claims
the key before writing, so a late-arriving original request carries the same Idempotency-Key
and is deduplicated by WordPress itself when we dispatch again under that key:

    original:  POST (key K) ........................ arrives late -> claim exists -> replay
    ledger:              lookup K -> absent -> dispatch (key K) -> claims K, creates post

Without the plugin (hosted WordPress), absence proves nothing and a same-titled post proves
nothing either: both go to an editor, never to an automatic retry or confirm.
"""

from urllib.parse import quote

import requests

from .verdicts import Absent, Found, ReconcilerError, Undecidable


def site_of(target, default_site):
    parts = (target or "").split(":")
    if len(parts) >= 2 and parts[0] == "wordpress" and parts[1]:
        return parts[1]
    return default_site


class WordPressReconciler:
    def __init__(self, proxy_url, proxy_token, default_site="default", timeout=(3.0, 15.0), session=None):
        self.proxy_url = proxy_url.rstrip("/")
        self.proxy_token = proxy_token
        self.default_site = default_site
        self.timeout = timeout
        self.session = session or requests.Session()

    def _get(self, path, **params):
        try:
            r = self.session.get(self.proxy_url + path, params=params or None, timeout=self.timeout,
                                 headers={"Authorization": f"Bearer {self.proxy_token}"})
        except requests.RequestException as exc:
            raise ReconcilerError(f"publishing proxy unreachable: {type(exc).__name__}") from exc
        if r.status_code != 200:
            code = (r.json().get("error") or {}).get("code") if r.headers.get("content-type", "").startswith(
                "application/json") else None
            raise ReconcilerError(f"publishing proxy answered {r.status_code} {code or ''}".strip())
        return r.json()

    def lookup(self, op):
        site = site_of(op.target, self.default_site)
        title = (op.request_summary or {}).get("title")
        # The proxy qualifies keys by tenant; a reconciler token of another tenant must be admin.
        params = {"title": title, "tenant": op.tenant} if isinstance(title, str) and title else {"tenant": op.tenant}
        body = self._get(f"/v1/sites/{quote(site, safe='')}/operations/{quote(op.operation_key, safe='')}", **params)
        evidence = {"site": site, "plugin": body.get("plugin"), "lookup": "operation_key"}
        if body.get("plugin"):
            if body.get("found") and body.get("id"):
                return Found(str(body["id"]), {"object_type": body.get("object_type"), "status": body.get("status"),
                                               "site": site, "edit_url": body.get("edit_url"), "reconciled": True},
                             evidence)
            if body.get("state") == "in_progress":
                raise ReconcilerError("WordPress still holds the key's claim in progress; ask again shortly")
            return Absent(True, {**evidence, "detail": "no WordPress object claimed this operation key"})
        candidates = [{**c, "site": site} for c in body.get("candidates") or []]
        evidence.update(lookup="title", title=title,
                        detail="durable-ops plugin missing: absence is not proof and titles are not keys")
        if candidates:
            return Undecidable(evidence, candidates)
        return Absent(False, evidence)

    def verify(self, op, remote_id):
        """For an editor's confirm: does the object exist on the site? (By job, so drafts count.)

        Without the plugin nothing is bound to the job: the proxy answers the objects titled like
        the request instead (the same candidates the editor was shown), and the id must be one of them.
        """
        site = site_of(op.target, self.default_site)
        title = (op.request_summary or {}).get("title")
        params = {"title": title, "tenant": op.tenant} if isinstance(title, str) and title else {"tenant": op.tenant}
        body = self._get(f"/v1/sites/{quote(site, safe='')}/jobs/{quote(op.job.job_id, safe='')}", **params)
        objects = (body.get("objects") or body.get("items") or []) + (body.get("candidates") or [])
        return any(str(o.get("id")) == str(remote_id) for o in objects)


class IdempotentUpdateReconciler:
    """For writes that set a value (SEO meta): repeating the same write is harmless, so a
    lost outcome is settled by writing again. Never used for creates."""

    def lookup(self, op):
        return Absent(True, {"detail": f"{op.action} sets values idempotently; re-applying it is safe"})

    def verify(self, op, remote_id):
        return True
