"""Crashes around the WordPress write, reconciled by the next `begin` against the real stack.

Every test counts at the source: the plugin's job lookup and core's `wp/v2/posts?status=draft`.
"""
import uuid

from harness import Caller, crash_at, resume


def _uid():
    return uuid.uuid4().hex[:10]


def _events(stack, key):
    return [e["to_state"] for e in stack.operation(key)["events"]]


def test_reconcile_crash_after_write_reuses_the_real_post(stack):
    uid = _uid()
    job, title = f"crash-after-{uid}", f"Crash after write {uid}"
    key, written = crash_at(stack, job, "test", title, "after_write")
    assert written["outcome"] == "confirmed"
    assert stack.operation(key)["operation"]["state"] == "SENT"  # the confirm never came

    out = resume(stack, job, "test", title)

    assert out["decision"] == "reuse_receipt", out
    assert out["receipt"]["remote_id"] == str(written["remote_id"])
    assert out["reconciliation"]["verdict"] == "found"
    assert out["operation"]["state"] == "CONFIRMED" and out["operation"]["attempt"] == 1
    assert stack.plugin_job_posts(job) == [written["remote_id"]]
    assert stack.drafts_titled("test", title) == [written["remote_id"]]
    assert _events(stack, key) == ["SENT", "CONFIRMED"]
    print(f"\n[count] crash after write: posts for {job}: 1 (id {written['remote_id']}), reused")


def test_reconcile_crash_before_send_dispatches_once_more(stack):
    uid = _uid()
    job, title = f"crash-before-{uid}", f"Crash before send {uid}"
    key, _ = crash_at(stack, job, "test", title, "before_send")
    assert stack.plugin_job_posts(job) == [] and stack.drafts_titled("test", title) == []

    out = resume(stack, job, "test", title)

    assert out["decision"] == "dispatch" and out["reconciliation"]["verdict"] == "absent", out
    assert out["operation"]["state"] == "CONFIRMED" and out["operation"]["attempt"] == 2
    assert stack.plugin_job_posts(job) == [out["remote_id"]]
    assert stack.drafts_titled("test", title) == [out["remote_id"]]
    assert _events(stack, key) == ["SENT", "FAILED", "SENT", "CONFIRMED"]
    again = resume(stack, job, "test", title)  # and from now on it is only reused
    assert again["decision"] == "reuse_receipt" and again["receipt"]["remote_id"] == str(out["remote_id"])
    print(f"\n[count] crash before send: posts for {job}: 1 (attempt 2)")


def test_reconcile_plain_site_no_title_match_is_not_proof(stack):
    """Without the plugin an empty title search proves nothing (issue 35): an editor decides, and the
    review item says who was asked and what it answered; nothing is dispatched."""
    uid = _uid()
    job, title = f"plain-none-{uid}", f"Plain none {uid}"
    key, _ = crash_at(stack, job, "plain", title, "before_send")

    out = resume(stack, job, "plain", title)

    assert (out["decision"], out["reconciliation"]["verdict"]) == ("needs_review", "undecidable"), out
    assert stack.drafts_titled("plain", title) == []  # nothing dispatched
    item = stack.review_item(key)
    assert item["candidates"] == [] and item["checked"]["asked"] is True
    assert item["checked"]["text"].startswith(
        "Asked WordPress site 'plain' through the publishing proxy, by title (no durable-ops plugin).")
    assert "does not prove nothing was written" in item["checked"]["text"]


def test_reconcile_proxy_down_keeps_unknown_and_records_the_error(stack):
    uid = _uid()
    job, title = f"proxy-down-{uid}", f"Proxy down {uid}"
    stack.lossy.drop_responses = 1  # the write lands, its answer is lost: the caller records UNKNOWN
    caller = Caller(stack.caller_config(job, "lossy", title))
    done = caller.wait_for("DONE")
    caller.finish()
    key = done["operation"]["operation_key"]
    assert (done["outcome"], done["operation"]["state"]) == ("unknown", "UNKNOWN")
    [post_id] = stack.plugin_job_posts(job)

    stack.proxy.stop()
    try:
        out = resume(stack, job, "lossy", title)
        assert (out["decision"], out["reason"]) == ("reconcile", "reconcile_failed"), out
        assert "publishing proxy unreachable" in out["reconciliation"]["evidence"]["error"]
        item = stack.review_item(key)  # what an editor sees: state, evidence, history
        assert (item["state"], item["attempt"], item["reconcile_attempts"]) == ("UNKNOWN", 1, 1)
        assert "publishing proxy unreachable" in item["evidence"]["error"]
        assert [e["detail"]["reconcile_error"] for e in item["events"] if "reconcile_error" in (e["detail"] or {})]
        assert stack.plugin_job_posts(job) == [post_id]  # no dispatch
    finally:
        stack.proxy.start()

    out = resume(stack, job, "lossy", title)
    assert out["decision"] == "reuse_receipt" and out["receipt"]["remote_id"] == str(post_id), out
    assert stack.plugin_job_posts(job) == [post_id]
    assert stack.drafts_titled("test", title) == [post_id]
