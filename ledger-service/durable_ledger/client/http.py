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
from .errors import LedgerUnavailable, error_from_http
from .ledger import GateAnswer, Ledger, begin_body, lease_body, outcome_body, release_body, renew_body


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

    def _call(self, method, path, body=None):
        # Serialised here, not by requests: a NaN or a lone surrogate reaches the ledger and is
        # refused there (422 invalid_value) exactly as LocalLedger refuses it; LocalLedger
        # measures these same bytes against DURABLE_MAX_BODY_BYTES.
        data = checks.encode(body) if body is not None else None
        try:
            r = self._http().request(method, self.url + path, data=data, headers=self._headers,
                                     timeout=self.timeout, allow_redirects=False)
        except requests.RequestException as exc:
            raise LedgerUnavailable(f"the ledger at {_shown(self.url)} could not be reached ({type(exc).__name__})",
                                    {"url": _shown(self.url)}) from None
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

    def _begin(self, job_id, action, token, payload, operation_key, target, requires_approval):
        body = begin_body(job_id, action, token, payload, operation_key, target, requires_approval)
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
