"""The real stack for the acceptance suite, assembled from the existing harnesses.

    tests ──▶ ledger (durable-ledger serve, SQLite) ──reconciler──▶ proxy ──▶ WordPress (plugin)
      │            └── OPENAI_BASE_URL ──▶ Agents API stand-in (in this process)   ├──▶ LossyProxy ──▶ WordPress
      └── curl / caller.py subprocesses, SIGKILLed mid-request                      └──▶ "revocable" app password

Every scenario runs under its own tenant (tokens `<tenant>:<role>:...`), so the tenant-wide
acceptance counters (`GET /v1/metrics/acceptance`) belong to exactly one test.
The PostgreSQL restart scenario starts its own ledger (see test_acceptance_ledger.py).
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import requests

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
REPO = TESTS.parent

from agents_standin import WEBHOOK_SECRET  # noqa: E402
from durable_ledger.gate.dispatch_auth import remote_job_id  # noqa: E402
from durable_ledger.wordpress.client import WordPressClient  # noqa: E402
from harness import BIN, TENANT, LedgerServer, ProxyServer, Stack, free_port  # noqa: E402
from support.netfaults import LossyProxy  # noqa: E402

TENANTS = ("s-client-drop", "s-ledger-restart", "s-many-items", "s-response-lost", "s-two-workers",
           "s-machine-replaced", "s-revoked", "s-cancel")


def q(key):
    return quote(key, safe="")


class TenantApi:
    """One scenario's view of the ledger: its tenant's runner / editor / approver tokens."""

    def __init__(self, url, tenant, tokens):
        self.url, self.tenant, self.tokens = url, tenant, tokens
        self.http = requests.Session()

    def h(self, role="runner"):
        return {"Authorization": f"Bearer {self.tokens[role]}"}

    def call(self, method, path, role="runner", expect=None, headers=None, **kw):
        r = self.http.request(method, self.url + path, headers={**self.h(role), **(headers or {})}, timeout=60, **kw)
        if expect is not None:
            assert r.status_code == expect, f"{method} {path} -> {r.status_code} {r.text[:500]}"
        return r

    def post(self, path, body=None, role="runner", expect=200, **kw):
        return self.call("POST", path, role, expect, json=body if body is not None else {}, **kw).json()

    def get(self, path, role="runner", expect=200):
        return self.call("GET", path, role, expect).json()

    def job(self, job_id, body=None):
        return self.call("PUT", f"/v1/jobs/{q(job_id)}", json=body or {}).json()

    def lease(self, job_id, owner, takeover=False):
        return self.post(f"/v1/jobs/{q(job_id)}/lease", {"owner": owner, "ttl_s": 600, "takeover": takeover})

    def begin(self, job_id, action, token, payload, expect=200, **extra):
        return self.post("/v1/operations/begin", {"job_id": job_id, "action": action, "fencing_token": token,
                                                  "payload": payload, **extra}, expect=expect)

    def operation(self, key):
        return self.get(f"/v1/operations/{q(key)}")

    def states(self, key):
        return [e["to_state"] for e in self.operation(key)["events"]]

    def metrics(self):
        return self.get("/v1/metrics/acceptance")


class AcceptanceStack(Stack):
    """reconcile/harness.Stack with per-scenario tenants, the Agents API stand-in wired into the
    ledger, an artifact store, and a third site profile whose application password a test revokes."""

    def __init__(self, workdir, wp, standin):
        super().__init__(workdir, wp, wp)  # no plain site needed: "plain" points at the plugin site
        self.standin = standin
        self.artifacts = self.workdir / "artifacts"
        self.tenant_tokens = {t: {r: f"{t}-{r}-{secrets.token_hex(8)}" for r in ("runner", "editor", "approver")}
                              for t in TENANTS}
        self.tokens += "," + ",".join(
            f"{t}:{role}:{tok}" + (":test+lossy+revocable" if role == "runner" else "")
            for t, toks in self.tenant_tokens.items() for role, tok in toks.items())
        # The ledger's reconciler serves every scenario's tenant: its proxy lookups name the tenant
        # (`?tenant=`), which only an admin token may do.
        self.tokens = self.tokens.replace(f"{TENANT}:editor:{self.reconciler}", f"{TENANT}:admin:{self.reconciler}")
        self.revocable = None

    def start(self):
        self.revocable = self.new_app_password("acceptance-revocable")
        self.lossy = LossyProxy("127.0.0.1", int(self.wp.url.rsplit(":", 1)[1]))
        profile = {"url": self.wp.url, "user": self.wp.user, "app_password": self.wp.app_password}
        sites = {"test": profile, "lossy": {**profile, "url": self.lossy.url},
                 "revocable": {**profile, "app_password": self.revocable["password"]}}
        proxy_port = free_port()
        self.proxy_url = f"http://127.0.0.1:{proxy_port}"
        self.ledger = LedgerServer(self.database_url, self.tokens, workers=1, threads=8,
                                   log_path=self.workdir / "ledger.log")
        self.ledger.env.update(self.ledger_env())
        self.ledger.start(timeout=60)
        self.proxy = ProxyServer(self.database_url, self.tokens, sites, proxy_port, self.workdir / "proxy.log")
        self.proxy.start(timeout=60)
        self.ledger_url = self.ledger.url
        return self

    def ledger_env(self):
        return {"DURABLE_PROXY_URL": self.proxy_url, "DURABLE_PROXY_TOKEN": self.reconciler,
                "DURABLE_LOG_LEVEL": "INFO", "DURABLE_ARTIFACT_DIR": str(self.artifacts),
                "OPENAI_API_KEY": "test", "OPENAI_BASE_URL": self.standin.base_url,
                "OPENAI_WEBHOOK_SECRET": WEBHOOK_SECRET, "DURABLE_OPENAI_MAX_RETRIES": "0"}

    def api(self, tenant):
        return TenantApi(self.ledger_url, tenant, self.tenant_tokens[tenant])

    def caller_config(self, job_id, site, title, pause=None, token=None):
        return {**super().caller_config(job_id, site, title, pause), "token": token or self.runner}

    def cli(self, *args, check=True):
        """`durable-ledger ARGS` against the stack's database and artifact store."""
        env = {**os.environ, "DURABLE_DATABASE_URL": self.database_url, "DURABLE_ARTIFACT_DIR": str(self.artifacts),
               "DURABLE_LOG_LEVEL": "WARNING"}
        out = subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=120)
        if check and out.returncode != 0:
            raise RuntimeError(f"durable-ledger {' '.join(args)} -> {out.returncode}: {out.stderr[-2000:]}")
        return out

    # ------------------------------------------------------------------ WordPress side

    def new_app_password(self, name):
        r = requests.post(self.wp.rest("/wp/v2/users/me/application-passwords"), auth=self.wp.auth,
                          json={"name": f"{name}-{secrets.token_hex(4)}"}, timeout=30)
        assert r.status_code == 201, r.text
        return {"uuid": r.json()["uuid"], "password": r.json()["password"]}

    def revoke_app_password(self, uuid):
        r = requests.delete(self.wp.rest(f"/wp/v2/users/me/application-passwords/{uuid}"), auth=self.wp.auth,
                            timeout=30)
        assert r.status_code == 200, r.text

    def wordpress_client(self):
        """WordPress itself, with the site's credentials: what only the proxy holds in production."""
        return WordPressClient(self.wp.url, self.wp.user, self.wp.app_password)

    def job_objects(self, job_id, tenant):
        """Every object the durable-ops plugin binds to the job (drafts, published, attachments);
        in WordPress the job id is tenant-qualified."""
        r = requests.get(self.wp.rest(f"/durable/v1/jobs/{q(remote_job_id(tenant, job_id))}"), auth=self.wp.auth,
                         timeout=30)
        r.raise_for_status()
        return r.json()["objects"]

    def posts_titled(self, title):
        """Core WordPress, any status: what exists regardless of the plugin's bookkeeping."""
        r = requests.get(self.wp.rest("/wp/v2/posts"), auth=self.wp.auth, timeout=30,
                         params={"status": "any", "context": "edit", "search": title, "per_page": 100})
        r.raise_for_status()
        return [p["id"] for p in r.json() if p["title"]["raw"] == title]


class KillableRequest:
    """One HTTP request made by a `curl` process, so a test can SIGKILL the client mid-request:
    the TCP connection is torn down by the kernel exactly as when a browser tab or an SSE
    consumer goes away."""

    def __init__(self, method, url, token, body, headers=None):
        args = ["curl", "-sS", "-X", method, url, "-H", f"Authorization: Bearer {token}",
                "-H", "Content-Type: application/json", "--data-binary", json.dumps(body), "-w", "\n%{http_code}"]
        for k, v in (headers or {}).items():
            args += ["-H", f"{k}: {v}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    def kill(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode


class Gate:
    """Holds the first matching call of a stand-in method until released: the ledger is then
    provably in the middle of the request the client is about to abandon."""

    def __init__(self, obj, name, match):
        self.obj, self.name, self.match = obj, name, match
        self.original = getattr(obj, name)
        self.entered, self.released, self.held = threading.Event(), threading.Event(), 0
        gate = self

        def wrapper(*args, **kw):
            if gate.held == 0 and match(*args, **kw):
                gate.held += 1
                gate.entered.set()
                gate.released.wait(30)
            return gate.original(*args, **kw)

        setattr(obj, name, wrapper)

    def release(self):
        self.released.set()
        setattr(self.obj, self.name, self.original)


class CountingRemote:
    """A remote system with a lookup route, counted at the source: `writes[key]` is how many
    times the side effect of ``key`` really happened. Serves the ledger's generic HTTP
    reconciler (DURABLE_RECONCILE_HTTP): found with the remote id, or definitively absent, for the key asked."""

    def __init__(self):
        self.writes, self.ids, self.lock = {}, {}, threading.Lock()
        remote = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _json(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                key = parse_qs(urlsplit(self.path).query)["key"][0]
                with remote.lock:
                    rid = remote.ids.get(key)
                # The answer names the key it is about (issue 35): without it the ledger decides nothing.
                self._json(200, {"found": True, "operation_key": key, "remote_id": rid} if rid
                           else {"found": False, "operation_key": key, "definitive": True})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.lookup_template = f"http://127.0.0.1:{self.server.server_address[1]}/lookup?key={{key}}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def write(self, key):
        with self.lock:
            self.writes[key] = self.writes.get(key, 0) + 1
            self.ids.setdefault(key, f"r-{len(self.ids) + 1}")
            return self.ids[key]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def wait_until(predicate, timeout=30, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached within {timeout} s")


def assert_exactly_once(metrics):
    """The ledger's own exactly-once counters: nothing confirmed twice, no remote id shared by
    two operations, no operation left SENT/UNKNOWN/NEEDS_REVIEW."""
    assert (metrics["operations_confirmed_twice"], metrics["duplicate_remote_ids"],
            metrics["unknown_operations_left"]) == (0, [], 0), metrics
