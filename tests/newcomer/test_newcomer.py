"""The first ten minutes of a builder: the README's quickstart, followed literally.

A fresh venv from the wheel `make dist` built; `durable-ledger init-db`, three `token create`, and
`serve`, in a fresh HOME (so `~/.local/share/durable-steps` and `~/.n8n` are this test's own); the
node tarball installed into `~/.n8n/nodes` with the quickstart's npm command; a fresh n8n 2.40.7.
Through n8n's REST API: the credential is tested (runner passes, approver fails saying why) and
`workflows/first-gated-step.json` is created with the node's defaults only (its Durable Step nodes
set nothing but operation, job id and action, and Gated HTTP Request the URL and body it sends).
Then the workflow runs twice (the second run is Done Before), and a copy runs against a remote that
never answers, n8n is killed mid-request and the workflow runs again: it ends red with a message
that names the console page. `workflows/begin-and-record-step.json` (Begin Step -> HTTP Request ->
Record Outcome, the pattern for any node) runs twice too. A local counting remote counts one side
effect per business id throughout. Last, the editor shows both workflows and the Gated HTTP
Request's panel (docs/img/, with DURABLE_UPDATE_SCREENSHOTS=1).

Deviation from the quickstart's words: `serve` gets a free port through DURABLE_PORT (documented),
because other processes on a shared machine may hold 8787.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
from dist_support import artifact, version  # noqa: E402
from support.n8n_editor import Editor  # noqa: E402
from localhost import free_port as _free_port

N8N_SH = REPO / "stack" / "n8n.sh"
SAMPLE = REPO / "workflows" / "first-gated-step.json"  # the quickstart's: Start Job -> Gated HTTP Request
TWO_NODE_SAMPLE = REPO / "workflows" / "begin-and-record-step.json"  # Begin Step -> any node -> Record Outcome
# What a sample's Durable Step nodes may set: the gate's fields keep the node's defaults; Gated
# HTTP Request says what it sends where.
SET_BY_SAMPLE = {"operation", "jobId", "action", "url", "jsonBody"}
TENANT = "acme"
OWNER = {"email": "newcomer@example.test", "firstName": "New", "lastName": "Comer", "password": "Durable-Steps-1"}


class CountingRemote:
    """POST /invoices: one side effect per request, counted by the body's `order`;
    POST /invoices-hang: counted, then never answered (n8n is killed while it waits)."""

    def __init__(self):
        self.writes = {}
        self.lock = threading.Lock()
        self.hung = threading.Event()
        remote = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with remote.lock:
                    order = str(body.get("order"))
                    remote.writes[order] = remote.writes.get(order, 0) + 1
                if self.path == "/invoices-hang":
                    remote.hung.set()
                    time.sleep(120)  # the answer never comes while n8n lives
                    return
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps({"id": f"inv-{order}", "order": order}).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, order):
        with self.lock:
            return self.writes.get(order, 0)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """The builder's HOME: the quickstart's `~` paths land here."""
    return tmp_path_factory.mktemp("newcomer-home")


def _env(home, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DURABLE_", "N8N_"))}
    # The n8n and Node 24 installs stay in the machine's cache (stack/n8n.sh), not in this HOME.
    cache = os.environ.get("DURABLE_CACHE") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "durable-steps")
    env.update(HOME=str(home), DURABLE_CACHE=cache, **extra)
    return env


def _run(args, env, cwd, timeout=300):
    r = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, args))} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def ledger(home):
    """Quickstart step 1, word for word (plus DURABLE_PORT)."""
    whl = artifact(f"durable_ledger-{version()}-py3-none-any.whl")
    venv = home / "durable-ledger"
    base_python = getattr(sys, "_base_executable", None) or "python3"
    t0 = time.monotonic()
    _run([base_python, "-m", "venv", str(venv)], _env(home), home)
    pip_env = _env(home, PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")))
    _run([str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", str(whl)], pip_env, home)
    bin_ = str(venv / "bin" / "durable-ledger")
    env = _env(home, PATH=f"{venv / 'bin'}:{os.environ['PATH']}", DURABLE_PORT=str(_free_port()))
    _run([bin_, "init-db"], env, home)
    assert (home / ".local/share/durable-steps/durable-ledger.db").exists(), "init-db's default data dir"
    tokens = {role: _run([bin_, "token", "create", "--tenant", TENANT, "--role", role], env, home).strip().splitlines()[-1]
              for role in ("runner", "approver", "editor")}
    log = open(home / "ledger.log", "w")
    proc = subprocess.Popen([bin_, "serve"], env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{env['DURABLE_PORT']}"
    _wait_http(f"{url}/health", proc, home / "ledger.log")
    print(f"\n[newcomer] venv + wheel + init-db + 3 tokens + serve in {time.monotonic() - t0:.1f} s")
    yield {"url": url, "tokens": tokens}
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(20)
    log.close()


def _wait_http(url, proc, log, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{url}: exited {proc.returncode}:\n{Path(log).read_text()[-3000:]}")
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    pytest.fail(f"{url} did not answer within {timeout} s:\n{Path(log).read_text()[-3000:]}")


def _wait_ready(url, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = requests.get(url, timeout=5)
            if r.status_code == 200 and r.json().get("status") == "ok":
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    pytest.fail(f"{url}: n8n was not ready within {timeout} s")


@pytest.fixture(scope="module")
def n8n(home):
    """Quickstart step 2: the tarball into ~/.n8n/nodes with the README's npm command, then n8n."""
    tgz = artifact(f"n8n-nodes-durable-{version()}.tgz")
    readme = (REPO / "README.md").read_text()
    command = "npm install --prefix ~/.n8n/nodes --omit=peer --no-audit --no-fund ./n8n-nodes-durable-<v>.tgz"
    assert command in readme, "the quickstart's install command changed: change this test with it"
    n8n_home = _run(["bash", str(N8N_SH), "install"], dict(os.environ), REPO).strip().splitlines()[-1]
    node_bin = _run(["bash", str(REPO / "stack" / "node24.sh")], dict(os.environ), REPO).strip()
    env = _env(home, PATH=f"{node_bin}:{os.environ['PATH']}", N8N_USER_FOLDER=str(home),
               N8N_PORT=str(_free_port()), N8N_RUNNERS_BROKER_PORT=str(_free_port()), N8N_LOG_LEVEL="info")
    (home / "dist").mkdir(exist_ok=True)
    local_tgz = home / "dist" / tgz.name
    local_tgz.write_bytes(tgz.read_bytes())
    args = command.replace("~", str(home)).replace("./n8n-nodes-durable-<v>.tgz", f"./{tgz.name}").split()
    _run(args, env, home / "dist")
    modules = sorted(p.name for p in (home / ".n8n/nodes/node_modules").iterdir() if not p.name.startswith("."))
    assert modules == ["n8n-nodes-durable"], f"no n8n packages pulled in: {modules}"
    size = sum(f.stat().st_size for f in (home / ".n8n/nodes/node_modules").rglob("*") if f.is_file())
    assert size < 2_000_000, size
    return {"env": env, "home": n8n_home, "url": f"http://127.0.0.1:{env['N8N_PORT']}", "user_folder": home}


class Server:
    """`n8n start` for the REST API (the editor's own calls)."""

    def __init__(self, n8n):
        self.n8n = n8n
        self.log = open(n8n["user_folder"] / "n8n-server.log", "a")
        self.proc = subprocess.Popen(["bash", str(N8N_SH), "n8n", "start"], env=n8n["env"], cwd=n8n["user_folder"],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait_http(f"{n8n['url']}/healthz", self.proc, n8n["user_folder"] / "n8n-server.log", timeout=180)
            _wait_ready(f"{n8n['url']}/healthz/readiness", timeout=180)  # /healthz answers while it starts up
        except BaseException:
            self.stop()
            raise
        self.http = requests.Session()
        r = self.http.post(f"{n8n['url']}/rest/owner/setup", json=OWNER, timeout=30)
        if r.status_code != 200:
            r = self.http.post(f"{n8n['url']}/rest/login",
                               json={"emailOrLdapLoginId": OWNER["email"], "password": OWNER["password"]}, timeout=30)
        assert r.status_code == 200, r.text

    def rest(self, method, path, body=None):
        r = self.http.request(method, f"{self.n8n['url']}/rest{path}", json=body, timeout=60)
        assert r.status_code == 200, f"{method} {path}: {r.status_code} {r.text[:2000]}"
        return r.json()["data"]

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()


def _sample(remote_url, credential_id, job_id, path, task_version=None, sample=SAMPLE):
    wf = json.loads(sample.read_text())
    for node in wf["nodes"]:
        if node["type"] == "n8n-nodes-durable.durableStep":
            # The node's defaults only: the operation, the job, the action and the request itself.
            assert set(node["parameters"]) <= SET_BY_SAMPLE, node
            node["credentials"]["durableLedgerApi"] = {"id": credential_id, "name": "Durable Ledger"}
            if node["parameters"]["operation"] == "startJob":
                node["parameters"]["jobId"] = job_id
                if task_version is not None:  # the one field a builder changes to start a new version
                    node["parameters"]["taskVersion"] = task_version
        if "url" in node["parameters"]:
            node["parameters"]["url"] = f"{remote_url}{path}"
    return {k: wf[k] for k in ("name", "nodes", "connections", "settings")} | {"name": f"{wf['name']} ({job_id})"}


def _shipped(sample, credential_id):
    """The sample as shipped (its name and URL), with the credential picked: for the screenshots."""
    wf = json.loads(sample.read_text())
    for node in wf["nodes"]:
        if "credentials" in node:
            node["credentials"]["durableLedgerApi"] = {"id": credential_id, "name": "Durable Ledger"}
    return {k: wf[k] for k in ("name", "nodes", "connections", "settings")}


@pytest.fixture(scope="module")
def built(n8n, ledger):
    """Steps 3 and 4 through n8n's REST API: the credential (tested) and the sample workflow."""
    remote = CountingRemote()
    server = Server(n8n)
    try:
        types = server.http.get(f"{n8n['url']}/types/nodes.json", timeout=30)
        assert "n8n-nodes-durable.durableStep" in types.text, f"the package was not loaded: {types.status_code} {types.text[:300]}"
        # The quickstart's Base URL is http://127.0.0.1:8787; this run's ledger has a free port.
        data = {"baseUrl": ledger["url"], "token": ledger["tokens"]["runner"]}
        tests = {}
        for role in ("runner", "approver"):
            body = {"credentials": {"id": "", "name": f"Ledger {role}", "type": "durableLedgerApi",
                                    "data": {**data, "token": ledger["tokens"][role]}}}
            tests[role] = server.rest("POST", "/credentials/test", body)
        cred = server.rest("POST", "/credentials", {"name": "Durable Ledger", "type": "durableLedgerApi", "data": data})
        ids = {job: server.rest("POST", "/workflows", _sample(remote.url, cred["id"], job, path))["id"]
               for job, path in (("order-1042", "/invoices"), ("order-1043", "/invoices-hang"))}
        ids["order-1042 v2"] = server.rest("POST", "/workflows", _sample(remote.url, cred["id"], "order-1042",
                                                                          "/invoices", task_version=2))["id"]
        ids["order-2042 two nodes"] = server.rest("POST", "/workflows", _sample(
            remote.url, cred["id"], "order-2042", "/invoices", sample=TWO_NODE_SAMPLE))["id"]
        for name, sample in (("shipped", SAMPLE), ("shipped two nodes", TWO_NODE_SAMPLE)):
            ids[name] = server.rest("POST", "/workflows", _shipped(sample, cred["id"]))["id"]
    finally:
        server.stop()
    return {"remote": remote, "credential_tests": tests, "workflows": ids}


def _execute(n8n, workflow_id, timeout=240):
    """`n8n execute --id --rawOutput`: (exit code, IRun or None, output)."""
    r = subprocess.run(["bash", str(N8N_SH), "n8n", "execute", f"--id={workflow_id}", "--rawOutput"], env=n8n["env"],
                       cwd=n8n["user_folder"], capture_output=True, text=True, timeout=timeout)
    return r.returncode, _parse_run(r.stdout), r.stdout + r.stderr


def _parse_run(stdout):
    lines = stdout.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] != "{":
            continue
        try:
            end = lines.index("}", i)
            value = json.loads("\n".join(lines[i:end + 1]))
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("data"):
            return value
    return None


def _outputs(run, node):
    runs = run["data"]["resultData"]["runData"].get(node) or []
    return [len(items or []) for items in runs[0]["data"]["main"]] if runs else None


def test_credential_test_passes_for_a_runner_and_fails_for_an_approver_saying_why(built):
    runner, approver = built["credential_tests"]["runner"], built["credential_tests"]["approver"]
    assert runner["status"] == "OK", runner
    assert approver["status"] == "Error"
    assert approver["message"].startswith("This is an approver's token:"), approver
    assert "needs a runner token" in approver["message"]


def test_smallest_gated_workflow_runs_once_then_already_done(n8n, built, ledger):
    remote, wf = built["remote"], built["workflows"]["order-1042"]
    code, run, output = _execute(n8n, wf)
    assert code == 0 and run and run["status"] == "success", output[-4000:]
    assert _outputs(run, "Send Invoice") == [1, 0], "first run: Done"
    done = run["data"]["resultData"]["runData"]["Send Invoice"][0]["data"]["main"][0][0]["json"]
    assert done["id"] == "inv-order-1042" and done["durable"]["remote_id"] == "inv-order-1042", done
    assert remote.count("order-1042") == 1
    code, run, output = _execute(n8n, wf)  # at once: Start Job takes over from the ended execution
    assert code == 0 and run and run["status"] == "success", output[-4000:]
    assert _outputs(run, "Send Invoice") == [0, 1], "second run: Done Before"
    before = run["data"]["resultData"]["runData"]["Send Invoice"][0]["data"]["main"][1][0]["json"]
    assert before["id"] == "inv-order-1042", before  # the receipt's fields, as Done had them
    assert remote.count("order-1042") == 1, "one side effect for order-1042"
    # Task Version 2 in Start Job starts version 2 of the job: its step is a new side effect (new
    # operation keys), done once however often it runs.
    v2 = built["workflows"]["order-1042 v2"]
    for proceed, done_before in ((1, 0), (0, 1)):
        code, run, output = _execute(n8n, v2)
        assert code == 0 and run and run["status"] == "success", output[-4000:]
        assert _outputs(run, "Send Invoice") == [proceed, done_before], output[-2000:]
    first = run["data"]["resultData"]["runData"]["Send Invoice"][0]["data"]["main"][1][0]["json"]["durable"]
    assert ":v2:" in first["operation_key"], first
    assert remote.count("order-1042") == 2, "version 1 once, version 2 once"


def test_killed_mid_request_then_run_again_ends_red_naming_the_console_page(n8n, built, ledger):
    remote, wf = built["remote"], built["workflows"]["order-1043"]
    proc = subprocess.Popen(["bash", str(N8N_SH), "n8n", "execute", f"--id={wf}", "--rawOutput"], env=n8n["env"],
                            cwd=n8n["user_folder"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert remote.hung.wait(180), "the request never reached the remote"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # n8n dies while the invoice request waits for its answer
        proc.wait(30)
    assert remote.count("order-1043") == 1
    code, run, output = _execute(n8n, wf)
    assert code != 0 and run and run["status"] == "error", output[-4000:]
    error = run["data"]["resultData"]["error"]
    text = f"{error.get('message')} {error.get('description')}"
    assert run["data"]["resultData"]["lastNodeExecuted"] == "Send Invoice"
    assert f"{ledger['url']}/console/" in text, text
    assert remote.count("order-1043") == 1, "nothing sent twice"
    print(f"\n[newcomer] after the kill: {error.get('message')}\n  {error.get('description')}")


def test_begin_and_record_around_any_node_runs_once_then_already_done(n8n, built):
    remote, wf = built["remote"], built["workflows"]["order-2042 two nodes"]
    code, run, output = _execute(n8n, wf)
    assert code == 0 and run and run["status"] == "success", output[-4000:]
    assert _outputs(run, "Begin Step") == [1, 0], "first run: Proceed"
    assert _outputs(run, "Record Outcome") == [1], "Done"
    code, run, output = _execute(n8n, wf)
    assert code == 0 and run and run["status"] == "success", output[-4000:]
    assert _outputs(run, "Begin Step") == [0, 1], "second run: Already Done"
    assert "Send Invoice" not in run["data"]["resultData"]["runData"]
    assert remote.count("order-2042") == 1, "one side effect for order-2042"


def test_zz_editor_shows_the_first_workflows_and_the_gated_request_panel(n8n, built, tmp_path):
    """docs/img: both first workflows at fit-to-window, and Send Invoice's parameter panel (its
    defaults: what a builder sees after adding Gated HTTP Request)."""
    server = Server(n8n)
    try:
        cookie = server.http.cookies.get("n8n-auth")
        ids = built["workflows"]
        with Editor(n8n["url"], tmp_path, cookie=cookie) as editor:
            editor.open_workflow(ids["shipped"], 3, must_show=("Start Job", "Send Invoice", "Done", "Done Before"))
            editor.save(tmp_path / "first-gated-step.png")
            editor.open_workflow(ids["shipped two nodes"], 5,
                                 must_show=("Begin Step", "Send Invoice", "Record Outcome", "Done Before"))
            editor.save(tmp_path / "begin-and-record-step.png")
        # Tall enough for every field of the panel at once (its column scrolls otherwise).
        with Editor(n8n["url"], tmp_path, window="1600,1800", cookie=cookie) as editor:
            editor.open_workflow(ids["shipped"], 3)
            editor.open_node("Send Invoice")
            editor.save(tmp_path / "gated-request-panel.png", clip=editor.parameters_box())
    finally:
        server.stop()
    print(f"\n[newcomer] editor screenshots in {tmp_path}")
