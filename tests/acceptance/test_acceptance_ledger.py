"""The ledger itself dies: one server worker SIGKILLed under load, then the whole server (its
process group) SIGKILLed mid-run and a new one started on the same PostgreSQL database.

Eight client threads gate distinct keys (`begin` -> the side effect -> `confirm`) against a
counting remote that also serves the ledger's generic HTTP reconciler. A client that loses an
answer restarts its step from `begin`, as a re-run would: the ledger must then say reconcile
(found -> reuse_receipt, absent -> dispatch) and never dispatch a key twice.
"""
import json
import os
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path

import requests
from acceptance_stack import CountingRemote, LedgerServer, TenantApi, q, assert_exactly_once
from agents_standin import WEBHOOK_SECRET, message_item

TENANT = "s-ledger-restart"
THREADS, KEYS_PER_THREAD = 8, 15


def _workers(master_pid):
    """`serve`'s worker pids: the children it forked (not its helper processes), read from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master_pid:
            try:
                cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            # `serve` also starts its background passes (approval deliverer, sweeper) as children.
            if b"deliver-approvals" in cmdline or b"sweep" in cmdline:
                continue
            out.append(int(stat.parent.name))
    return sorted(out)


class Clients:
    """THREADS clients, each gating its own keys; records every answer the clients heard."""

    def __init__(self, url, token, job_id, fencing_token, remote):
        self.url, self.token, self.job_id, self.fence, self.remote = url, token, job_id, fencing_token, remote
        self.lock = threading.Lock()
        self.heard = defaultdict(list)  # key -> decisions, in order
        self.after_error = defaultdict(list)  # key -> decisions of begins that followed a lost answer
        self.verdicts = defaultdict(int)  # reconciliations that answered a retried begin, by verdict
        self.errors = 0
        self.done = 0
        self.progress = threading.Condition(self.lock)

    def _post(self, http, path, body):
        """One request; None when the answer was lost (reset, refused, timeout, 5xx)."""
        try:
            r = http.post(self.url + path, json=body, headers={"Authorization": f"Bearer {self.token}"}, timeout=20)
        except requests.RequestException:
            return None
        if r.status_code >= 500:
            return None
        assert r.status_code == 200, f"{path} -> {r.status_code} {r.text[:300]}"
        return r.json()

    def _step(self, http, action, deadline):
        key = f"{TENANT}:{self.job_id}:v1:{action}"
        lost = False
        while time.monotonic() < deadline:
            gate = self._post(http, "/v1/operations/begin", {"job_id": self.job_id, "action": action,
                                                             "target": "crm:main", "fencing_token": self.fence,
                                                             "payload": {"to": action}})
            if gate is None:
                lost = self._lost()
                time.sleep(0.05)
                continue
            with self.lock:
                self.heard[key].append(gate["decision"])
                if lost:
                    self.after_error[key].append(gate["decision"])
                if "reconciliation" in gate:
                    self.verdicts[gate["reconciliation"]["verdict"]] += 1
            if gate["decision"] == "reuse_receipt":
                break
            if gate["decision"] == "reconcile":  # a reconciliation is still running: ask again
                time.sleep(0.1)
                continue
            assert gate["decision"] == "dispatch", gate
            remote_id = self.remote.write(key)
            if self._post(http, f"/v1/operations/{q(key)}/confirm",
                          {"fencing_token": self.fence, "remote_id": remote_id}) is not None:
                break
            lost = self._lost()  # the confirm's answer is lost: start the step over from begin
        else:
            raise AssertionError(f"{key} did not finish")
        with self.progress:
            self.done += 1
            self.progress.notify_all()

    def _lost(self):
        with self.lock:
            self.errors += 1
        return True

    def run(self, prefix, deadline_s=90):
        deadline = time.monotonic() + deadline_s
        failures = []

        def worker(t):
            http = requests.Session()
            try:
                for i in range(KEYS_PER_THREAD):
                    self._step(http, f"notify:{prefix}-{t}-{i}", deadline)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                failures.append(exc)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for t in threads:
            t.start()
        return threads, failures

    def wait_done(self, n, timeout=60):
        with self.progress:
            assert self.progress.wait_for(lambda: self.done >= n, timeout), f"only {self.done} steps done"


def _server(pg_url, tokens, env, port=None, log=None):
    server = LedgerServer(pg_url, tokens, workers=2, threads=8, port=port, log_path=log)
    server.env.update(env)
    return server.start(timeout=90)


def test_acceptance_ledger_service_restarted(pg_url, standin, tmp_path, uid):
    remote = CountingRemote()
    token = f"{TENANT}-runner-{uid}"
    tokens = f"{TENANT}:runner:{token}"
    env = {"DURABLE_RECONCILE_HTTP": json.dumps({"crm.notify": remote.lookup_template}),
           "OPENAI_API_KEY": "test", "OPENAI_BASE_URL": standin.base_url, "OPENAI_WEBHOOK_SECRET": WEBHOOK_SECRET,
           "DURABLE_OPENAI_MAX_RETRIES": "0", "DURABLE_LOG_LEVEL": "INFO"}
    log = tmp_path / "ledger.log"
    server = _server(pg_url, tokens, env, log=log)
    try:
        api = TenantApi(server.url, TENANT, {"runner": token})
        job, sid = f"restart-{uid}", f"sess_restart_{uid}"
        standin.add_session(sid, items=[message_item(i) for i in range(5)], tenant=TENANT)
        api.job(job, {"pipeline": "generic"})
        fence = api.lease(job, "n8n-main")["fencing_token"]
        api.call("PUT", f"/v1/jobs/{q(job)}/session", json={"session_id": sid}, expect=201)
        clients = Clients(server.url, token, job, fence, remote)
        total = THREADS * KEYS_PER_THREAD

        # (a) SIGKILL one server worker while the eight clients run.
        threads, failures = clients.run("a")
        clients.wait_done(total // 4)
        before = _workers(server.proc.pid)
        assert len(before) == 2, before
        os.kill(before[0], signal.SIGKILL)
        for t in threads:
            t.join(120)
        assert not failures, failures
        errors_a = clients.errors
        after = _workers(server.proc.pid)
        assert len(after) == 2 and before[0] not in after  # the master replaced it

        # (b) SIGKILL the whole server mid-run; a new one starts on the same database and port.
        threads, failures = clients.run("b")
        clients.wait_done(total + total // 4)
        server.stop(signal.SIGKILL)
        killed_at = time.monotonic()
        server = _server(pg_url, tokens, env, port=server.port, log=log)
        restart_s = time.monotonic() - killed_at
        for t in threads:
            t.join(120)
        assert not failures, failures
        errors_b = clients.errors - errors_a

        # The job, its lease and its session mapping are found again.
        found = api.get(f"/v1/jobs/{q(job)}")
        assert (found["status"], found["fencing_token"], found["lease"]["owner"]) == ("active", fence, "n8n-main")
        assert api.get(f"/v1/jobs/{q(job)}/session")["session_id"] == sid
        assert api.post(f"/v1/jobs/{q(job)}/session/sync", {})["item_count"] == 5

        # No operation lost, none duplicated: every key dispatched exactly once, written exactly once.
        keys = set(clients.heard)
        assert len(keys) == 2 * total
        dispatched = {k: d.count("dispatch") for k, d in clients.heard.items()}
        assert set(dispatched.values()) == {1}, {k: v for k, v in dispatched.items() if v != 1}
        assert remote.writes == {k: 1 for k in keys}
        ops = api.get(f"/v1/jobs/{q(job)}/operations")["operations"]
        assert len(ops) == len(keys) and {o["state"] for o in ops} == {"CONFIRMED"}
        assert {o["operation_key"]: o["remote_id"] for o in ops} == {k: remote.ids[k] for k in keys}
        # Retries after a lost answer: reconcile / reuse_receipt, or the first dispatch of a key
        # whose begin never reached the database; never a second dispatch.
        retried = [d for ds in clients.after_error.values() for d in ds]
        assert retried and set(retried) <= {"dispatch", "reconcile", "reuse_receipt"}
        # Re-running every step now answers from the receipts.
        actions = {k: k.split(":v1:", 1)[1] for k in keys}
        rerun = {k: api.begin(job, a, fence, {"to": a}, target="crm:main")["decision"] for k, a in actions.items()}
        assert set(rerun.values()) == {"reuse_receipt"}
        assert remote.writes == {k: 1 for k in keys}
        m = api.metrics()
        assert_exactly_once(m)
        # The server kill always hits requests in flight; a worker kill only those that worker held
        # at that instant (a dropped idle keep-alive connection is reopened by the client library).
        assert errors_b >= 1, errors_b
        recovered = sum(1 for ds in clients.after_error.values() if "reuse_receipt" in ds)
        print(f"\n[acceptance] ledger restarted (PostgreSQL): {len(keys)} keys by {THREADS} threads; worker kill -> "
              f"{errors_a} lost answers, server kill -> {errors_b} lost answers, restart {restart_s:.1f} s; "
              f"retries answered {dict((d, retried.count(d)) for d in set(retried))} "
              f"({recovered} recovered from a receipt after a lost confirm), reconciler verdicts "
              f"{dict(clients.verdicts)}; dispatches per key 1; remote writes per "
              f"key 1; metrics {m}")
    finally:
        server.stop(signal.SIGKILL)
        remote.close()
