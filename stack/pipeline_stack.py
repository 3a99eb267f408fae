"""The article pipeline's whole stack as processes, for `make demo` and tests/pipeline.

    n8n (execute, headless) ──▶ ledger (durable-ledger serve, SQLite) ──reconciler──▶ proxy
         │                                                                             │
         ├──▶ FaultRelay ──▶ publishing proxy (durable-ledger proxy serve) ──▶ WordPress (+ durable-ops)
         └──▶ OpenAI stand-in (stack/openai_standin.py; or any OpenAI-compatible URL)

Every service is a real process. Counting is done at the source: WordPress itself (the plugin's
job lookup and the REST API), never the ledger's own bookkeeping.
Nothing here imports pytest; the state of a running stack lives in one JSON file.
"""
from __future__ import annotations

import copy
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import requests

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
from fault_relay import FaultRelay  # noqa: E402
from localhost import free_port  # noqa: E402,F401 - the stacks and tests take it from here too
from services import Service, ledger_bin, ledger_command, ledger_env, stop_pid, wait_http  # noqa: E402,F401
from durable_ledger.gate.dispatch_auth import remote_job_id  # noqa: E402

WORKFLOW_FILE = REPO / "workflows" / "article-pipeline.json"
LEDGER_BIN = ledger_bin()
TENANT = "demo"
SITE = "default"
CRED_LEDGER = {"id": "durableLedgerCred", "name": "Durable Ledger"}
CRED_OPENAI = {"id": "openAiCred", "name": "OpenAI"}
CRED_MAIL = {"id": "approvalMailCred", "name": "Approval Mail"}
# Where the workflow's Send Approval Request node sends (Config `approvers_email`); a stack with a
# mail server (stack/mail_stack.py, started with this domain) receives it.
MAIL_DOMAIN = "newsroom.test"
# SMTP with no mail server: the discard port, where nothing listens here. Send Approval Request
# continues on error, so the run still parks and the approval is still on the console.
NO_SMTP_PORT = 9


def node_path() -> str:
    return subprocess.run(["bash", str(HERE / "node24.sh")], check=True, capture_output=True, text=True).stdout.strip()


def parse_run(stdout: str):
    """`n8n execute --rawOutput` prints the IRun as indented JSON between log lines."""
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


def outputs_of(run: dict, node: str):
    runs = ((run or {}).get("data", {}).get("resultData", {}).get("runData", {}) or {}).get(node)
    if not runs:
        return None
    return [[it["json"] for it in (items or [])] for items in (runs[0].get("data", {}).get("main") or [])]


def run_error(run: dict) -> str | None:
    result = (run or {}).get("data", {}).get("resultData", {}) or {}
    err = result.get("error")
    if not err:
        return None
    node = (err.get("node") or {}).get("name") or result.get("lastNodeExecuted") or "?"
    return f"{node}: {err.get('message')}"


class PipelineStack:
    """Start with `start()`, stop with `stop()`; `detach()` leaves the processes running."""

    def __init__(self, workdir: Path, *, wp_state: Path | None = None, ports: dict | None = None,
                 say=lambda *_a: None, encryption_key: str | None = None,
                 ledger_db_url: str | None = None, extra_tokens: dict[str, str] | None = None):
        """``ledger_db_url``: the ledger's database (default: SQLite in the work directory; e.g.
        ``postgresql://postgres@127.0.0.1:5432/<db>``, created by the caller). ``extra_tokens``:
        more bootstrap tokens, name -> ``tenant:role[:site]``; each gets a fresh secret in
        ``self.tokens[name]`` (the soak's intruder: ``{"intruder": "intruder:runner:default"}``)."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.say = say
        self.ports = {"ledger": 0, "proxy": 0, "openai": 0, "n8n": 0, **(ports or {})}
        self.wp_state_given = wp_state
        self.wp_state = Path(wp_state) if wp_state else self.workdir / "wordpress" / "state.json"
        self.tokens = {r: f"{r}-{secrets.token_hex(12)}" for r in ("runner", "editor", "approver", "reconciler")}
        self.ledger_db_url = ledger_db_url
        self.extra_tokens = dict(extra_tokens or {})
        for name in self.extra_tokens:
            self.tokens[name] = f"{name}-{secrets.token_hex(12)}"
        self.encryption_key = encryption_key or secrets.token_hex(16)
        self.services: list[Service] = []
        self.relay: FaultRelay | None = None
        self.ledger_relay: FaultRelay | None = None
        self.n8n_folder = self.workdir / "n8n"
        self.wp: dict = {}
        # Where the publishing proxy reaches WordPress (default: WordPress itself). The soak puts a
        # response-dropping TCP proxy here (tests/support/netfaults.py).
        self.wp_url_for_proxy: str | None = None
        self._ledger_spec: tuple | None = None
        # A running stack/mail_stack.py MailServer's state (set before start()): the SMTP credential
        # points at it; without one, at a port where nothing listens.
        self.mail: dict | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, ledger_relay: bool = False):
        self._start_wordpress()
        self._start_ledger_and_proxy()
        self._start_openai()
        self.relay = FaultRelay(self.proxy_url)
        if ledger_relay:
            self.ledger_relay = FaultRelay(self.ledger_url)
        self._prepare_n8n()
        return self

    def stop(self):
        for r in (self.relay, self.ledger_relay):
            if r is not None:
                r.close()
        for svc in reversed(self.services):
            svc.stop()
        self.services.clear()
        if not self.wp_state_given and self.wp_state.exists():
            subprocess.run(["bash", str(HERE / "wordpress.sh"), "down", "--state", str(self.wp_state)],
                           capture_output=True, text=True)

    def state(self) -> dict:
        """What `make down` needs, and the URLs for people."""
        return {"workdir": str(self.workdir), "wp_state": str(self.wp_state), "wordpress": self.wp["url"],
                "ledger": self.ledger_url, "proxy": self.proxy_url, "openai": self.openai_url,
                "pids": {s.name: s.pid for s in self.services}, "tenant": TENANT,
                "n8n_user_folder": str(self.n8n_folder)}

    def _start_wordpress(self):
        if self.wp_state_given and self.wp_state.exists():
            self.wp = json.loads(self.wp_state.read_text())
            return
        self.wp_state.parent.mkdir(parents=True, exist_ok=True)
        self.say("WordPress + MariaDB (stack/wordpress.sh; installs Debian packages on first use)")
        proc = subprocess.run(["bash", str(HERE / "wordpress.sh"), "up", "--state", str(self.wp_state)],
                              text=True, stdout=subprocess.PIPE, stderr=None)
        if proc.returncode != 0:
            raise RuntimeError("stack/wordpress.sh up failed (see the output above)")
        self.wp = json.loads(self.wp_state.read_text())

    def _start_ledger_and_proxy(self):
        t = self.tokens
        tokens = (f"{TENANT}:runner:{t['runner']}:{SITE},{TENANT}:editor:{t['editor']},"
                  f"{TENANT}:approver:{t['approver']},{TENANT}:editor:{t['reconciler']}")
        for name, spec in self.extra_tokens.items():
            tenant, role, *site = spec.split(":")
            tokens += "," + ":".join([tenant, role, t[name], *site])
        db_url = self.ledger_db_url or f"sqlite:///{self.workdir / 'ledger.db'}"
        pp = self.ports["proxy"] or free_port()
        self.proxy_url = f"http://127.0.0.1:{pp}"
        base = ledger_env(db_url, tokens, DURABLE_DATA_DIR=str(self.workdir))
        self.start_ledger(db_url, tokens, port=self.ports["ledger"] or None, DURABLE_PROXY_URL=self.proxy_url,
                          DURABLE_PROXY_TOKEN=t["reconciler"], DURABLE_PROXY_SITE=SITE)
        self.say(f"publishing proxy on {self.proxy_url} (holds the WordPress application password)")
        sites = {SITE: {"url": self.wp_url_for_proxy or self.wp["url"], "user": self.wp["user"],
                        "app_password": self.wp["app_password"]}}
        prx = Service.start("proxy", ledger_command("proxy", "serve", port=pp),
                            {**base, "WORDPRESS_SITES": json.dumps(sites), "DURABLE_PROXY_READ_TIMEOUT": "60"},
                            self.workdir / "proxy.log", ready=self.proxy_url + "/health")
        self.services.append(prx)

    def start_ledger(self, db_url: str, tokens: str, port: int | None = None, threads: int = 8, **extra: str):
        """The stack's ledger: `init-db`, then `serve` (one worker) until /health answers. Its
        command line and environment are kept, so `restart_ledger` starts the same one again."""
        port = port or free_port()
        self.ledger_url = f"http://127.0.0.1:{port}"
        self.ledger_env = ledger_env(db_url, tokens, DURABLE_DATA_DIR=str(self.workdir), **extra)
        self.say(f"ledger ({'PostgreSQL' if db_url.startswith('postgres') else 'SQLite'}) on {self.ledger_url}")
        out = subprocess.run([str(LEDGER_BIN), "init-db"], env=self.ledger_env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"durable-ledger init-db failed:\n{out.stdout}\n{out.stderr}")
        self._ledger_spec = (ledger_command("serve", port=port, threads=threads), self.ledger_env)
        return self._spawn_ledger()

    def _spawn_ledger(self):
        args, env = self._ledger_spec
        led = Service.start("ledger", args, env, self.workdir / "ledger.log", ready=self.ledger_url + "/health")
        self.services.insert(0, led)
        return led

    def restart_ledger(self, sig=signal.SIGKILL) -> float:
        """Kill the ledger server (its whole process group: `serve`'s parent and workers, no
        cleanup with SIGKILL) and start a new one on the same database and port. Returns the
        seconds until the new one answered /health."""
        old = next(s for s in self.services if s.name == "ledger")
        old.stop(sig)
        self.services.remove(old)
        t0 = time.monotonic()
        self._spawn_ledger()
        return round(time.monotonic() - t0, 2)

    def _start_openai(self):
        port = self.ports["openai"] or free_port()
        self.openai_url = f"http://127.0.0.1:{port}/v1"
        self.say(f"OpenAI stand-in (fixed demo content, not OpenAI) on {self.openai_url}")
        svc = Service("openai-standin", [sys.executable, str(HERE / "openai_standin.py"), "--port", str(port)],
                      dict(os.environ), self.workdir / "openai-standin.log")
        self.services.append(svc)
        wait_http(f"http://127.0.0.1:{port}/health", proc=svc.proc, log=svc.log_path)

    # ------------------------------------------------------------------ n8n

    def n8n_env(self) -> dict:
        return {**os.environ, "N8N_USER_FOLDER": str(self.n8n_folder), "N8N_ENCRYPTION_KEY": self.encryption_key,
                "N8N_PORT": str(self.ports["n8n"] or free_port()), "N8N_RUNNERS_BROKER_PORT": str(free_port()),
                "N8N_LOG_LEVEL": "info"}

    def n8n(self, *args, timeout=300) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(HERE / "n8n.sh"), "n8n", *args], env=self.n8n_env(), text=True,
                              capture_output=True, timeout=timeout)

    def _prepare_n8n(self):
        self.say("n8n 2.40.7 (cached install) with the packed n8n-nodes-durable package")
        subprocess.run(["bash", str(HERE / "n8n.sh"), "install"], check=True, stdout=subprocess.DEVNULL)
        self.install_node_package()
        creds = [
            {**CRED_LEDGER, "type": "durableLedgerApi", "data": {"baseUrl": self.ledger_for_n8n, "token": self.tokens["runner"]}},
            self.openai_credential(),
            self.mail_credential(),
        ]
        path = self.n8n_folder / "credentials.json"
        path.write_text(json.dumps(creds))
        out = self.n8n("import:credentials", f"--input={path}")
        path.unlink()  # it holds the runner token in plain text; n8n stored it encrypted
        if out.returncode != 0:
            raise RuntimeError(f"n8n import:credentials failed:\n{out.stdout}\n{out.stderr}")

    def openai_credential(self) -> dict:
        """The credential `openAiCred`: the pipeline's Gated HTTP Request nodes authenticate with the
        package's own credential (bearer)."""
        return {**CRED_OPENAI, "type": "durableHttpAuthApi", "data": {"kind": "bearer", "token": "standin-key"}}

    def mail_credential(self) -> dict:
        """The credential `approvalMailCred` (n8n's SMTP): Send Approval Request mails the approvers."""
        port = self.mail["smtp_port"] if self.mail else NO_SMTP_PORT
        return {**CRED_MAIL, "type": "smtp",
                "data": {"host": "127.0.0.1", "port": port, "secure": False, "disableStartTls": True,
                         "user": "", "password": "", "hostName": f"n8n.{MAIL_DOMAIN}"}}

    @property
    def ledger_for_n8n(self) -> str:
        return self.ledger_relay.url if self.ledger_relay else self.ledger_url

    def install_node_package(self):
        """npm pack the built package and extract it where n8n loads community nodes from."""
        pkg = REPO / "n8n-nodes-durable"
        if not (pkg / "dist" / "nodes" / "DurableStep" / "DurableStep.node.js").exists():
            raise RuntimeError("n8n-nodes-durable is not built: run `make node-build`")
        env = {**os.environ, "PATH": node_path() + os.pathsep + os.environ["PATH"]}
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(["npm", "pack", "--json", "--pack-destination", tmp], cwd=pkg, env=env,
                                 capture_output=True, text=True, check=True)
            tgz = Path(tmp) / json.loads(out.stdout)[0]["filename"]
            dest = self.n8n_folder / ".n8n" / "nodes" / "node_modules" / "n8n-nodes-durable"
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            with tarfile.open(tgz) as tar:
                for m in tar.getmembers():
                    m.name = m.name.split("/", 1)[1] if "/" in m.name else ""
                tar.extractall(dest, members=[m for m in tar.getmembers() if m.name], filter="data")

    def workflow(self, workflow_id: str, job_id: str, topic: str = "Durable automation",
                 proxy_url: str | None = None) -> dict:
        """The shipped workflow with this stack's Config values (URLs, job id)."""
        wf = copy.deepcopy(json.loads(WORKFLOW_FILE.read_text()))
        wf["id"], wf["name"] = workflow_id, f"{wf['name']} [{job_id}]"
        values = {"job_id": job_id, "topic": topic, "site": SITE, "proxy_url": proxy_url or self.relay.url,
                  "openai_base_url": self.openai_url, "model": "standin-gpt", "image_model": "standin-image"}
        cfg = next(n for n in wf["nodes"] if n["name"] == "Config")
        for a in cfg["parameters"]["assignments"]["assignments"]:
            if a["name"] in values:
                a["value"] = values[a["name"]]
        return wf

    def import_workflows(self, workflows: list[dict], publish=()):
        """One `n8n import:workflow` for all of them. ``publish``: the ids to publish as well (what
        n8n 2.x needs to run a sub-workflow outside the editor), one `n8n publish:workflow` each.
        (Publishing at import, `--activeState=fromJson` in queue mode, is no way round it: the CLI
        checks the owner's scopes, which only `n8n start` writes into a new database.) Stacks with
        a running server publish through it instead (stack/n8n_server.py `activate`)."""
        missing = set(publish) - {w["id"] for w in workflows}
        if missing:
            raise ValueError(f"cannot publish workflows that are not imported: {sorted(missing)}")
        path = self.n8n_folder / "workflows.json"
        path.write_text(json.dumps(workflows))
        out = self.n8n("import:workflow", f"--input={path}")
        if out.returncode != 0:
            raise RuntimeError(f"n8n import:workflow failed:\n{out.stdout}\n{out.stderr}")
        for workflow_id in publish:
            out = self.n8n("publish:workflow", f"--id={workflow_id}")
            if out.returncode != 0:
                raise RuntimeError(f"n8n publish:workflow {workflow_id} failed:\n{out.stdout}\n{out.stderr}")

    def execute(self, workflow_id: str, *, trap=None, on_hit=None, timeout=300) -> dict:
        """`n8n execute`; with a relay trap, SIGKILL n8n (and its task runner) once the trap is hit.

        Returns {"killed", "exit", "run", "error", "seconds", "stdout"}.
        """
        t0 = time.monotonic()
        proc = subprocess.Popen(["bash", str(HERE / "n8n.sh"), "n8n", "execute", f"--id={workflow_id}", "--rawOutput"],
                                env=self.n8n_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        killed = False
        if trap is not None:
            while not trap.hit.wait(0.1):
                if proc.poll() is not None:
                    break
                if time.monotonic() - t0 > timeout:
                    stop_pid(proc.pid, signal.SIGKILL)
                    raise TimeoutError(f"{workflow_id}: the trap was not hit within {timeout} s")
            if trap.hit.is_set():
                if on_hit is not None:
                    on_hit()
                stop_pid(proc.pid, signal.SIGKILL)  # the whole group: n8n and its task runner
                killed = True
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_pid(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        run = None if killed else parse_run(stdout)
        if not killed and run is None:
            raise RuntimeError(f"n8n execute printed no run data (exit {proc.returncode}):\n{stdout[-3000:]}\n{stderr[-3000:]}")
        return {"killed": killed, "exit": proc.returncode, "run": run, "error": run_error(run) if run else None,
                "seconds": round(time.monotonic() - t0, 1), "stdout": stdout}

    # ------------------------------------------------------------------ WordPress, counted at the source

    def wp_get(self, route: str, **params):
        url = f"{self.wp['rest_url']}{route}"
        r = requests.get(url, params=params, auth=(self.wp["user"], self.wp["app_password"]), timeout=30)
        r.raise_for_status()
        return r.json()

    def wordpress_job(self, job_id: str) -> dict:
        """The plugin's view of the job: in WordPress the job id is tenant-qualified."""
        return self.wp_get(f"/durable/v1/jobs/{quote(remote_job_id(TENANT, job_id), safe='')}")

    def wait_for_draft(self, job_id: str, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            posts = [o for o in self.wordpress_job(job_id)["objects"] if o["object_type"] == "post"]
            if posts:
                return posts[0]["id"]
            time.sleep(0.2)
        raise TimeoutError(f"no draft for {job_id} in WordPress within {timeout} s")

    def wordpress_counts(self, job_id: str, article: dict | None = None) -> dict:
        """Drafts, media, SEO and resource pack of the job, as WordPress itself stores them."""
        objects = self.wordpress_job(job_id)["objects"]
        posts = [o for o in objects if o["object_type"] == "post"]
        media = [o for o in objects if o["object_type"] == "attachment"]
        out = {"drafts": sum(1 for p in posts if p["status"] == "draft"), "posts": len(posts),
               "published": sum(1 for p in posts if p["status"] == "publish"), "media": len(media),
               "post_ids": [p["id"] for p in posts], "media_ids": [m["id"] for m in media]}
        if len(posts) == 1:
            post = self.wp_get(f"/wp/v2/posts/{posts[0]['id']}", context="edit")
            meta, content = post.get("meta") or {}, post["content"]["raw"]
            out.update(post_id=post["id"], status=post["status"], featured_media=post["featured_media"],
                       seo={"title": meta.get("rank_math_title"), "description": meta.get("rank_math_description"),
                            "focus_keyword": meta.get("rank_math_focus_keyword")},
                       resource_packs=len(re.findall(r"<!-- durable:resource-pack ", content)),
                       edit_url=f"{self.wp['url']}/wp-admin/post.php?post={post['id']}&action=edit")
            if article is not None:
                out["seo_verified"] = out["seo"] == article["seo"] and meta.get("_yoast_wpseo_title") == article["seo"]["title"]
                out["featured_is_upload"] = post["featured_media"] in out["media_ids"]
        return out

    # ------------------------------------------------------------------ ledger

    def ledger(self, method: str, path: str, role: str = "runner", **kw):
        r = requests.request(method, self.ledger_url + path, timeout=30,
                             headers={"Authorization": f"Bearer {self.tokens[role]}"}, **kw)
        r.raise_for_status()
        return r.json()

    def report(self, job_id: str) -> dict:
        return self.ledger("GET", f"/v1/jobs/{quote(job_id, safe='')}/report")

    def operations(self, job_id: str) -> list[dict]:
        return self.ledger("GET", f"/v1/jobs/{quote(job_id, safe='')}/operations")["operations"]

    def article(self, job_id: str) -> dict | None:
        for op in self.operations(job_id):
            if op["action"] == "generate_article" and op["state"] == "CONFIRMED":
                # The receipt keeps the completion's message (Receipt Fields choices.0.message.content).
                return json.loads(op["receipt"]["choices"]["0"]["message"]["content"])
        return None

    def approve_publish(self, job_id: str, note: str = "approved") -> dict:
        """What an approver does: approve the exact publish payload the run halted on."""
        op = next(o for o in self.operations(job_id) if o["action"] == "publish")
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        return self.ledger("POST", "/v1/approvals", role="approver", json={
            "job_id": job_id, "task_version": op["task_version"], "action": "publish",
            "content_digest": op["request_hash"], "target": op["target"], "expires_at": expires, "note": note})


# ---------------------------------------------------------------------- interruptions
# Where a run is killed, relative to one side effect ("action"):
#   before_send    Begin Step made it SENT; the request never reaches the proxy (held by the relay)
#   after_write    WordPress wrote it and answered; the answer is held, n8n never records the receipt
#   after_receipt  the ledger stored the receipt (confirm answered), n8n never hears back, so the
#                  phase's checkpoint is never saved
POINTS = ("before_send", "after_write", "after_receipt")

PROXY_ROUTES = {
    "create_draft": r"/v1/sites/[^/]+/drafts\b",
    "upload_media": r"/v1/sites/[^/]+/media\b",
    "set_seo": r"/v1/sites/[^/]+/posts/\d+/seo\b",
    "add_resource_pack": r"/v1/sites/[^/]+/posts/\d+\?",
    "publish": r"/v1/sites/[^/]+/posts/\d+/publish\b",
}


def arm_interruption(stack: PipelineStack, action: str, point: str, job_id: str | None = None):
    """Arms the relay for one boundary of one action; returns the trap. With `job_id`, only that
    job's request is taken (runs of several jobs interrupted together): its operation key holds
    `<job_id>:` and ends with the action, in the confirm's path and in the proxy request's body."""
    if point == "after_receipt":
        if stack.ledger_relay is None:
            raise RuntimeError("after_receipt needs the stack started with ledger_relay=True")
        job = re.escape(quote(f"{job_id}:", safe="")) + ".*" if job_id else ""
        return stack.ledger_relay.arm("POST", job + re.escape(quote(action, safe="")) + r"/confirm$", "hold_response")
    base = action.split(":", 1)[0]
    body = re.escape(action) + '"' if ":" in action or job_id else None  # the operation key ends with the action
    if job_id:
        body = re.escape(f"{job_id}:") + '[^"]*' + body
    return stack.relay.arm("POST", PROXY_ROUTES[base], "before_send" if point == "before_send" else "hold_response",
                           body_regex=body)


def interrupted_run(stack: PipelineStack, workflow_id: str, job_id: str, action: str, point: str) -> dict:
    """Runs the workflow and SIGKILLs n8n at `point` of `action`. For create_draft after the write,
    n8n is killed only once WordPress itself lists the draft for the job."""
    trap = arm_interruption(stack, action, point)
    on_hit = None
    if action == "create_draft" and point == "after_write":
        on_hit = lambda: stack.wait_for_draft(job_id)  # noqa: E731
    try:
        result = stack.execute(workflow_id, trap=trap, on_hit=on_hit)
    finally:
        for relay in (stack.relay, stack.ledger_relay):
            if relay is not None:
                relay.disarm()
    if not result["killed"]:
        raise RuntimeError(f"the run ended before {point} of {action}: {result['error']}")
    return {**result, "request": trap.request, "upstream_status": trap.upstream_status}


GATED_STEPS = tuple(n["name"] for n in json.loads(WORKFLOW_FILE.read_text())["nodes"]
                    if n["parameters"].get("operation") == "gatedRequest")


def step_routes(run: dict) -> dict:
    """Per Gated HTTP Request node of one execution: how many items left as done (sent and
    confirmed now) / done before (an earlier run's receipt, on the Done Before output or, with
    "Done Before Items: On the Done Output", on Done) / attention, and which actions."""
    routes = {}
    for name in (run or {}).get("data", {}).get("resultData", {}).get("runData", {}):
        if name in GATED_STEPS:
            routes[name] = {k: 0 for k in ("done", "done_before", "attention")}
            routes[name].update({k + "_actions": [] for k in ("done", "done_before", "attention")})
            for i, items in enumerate(outputs_of(run, name) or []):
                for it in items or []:
                    d = it.get("durable") or {}
                    k = "done_before" if d.get("decision") == "reuse_receipt" else "done" if i == 0 else "attention"
                    routes[name][k] += 1
                    routes[name][k + "_actions"].append(d.get("action"))
    return routes


def reconciled_operations(stack: PipelineStack, job_id: str) -> list[dict]:
    """Operations whose outcome the ledger settled by asking the remote (or regenerating)."""
    out = []
    for op in stack.operations(job_id):
        events = stack.ledger("GET", f"/v1/operations/{quote(op['operation_key'], safe='')}")["events"]
        hits = [e for e in events if "reconcil" in json.dumps(e.get("detail") or {}).lower()
                or "reconcil" in str(e.get("actor") or "").lower()]
        if hits:
            out.append({"operation_key": op["operation_key"], "action": op["action"], "state": op["state"],
                        "remote_id": op["remote_id"], "verdict": hits[-1].get("detail")})
    return out
