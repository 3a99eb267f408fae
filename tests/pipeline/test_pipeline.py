"""Interrupt the article pipeline at each side-effect boundary, run it again, count in WordPress.

Boundaries (stack/pipeline_stack.py): before_send (SENT in the ledger, nothing reached WordPress),
after_write (WordPress wrote it, the answer never reached n8n), after_receipt (the ledger holds
the receipt, n8n never heard back, so the phase checkpoint is missing).

Every case's first run starts at once in one `n8n start` server (a production webhook per case);
each is held at its own boundary by the relays, and once all are held the server is SIGKILLed
(n8n and its task runner, no cleanup): an executor lost with twelve executions in flight. A new
server then runs every case again. The approval case runs with `n8n execute`, one run at a time.
"""
import json

import pytest
from conftest import CASES, job_for, workflow_for
from pipeline_stack import arm_interruption, interrupted_run, outputs_of, run_error, step_routes

RESULTS = {}


def assert_exactly_once(stack, job_id):
    """Counted in WordPress itself (plugin job lookup + REST), not in the ledger."""
    article = stack.article(job_id)
    wp = stack.wordpress_counts(job_id, article)
    assert wp["posts"] == 1 and wp["drafts"] == 1, wp
    assert wp["media"] == 3, wp
    assert wp["featured_is_upload"], wp
    assert wp["seo"] == article["seo"] and wp["seo_verified"], wp
    assert wp["resource_packs"] == 1, wp
    assert wp["published"] == 0, "nothing is published without an approval"
    report = stack.report(job_id)
    assert report["counts"]["unknown"] == 0, report["operations"]["unknown"]
    assert [o["action"] for o in report["operations"]["pending_human"]] == ["publish"]
    return wp, report


@pytest.fixture(scope="module")
def batch(stack):
    """Every case's first run in one server, killed once all are held; then every re-run."""
    paths = {(a, p): workflow_for(job_for(a, p)) for a, p in CASES}
    traps = {(a, p): arm_interruption(stack, a, p, job_id=job_for(a, p)) for a, p in CASES}
    draft_written = traps[("create_draft", "after_write")]

    def before_kill():  # WordPress itself lists the draft: then kill
        if draft_written.hit.is_set():
            stack.wait_for_draft(job_for("create_draft", "after_write"))

    try:
        crashes = stack.crash_together(paths, traps, before_kill, publish=list(paths.values()))
    finally:
        for relay in (stack.relay, stack.ledger_relay):
            relay.disarm()
    for case, trap in traps.items():
        crashes[case].update(request=trap.request, upstream_status=trap.upstream_status)
    reruns = stack.run_together(paths)
    for r in reruns.values():
        r["error"] = run_error(r["run"]) if r["run"] else "did not end"
    return {"crash": crashes, "rerun": reruns}


@pytest.mark.parametrize("action,point", CASES, ids=[f"{a}-{p}" for a, p in CASES])
def test_pipeline_interrupted_then_rerun_ends_exactly_once(stack, batch, action, point):
    job_id = job_for(action, point)
    crash = batch["crash"][(action, point)]
    assert crash["hit"], f"the run ended before {point} of {action}: {crash['ended_before']}"
    if point == "before_send":
        assert crash["upstream_status"] is None  # nothing reached the proxy
    else:
        assert crash["upstream_status"] == 200  # the write (or the receipt) happened, unseen

    rerun = batch["rerun"][(action, point)]
    assert rerun["error"] is None and rerun["run"]["status"] == "waiting", rerun["error"]
    waiting = outputs_of(rerun["run"], "Wait for Approval")[0][0]["durable"]
    assert waiting["waiting_for"] == "approval"
    routes = step_routes(rerun["run"])
    step = {"upload_media:inline-1": "Upload Media"}.get(action, action.replace("_", " ").title().replace("Seo", "SEO"))
    if point == "before_send":
        assert action in routes[step]["done_actions"], routes[step]  # absent in WordPress: sent again, same key
    elif action.startswith(("create_draft", "upload_media")):
        # Found in WordPress (or in the ledger): reused, not sent again. (The uploads are sent one
        # after the other, so an upload after the interrupted one may be sent only now.)
        assert action in routes[step]["done_before_actions"], routes[step]
        assert action not in routes[step]["done_actions"], routes[step]
    wp, report = assert_exactly_once(stack, job_id)
    RESULTS[f"{action} {point}"] = {"drafts": wp["drafts"], "media": wp["media"], "seo_verified": wp["seo_verified"],
                                    "resource_packs": wp["resource_packs"], "published": wp["published"],
                                    "unknown_left": report["counts"]["unknown"], "rerun_routes": routes[step],
                                    "all_crashed_s": crash["seconds"], "all_rerun_s": rerun["seconds"]}


def test_pipeline_publishes_once_only_after_approval_even_if_interrupted(stack):
    job_id = "art-approval"
    wf = workflow_for(job_id)
    first = stack.execute(wf)
    assert first["error"] is None and outputs_of(first["run"], "Wait for Approval")
    # This stack has no mail server: Send Approval Request fails (On Error: Continue) and the run
    # parks all the same; the approval is on the console.
    (mailed,) = outputs_of(first["run"], "Send Approval Request")[0]
    assert "error" in mailed and first["run"]["status"] == "waiting", mailed
    assert stack.wordpress_counts(job_id)["published"] == 0
    again = stack.execute(wf)  # still no approval: still nothing published
    assert outputs_of(again["run"], "Wait for Approval")
    assert stack.wordpress_counts(job_id)["published"] == 0

    stack.approve_publish(job_id)
    crash = interrupted_run(stack, wf, job_id, "publish", "after_write")
    assert crash["upstream_status"] == 200
    assert stack.wordpress_counts(job_id)["published"] == 1  # published, n8n never heard it
    final = stack.execute(wf)
    assert final["error"] is None, final["error"]
    assert outputs_of(final["run"], "Checkpoint: Published")
    wp = stack.wordpress_counts(job_id)
    assert (wp["posts"], wp["published"], wp["media"], wp["resource_packs"]) == (1, 1, 3, 1)
    report = stack.report(job_id)
    assert report["counts"]["unknown"] == 0 and report["counts"]["pending_human"] == 0
    assert report["phase"] == "PUBLISHED"


def test_pipeline_zz_print_counts():
    """Prints the counts per interruption point (for the issue note); runs last by name."""
    print("\nDURABLE_PIPELINE_COUNTS " + json.dumps(RESULTS, indent=1))
