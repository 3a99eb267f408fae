"""n8n's own retry buttons against one order per scenario and variant, in real n8n 2.40.7
(`n8n start`, production webhooks, REST API) with the real ledger and a remote that counts every
write (tests/retry/remote.py). One n8n and one ledger serve the whole module; every scenario has
its own order ids, so scenarios never see each other's writes.

    (a) Retry On Fail on Create Order; the remote commits, then answers 500 / past the timeout
    (b) "Retry execution" (REST) of the failed execution, original and currently saved workflow
    (c) kill -9 of n8n while the remote holds its answer; a plain re-run; then Retry of the
        crashed execution; "Save Execution Progress" off and on
    (d) the same webhook twice with the same order, one after the other and at the same moment

What each variant does is asserted as measured (`EXPECT`): for plain n8n the count it really
makes, for the gated variants exactly one write, and Needs Attention (with its reason) only
where the outcome cannot be known.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from flows import VARIANTS, workflow
from n8n_server import RetryStack
from remote import RecordingRemote
from results import record

REPO = Path(__file__).resolve().parents[2]
GATED_BUILT = "gatedRequest" in (REPO / "n8n-nodes-durable/dist/nodes/DurableStep/description.js").read_text() \
    if (REPO / "n8n-nodes-durable/dist/nodes/DurableStep/description.js").exists() else False
CONFIGS = {"base": {}, "rof": {"retry_on_fail": True}, "prog": {"save_progress": True}}


def variants():
    return [v for v in VARIANTS if v != "gated" or GATED_BUILT]


def wf_id(variant: str, config: str) -> str:
    return f"rt{variant}{config}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    remote = RecordingRemote()
    st = RetryStack(tmp_path_factory.mktemp("retry-buttons"))
    try:
        st.start()
        ids = [wf_id(v, c) for v in variants() for c in CONFIGS]
        st.import_workflows([workflow(v, wf_id(v, c), wf_id(v, c), remote.url, **kw)
                             for v in variants() for c, kw in CONFIGS.items()])
        st.start_server()
        st.activate(ids, ids)
        yield st, remote
    finally:
        remote.close()
        st.stop()


# ---------------------------------------------------------------------- observing one order

def job_state(st: RetryStack, order_id: str) -> str | None:
    try:
        ops = st.ledger("GET", f"/v1/jobs/{quote(order_id, safe='')}/operations")["operations"]
    except Exception:  # noqa: BLE001 - plain n8n has no job
        return None
    return ",".join(o["state"] for o in ops) or None


def reason_of(st: RetryStack, execution_id: str) -> str | None:
    """Durable Step 1.2 fails an execution with `<reason>: <explanation>`; other errors as n8n says."""
    msg = st.error_of(execution_id)
    if not msg:
        return None
    head = msg.split(":", 1)[0]
    return head if head.replace("_", "").isalnum() and head.islower() else msg[:80]


def run(st: RetryStack, variant: str, config: str, order_id: str, times: int = 1) -> list[dict]:
    """Fire the workflow's webhook for the order and wait until the new execution(s) ended."""
    wf = wf_id(variant, config)
    before = len(st.executions(wf))
    for _ in range(times):
        assert st.fire(wf, order_id) == 200
    return st.wait_executions(wf, before + times)[before:]


def run_all(st, config: str, orders: dict[str, str]) -> dict[str, list[dict]]:
    """All variants at once (each has its own workflow and order)."""
    out, threads = {}, []
    for v, o in orders.items():
        t = threading.Thread(target=lambda v=v, o=o: out.__setitem__(v, run(st, v, config, o)))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(120)
    return out


def observe(st, remote, order_id: str, executions: list[dict]) -> dict:
    return {"order_id": order_id, "writes": len(remote.writes(order_id)),
            "lookups": len(remote.lookups(order_id)),
            "executions": [f"{e['mode']}:{e['status']}" for e in executions],
            "reasons": [reason_of(st, e["id"]) for e in executions],
            "failed_nodes": [st.failed_node(e["id"]) for e in executions],
            "nodes_run": [st.nodes_run(e["id"]) for e in executions],
            "ledger": job_state(st, order_id)}


# ---------------------------------------------------------------------- what was measured

# (scenario, variant) -> the facts asserted; "what" is the table's words.
EXPECT: dict[tuple[str, str], dict] = {}


def check(scenario: str, title: str, variant: str, seen: dict):
    exp = EXPECT.get((scenario, variant), {})
    record(scenario, title, variant, {**seen, "what": exp.get("what", "")})
    if os.environ.get("DURABLE_RETRY_EXPLORE"):
        return
    for k, v in exp.items():
        if k != "what":
            assert seen[k] == v, (scenario, variant, k, seen)
    if variant != "plain":
        assert seen["writes"] == exp.get("writes", 1), (scenario, variant, seen)


# ---------------------------------------------------------------------- (a) Retry On Fail

@pytest.mark.parametrize("failure", ["fail500", "slow"])
def test_a_retry_on_fail(stack, failure):
    st, remote = stack
    orders = {v: f"a-{failure}-{v}" for v in variants()}
    for o in orders.values():
        remote.plan[o] = [failure]
    ended = run_all(st, "rof", orders)
    what = {"fail500": "commits, then 500", "slow": "commits, then times out"}[failure]
    for v, o in orders.items():
        check(f"a-{failure}", f"(a) Retry On Fail; the remote {what}", v, observe(st, remote, o, ended[v]))


# ---------------------------------------------------------------------- (b) Retry execution

@pytest.mark.parametrize("load_workflow", [False, True])
def test_b_retry_execution(stack, load_workflow):
    """The remote commits the write and answers 500, and its lookup answers 500 once; then n8n's
    "Retry execution" of whatever execution failed."""
    st, remote = stack
    tag = "saved" if load_workflow else "orig"
    orders = {v: f"b-{tag}-{v}" for v in variants()}
    for o in orders.values():
        remote.plan[o], remote.lookup_plan[o] = ["fail500"], ["fail500"]
    ended = run_all(st, "base", orders)
    for v, o in orders.items():
        first = ended[v][0]
        r = st.retry(first["id"], load_workflow)
        retried = [e for e in st.executions(wf_id(v, "base")) if e["retry_of"] == first["id"]]
        seen = observe(st, remote, o, [first, *retried])
        seen["retry_http"] = r.status_code
        if r.status_code != 200:
            seen["retry_refused"] = (r.json().get("message") or r.text)[:120]
        title = f"(b) Retry execution ({'currently saved' if load_workflow else 'original'} workflow) after 500"
        check(f"b-{tag}", title, v, seen)


# ---------------------------------------------------------------------- (c) kill -9, re-run, Retry

def fire_when_up(st, path: str, order_id: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        status = st.fire(path, order_id)
        if status == 200 or time.monotonic() > deadline:
            return status
        time.sleep(0.3)


def test_c_kill_then_rerun_then_retry(stack):
    st, remote = stack
    cases = {(v, c): f"c-{'on' if c == 'prog' else 'off'}-{v}" for v in variants() for c in ("base", "prog")}
    for o in cases.values():
        remote.plan[o] = ["hold"]
    before = {k: len(st.executions(wf_id(*k))) for k in cases}
    for (v, c), o in cases.items():
        assert st.fire(wf_id(v, c), o) == 200
    assert remote.wait_held(len(cases)), remote.requests
    st.kill_server()  # every execution dies while the remote holds its answer
    remote.release()
    st.start_server()
    crashed = {}
    for k, o in cases.items():
        rows = st.executions(wf_id(*k))[before[k]:]
        assert len(rows) == 1, rows
        crashed[k] = rows[0]
    # a plain re-run: the same webhook with the same order
    rerun = {}
    for k, o in cases.items():
        assert fire_when_up(st, wf_id(*k), o) == 200
    for k in cases:
        rerun[k] = st.wait_executions(wf_id(*k), before[k] + 2)[before[k] + 1]
    # then n8n's Retry of the crashed execution
    for (v, c), o in cases.items():
        r = st.retry(crashed[(v, c)]["id"], False)
        retried = [e for e in st.executions(wf_id(v, c)) if e["retry_of"] == crashed[(v, c)]["id"]]
        seen = observe(st, remote, o, [crashed[(v, c)], rerun[(v, c)], *retried])
        seen["retry_http"] = r.status_code
        if r.status_code != 200:
            seen["retry_refused"] = (r.json().get("message") or r.text)[:120]
        progress = "on" if c == "prog" else "off"
        check(f"c-{progress}", f"(c) kill -9 during the write, re-run, then Retry (Save Execution Progress {progress})",
              v, seen)


# ---------------------------------------------------------------------- (d) the same trigger twice

def test_d_same_trigger_twice_sequentially(stack):
    st, remote = stack
    for v in variants():
        o = f"d-seq-{v}"
        ended = run(st, v, "base", o) + run(st, v, "base", o)
        check("d-seq", "(d) the same webhook twice, one after the other", v, observe(st, remote, o, ended))


def test_d_same_trigger_twice_concurrently(stack):
    st, remote = stack
    orders = {v: f"d-conc-{v}" for v in variants()}
    for o in orders.values():
        remote.plan[o] = ["delay", "delay"]
    barrier = threading.Barrier(2 * len(orders))
    before = {v: len(st.executions(wf_id(v, "base"))) for v in orders}

    def fire(v, o):
        barrier.wait()
        assert st.fire(wf_id(v, "base"), o) == 200

    threads = [threading.Thread(target=fire, args=(v, o)) for v, o in orders.items() for _ in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for v, o in orders.items():
        ended = st.wait_executions(wf_id(v, "base"), before[v] + 2)[before[v]:]
        check("d-conc", "(d) the same webhook twice at the same moment", v, observe(st, remote, o, ended))
