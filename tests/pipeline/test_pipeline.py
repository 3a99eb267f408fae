"""Interrupt the article pipeline at each side-effect boundary, run it again, count in WordPress.

Boundaries (stack/pipeline_stack.py): before_send (SENT in the ledger, nothing reached WordPress),
after_write (WordPress wrote it, the answer never reached n8n), after_receipt (the ledger holds
the receipt, n8n never heard back, so the phase checkpoint is missing). n8n is SIGKILLed there
(n8n and its task runner, no cleanup), then the same workflow runs again.
"""
import json

import pytest
from conftest import CASES, job_for, workflow_for
from pipeline_stack import interrupted_run, outputs_of, step_routes

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


@pytest.mark.parametrize("action,point", CASES, ids=[f"{a}-{p}" for a, p in CASES])
def test_pipeline_interrupted_then_rerun_ends_exactly_once(stack, action, point):
    job_id = job_for(action, point)
    wf = workflow_for(job_id)
    crash = interrupted_run(stack, wf, job_id, action, point)
    if point == "before_send":
        assert crash["upstream_status"] is None  # nothing reached the proxy
    else:
        assert crash["upstream_status"] == 200  # the write (or the receipt) happened, unseen

    rerun = stack.execute(wf)
    assert rerun["exit"] == 0 and rerun["error"] is None, rerun["error"]
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
                                    "crash_s": crash["seconds"], "rerun_s": rerun["seconds"]}


def test_pipeline_publishes_once_only_after_approval_even_if_interrupted(stack):
    job_id = "art-approval"
    wf = workflow_for(job_id)
    first = stack.execute(wf)
    assert first["error"] is None and outputs_of(first["run"], "Wait for Approval")
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
