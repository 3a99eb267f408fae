"""The same event delivered 2, 3 and 10 times (issue 37): at once, and 20 ms apart, as n8n users
report webhooks and schedules firing (n8n issues 31837, 38083, 30607), in real n8n with the real
ledger and a remote that takes 1.5 s to answer a write (remote.py "busy"). For Gated HTTP Request,
Gated Sub-Workflow and Begin Step + Record Outcome, with and without Look Up, on node 1.3 (before
liveness: every Start Job takes the job over at once, fencing out the live holder) and on the
newest node version (1.5: a duplicate waits for a live holder, then reads Done Before, or leaves by
Running Elsewhere past Wait for Live Holder; green either way).

Measured per case (one order): writes at the remote, failed executions, steps in the ledger's
review queue, how long the duplicates waited (Start Job's `waited_for_holder_s` /
`running_elsewhere.waited_s`), and how the executions ended (Done, Done Before, Running Elsewhere,
failed with which reason). Asserted for the newest version: one write, no failed execution, no
review item. The table: $DURABLE_CACHE/retry-suite.md (results.py), DURABLE_SAME_EVENT lines.
"""
from __future__ import annotations

import json
import os
import threading
import time
from urllib.parse import quote

import pytest
import requests
from event_flows import OPS, editor_built, subworkflows, wf_id, workflow
from remote import RecordingRemote
from results import record
from retry_stack import RetryStack

NEWEST, BEFORE = 1.5, 1.3
VERSIONS = (BEFORE, NEWEST)
LOOKUPS = (False, True)
PATTERNS = [(2, 0.0), (3, 0.0), (10, 0.0), (2, 0.02), (3, 0.02), (10, 0.02)]  # (times, seconds apart)
CASES = [(v, op, lk) for v in VERSIONS for op in OPS for lk in LOOKUPS]
EDITOR, EDITOR_WAIT = "svEditor", "svEditorWait"  # built as the editor builds it (event_flows.editor_built)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    remote = RecordingRemote()
    st = RetryStack(tmp_path_factory.mktemp("same-event"))
    try:
        st.start()
        subs = subworkflows(remote.url)
        flows = [workflow(v, op, lk, remote.url) for v, op, lk in CASES]
        flows += [editor_built(EDITOR, remote.url), editor_built(EDITOR_WAIT, remote.url, {"waitForHolderS": 1}, elsewhere=True)]
        st.import_workflows(subs + flows)
        st.start_server()
        # sub-workflows first: n8n runs the published version of a sub-workflow
        st.activate([s["id"] for s in subs], ())
        st.activate([f["id"] for f in flows], [f["id"] for f in flows])
        yield st, remote
    finally:
        remote.close()
        st.stop()


def fire(st, path: str, order_id: str, times: int, apart: float):
    """The webhook `times` times: all at once (threads behind a barrier) or `apart` seconds apart."""
    barrier = threading.Barrier(times)
    codes = []

    def post(delay):
        if apart:
            time.sleep(delay)
        else:
            barrier.wait()
        codes.append(requests.post(f"{st.n8n_url}/webhook/{path}", json={"order_id": order_id}, timeout=60).status_code)

    threads = [threading.Thread(target=post, args=(k * apart,)) for k in range(times)]
    for t in threads:
        t.start()
    return threads, codes


def start_job_item(st, execution_id: str) -> tuple[str, dict]:
    """How Start Job let the execution go on: ("job", item) or ("running_elsewhere", item). The
    editor-built workflow's Start Job is named as n8n names a new node: Durable Step."""
    rd = st.run_data(execution_id)
    runs = rd.get("Start Job") or rd.get("Durable Step") or []
    main = ((runs[0].get("data") or {}).get("main") or []) if runs else []
    for route, items in zip(("job", "running_elsewhere"), main):
        if items:
            return route, items[0]["json"]
    return "none", {}


def ending(st, execution_id: str, status: str) -> str:
    """done (the step was written now), done_before, running_elsewhere, or the failure's reason."""
    if status != "success":
        return f"failed:{st.reason_of(execution_id)}"
    route, _ = start_job_item(st, execution_id)
    if route == "running_elsewhere":
        return "running_elsewhere"
    rd = st.run_data(execution_id)
    for node in ("Create Order", "Durable Step1", "Record Outcome", "Report Lookup", "Begin Step"):
        for run in reversed(rd.get(node) or []):
            for items in (run.get("data") or {}).get("main") or []:
                for it in items or []:
                    decision = ((it.get("json") or {}).get("durable") or {}).get("decision")
                    if decision in ("recorded", "reuse_receipt"):
                        return "done" if decision == "recorded" else "done_before"
    return "success"


def waited_s(st, execution_id: str) -> float:
    route, item = start_job_item(st, execution_id)
    if route == "running_elsewhere":
        return float(item.get("running_elsewhere", {}).get("waited_s") or 0)
    return float(item.get("waited_for_holder_s") or 0)


def observe(st, remote, order_id: str, executions: list[dict]) -> dict:
    ops = st.ledger("GET", f"/v1/jobs/{quote(order_id, safe='')}/operations")["operations"]
    endings = [ending(st, e["id"], e["status"]) for e in executions]
    waits = [waited_s(st, e["id"]) for e in executions]
    return {"order_id": order_id, "writes": len(remote.writes(order_id)),
            "failed": sum(1 for e in executions if e["status"] != "success"),
            "review": sum(1 for o in ops if o["state"] == "NEEDS_REVIEW"),
            "max_wait_s": max(waits) if waits else 0.0, "waits_s": sorted(waits),
            "endings": {k: endings.count(k) for k in sorted(set(endings))},
            "ledger": ",".join(o["state"] for o in ops)}


def run_pattern(st, remote, times: int, apart: float) -> dict:
    """Every case's workflow at once, each with its own order; returns case -> observation."""
    tag = f"{times}x{'conc' if not apart else int(apart * 1000)}"
    orders = {c: f"se-{tag}-{wf_id(*c)}" for c in CASES}
    for o in orders.values():
        remote.plan[o] = ["busy"] * 20
    before = {c: len(st.executions(wf_id(*c))) for c in CASES}
    t0 = time.monotonic()
    fired = [fire(st, wf_id(*c), o, times, apart) for c, o in orders.items()]
    for threads, _ in fired:
        for t in threads:
            t.join(90)
    assert all(code == 200 for _, codes in fired for code in codes), [codes for _, codes in fired]
    out = {}
    for c, o in orders.items():
        ended = st.wait_executions(wf_id(*c), before[c] + times, timeout=150)[before[c]:]
        out[c] = observe(st, remote, o, ended)
    print(f"\n[same-event] {tag}: all cases ended in {time.monotonic() - t0:.1f} s")
    return out


OP_TITLES = {"http": "Gated HTTP Request", "sub": "Gated Sub-Workflow", "begin": "Begin Step + Record Outcome"}


@pytest.mark.parametrize("times,apart", PATTERNS, ids=[f"{n}x-{'at-once' if not a else '20ms'}" for n, a in PATTERNS])
def test_the_same_event_many_times(stack, times, apart):
    st, remote = stack
    seen = run_pattern(st, remote, times, apart)
    when = "at once" if not apart else "20 ms apart"
    for (v, op, lk), row in seen.items():
        print("DURABLE_SAME_EVENT " + json.dumps({"times": times, "when": when, "version": v, "op": op,
                                                  "look_up": lk, **row}, sort_keys=True))
        record(f"s-{times}-{when}", f"(s) the same webhook {times} times {when}", f"{op}-{'lookup' if lk else 'bare'}-{v}",
               {**row, "what": f"{OP_TITLES[op]}, Look Up {'on' if lk else 'off'}, node {v}"})
    if os.environ.get("DURABLE_RETRY_EXPLORE"):
        return
    for (v, op, lk), row in seen.items():
        if v == NEWEST:
            assert (row["writes"], row["failed"], row["review"]) == (1, 0, 0), (v, op, lk, row)
            assert set(row["endings"]) <= {"done", "done_before", "running_elsewhere"}, (v, op, lk, row)
            assert row["endings"].get("done") == 1, (v, op, lk, row)
        else:  # before: never two writes with Look Up or without (the fencing token), but red runs
            assert row["writes"] <= 1 or (op != "http" and lk), (v, op, lk, row)


# ---------------------------------------------------------------------- built in the editor (issue 37, part 5)

def answer(st, path: str, order_id: str) -> tuple[int, dict, float]:
    """The webhook's answer (it answers when the last node finishes): status, body, seconds."""
    t0 = time.monotonic()
    r = requests.post(f"{st.n8n_url}/webhook/{path}", json={"order_id": order_id}, timeout=120)
    try:
        body = r.json()
    except ValueError:
        body = {"text": r.text}
    return r.status_code, body, round(time.monotonic() - t0, 1)


def test_a_workflow_built_in_the_editor_answers_done_then_done_before_with_the_same_fields(stack):
    """Webhook -> Durable Step (Start Job) -> Durable Step1 (Gated HTTP Request), defaults only, the
    Webhook answering with the last node's item: the first run Done, the second Done Before with the
    same fields and a 2xx (before node 1.5: the second answered HTTP 500 "No item to return was
    found", Done Before being on an output of its own, and the first run failed: no node named
    "Start Job")."""
    st, remote = stack
    order = "editor-1"
    before = len(st.executions(EDITOR))
    first = answer(st, EDITOR, order)
    second = answer(st, EDITOR, order)
    runs = st.wait_executions(EDITOR, before + 2)[before:]
    print(f"\nDURABLE_EDITOR_BUILT first {first[0]} {json.dumps(first[1])}\n  second {second[0]} {json.dumps(second[1])}")
    assert [r["status"] for r in runs] == ["success", "success"], [st.error_of(r["id"]) for r in runs]
    assert (first[0], second[0]) == (200, 200), (first, second)
    assert first[1]["durable"]["decision"] == "recorded" and second[1]["durable"]["decision"] == "reuse_receipt"
    fields = lambda body: {k: v for k, v in body.items() if k != "durable"}  # noqa: E731
    assert fields(second[1]) == fields(first[1]) == {"id": f"{order}-1", "order_id": order}, (first, second)
    assert len(remote.writes(order)) == 1


def test_the_duplicates_side_in_the_editor(stack, tmp_path):
    """What a builder sees on the duplicate's side (docs/img/): the same webhook twice at once on the
    editor-built workflow (the duplicate waits for the holder, then Done Before, both answered 2xx),
    and with Wait for Live Holder 1 s (the duplicate leaves by Running Elsewhere, green, and the
    No Operation node there makes the Webhook answer it 2xx)."""
    from support.n8n_editor import Editor
    st, remote = stack
    shots = {}
    for path, order, name in ((EDITOR, "editor-2", "duplicate-done-before.png"),
                              (EDITOR_WAIT, "editor-3", "duplicate-running-elsewhere.png")):
        remote.plan[order] = ["busy"] * 3
        before = len(st.executions(path))
        got = []
        threads = [threading.Thread(target=lambda: got.append(answer(st, path, order))) for _ in range(2)]
        for t in threads:
            t.start()
            time.sleep(0.02)
        for t in threads:
            t.join(120)
        runs = st.wait_executions(path, before + 2)[before:]
        endings = [ending(st, r["id"], r["status"]) for r in runs]
        print(f"\nDURABLE_EDITOR_DUPLICATE {path}: answers {[(c, s) for c, _, s in got]}, endings {endings}")
        assert sorted(c for c, _, _ in got) == [200, 200], got
        assert [r["status"] for r in runs] == ["success", "success"], runs
        assert len(remote.writes(order)) == 1
        duplicate = next(r for r, e in zip(runs, endings) if e != "done")
        assert ending(st, duplicate["id"], "success") == ("done_before" if path == EDITOR else "running_elsewhere")
        shots[name] = duplicate["id"]
    with Editor(st.n8n_url, tmp_path, window="1600,900") as editor:
        for name, execution_id in shots.items():
            wf = EDITOR if "done-before" in name else EDITOR_WAIT
            editor.driver.get(f"{st.n8n_url}/workflow/{wf}/executions/{execution_id}")
            time.sleep(8)  # the execution list and its preview load
            editor.save(tmp_path / name)
    print(f"\n[same-event] editor screenshots in {tmp_path}")
