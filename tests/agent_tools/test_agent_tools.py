"""n8n's AI Agent with a gated tool, in real n8n 2.40.7 (`n8n execute`), counted at the remote.

The stand-in model calls issue_refund three times with the same business arguments, each time
under a new call id. The tool workflow gates the refund by operation key
`refund:{customer_id}:{refund_id}` (built from the business arguments, never the call id):

    three        no interruption: 1 refund at the refunds API; call 1 issued it, calls 2 and 3 get
                 the stored receipt (Already Done); the agent's answer says so
    afterwrite   n8n SIGKILLed after the refunds API created the refund, before n8n saw the answer
                 (so before Issue Refund recorded it): the re-run's first call runs the lookup
                 sub-workflow Find Refund, which finds the refund by its stamped key: found ->
                 Done Before; still 1 refund
    beforesend   n8n SIGKILLed with the create request held before it reached the refunds API:
                 Find Refund finds nothing: absent -> a new attempt in the same node -> exactly 1 refund
    parallel     the three calls in ONE model turn (parallel tool calls): n8n runs the tool node once
                 per call, one after the other; 1 refund, two stored receipts
    conflict     the same refund id with another amount: digest_mismatch -> Needs Attention; the
                 agent hears "Not done", nothing is sent

Timings are printed as DURABLE_AGENT_TOOLS lines.
"""
from __future__ import annotations

import json
import re
import time
from urllib.parse import quote

import pytest
from agent_stack import REPO, TOOL_WORKFLOW_ID, agent_output, tool_calls
from conftest import REQUESTS, workflow_id
from pipeline_stack import Service, free_port, wait_http
from support.n8n_editor import Editor, require_browser, sign_in

TOOL_NODES = ("Start Job", "Issue Refund", "Tool Answer: Refunded", "Tool Answer: Not Done")


def op_key(req: dict) -> str:
    return f"refund:{req['customer_id']}:{req['refund_id']}"


def operation(st, req: dict) -> dict:
    return st.ledger("GET", f"/v1/operations/{quote(op_key(req), safe='')}")


def run_agent(st, name: str, trap=None) -> dict:
    res = st.execute(workflow_id(name), trap=trap)
    if trap is None:
        assert res["exit"] == 0 and res["error"] is None, (res["error"], res["stdout"][-3000:])
    return res


def call_ids(st, req: dict) -> list[str]:
    """The call ids of the stand-in's issue_refund calls in the last conversation about this refund."""
    convo = [b for b in st.standin_requests() if f"refund_id: {req['refund_id']}" in json.dumps(b["messages"])
             .replace("\\n", "\n") and f"amount_cents: {req['amount_cents']}" in json.dumps(b["messages"]).replace("\\n", "\n")]
    last = convo[-1]["messages"]
    return [c["id"] for m in last if m.get("role") == "assistant" for c in m.get("tool_calls") or []]


def said(run: dict) -> list[str]:
    """The agent's final answer, one line per tool call ("1. ...", "2. ...", "3. ...")."""
    out = agent_output(run)
    assert "Tool results verbatim: " in out, out  # and the raw tool results after them
    return [line for line in out.split("\n") if re.match(r"^\d+\. ", line)]


def assert_all_answers_are_the_receipt(calls: list[dict], remote_id: str, req: dict, gates: list[str]):
    assert len(calls) == 3, calls
    for call, gate in zip(calls, gates):
        assert call["input"] == req, call["input"]  # the business arguments, nothing else
        (answer,) = call["output"]
        assert (answer["status"], answer["gate"]) == ("refunded", gate), answer
        assert answer["refund"]["id"] == answer["refund"]["remote_id"] == remote_id
        assert answer["operation_key"] == op_key(req)


def test_three_calls_with_new_call_ids_refund_once(stack):
    st, req = stack, REQUESTS["three"]
    t0 = time.monotonic()
    res = run_agent(st, "three")
    (refund,) = st.refunds(refund_id=req["refund_id"])  # counted at the remote: exactly one
    assert refund["operation_key"] == op_key(req) and refund["amount_cents"] == req["amount_cents"]
    ids = call_ids(st, req)
    assert len(ids) == 3 and len(set(ids)) == 3, ids  # three different call ids
    calls = tool_calls(res["run"])
    assert_all_answers_are_the_receipt(calls, refund["id"], req, ["issued_now", "already_done", "already_done"])
    already = (f"Already done: refund {refund['id']} was issued earlier for C-1042 / RF-3001; nothing was sent "
               "again, this is the stored receipt.")
    assert said(res["run"]) == [f"1. Refund {refund['id']} issued now: 2500 cents EUR to C-1042 (refund RF-3001).",
                                f"2. {already}", f"3. {already}"]
    op = operation(st, req)["operation"]
    assert (op["state"], op["attempt"], op["remote_id"]) == ("CONFIRMED", 1, refund["id"])
    print(f"\nDURABLE_AGENT_TOOLS three calls: {res['seconds']} s (n8n execute), {len(st.refunds())} refund(s) "
          f"at the remote for {op_key(req)}, call ids {ids}, {round(time.monotonic() - t0, 1)} s")


def test_killed_between_remote_write_and_receipt_then_rerun(stack):
    st, req = stack, REQUESTS["afterwrite"]
    trap = st.relay.arm("POST", r"^/v1/refunds$", "hold_response")
    try:
        killed = run_agent(st, "afterwrite", trap=trap)
    finally:
        st.relay.disarm()
    assert killed["killed"] and trap.upstream_status == 201, (killed, trap.upstream_status)
    (refund,) = st.refunds(refund_id=req["refund_id"])  # the refunds API wrote it ...
    op = operation(st, req)["operation"]
    assert op["state"] == "SENT" and op["remote_id"] is None  # ... n8n died before recording it
    rerun = run_agent(st, "afterwrite")
    assert len(st.refunds(refund_id=req["refund_id"])) == 1  # still one refund at the remote
    calls = tool_calls(rerun["run"])
    assert_all_answers_are_the_receipt(calls, refund["id"], req, ["already_done"] * 3)
    already = (f"Already done: refund {refund['id']} was issued earlier for C-2077 / RF-3002; nothing was sent "
               "again, this is the stored receipt.")
    assert said(rerun["run"]) == [f"{i}. {already}" for i in (1, 2, 3)]
    detail = operation(st, req)
    assert (detail["operation"]["state"], detail["operation"]["remote_id"]) == ("CONFIRMED", refund["id"])
    events = json.dumps(detail["events"])
    assert "found" in events, events  # settled by the workflow's own lookup (Find Refund: found)
    print(f"\nDURABLE_AGENT_TOOLS killed after the write: killed at {killed['seconds']} s, re-run {rerun['seconds']} s, "
          f"refunds at the remote for {op_key(req)}: 1, all 3 calls answered with the stored receipt {refund['id']}")


def test_killed_before_the_request_reached_the_remote_then_rerun(stack):
    st, req = stack, REQUESTS["beforesend"]
    trap = st.relay.arm("POST", r"^/v1/refunds$", "before_send")
    try:
        killed = run_agent(st, "beforesend", trap=trap)
    finally:
        st.relay.disarm()
    assert killed["killed"]
    assert st.refunds(refund_id=req["refund_id"]) == []
    assert operation(st, req)["operation"]["state"] == "SENT"
    rerun = run_agent(st, "beforesend")
    (refund,) = st.refunds(refund_id=req["refund_id"])
    calls = tool_calls(rerun["run"])
    assert_all_answers_are_the_receipt(calls, refund["id"], req, ["issued_now", "already_done", "already_done"])
    op = operation(st, req)["operation"]
    assert (op["state"], op["attempt"], op["remote_id"]) == ("CONFIRMED", 2, refund["id"])  # absent -> attempt 2
    lines = said(rerun["run"])
    assert lines[0] == f"1. Refund {refund['id']} issued now: 800 cents USD to C-3150 (refund RF-3003).", lines
    assert [line[3:].split(";")[0] for line in lines[1:]] == [
        f"Already done: refund {refund['id']} was issued earlier for C-3150 / RF-3003"] * 2, lines
    print(f"\nDURABLE_AGENT_TOOLS killed before send: re-run {rerun['seconds']} s, lookup absent -> attempt 2, "
          f"refunds at the remote for {op_key(req)}: 1")


def test_parallel_tool_calls_in_one_turn_refund_once(stack):
    st, req = stack, REQUESTS["parallel"]
    res = run_agent(st, "parallel")
    (refund,) = st.refunds(refund_id=req["refund_id"])
    convo = [b for b in st.standin_requests() if "RF-3004" in json.dumps(b["messages"])]
    # Two model requests: the one answered with three tool calls at once, and the final answer's
    # (n8n replays the history as one assistant message per call, each followed by its tool result).
    assert len(convo) == 2, [len(b["messages"]) for b in convo]
    answered = [m["tool_call_id"] for m in convo[-1]["messages"] if m.get("role") == "tool"]
    assert len(set(answered)) == 3, answered
    calls = tool_calls(res["run"])
    assert_all_answers_are_the_receipt(calls, refund["id"], req, ["issued_now", "already_done", "already_done"])
    runs = res["run"]["data"]["resultData"]["runData"]["issue_refund"]
    spans = [(r["startTime"], r["startTime"] + r["executionTime"]) for r in runs]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans  # n8n ran them one after the other
    print(f"\nDURABLE_AGENT_TOOLS parallel calls in one turn: {res['seconds']} s, refunds at the remote: 1")


def test_same_refund_with_other_amount_is_not_done_and_not_sent(stack):
    st, req = stack, REQUESTS["conflict"]
    if not st.refunds(refund_id=req["refund_id"]):
        run_agent(st, "three")  # the refund this request conflicts with
    before = len(st.refunds())
    res = run_agent(st, "conflict")
    assert len(st.refunds()) == before and len(st.refunds(refund_id=req["refund_id"])) == 1
    calls = tool_calls(res["run"])
    assert len(calls) == 3
    for call in calls:
        (answer,) = call["output"]
        assert (answer["status"], answer["reason"]) == ("not_done", "digest_mismatch"), answer
    lines = said(res["run"])
    assert len(lines) == 3 and all(line[3:].startswith("Not done: the refund is not confirmed (digest_mismatch).")
                                   for line in lines), lines


# ---------------------------------------------------------------------- the editor, at fit-to-window

@pytest.fixture(scope="module")
def editor(stack):
    """`n8n start` on the same user folder (the CLI runs are over), with an owner signed in."""
    require_browser()
    port = free_port()
    env = {**stack.n8n_env(), "N8N_PORT": str(port), "N8N_LISTEN_ADDRESS": "127.0.0.1"}
    t0 = time.monotonic()
    server = Service("n8n-editor", ["bash", str(REPO / "stack" / "n8n.sh"), "n8n", "start"], env,
                     stack.workdir / "n8n-editor.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/healthz/readiness", timeout=120, proc=server.proc, log=server.log_path)
        cookie = sign_in(url)
        print(f"\nDURABLE_AGENT_TOOLS editor up in {round(time.monotonic() - t0, 1)} s")
        yield url, cookie
    finally:
        server.stop()


def _screenshot(editor, tmp_path, wf_id: str, file_name: str, must_show, min_nodes: int, window="1600,900"):
    """The n8n editor with a workflow at fit-to-window in Debian's headless Chromium
    (tests/support/n8n_editor.py). DURABLE_UPDATE_SCREENSHOTS=1 also writes docs/img/."""
    url, cookie = editor
    with Editor(url, tmp_path, window=window, cookie=cookie) as browser:
        names = browser.open_workflow(wf_id, min_nodes, must_show=must_show)
        shot = browser.save(tmp_path / file_name)
    print(f"\nDURABLE_AGENT_TOOLS editor screenshot {shot}")
    return names


def test_zz_editor_shows_the_gated_tool_workflow(editor, tmp_path):
    _screenshot(editor, tmp_path, TOOL_WORKFLOW_ID, "agent-tools.png", TOOL_NODES, len(TOOL_NODES) + 1)


def test_zz_editor_shows_the_agent_workflow(editor, tmp_path):
    _screenshot(editor, tmp_path, workflow_id("three"), "agent-tools-agent.png",
                ("AI Agent", "OpenAI Chat Model", "issue_refund", "Refund Request"), 5)
