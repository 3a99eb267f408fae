"""n8n resumes by itself (issue 14, item 4): the article pipeline parks at the approval, and the
approver's decision resumes the waiting execution, with nobody running the workflow again.

    n8n execute ─▶ ... Publish ─approval_required (Attention)─▶ Wait for Approval ─▶ Wait (webhook)
                                                                 │ POST /v1/operations/{key}/wait
    approver ─▶ POST /v1/operations/{key}/approve|deny ─▶ ledger ─▶ deliverer ─▶ POST resume URL
                                                                         ▼
                       n8n start (same PostgreSQL) resumes the execution ─▶ Publish again

The execution is started by `n8n execute` (the shipped workflow as it is, Manual Trigger) and
parks; a long-running `n8n start` on the same n8n database receives the resume call. n8n runs
on a throwaway PostgreSQL database because two n8n processes share it (SQLite is one process's).
Counted in WordPress (published posts of the job) and in n8n's own execution table.
Between Wait for Approval and the Wait node the shipped workflow mails the approval request (Send
Approval Request, n8n's Send Email) to a real mailbox (stack/mail_stack.py: SMTP in, IMAP out).
"""
from __future__ import annotations

import json
import secrets
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
import approval_mail
from conftest import REPO
from mail_stack import MailServer
from pipeline_stack import HERE as STACK, MAIL_DOMAIN, PipelineStack, Service, free_port, outputs_of, wait_http
from support.n8n_editor import Editor
from localhost import psql

JOBS = ("rs-approve", "rs-deny", "rs-down", "rs-email")


class ResumeStack(PipelineStack):
    """The pipeline stack with n8n on PostgreSQL, one fixed n8n port for the CLI runs (their
    resume URLs) and the `n8n start` server that receives the resume calls."""

    def __init__(self, *a, pg_database: str, **kw):
        super().__init__(*a, **kw)
        self.pg_database = pg_database
        self.n8n_port = free_port()
        self.n8n_url = f"http://127.0.0.1:{self.n8n_port}"
        self.server: Service | None = None

    def n8n_env(self) -> dict:
        return {**super().n8n_env(), "N8N_DB": "postgres", "N8N_PG_DATABASE": self.pg_database,
                "N8N_PORT": str(self.n8n_port), "N8N_LISTEN_ADDRESS": "127.0.0.1",
                "WEBHOOK_URL": self.n8n_url + "/"}

    def _spawn_ledger(self):
        args, env = self._ledger_spec
        # Retry quickly in a test (the default backoff doubles up to 60 s), and for long enough: 20
        # attempts at <= 3 s apart gave up after about 55 s, less than `n8n start` took to come back
        # on a loaded CI machine (the execution then stays waiting: the deliverer gave up).
        self._ledger_spec = (args, {**env, "DURABLE_N8N_URL": self.n8n_url, "DURABLE_RESUME_BACKOFF_S": "0.5",
                                    "DURABLE_RESUME_BACKOFF_MAX_S": "3", "DURABLE_RESUME_MAX_ATTEMPTS": "100"})
        return super()._spawn_ledger()

    def start_n8n_server(self) -> float:
        t0 = time.monotonic()
        self.server = Service("n8n-server", ["bash", str(STACK / "n8n.sh"), "n8n", "start"], self.n8n_env(),
                              self.workdir / "n8n-server.log")
        self.services.append(self.server)
        wait_http(self.n8n_url + "/healthz/readiness", timeout=120, proc=self.server.proc, log=self.server.log_path)
        return round(time.monotonic() - t0, 1)

    def stop_n8n_server(self):
        self.server.stop()
        self.services.remove(self.server)
        self.server = None

    # ------------------------------------------------------------------ what n8n itself recorded

    def executions(self, workflow_id: str) -> list[dict]:
        rows = psql(f"SELECT id, status FROM execution_entity WHERE \"workflowId\" = '{workflow_id}' ORDER BY id",
                    self.pg_database)
        return [{"id": int(i), "status": s} for i, s in (line.split("|") for line in rows.split())]

    def execution_data(self, execution_id: int) -> str:
        return psql(f'SELECT data FROM execution_data WHERE "executionId" = {execution_id}', self.pg_database)

    def run_data(self, execution_id: int) -> dict:
        """The execution's data as n8n keeps it (IRunExecutionData), decoded from its flatted text."""
        return unflatten(self.execution_data(execution_id))

    def wait_status(self, workflow_id: str, execution_id: int, statuses, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = next(r for r in self.executions(workflow_id) if r["id"] == execution_id)
            if row["status"] in statuses:
                return row
            time.sleep(0.3)
        log = self.server.log_path.read_text(errors="replace")[-3000:] if self.server else ""
        raise TimeoutError(f"execution {execution_id} still {row['status']} after {timeout} s\n{log}")

    # ------------------------------------------------------------------ the approver

    def publish_op(self, job_id: str) -> dict:
        return next(o for o in self.operations(job_id) if o["action"] == "publish")

    def waits(self, job_id: str) -> list[dict]:
        return self.ledger("GET", f"/v1/jobs/{quote(job_id, safe='')}/waits")["waits"]

    def decide(self, job_id: str, decision: str, reason: str = "") -> int:
        """Through the approvals HTTP API (the console's buttons post the same)."""
        op = self.publish_op(job_id)
        key = quote(op["operation_key"], safe="")
        body = {"content_digest": op["request_hash"]}
        body.update({"note": reason} if decision == "approve" else {"reason": reason})
        r = requests.post(f"{self.ledger_url}/v1/operations/{key}/{decision}", json=body, timeout=60,
                          headers={"Authorization": f"Bearer {self.tokens['approver']}"})
        assert r.status_code in (200, 201), r.text
        return r.status_code


def unflatten(text: str):
    """n8n stores execution data in the `flatted` format: one JSON array whose first entry is the
    root; within objects and lists every string is the index of the entry that holds the value."""
    table, seen = json.loads(text), set()

    def revive(value):
        if id(value) in seen:
            return value
        seen.add(id(value))
        for k, v in list(value.items() if isinstance(value, dict) else enumerate(value)):
            if isinstance(v, str):
                value[k] = table[int(v)]
                if isinstance(value[k], (dict, list)):
                    revive(value[k])
        return value

    root = table[0]
    return revive(root) if isinstance(root, (dict, list)) else root


def workflow_id(job_id: str) -> str:
    return "wf" + job_id.replace("-", "")


@pytest.fixture(scope="module")
def rstack(wordpress_site, tmp_path_factory):
    subprocess.run(["bash", str(STACK / "ensure-services.sh"), "postgres"], check=True)
    pg_database = f"n8n_resume_{secrets.token_hex(4)}"
    psql(f"CREATE DATABASE {pg_database}")
    st = ResumeStack(tmp_path_factory.mktemp("resume"), wp_state=Path(wordpress_site.state_file),
                     say=lambda m: print(f"[resume] {m}"), pg_database=pg_database)
    # The approvers' mailbox: Send Approval Request mails editors@newsroom.test over SMTP.
    mail = MailServer(domain=MAIL_DOMAIN)
    st.mailbox = mail
    try:
        st.mail = mail.start()
        st.start()
        st.import_workflows([st.workflow(workflow_id(j), j, proxy_url=st.proxy_url) for j in JOBS])
        st.boot_s = st.start_n8n_server()
        yield st
    finally:
        st.stop()
        mail.stop()
        psql(f"DROP DATABASE IF EXISTS {pg_database} WITH (FORCE)")


def run_to_approval_wait(st: ResumeStack, job_id: str) -> dict:
    """`n8n execute` until the execution parks in the Wait node; returns its n8n execution row."""
    wf = workflow_id(job_id)
    run = st.execute(wf)
    assert run["exit"] == 0 and run["error"] is None, run["error"]
    assert run["run"]["status"] == "waiting", run["run"].get("status")
    waiting = outputs_of(run["run"], "Wait for Approval")[0][0]["durable"]
    assert waiting["waiting_for"] == "approval" and waiting["reason"] == "approval_required"
    registered = waiting["wait"]
    (execution,) = st.executions(wf)
    assert execution["status"] == "waiting", execution
    (wait,) = st.waits(job_id)
    assert wait["execution_id"] == str(execution["id"]) == registered["execution_id"]
    assert wait["workflow_id"] == wf and wait["delivery"] is None
    assert "signature=" not in str(wait) and wait["resume_url"].endswith(f"/webhook-waiting/{execution['id']}?<redacted>")
    assert st.wordpress_counts(job_id)["published"] == 0
    return {**execution, "seconds": run["seconds"]}


def test_approval_resumes_the_waiting_execution_which_publishes_once(rstack):
    st, job_id = rstack, "rs-approve"
    execution = run_to_approval_wait(st, job_id)
    t0 = time.monotonic()
    assert st.decide(job_id, "approve", "ship it") == 201
    assert st.decide(job_id, "approve", "ship it") == 200  # a double click: the same approval
    done = st.wait_status(workflow_id(job_id), execution["id"], ("success", "error", "crashed"))
    resumed_s = round(time.monotonic() - t0, 1)
    assert done["status"] == "success", st.execution_data(execution["id"])[-2000:]
    wp = st.wordpress_counts(job_id)
    assert (wp["posts"], wp["published"]) == (1, 1), wp
    report = st.report(job_id)
    assert report["phase"] == "PUBLISHED" and report["counts"]["pending_human"] == 0
    (wait,) = st.waits(job_id)
    assert wait["delivery"]["state"] == "delivered" and wait["delivery"]["decision"] == "approved"
    assert len(st.executions(workflow_id(job_id))) == 1  # nobody ran the workflow again
    # Every step's events name the n8n execution that did it (the job timeline links them).
    events = st.ledger("GET", f"/v1/operations/{quote(st.publish_op(job_id)['operation_key'], safe='')}")["events"]
    assert {(e["detail"] or {}).get("n8n", {}).get("execution_id") for e in events} == {str(execution["id"])}
    print(f"\nDURABLE_RESUME approve: run to wait {execution['seconds']} s, approve -> published {resumed_s} s, "
          f"attempts {wait['delivery']['attempts']}")


def test_denial_resumes_the_execution_which_stops_with_the_reason(rstack):
    st, job_id = rstack, "rs-deny"
    execution = run_to_approval_wait(st, job_id)
    st.decide(job_id, "deny", "the headline overpromises")
    done = st.wait_status(workflow_id(job_id), execution["id"], ("success", "error", "crashed"))
    assert done["status"] == "error"
    data = st.execution_data(execution["id"])
    # Publish, resumed, answers approval_denied on Attention; Wait for Approval ends the execution
    # with the ledger's reason and the approver's.
    # "reason: explanation": the error Wait for Approval ends the execution with (Publish routes it).
    assert "approval_denied: " in data and "the headline overpromises" in data
    assert st.wordpress_counts(job_id)["published"] == 0
    (wait,) = st.waits(job_id)
    assert (wait["delivery"]["state"], wait["delivery"]["decision"]) == ("delivered", "denied")


def test_n8n_down_at_approval_time_is_resumed_once_when_back(rstack):
    st, job_id = rstack, "rs-down"
    execution = run_to_approval_wait(st, job_id)
    st.stop_n8n_server()
    st.decide(job_id, "approve", "approved while n8n was down")
    deadline = time.monotonic() + 30
    while (st.waits(job_id)[0]["delivery"] or {}).get("attempts", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.3)
    delivery = st.waits(job_id)[0]["delivery"]
    assert delivery["state"] == "pending" and delivery["attempts"] >= 2, delivery
    assert delivery["last_error"]["error"] == "ConnectionError"
    assert st.wordpress_counts(job_id)["published"] == 0
    boot = st.start_n8n_server()
    done = st.wait_status(workflow_id(job_id), execution["id"], ("success", "error", "crashed"))
    assert done["status"] == "success", st.execution_data(execution["id"])[-2000:]
    wp = st.wordpress_counts(job_id)
    assert (wp["posts"], wp["published"]) == (1, 1), wp
    (wait,) = st.waits(job_id)
    assert wait["delivery"]["state"] == "delivered" and wait["delivery"]["last_status"] == 200
    assert len(st.executions(workflow_id(job_id))) == 1
    print(f"\nDURABLE_RESUME n8n down: {delivery['attempts']} refused attempts, n8n back in {boot} s, "
          f"delivered on attempt {wait['delivery']['attempts']}")


def test_the_request_reaches_the_mailbox_and_the_approver_publishes_from_its_link(rstack, tmp_path):
    """Issue 38: Wait for Approval -> Send Approval Request (n8n's Send Email, SMTP) -> Wait. The
    message is read from the mailbox over IMAP; a mail scanner fetching every link of it without a
    session decides nothing; the approver follows the link in Chromium, signs in, approves on the
    decision page, and the waiting execution publishes once."""
    st, job_id = rstack, "rs-email"
    execution = run_to_approval_wait(st, job_id)
    op = st.publish_op(job_id)
    (msg,) = [m for m in st.mailbox.imap_messages() if job_id in str(m["Subject"])]
    assert msg["To"] == f"editors@{MAIL_DOMAIN}" and str(msg["Subject"]).startswith("Approval needed: ")
    text, body = approval_mail.parts(msg)
    urls = approval_mail.links(msg)
    decision = [u for u in urls if "/console/a/" in u and "intent=" not in u]
    assert decision and all(u.startswith(st.ledger_url + "/console/a/") for u in decision), urls
    link = decision[0]
    assert text.rstrip().endswith(link) and op["request_hash"][:12] in text + body
    approval_mail.render(msg, tmp_path / "approval-email.png", tmp_path)

    # A mail scanner (or a link preview) fetches every link of the message, with no session.
    for url in urls:
        if url.startswith(st.ledger_url):
            r = requests.get(url, timeout=30, allow_redirects=True)
            assert r.status_code < 500, (url, r.status_code)
    time.sleep(2)  # a decision would have resumed the execution by now (the deliverer retries every 0.5 s)
    assert st.wordpress_counts(job_id)["published"] == 0
    assert st.waits(job_id)[0]["delivery"] is None, "nothing was decided, so nothing resumed"
    assert st.executions(workflow_id(job_id))[0]["status"] == "waiting"
    key = quote(op["operation_key"], safe="")
    approvals = st.ledger("GET", f"/v1/operations/{key}/approvals", role="editor")
    assert (approvals["decided_by"], approvals["approvals"]) == ([], []), approvals

    t0 = time.monotonic()
    page = approval_mail.approve_from_link(link, st.tokens["approver"], tmp_path, tmp_path / "decision-page.png")
    assert "approved" in page.lower(), page[:500]
    done = st.wait_status(workflow_id(job_id), execution["id"], ("success", "error", "crashed"))
    resumed_s = round(time.monotonic() - t0, 1)
    assert done["status"] == "success", st.execution_data(execution["id"])[-2000:]
    wp = st.wordpress_counts(job_id)
    assert (wp["posts"], wp["published"]) == (1, 1), wp
    assert len(st.executions(workflow_id(job_id))) == 1
    (who,) = st.ledger("GET", f"/v1/operations/{key}/approvals", role="editor")["decided_by"]
    assert who["decision"] == "approved" and who["door"] in ("link", "console"), who
    # Publish, resumed, carries who decided on its item (durable.decided_by, from the resume call).
    publish = st.run_data(execution["id"])["resultData"]["runData"]["Publish"]
    assert len(publish) == 2, "Publish ran twice: approval_required, then after the resume"
    (done,) = publish[-1]["data"]["main"][0]
    decided = [(d["name"], d["decision"], d["door"]) for d in done["json"]["durable"]["decided_by"]]
    assert decided == [(who["name"], "approved", who["door"])], done["json"]["durable"]
    print(f"\nDURABLE_RESUME email: {len(urls)} links in the message, prefetched without effect; "
          f"approved by {who['name']} through {who['door']}, published {resumed_s} s after the approver opened the link")


def _editor_screenshot(st, tmp_path, file_name, must_show, window="1600,900", focus=None, below=60):
    """The n8n editor with the shipped workflow at fit-to-window, in Debian's headless Chromium;
    with `focus` (node names) only the part of the canvas around those nodes (a large window, so
    they are legible; `below`: the margin under them, for edges that run below). DURABLE_UPDATE_SCREENSHOTS=1 also writes it to docs/img/ for the docs.
    Returns the node labels."""
    with Editor(st.n8n_url, tmp_path, window=window) as editor:
        names = editor.open_workflow(workflow_id("rs-approve"), 20, must_show=must_show)
        shot = editor.save(tmp_path / file_name, clip=editor.box_around(focus, below) if focus else None)
    print(f"\nDURABLE_RESUME editor screenshot {shot}")
    return names


def test_zz_editor_shows_the_approval_loop(rstack, tmp_path):
    """docs/img/n8n-approval-wait.png: the approval loop only, legible (not the whole pipeline)."""
    loop = ("Publish", "Wait for Approval", "Send Approval Request", "Wait: Approver Decides", "Checkpoint: Published")
    # The edge from the Wait node back into Publish runs under the nodes: a deeper margin below.
    _editor_screenshot(rstack, tmp_path, "n8n-approval-wait.png", loop, window="3200,1800", focus=loop, below=110)


def test_zz_editor_shows_the_whole_pipeline(rstack, tmp_path):
    """docs/img/article-pipeline.png: every section and sticky note of the workflow at fit-to-window."""
    names = _editor_screenshot(rstack, tmp_path, "article-pipeline.png",
                               ("Start Job", "Write Article", "Upload Media", "Create Draft", "Verify Read-Back",
                                "Publish", "Wait for Approval", "Checkpoint: Published"))
    nodes = json.loads((REPO / "workflows" / "article-pipeline.json").read_text())["nodes"]
    assert len(names) >= len([n for n in nodes if not n["type"].endswith("stickyNote")])
