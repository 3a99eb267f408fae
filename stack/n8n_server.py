"""A running n8n (`n8n start`, SQLite in its user folder) beside a stack's processes, driven the way
a user's browser drives it: owner sign-in, workflow activation, production webhooks, the
executions list and "Retry execution" through n8n's REST API; what n8n did is read from its own
SQLite execution tables (`execution_entity`, `execution_data`)."""
from __future__ import annotations

import copy
import json
import signal
import sqlite3
import time
import uuid
from pathlib import Path

import requests
from localhost import free_port
from services import Service, wait_http

HERE_STACK = Path(__file__).resolve().parent
FINAL = ("success", "error", "crashed", "canceled")
OWNER = {"email": "owner@example.test", "firstName": "Demo", "lastName": "Owner", "password": "Durable-Steps-1"}


class N8nServer:
    """Mixed into a stack (stack/pipeline_stack.py's PipelineStack or a subclass, after this class
    in the bases) that has `ports`, `n8n_folder`, `workdir`, `services` and `n8n_env()`: the stack's
    n8n can also run as a server on a fixed port (its CLI commands get the same port)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.init_server()

    def n8n_env(self) -> dict:
        return {**super().n8n_env(), **self.server_env()}

    def init_server(self):
        self.ports["n8n"] = self.ports.get("n8n") or free_port()
        self.n8n_url = f"http://127.0.0.1:{self.ports['n8n']}"
        self.server = None
        self._session: requests.Session | None = None

    def server_env(self) -> dict:
        return {"N8N_PORT": str(self.ports["n8n"]), "N8N_LISTEN_ADDRESS": "127.0.0.1",
                # activation goes through the publication outbox, polled every 15 s by default
                "N8N_WORKFLOW_PUBLICATION_OUTBOX_POLL_INTERVAL_MS": "500"}

    # ------------------------------------------------------------------ the server

    def start_server(self):
        self.server = Service("n8n-server", ["bash", str(HERE_STACK / "n8n.sh"), "n8n", "start"], self.n8n_env(),
                              self.workdir / "n8n-server.log")
        self.services.append(self.server)
        wait_http(self.n8n_url + "/healthz/readiness", timeout=180, proc=self.server.proc, log=self.server.log_path)
        self._session = None

    def kill_server(self):
        """kill -9 of n8n and its task runner (the whole process group): no shutdown hook runs."""
        self.stop_server(signal.SIGKILL)

    def stop_server(self, sig=signal.SIGTERM):
        self.server.stop(sig)
        self.services.remove(self.server)
        self.server = None

    def server_log(self) -> str:
        return self.server.log_path.read_text(errors="replace") if self.server else ""

    @property
    def rest(self) -> requests.Session:
        if self._session is None:
            self._session = signed_in(self.n8n_url)
        return self._session

    def activate(self, workflow_ids, paths, timeout: float = 60):
        """Publish (activate) the imported workflows through the REST API, then wait until their
        production webhooks answer (the main applies publications asynchronously)."""
        for wf_id in workflow_ids:
            wf = self.rest.get(f"{self.n8n_url}/rest/workflows/{wf_id}", timeout=30).json()["data"]
            r = self.rest.post(f"{self.n8n_url}/rest/workflows/{wf_id}/activate",
                               json={"versionId": wf["versionId"]}, timeout=30)
            assert r.status_code == 200, r.text
        self.wait_webhooks(paths, timeout)

    def wait_webhooks(self, paths, timeout: float = 90):
        """Until n8n registered the production webhooks (it applies publications asynchronously)."""
        deadline = time.monotonic() + timeout
        pending = set(paths)
        while pending and time.monotonic() < deadline:
            con = sqlite3.connect(self.db_path)
            try:
                pending -= {p for (p,) in con.execute('SELECT "webhookPath" FROM webhook_entity')}
            except sqlite3.OperationalError:  # the table is not there before the migrations ran
                pass
            finally:
                con.close()
            if pending:
                time.sleep(0.3)
        assert not pending, f"webhooks not registered: {pending}\n{self.server_log()[-3000:]}"

    # ------------------------------------------------------------------ many runs at once

    def _fire(self, paths: dict, publish=()) -> dict:
        """Starts the server, publishes `publish` (ids, in that order: sub-workflows before their
        callers) as the owner would, and POSTs every key's webhook; returns the executions there
        were before."""
        before = {k: {e["id"] for e in self.executions(p)} for k, p in paths.items()}
        self.start_server()
        if publish:
            self.activate(publish, ())
        self.wait_webhooks(paths.values())
        for path in paths.values():
            assert self.post_webhook(path, {}) == 200, path
        return before

    def _new_execution(self, path: str, before: set) -> dict | None:
        new = [e for e in self.executions(path) if e["id"] not in before]
        return new[-1] if new else None

    def crash_together(self, paths: dict, traps: dict, before_kill=None, publish=(), timeout: float = 300) -> dict:
        """Every key's run at once in one server (its workflow id = its webhook path; `publish`: the
        ids to publish first, these included), each held by its relay trap; once all are held,
        `before_kill()`, then SIGKILL of the server: an executor lost with all of them in flight.
        Per key: hit, ended_before (a run that ended before its trap never gets there: its error),
        execution_id, seconds (of the whole phase)."""
        t0 = time.monotonic()
        before = self._fire(paths, publish)
        ended, deadline = {}, time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = [k for k, t in traps.items() if not t.hit.is_set() and k not in ended]
            if not waiting:
                break
            for k in waiting:
                row = self._new_execution(paths[k], before[k])
                if row and row["status"] in FINAL:
                    ended[k] = self.error_of(row["id"]) or row["status"]
            time.sleep(0.2)
        if before_kill is not None:
            before_kill()
        runs = {k: self._new_execution(p, before[k]) for k, p in paths.items()}
        self.kill_server()
        seconds = round(time.monotonic() - t0, 1)
        return {k: {"hit": traps[k].hit.is_set(), "ended_before": ended.get(k),
                    "execution_id": (runs[k] or {}).get("id"), "seconds": seconds} for k in paths}

    def run_together(self, paths: dict, timeout: float = 300) -> dict:
        """A new server runs every key's workflow at once, until each run ended (or waits, e.g. for an
        approval); then the server stops. Per key: execution_id, run (as `n8n execute --rawOutput`
        prints it; None: it did not end in time), seconds (of the whole phase)."""
        t0 = time.monotonic()
        before = self._fire(paths)
        done, deadline = {}, time.monotonic() + timeout
        try:
            while len(done) < len(paths) and time.monotonic() < deadline:
                for k, p in paths.items():
                    row = self._new_execution(p, before[k])
                    if k not in done and row and row["status"] in (*FINAL, "waiting"):
                        done[k] = row["id"]
                time.sleep(0.3)
            runs = {k: self.irun(i) for k, i in done.items()}
        finally:
            self.stop_server()
        seconds = round(time.monotonic() - t0, 1)
        return {k: {"execution_id": done.get(k), "run": runs.get(k), "seconds": seconds} for k in paths}

    def post_webhook(self, path: str, body: dict) -> int:
        return requests.post(f"{self.n8n_url}/webhook/{path}", json=body, timeout=60).status_code

    def irun(self, execution_id: str) -> dict:
        """The execution as `n8n execute --rawOutput` prints it (status and data.resultData), read
        from n8n's tables: stack/pipeline_stack.py's outputs_of / run_error read either."""
        status = next(e["status"] for e in self.executions() if e["id"] == str(execution_id))
        return {"status": status, "data": {"resultData": self.result_data(execution_id)}}

    def fire(self, path: str, order_id: str) -> int:
        r = requests.post(f"{self.n8n_url}/webhook/{path}", json={"order_id": order_id}, timeout=30)
        return r.status_code

    def retry(self, execution_id: str, load_workflow: bool) -> requests.Response:
        """n8n's "Retry execution" button (original / currently saved workflow). n8n answers once
        the new execution has ended."""
        return self.rest.post(f"{self.n8n_url}/rest/executions/{execution_id}/retry",
                              json={"loadWorkflow": load_workflow}, timeout=120)

    # ------------------------------------------------------------------ n8n's own tables

    @property
    def db_path(self):
        return self.n8n_folder / ".n8n" / "database.sqlite"

    def executions(self, workflow_id: str | None = None) -> list[dict]:
        con = sqlite3.connect(self.db_path)
        try:
            rows = con.execute('SELECT id, status, finished, "retryOf", "workflowId", mode FROM execution_entity '
                               'ORDER BY id').fetchall()
        finally:
            con.close()
        out = [{"id": str(i), "status": s, "finished": bool(f), "retry_of": r, "workflow_id": w, "mode": m}
               for i, s, f, r, w, m in rows]
        return [e for e in out if workflow_id is None or e["workflow_id"] == workflow_id]

    def wait_executions(self, workflow_id: str, n: int, timeout: float = 60) -> list[dict]:
        """The workflow's first n executions, once every one of them has ended."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.executions(workflow_id)
            if len(rows) >= n and all(r["status"] in FINAL for r in rows[:n]):
                return rows[:n]
            time.sleep(0.2)
        raise TimeoutError(f"{workflow_id}: {n} ended executions expected: {self.executions(workflow_id)}\n"
                           + self.server_log()[-3000:])

    def run_data(self, execution_id: str) -> dict:
        return self.result_data(execution_id).get("runData") or {}

    def result_data(self, execution_id: str) -> dict:
        return self.execution_data(execution_id).get("resultData") or {}

    def execution_data(self, execution_id: str) -> dict:
        """The execution's whole run data (IRunExecutionData), as n8n stored it."""
        con = sqlite3.connect(self.db_path)
        try:
            row = con.execute('SELECT data FROM execution_data WHERE "executionId" = ?', (execution_id,)).fetchone()
        finally:
            con.close()
        return (unflatten(row[0]) or {}) if row else {}

    def sub_executions(self, since: int = 0) -> dict[str, dict[str, int]]:
        """Per parent execution id, its sub-workflow executions (after execution `since`) counted per
        workflow id: n8n keeps the parent in each one's data (parentExecution)."""
        out: dict[str, dict[str, int]] = {}
        for e in self.executions():
            if int(e["id"]) > since:
                parent = (self.execution_data(e["id"]).get("parentExecution") or {}).get("executionId")
                if parent is not None:
                    runs = out.setdefault(str(parent), {})
                    runs[e["workflow_id"]] = runs.get(e["workflow_id"], 0) + 1
        return out

    def error_of(self, execution_id: str) -> str | None:
        err = self.result_data(execution_id).get("error") or {}
        return err.get("message")

    def reason_of(self, execution_id: str) -> str | None:
        """Durable Step 1.2 fails an execution with `<reason>: <explanation>`: the reason; any
        other error as n8n words it."""
        msg = self.error_of(execution_id)
        if not msg:
            return None
        head = msg.split(":", 1)[0]
        return head if head.replace("_", "").isalnum() and head.islower() else msg[:80]

    def nodes_run(self, execution_id: str) -> dict[str, int]:
        """Node name -> how many runs it has in the execution's data (a Retry's data holds the
        runs it resumed from too)."""
        return {name: len(runs) for name, runs in self.run_data(execution_id).items()}

    def outputs(self, execution_id: str, node: str) -> list[int] | None:
        """Items on each output of the node's last run (None: it did not run or failed)."""
        runs = self.run_data(execution_id).get(node) or []
        main = ((runs[-1].get("data") or {}).get("main") if runs else None)
        return [len(items or []) for items in main] if main else None

    def failed_node(self, execution_id: str) -> str | None:
        rd = self.result_data(execution_id)
        return ((rd.get("error") or {}).get("node") or {}).get("name") or (rd.get("lastNodeExecuted") if rd.get("error") else None)


def webhook_triggered(workflow: dict, path: str) -> dict:
    """A copy of the workflow whose Manual Trigger is a production webhook on `path` that answers
    at once (the execution goes on after the answer): for runs in a running server."""
    wf = copy.deepcopy(workflow)
    trigger = next(n for n in wf["nodes"] if n["type"] == "n8n-nodes-base.manualTrigger")
    trigger.update(type="n8n-nodes-base.webhook", typeVersion=2, webhookId=str(uuid.uuid4()),
                   parameters={"httpMethod": "POST", "path": path, "responseMode": "onReceived", "options": {}})
    return wf


def signed_in(url: str) -> requests.Session:
    s = requests.Session()
    s.headers["browser-id"] = "durable-retry-test"
    r = s.post(f"{url}/rest/owner/setup", json=OWNER, timeout=30)
    if r.status_code != 200:
        r = s.post(f"{url}/rest/login", json={"emailOrLdapLoginId": OWNER["email"], "password": OWNER["password"]},
                   timeout=30)
    assert r.status_code == 200, r.text
    return s


def unflatten(text: str):
    """n8n stores execution data in `flatted`'s format: a JSON array whose first entry is the root
    and in which every string inside an object or array is the index of another entry."""
    items, cache = json.loads(text), {}

    def resolve(i):
        i = int(i)
        if i not in cache:
            v = items[i]
            if isinstance(v, list):
                cache[i] = out = []
                out.extend(walk(x) for x in v)
            elif isinstance(v, dict):
                cache[i] = out = {}
                out.update((k, walk(x)) for k, x in v.items())
            else:
                cache[i] = v
        return cache[i]

    def walk(x):
        return resolve(x) if isinstance(x, str) else x

    return resolve(0)
