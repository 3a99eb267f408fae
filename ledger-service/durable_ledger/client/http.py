"""HttpLedger: the client API over the ledger's HTTP routes (docs/api.md).

One `requests.Session` per thread. No call is retried by the client: a begin whose answer was
lost may have claimed the operation (SENT), and the next begin says so (reconcile) instead of
dispatching twice. Errors come back as the ledger's own classes (by their code), unreachable or
non-ledger answers as LedgerUnavailable. The token is sent as a header and never shown.
"""

import threading
from urllib.parse import quote, urlsplit, urlunsplit

import requests

from ..kernel import checks
from .bodies import begin_body, lease_body, outcome_body, release_body, renew_body
from .calls import Batch
from .errors import LedgerUnavailable, error_from_http
from .ledger import GateAnswer, Ledger


def _shown(url):
    """``url`` without any user:password part, for messages."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _key(key):
    return quote(key, safe="", errors="surrogatepass")


class HttpLedger(Ledger):
    """``HttpLedger("http://127.0.0.1:8080", token="...")``: a runner token of the tenant."""

    def __init__(self, url, token, timeout=30.0, headers=None):
        self.url, self.timeout = url.rstrip("/"), timeout
        self._headers = {"Content-Type": "application/json", **(headers or {}), "Authorization": f"Bearer {token}"}
        self._local = threading.local()

    def __repr__(self):
        return f"HttpLedger({_shown(self.url)!r})"

    def _http(self):
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def close(self):
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    def _call(self, method, path, body=None, raw=None, headers=None):
        # Serialised here, not by requests: a NaN or a lone surrogate reaches the ledger and is
        # refused there (422 invalid_value) exactly as LocalLedger refuses it; LocalLedger
        # measures these same bytes against DURABLE_MAX_BODY_BYTES. ``raw``: bytes sent as they are.
        data = checks.encode(body) if body is not None else raw
        try:
            r = self._http().request(method, self.url + path, data=data, headers={**self._headers, **(headers or {})},
                                     timeout=self.timeout, allow_redirects=False)
        except requests.RequestException as exc:
            raise LedgerUnavailable(f"the ledger at {_shown(self.url)} could not be reached ({type(exc).__name__})",
                                    {"url": _shown(self.url)}) from None
        if r.status_code < 300 and r.headers.get("Content-Type") == "application/octet-stream":
            return r.status_code, r.content
        try:
            answer = r.json() if r.content else None
        except ValueError:  # not the ledger answering (a proxy's page)
            answer = None
            if r.status_code < 300:
                raise LedgerUnavailable(f"{_shown(self.url)} answered HTTP {r.status_code} without JSON",
                                        {"http_status": r.status_code}) from None
        if r.status_code < 300:
            return r.status_code, answer
        raise error_from_http(r.status_code, answer)

    def _put_job(self, job_id, fields):
        status, body = self._call("PUT", f"/v1/jobs/{_key(job_id)}", fields)
        return body, status == 201

    def _acquire(self, job_id, owner, ttl_s, takeover):
        return self._call("POST", f"/v1/jobs/{_key(job_id)}/lease", lease_body(owner, ttl_s, takeover))[1]

    def _renew(self, job_id, owner, token, ttl_s):
        return self._call("POST", f"/v1/jobs/{_key(job_id)}/lease/renew", renew_body(owner, token, ttl_s))[1]

    def _release(self, job_id, owner, token):
        self._call("DELETE", f"/v1/jobs/{_key(job_id)}/lease", release_body(owner, token))

    def _begin(self, job_id, action, token, payload, operation_key, target, requires_approval, approval_policy=None):
        body = begin_body(job_id, action, token, payload, operation_key, target, requires_approval, approval_policy)
        return GateAnswer.from_json(self._call("POST", "/v1/operations/begin", body)[1])

    def _outcome(self, kind, job_id, key, token, **fields):
        return self._call("POST", f"/v1/operations/{_key(key)}/{kind}", outcome_body(token, fields))[1]["operation"]

    def _operations(self, job_id, states):
        query = "?state=" + quote(",".join(states), safe=",", errors="surrogatepass") if states else ""
        return self._call("GET", f"/v1/jobs/{_key(job_id)}/operations{query}")[1]["operations"]

    def _operation(self, key):
        return self._call("GET", f"/v1/operations/{_key(key)}")[1]["operation"]

    def _cancel(self, job_id, reason):
        return self._call("POST", f"/v1/jobs/{_key(job_id)}/cancel", {"reason": reason})[1]

    # --- the calls beyond the step cycle (calls.py) -------------------------------------------
    def _version(self, job_id, body):
        return self._call("POST", f"/v1/jobs/{_key(job_id)}/versions", body)[1]

    def _get_job(self, job_id):
        return self._call("GET", f"/v1/jobs/{_key(job_id)}")[1]

    def _raw_outcome(self, key, body):
        return self._call("POST", f"/v1/operations/{_key(key)}/outcome", body)[1]

    def _lookup(self, key, body):
        return GateAnswer.from_json(self._call("POST", f"/v1/operations/{_key(key)}/lookup-result", body)[1])

    def _batch(self, body):
        return Batch.from_json(self._call("POST", "/v1/operations/batch", body)[1], GateAnswer)

    def _checkpoint(self, job_id, body):
        return self._call("POST", f"/v1/jobs/{_key(job_id)}/checkpoints", body)[1]

    def _checkpoints(self, job_id):
        return self._call("GET", f"/v1/jobs/{_key(job_id)}/checkpoints")[1]["checkpoints"]

    def _wait(self, key, body):
        return self._call("POST", f"/v1/operations/{_key(key)}/wait", body)[1]

    def _waits(self, job_id):
        return self._call("GET", f"/v1/jobs/{_key(job_id)}/waits")[1]["waits"]

    def _pending(self):
        return self._call("GET", "/v1/approvals/pending")[1]["pending"]

    def _decide(self, kind, key, body):
        status, answer = self._call("POST", f"/v1/operations/{_key(key)}/{kind}", body)
        return answer["approval" if kind == "approve" else "denial"], status == 201

    def _grant(self, body):
        return self._call("POST", "/v1/approvals", body)[1]

    def _revoke(self, approval_id):
        return self._call("DELETE", f"/v1/approvals/{approval_id}")[1]

    def _put_artifact(self, data, sha256):
        headers = {"Content-Type": "application/octet-stream"}
        if sha256 is not None:
            headers["X-Content-SHA256"] = sha256
        return self._call("PUT", "/v1/artifacts", raw=data, headers=headers)[1]

    def _artifact(self, sha256):
        return self._call("GET", f"/v1/artifacts/{_key(sha256)}")[1]

    def _bind(self, job_id, body):
        return self._call("PUT", f"/v1/jobs/{_key(job_id)}/session", body)[1]

    def _session_of(self, job_id):
        return self._call("GET", f"/v1/jobs/{_key(job_id)}/session")[1]

    def _sync(self, job_id, body):
        return self._call("POST", f"/v1/jobs/{_key(job_id)}/session/sync", body)[1]
