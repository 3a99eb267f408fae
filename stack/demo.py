#!/usr/bin/env python3
"""`make demo`, `make up`, `make down`: the article pipeline and its crash recovery, on this machine.

demo  starts ledger (SQLite), publishing proxy, WordPress, the OpenAI stand-in and n8n 2.40.7 with
      the Durable Step node; imports workflows/article-pipeline.json and its credentials; runs it;
      SIGKILLs n8n right after WordPress created the draft and before n8n recorded the receipt
      (a relay holds the create_draft answer); runs it again; prints and writes a recovery
      report counted in WordPress itself. The stack stays up for a look (n8n editor, wp-admin,
      review page) until `make down`.
up    the same stack and workflow without the runs.
down  stops whatever `demo` / `up` left running.

State (tokens, passwords, pids; mode 600) lives in $DURABLE_CACHE/demo/, outside the repository.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
from pipeline_stack import (  # noqa: E402
    PipelineStack, Service, free_port, interrupted_run, outputs_of, reconciled_operations, step_routes, stop_pid,
    wait_http,
)

CACHE = Path(os.environ.get("DURABLE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "durable-steps")
DEMO_DIR = CACHE / "demo"
STATE = DEMO_DIR / "state.json"
WORKFLOW_ID = "articlePipeline"
PREFERRED = {"ledger": 8790, "proxy": 8791, "openai": 8792, "n8n": 5678}
T0 = time.monotonic()


def say(msg: str):
    print(f"[demo {time.monotonic() - T0:5.1f}s] {msg}", flush=True)


def stage(n: int, title: str):
    print(f"\n==> {n}. {title}", flush=True)


def port_or_free(port: int) -> int:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            return free_port()


def write_private(path: Path, data: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)


def down(quiet: bool = False):
    if not STATE.exists():
        if not quiet:
            print("nothing to stop (no demo stack state)")
        return
    st = json.loads(STATE.read_text())
    for name, pid in (st.get("pids") or {}).items():
        stop_pid(pid)
        if not quiet:
            print(f"stopped {name} (pid {pid})")
    if st.get("wp_state") and Path(st["wp_state"]).exists():
        subprocess.run(["bash", str(HERE / "wordpress.sh"), "down", "--state", st["wp_state"]], capture_output=True)
        if not quiet:
            print("stopped WordPress and dropped its database")
    shutil.rmtree(DEMO_DIR, ignore_errors=True)


def set_wp_admin_password(stack: PipelineStack) -> str:
    """A login for wp-admin (the launcher only makes an application password, which cannot log in)."""
    password = secrets.token_urlsafe(12)
    me = stack.wp_get("/wp/v2/users/me", context="edit")
    r = requests.post(f"{stack.wp['rest_url']}/wp/v2/users/{me['id']}", json={"password": password},
                      auth=(stack.wp["user"], stack.wp["app_password"]), timeout=30)
    r.raise_for_status()
    return password


def start_editor(stack: PipelineStack, job_id: str) -> str:
    """n8n's editor for a look at the workflow and its two executions. The workflow is imported
    again pointing straight at the proxy (the demo's crash relay ends with this process)."""
    stack.import_workflows([stack.workflow(WORKFLOW_ID, job_id, proxy_url=stack.proxy_url)])
    env = {**stack.n8n_env(), "N8N_PORT": str(stack.ports["n8n"])}
    svc = Service("n8n", ["bash", str(HERE / "n8n.sh"), "n8n", "start"], env, stack.workdir / "n8n.log")
    stack.services.append(svc)
    url = f"http://127.0.0.1:{stack.ports['n8n']}"
    try:
        wait_http(url + "/healthz", timeout=90, proc=svc.proc, log=svc.log_path)
    except RuntimeError as exc:
        say(f"n8n editor did not come up ({exc}); see {svc.log_path}")
    return url


def sign_in_lines(stack: PipelineStack) -> str:
    """How people sign in to the ledger console: one page, a token per role."""
    return f"""  ledger console    {stack.ledger_url}/console   (sign in by pasting a token)
    as editor       {stack.tokens['editor']}   (review queue, jobs and their timelines)
    as approver     {stack.tokens['approver']}   (approvals: {stack.ledger_url}/console/approvals)"""


def bring_up() -> PipelineStack:
    down(quiet=True)
    stage(1, "Tools: Node 24 and n8n 2.40.7 (cached outside the repository; the first install takes ~4 min)")
    subprocess.run(["bash", str(HERE / "n8n.sh"), "install"], check=True, stdout=subprocess.DEVNULL)
    say("n8n ready")
    stage(2, "Services: WordPress + durable-ops plugin, ledger (SQLite), publishing proxy, OpenAI stand-in")
    ports = {k: port_or_free(v) for k, v in PREFERRED.items()}
    stack = PipelineStack(DEMO_DIR, ports=ports, say=say)
    stack.start()
    return stack


def save_state(stack: PipelineStack, extra: dict):
    write_private(STATE, {**stack.state(), "tokens": stack.tokens, **extra})


def demo():
    stack = bring_up()
    job_id = time.strftime("article-demo-%Y%m%d-%H%M%S")
    save_state(stack, {"job_id": job_id})
    stage(3, f"n8n: the Durable Step package, credentials 'Durable Ledger' + 'OpenAI' + 'Approval Mail' (SMTP; no mail server in the demo: the approvers are not mailed, the approval is on the console), workflow {WORKFLOW_ID}")
    stack.import_workflows([stack.workflow(WORKFLOW_ID, job_id)])
    say(f"workflows/article-pipeline.json imported for job {job_id}")

    stage(4, "Run 1: the pipeline runs; n8n is killed right after WordPress created the draft")
    say("a relay in front of the proxy forwards create_draft and holds the answer; then SIGKILL")
    crash = interrupted_run(stack, WORKFLOW_ID, job_id, "create_draft", "after_write")
    before = stack.wordpress_counts(job_id)
    draft_op = next(o for o in stack.operations(job_id) if o["action"] == "create_draft")
    say(f"n8n killed after {crash['seconds']} s. WordPress: {before['drafts']} draft (#{before['post_ids'][0]}), "
        f"{before['media']} media. Ledger: create_draft is {draft_op['state']} (no receipt).")

    stage(5, "Run 2: the same workflow again (Start Job takes over the lease)")
    # Straight to the proxy this time: run 2 ends parked in the approval wait, and the approver's
    # click resumes it after this script (and the crash relay with it) has exited.
    stack.import_workflows([stack.workflow(WORKFLOW_ID, job_id, proxy_url=stack.proxy_url)])
    rerun = stack.execute(WORKFLOW_ID)
    if rerun["error"]:
        raise SystemExit(f"run 2 failed: {rerun['error']}")
    routes = step_routes(rerun["run"])
    for step, r in routes.items():
        how = ", ".join(part for n, part in ((r["done"], f"{r['done']} done now (Done)"),
                                             (r["done_before"], f"{r['done_before']} reused (Done Before)"),
                                             (r["attention"], "waiting (Attention)")) if n)
        say(f"  {step:<18} {how}")

    stage(6, "Recovery report (counted in WordPress)")
    article = stack.article(job_id)
    wp = stack.wordpress_counts(job_id, article)
    report = stack.report(job_id)
    reconciled = reconciled_operations(stack, job_id)
    waiting = ((outputs_of(rerun["run"], "Wait for Approval") or [[{}]])[0][0]).get("durable", {})
    prevented = sum(r["done_before"] for r in routes.values())
    wp_password = set_wp_admin_password(stack)
    n8n_url = start_editor(stack, job_id)
    save_state(stack, {"job_id": job_id, "wp_admin_password": wp_password, "n8n": n8n_url})
    result = {
        "job_id": job_id,
        "drafts": wp["drafts"], "media": wp["media"], "seo_verified": bool(wp.get("seo_verified")),
        "resource_packs": wp.get("resource_packs"),
        "published_without_approval": wp["published"],
        "unknown_left": report["counts"]["unknown"],
        "duplicates_prevented": prevented,
        "reconciled": reconciled,
        "interrupted": {"step": "create_draft", "point": "after the WordPress write, before the receipt",
                        "draft_in_wordpress_before_rerun": before["drafts"], "ledger_state_before_rerun": draft_op["state"]},
        "rerun": {"seconds": rerun["seconds"], "steps": routes},
        "awaiting_approval": {"action": "publish", "operation_key": waiting.get("operation_key"),
                              "content_digest": (waiting.get("operation") or {}).get("request_hash"), "post_id": wp.get("post_id")},
        "wordpress": {"post_id": wp.get("post_id"), "status": wp.get("status"), "media_ids": wp["media_ids"],
                      "featured_media": wp.get("featured_media"), "seo": wp.get("seo")},
        "ledger_counts": report["counts"],
        "phase": report["phase"],
        "urls": {"n8n_editor": f"{n8n_url}/workflow/{WORKFLOW_ID}", "wordpress_draft": wp.get("edit_url"),
                 "wordpress_login": f"{stack.wp['url']}/wp-login.php", "review_page": f"{stack.ledger_url}/console/review",
                 "approvals_page": f"{stack.ledger_url}/console/approvals", "console": f"{stack.ledger_url}/console",
                 "ledger_report": f"{stack.ledger_url}/v1/jobs/{job_id}/report"},
    }
    out = DEMO_DIR / "recovery-report.json"
    out.write_text(json.dumps(result, indent=2))
    ok = (wp["drafts"] == 1 and wp["media"] == 3 and result["seo_verified"] and wp["published"] == 0
          and result["unknown_left"] == 0)
    print(f"""
  drafts in WordPress for the job     {wp['drafts']}   (expected 1)
  media in WordPress for the job      {wp['media']}   (expected 3; featured image is one of them: {wp.get('featured_is_upload')})
  SEO fields verified                 {'yes' if result['seo_verified'] else 'NO'}   ({wp['seo']['title']!r})
  resource pack in the body           {wp.get('resource_packs')}x
  published without approval          {wp['published']}
  unknown operations left             {result['unknown_left']}
  duplicates prevented                {prevented} side effects reused instead of repeated in run 2
  operations reconciled               {', '.join(f"{o['action']} -> {o['state']} #{o['remote_id']}" for o in reconciled) or 'none'}
  waiting for approval                publish of post #{wp.get('post_id')}: run 2 is parked in n8n (Wait: Approver Decides)

  n8n editor        {result['urls']['n8n_editor']}   (first visit: create the owner account)
  WordPress draft   {result['urls']['wordpress_draft']}
                    (log in as {stack.wp['user']} / {wp_password})
{sign_in_lines(stack)}

  approve publish   {result['urls']['approvals_page']}
                    sign in as approver, look at the draft's preview, approve: the n8n execution waiting
                    for it resumes by itself and publishes the post once (deny: it stops with approval_denied).

Recovery report written to {out}
The stack keeps running (tokens and passwords in {STATE}); stop it with: make down
""")
    if not ok:
        raise SystemExit("the recovery report shows a problem (see above)")


def up():
    stack = bring_up()
    job_id = time.strftime("article-%Y%m%d-%H%M%S")
    stage(3, "n8n editor with the workflow and credentials")
    save_state(stack, {"job_id": job_id})
    stack.relay.close()
    wp_password = set_wp_admin_password(stack)
    n8n_url = start_editor(stack, job_id)
    save_state(stack, {"job_id": job_id, "wp_admin_password": wp_password, "n8n": n8n_url})
    print(f"""
  n8n editor     {n8n_url}/workflow/{WORKFLOW_ID}  (first visit: create the owner account)
  WordPress      {stack.wp['url']}/wp-admin/  ({stack.wp['user']} / {wp_password})
  ledger         {stack.ledger_url}  (runner token {stack.tokens['runner']})
{sign_in_lines(stack)}
  approvals      {stack.ledger_url}/console/approvals: an approval resumes the run waiting for it in n8n
  proxy          {stack.proxy_url};  OpenAI stand-in {stack.openai_url}
State in {STATE}; stop with: make down""")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["demo", "up", "down"])
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_a: sys.exit(143))
    {"demo": demo, "up": up, "down": down}[args.command]()


if __name__ == "__main__":
    main()
