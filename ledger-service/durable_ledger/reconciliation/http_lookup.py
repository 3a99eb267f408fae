"""Generic HTTP reconciler: GET a configured lookup URL with the operation key.

Configured by DURABLE_RECONCILE_HTTP, a JSON object {kind: url_template}, e.g.
{"generic.notify": "http://crm.local/lookup?key={key}"}. The lookup answers 200
{"found": true, "remote_id": ...} or {"found": false, "definitive": true|false}; 404 means
"absent, not definitive". Anything else leaves the operation as it is.
"""

from urllib.parse import quote

import requests

from .verdicts import Absent, Found, ReconcilerError


class HttpLookupReconciler:
    def __init__(self, url_template, timeout=(3.0, 15.0), headers=None):
        self.url_template = url_template
        self.timeout = timeout
        self.headers = headers or {}

    def lookup(self, op):
        url = self.url_template.format(key=quote(op.operation_key, safe=""), job_id=quote(op.job.job_id, safe=""))
        try:
            r = requests.get(url, timeout=self.timeout, headers=self.headers)
        except requests.RequestException as exc:
            raise ReconcilerError(f"lookup unreachable: {type(exc).__name__}") from exc
        if r.status_code == 404:
            return Absent(False, {"lookup": url, "status": 404})
        if r.status_code != 200:
            raise ReconcilerError(f"lookup answered {r.status_code}")
        body = r.json()
        if body.get("found") and body.get("remote_id") is not None:
            return Found(str(body["remote_id"]), body.get("receipt") or {}, {"lookup": url})
        return Absent(bool(body.get("definitive")), {"lookup": url, "answer": body})

    def verify(self, op, remote_id):
        return True
