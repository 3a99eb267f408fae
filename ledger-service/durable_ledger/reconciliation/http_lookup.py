"""Generic HTTP reconciler: GET a configured lookup URL with the operation key.

Configured by DURABLE_RECONCILE_HTTP, a JSON object {kind: url_template}, e.g.
{"generic.notify": "http://crm.local/lookup?key={key}"}. The protocol (docs/builders.md):

    200 {"found": true, "operation_key": K, "remote_id": "r-1", "receipt": {...}}   -> found
    200 {"found": false, "operation_key": K, "definitive": true}                     -> absent
    200 {"found": false, "operation_key": K}  (definitive missing or not true)       -> absent, not definitive
    404 with an empty or JSON body                                                   -> absent, not definitive

A verdict is only ever read from an answer that proves it (issue 35): ``found`` must be the JSON
boolean, a found ``remote_id`` a non-empty string or number, and the answer must name this
operation's key (``operation_key``) so that a lookup that ignores its filter, or answers for
another key, never reads as ours. Every other answer the lookup gave (an HTML page, a list, a
wrapped ``{"data": [...]}``, an ``{"error": ...}``, ``"found": "yes"``, a 404 page) is
undecidable: an editor decides, with the answer kept as evidence. A lookup that could not be made
(network error, timeout, 429, 5xx, any other status) is no verdict: ReconcilerError, the
operation stays as it is and is asked again later.
"""

import json
from urllib.parse import quote

import requests

from .verdicts import Absent, Found, ReconcilerError, Undecidable

BODY_KEPT = 500  # characters of an answer's body kept as evidence


def _is_id(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return value.strip() != ""
    return isinstance(value, (int, float))


def _json_object(r):
    """The body as a JSON object, or None (empty, not JSON, or another JSON value)."""
    try:
        body = json.loads(r.content) if r.content else None
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


class HttpLookupReconciler:
    name = "http_lookup"
    verifies = False  # an editor's id is recorded as entered (the protocol has no lookup by remote id)

    def __init__(self, url_template, timeout=(3.0, 15.0), headers=None):
        self.url_template = url_template
        self.timeout = timeout
        self.headers = headers or {}

    def lookup(self, op):
        url = self.url_template.format(key=quote(op.operation_key, safe=""), job_id=quote(op.job.job_id, safe=""))
        try:
            r = requests.get(url, timeout=self.timeout, headers=self.headers)
        except requests.RequestException as exc:
            raise ReconcilerError(f"lookup {url} unreachable: {type(exc).__name__}") from exc
        seen = {"reconciler": self.name, "lookup": url, "status": r.status_code,
                "content_type": r.headers.get("Content-Type", ""), "body": r.text[:BODY_KEPT]}
        if r.status_code == 404:
            return self._not_found(r, seen)
        if r.status_code != 200:
            raise ReconcilerError(f"lookup {url} answered HTTP {r.status_code}")
        body = _json_object(r)
        if body is None:
            return Undecidable({**seen, "detail": "the lookup answered 200 with a body that is not a JSON object: "
                                                  "not the lookup protocol's answer, proof of nothing"})
        return self._verdict(op, body, seen)

    def _not_found(self, r, seen):
        """404 is the protocol's "absent, not definitive", but only from the lookup itself: an HTML
        or text page (a wrong URL, a proxy's error page) says the route is missing, not the object."""
        if not r.content.strip() or _json_object(r) is not None:
            return Absent(False, {**seen, "detail": "the lookup answered 404: absent, not definitive"})
        return Undecidable({**seen, "detail": "the lookup answered 404 with a page that is not JSON (a wrong URL "
                                              "or a proxy's error page?): proof of nothing"})

    def _verdict(self, op, body, seen):
        named = body.get("operation_key")
        found = body.get("found")
        if body.get("error") not in (None, False, "", {}):
            found = "error"  # an answer carrying an error proves nothing, whatever else it says
        if found is True and named == op.operation_key and _is_id(body.get("remote_id")):
            receipt = body.get("receipt") if isinstance(body.get("receipt"), dict) else {}
            return Found(str(body["remote_id"]), receipt, {"reconciler": self.name, "lookup": seen["lookup"],
                                                            "status": 200, "operation_key": named})
        if found is False and named == op.operation_key:
            definitive = body.get("definitive") is True
            return Absent(definitive, {**seen, "detail": "the lookup answered found: false for this operation key"
                                                         + ("" if definitive else ", not definitive")})
        if found is True and named == op.operation_key:
            why = "found: true without a remote_id (a non-empty string or number)"
        elif found in (True, False) and named is None:
            why = f"found: {json.dumps(found)} without the operation_key it answers for"
        elif found in (True, False):
            why = f"the answer is for operation key {json.dumps(named)[:100]}, not this one"
        elif found == "error":
            why = "an error object, not a lookup answer"
        else:
            why = "no found: true|false in the answer (a list, a wrapper or another shape)"
        return Undecidable({**seen, "detail": f"the lookup answered 200 with {why}: proof of nothing"})

    def verify(self, op, remote_id):
        return True
