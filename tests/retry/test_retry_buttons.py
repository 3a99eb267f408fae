"""n8n's own retry buttons against one order per scenario and variant, in real n8n 2.40.7
(`n8n start`, production webhooks, REST API) with the real ledger and a remote that counts every
write (tests/retry/remote.py). One n8n and one ledger serve the whole module; every scenario has
its own order ids, so scenarios never see each other's writes.

    (a) Retry On Fail on Create Order; the remote commits, then answers 500 / past the timeout
    (b) "Retry execution" (REST) of the failed execution, original and currently saved workflow
    (c) kill -9 of n8n while the remote holds its answer; a plain re-run; then Retry of the
        crashed execution; "Save Execution Progress" off and on
    (d) the same webhook twice with the same order, one after the other and at the same moment
    (f) a remote that dedupes by Idempotency-Key (its own server, remote.py dedupe=True): (a), (b)
        and (c) for the Gated HTTP Request without Look Up (before) and with Remote Dedupes by
        Idempotency Header (after); orders written, people needed, executions green and red

What each variant does is asserted as measured (`EXPECT`): for plain n8n the count it really
makes, for the gated variants exactly one write, and Needs Attention (with its reason) only
where the outcome cannot be known.
"""
from __future__ import annotations

import os
import threading
import time
from urllib.parse import quote

import pytest
from flows import DEDUPE_VARIANTS, TIMEOUT_MS, VARIANTS, workflow
from retry_stack import RetryStack
from remote import SLOW_S, RecordingRemote
from results import DEDUPE_COLUMNS, dedupe_cell, record, recorded, table

CONFIGS = {"base": {}, "rof": {"retry_on_fail": True}, "prog": {"save_progress": True}}
DEDUPE_CONFIGS = ("base", "rof")  # the deduping remote's scenarios need no saved progress


def variants():
    return list(VARIANTS)


def wf_id(variant: str, config: str) -> str:
    return f"rt{variant}{config}"


@pytest.fixture(scope="module")
def dedupe_remote():
    """The remote that honours Idempotency-Key (the IETF draft's semantics), for scenarios (f)."""
    remote = RecordingRemote(dedupe=True)
    yield remote
    remote.close()
    seen = [r for r in recorded() if (r["scenario"], r["variant"]) in DEDUPE_SEEN]
    if seen:  # (f) as measured in this run: before and after
        print("\nDURABLE_RETRY_DEDUPE a remote that dedupes by Idempotency-Key\n"
              + table(seen, DEDUPE_COLUMNS, dedupe_cell))


@pytest.fixture(scope="module")
def stack(tmp_path_factory, dedupe_remote):
    remote = RecordingRemote()
    st = RetryStack(tmp_path_factory.mktemp("retry-buttons"))
    try:
        st.start()
        flows = [workflow(v, wf_id(v, c), wf_id(v, c), remote.url, **kw)
                 for v in variants() for c, kw in CONFIGS.items()]
        flows += [workflow(v, wf_id(v, c), wf_id(v, c), dedupe_remote.url, **CONFIGS[c])
                  for v in DEDUPE_VARIANTS for c in DEDUPE_CONFIGS]
        ids = [f["id"] for f in flows]
        st.import_workflows(flows)
        st.start_server()
        st.activate(ids, ids)
        yield st, remote
    finally:
        remote.close()
        st.stop()


# ---------------------------------------------------------------------- observing one order

def job_ops(st: RetryStack, order_id: str) -> list[dict]:
    try:
        return st.ledger("GET", f"/v1/jobs/{quote(order_id, safe='')}/operations")["operations"]
    except Exception:  # noqa: BLE001 - plain n8n has no job
        return []


def job_state(st: RetryStack, order_id: str) -> str | None:
    return ",".join(o["state"] for o in job_ops(st, order_id)) or None


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
            "reasons": [st.reason_of(e["id"]) for e in executions],
            "failed_nodes": [st.failed_node(e["id"]) for e in executions],
            "last_error": (st.error_of(executions[-1]["id"]) or "")[:900] if executions else "",
            "nodes_run": [st.nodes_run(e["id"]) for e in executions],
            # gated: [Done, Done Before] items of the gated node per execution
            "gated_routes": [st.outputs(e["id"], "Create Order") for e in executions]
            if "-gated" in order_id else None,
            "ledger": job_state(st, order_id),
            # people needed: the order's steps in the ledger's review queue
            "people": sum(1 for o in job_ops(st, order_id) if o["state"] == "NEEDS_REVIEW"),
            "repeats": remote.repeats(order_id),
            "ledger_attempts": [(o.get("attempt"), o.get("remote_id")) for o in job_ops(st, order_id)],
            "review_candidates": review_candidates(st, order_id)}


def review_candidates(st: RetryStack, order_id: str) -> list:
    """For a step in the review queue: the remote ids the ledger kept as evidence, which the
    review item offers an editor to confirm."""
    out = []
    for op in job_ops(st, order_id):
        if op["state"] == "NEEDS_REVIEW":
            item = st.ledger("GET", f"/v1/reviews/{quote(op['operation_key'], safe='')}", role="editor")
            out += [c["id"] for c in item.get("candidates") or []]
    return out


# ---------------------------------------------------------------------- what was measured

CRASHED = "Workflow did not finish, possible out-of-memory issue"  # n8n's words for a crashed execution
HTTP_500 = "The service was not able to process your request"      # HTTP Request's words for a 500


def E(writes, executions, reasons, what, ledger=None, lookups=0, **kw):  # noqa: N802 - a table row
    return {"writes": writes, "executions": executions, "reasons": reasons, "ledger": ledger, "lookups": lookups,
            "what": what, **kw}


OK, ERR, RETRY_OK, RETRY_ERR = "webhook:success", "webhook:error", "retry:success", "retry:error"
CRASH = "webhook:crashed"
# (scenario, variant) -> what was measured and is asserted; "what" is the table's words.
EXPECT: dict[tuple[str, str], dict] = {}
for _f in ("fail500", "slow"):
    EXPECT |= {
        (f"a-{_f}", "plain"): E(2, [OK], [None], "Retry On Fail sends the order again; the execution succeeds"),
        (f"a-{_f}", "begin"): E(2, [OK], [None], "Retry On Fail repeats the HTTP node between Begin Step and Record "
                                "Outcome (n8n retries an error item too); Record Outcome confirms the second write: "
                                "turn Retry On Fail off there", ledger="CONFIRMED"),
        (f"a-{_f}", "gated"): E(1, [OK], [None], "the first try ends outcome_unknown; Retry On Fail runs the node "
                                "again, which asks the ledger first: the Look Up finds the order, Done Before",
                                ledger="CONFIRMED", lookups=1, gated_routes=[[0, 1]]),
    }
for _tag in ("orig", "saved"):
    EXPECT |= {
        (f"b-{_tag}", "plain"): E(2, [ERR, RETRY_OK], [HTTP_500, None], "the Retry runs the failed HTTP node again (and succeeds)"),
        (f"b-{_tag}", "begin"): E(1, [ERR, RETRY_ERR, RETRY_ERR], ["outcome_unknown"] * 3,
                                  "Record Outcome fails the execution (outcome_unknown: no lookup in this pattern); "
                                  "each Retry re-runs only Record Outcome, which says the same", ledger="UNKNOWN"),
        (f"b-{_tag}", "gated"): E(1, [ERR, RETRY_ERR, RETRY_OK], ["outcome_unknown", "lookup_failed", None],
                                  "outcome_unknown; the Retry looks the order up, the lookup answers 500: "
                                  "lookup_failed, the step stays unknown; the Retry of that Retry looks again: found, "
                                  "Done Before", ledger="CONFIRMED", lookups=2, gated_routes=[None, None, [0, 1]]),
    }
EXPECT |= {
    ("c-off", "plain"): E(3, [CRASH, OK, RETRY_OK], [CRASHED, None, None], "the re-run writes again; the Retry (run "
                          "data recovered from n8n's event log) starts over from the trigger and writes a third"),
    ("c-off", "begin"): E(1, [CRASH, ERR, RETRY_ERR], [CRASHED, "needs_review", "needs_review"], "re-run: Begin Step "
                          "finds the step sent, outcome unknown, no reconciler: review queue; the Retry starts over "
                          "and stops at Begin Step too", ledger="NEEDS_REVIEW"),
    ("c-off", "gated"): E(1, [CRASH, OK, RETRY_OK], [CRASHED, None, None], "re-run: the Look Up finds the write, "
                          "Done Before; the Retry starts over: Done Before", ledger="CONFIRMED", lookups=1),
    ("c-on", "plain"): E(3, [CRASH, OK, RETRY_OK], [CRASHED, None, None], "the re-run writes again; the Retry resumes "
                         "at the HTTP node and writes a third"),
    ("c-on", "begin"): E(2, [CRASH, ERR, RETRY_ERR], [CRASHED, "needs_review", "stale_fencing_token"], "re-run: "
                         "review queue; the Retry resumes after Begin Step (saved) and the HTTP node writes again; "
                         "Record Outcome: stale_fencing_token (the re-run took the job over), receipt kept for review",
                         ledger="NEEDS_REVIEW", review_candidates=["c-on-begin-2"]),
    ("c-on", "gated"): E(1, [CRASH, OK, RETRY_ERR], [CRASHED, None, "stale_fencing_token"], "re-run: the Look Up "
                         "finds the write, Done Before; the Retry resumes at the gated node, which asks the ledger first: "
                         "stale_fencing_token, nothing sent", ledger="CONFIRMED", lookups=1),
    ("cr-off", "plain"): E(3, [CRASH, RETRY_OK, OK], [CRASHED, None, None], "the Retry starts over and writes "
                           "again; the re-run writes a third"),
    ("cr-off", "begin"): E(1, [CRASH, RETRY_ERR, ERR], [CRASHED, "needs_review", "needs_review"], "the Retry starts "
                           "over: Begin Step finds the step sent, no reconciler: review queue; the re-run too",
                           ledger="NEEDS_REVIEW"),
    ("cr-off", "gated"): E(1, [CRASH, RETRY_OK, OK], [CRASHED, None, None], "the Retry starts over: the Look Up "
                           "finds the write, Done Before; the re-run: Done Before", ledger="CONFIRMED", lookups=1),
    ("cr-on", "plain"): E(3, [CRASH, RETRY_OK, OK], [CRASHED, None, None], "the Retry resumes at the HTTP node and "
                          "writes again; the re-run writes a third"),
    ("cr-on", "begin"): E(2, [CRASH, RETRY_ERR, ERR], [CRASHED, "execution_mismatch", "needs_review"], "the Retry "
                          "resumes after Begin Step and the HTTP node writes again; Record Outcome: execution_mismatch "
                          "(another execution began the attempt), its receipt to review; the re-run: review queue",
                          ledger="NEEDS_REVIEW", review_candidates=["cr-on-begin-2"]),
    ("cr-on", "gated"): E(1, [CRASH, RETRY_OK, OK], [CRASHED, None, None], "the Retry resumes at the gated node: "
                          "the Look Up finds the write, Done Before; the re-run: Done Before", ledger="CONFIRMED", lookups=1),
    ("d1-seq", "plain"): E(2, [OK, OK], [None, None], "two orders"),
    ("d1-seq", "begin"): E(1, [OK, OK], [None, None], "the second run: Done Before", ledger="CONFIRMED"),
    ("d1-seq", "gated"): E(1, [OK, OK], [None, None], "the second run: Done Before", ledger="CONFIRMED"),
    ("d3-late", "plain"): E(3, [OK, OK, OK], [None] * 3, "three orders"),
    # Node 1.5: the first run is live while it writes (Begin Step marks a dispatched step live for
    # 10 s, the gated node beats every 2.5 s), so the second run's Start Job waits for it instead of
    # fencing it out, then takes the job over and reads Done Before from the first run's receipt.
    # (Node 1.2: the second run took over at once: needs_review / in_flight_lookup, red.)
    ("d3-late", "begin"): E(1, [OK, OK, OK], [None] * 3,
                            "the second run waits while the first is writing (Begin Step marked the step live), "
                            "then takes the job over: Done Before from the first run's receipt; the third run: Done "
                            "Before; nobody needed", ledger="CONFIRMED", review_candidates=[], people=0),
    ("d3-late", "gated"): E(1, [OK, OK, OK], [None] * 3,
                            "the second run waits while the first is writing (its gated node beats), then takes the "
                            "job over: Done Before from the first run's receipt, no lookup; the third run: Done Before",
                            ledger="CONFIRMED", lookups=0, gated_routes=[[1, 0], [0, 1], [0, 1]], people=0),
    ("d2-conc", "plain"): {"writes": 2, "what": "two orders"},
    ("d2-conc", "begin"): {"writes": 1, "executions": [OK, OK], "people": 0, "what": "one execution writes; the "
                          "other waits for it (live), then Done Before"},
    ("d2-conc", "gated"): {"writes": 1, "executions": [OK, OK], "people": 0, "what": "one execution writes; the "
                          "other waits for it (live), then Done Before"},
}
# (f) the remote dedupes by Idempotency-Key. Before: the Gated HTTP Request without Look Up, an
# unknown outcome goes to review. After: Remote Dedupes by Key, the unknown outcome
# is settled by the same request with the same key, which the remote answers from its record.
_BARE_RUN = "the step is unknown and nothing can settle it: review queue"
EXPECT |= {
    ("f-a", "gated-bare"): E(1, [ERR], ["needs_review"], "the first try ends outcome_unknown; Retry On Fail runs "
                             f"the node again: {_BARE_RUN}; the third try says the same", ledger="NEEDS_REVIEW",
                             people=1, repeats=[]),
    ("f-a", "gated-dedupe"): E(1, [OK], [None], "the first try ends outcome_unknown; Retry On Fail runs the node "
                               "again, which sends the order again with the same key: the remote answers the stored "
                               "201, Done Before", ledger="CONFIRMED", people=0, repeats=["replay"],
                               gated_routes=[[0, 1]]),
    ("f-a-slow", "gated-bare"): E(1, [ERR, ERR], ["needs_review", "needs_review"], "the first try times out: "
                                  f"outcome_unknown; the next tries: {_BARE_RUN}; a re-run once the remote has "
                                  "answered: the same", ledger="NEEDS_REVIEW", people=1, repeats=[]),
    ("f-a-slow", "gated-dedupe"): E(1, [ERR, OK], ["lookup_failed", None], "the first try times out: "
                                    "outcome_unknown; the next two send the order again while the remote is still "
                                    "processing the first: 409, no verdict (lookup_failed), the step stays unknown; "
                                    "a re-run once the remote has answered: the stored 201, Done Before",
                                    ledger="CONFIRMED", people=0, repeats=["conflict", "conflict", "replay"],
                                    gated_routes=[None, [0, 1]]),
    ("f-b", "gated-bare"): E(1, [ERR, RETRY_ERR, RETRY_ERR], ["outcome_unknown", "needs_review", "needs_review"],
                             f"outcome_unknown; each Retry runs the node again: {_BARE_RUN}", ledger="NEEDS_REVIEW",
                             people=1, repeats=[]),
    ("f-b", "gated-dedupe"): E(1, [ERR, RETRY_OK], ["outcome_unknown", None], "outcome_unknown; the Retry sends the "
                               "order again with the same key: the stored 201, Done Before", ledger="CONFIRMED",
                               people=0, repeats=["replay"], gated_routes=[None, [0, 1]]),
    ("f-c", "gated-bare"): E(1, [CRASH, ERR, RETRY_ERR], [CRASHED, "needs_review", "needs_review"], "re-run: the "
                             f"step was sent, {_BARE_RUN}; the Retry starts over and stops there too",
                             ledger="NEEDS_REVIEW", people=1, repeats=[]),
    ("f-c", "gated-dedupe"): E(1, [CRASH, OK, RETRY_OK], [CRASHED, None, None], "re-run: the order sent again with "
                               "the same key; the killed execution's write has completed meanwhile, the remote "
                               "answers its 201: Done Before; the Retry starts over: Done Before (from the ledger, "
                               "nothing sent)", ledger="CONFIRMED", people=0, repeats=["replay"],
                               gated_routes=[None, [0, 1], [0, 1]]),
}


DEDUPE_SEEN: set[tuple[str, str]] = set()  # (f) rows recorded in this run, for the table at the end


def check(scenario: str, title: str, variant: str, seen: dict):
    if variant in DEDUPE_VARIANTS:
        DEDUPE_SEEN.add((scenario, variant))
    exp = dict(EXPECT[(scenario, variant)])
    record(scenario, title, variant, {**seen, "what": exp.pop("what")})
    if os.environ.get("DURABLE_RETRY_EXPLORE"):
        return
    refused = exp.pop("refused", None)
    if refused is not None:  # a race: each execution either succeeded or was refused for one of these
        assert all(s == OK or r in refused for s, r in zip(seen["executions"], seen["reasons"])), seen
    for k, v in exp.items():
        assert seen[k] == v, (scenario, variant, k, seen)


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
        chain = [ended[v][0]]
        while chain[-1]["status"] != "success" and len(chain) < 3:  # Retry, and Retry the Retry
            r = st.retry(chain[-1]["id"], load_workflow)
            assert r.status_code == 200, r.text
            chain += [e for e in st.executions(wf_id(v, "base")) if e["retry_of"] == chain[-1]["id"]]
        title = f"(b) Retry execution ({'currently saved' if load_workflow else 'original'} workflow) after 500"
        check(f"b-{tag}", title, v, observe(st, remote, o, chain))


# ---------------------------------------------------------------------- (c) kill -9, re-run, Retry

def fire_when_up(st, path: str, order_id: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        status = st.fire(path, order_id)
        if status == 200 or time.monotonic() > deadline:
            return status
        time.sleep(0.3)


@pytest.mark.parametrize("order", ["rerun-retry", "retry-rerun"])
def test_c_kill_then_rerun_and_retry(stack, order):
    """kill -9 of n8n while the remote holds every variant's committed write; n8n restarts (and
    marks the executions crashed); then a plain re-run and n8n's Retry of the crashed execution,
    in this order or the other way round."""
    st, remote = stack
    tag = "" if order == "rerun-retry" else "r"
    cases = {(v, c): f"c{tag}-{'on' if c == 'prog' else 'off'}-{v}" for v in variants() for c in ("base", "prog")}
    for o in cases.values():
        remote.plan[o] = ["hold"]
    before = {k: len(st.executions(wf_id(*k))) for k in cases}
    held = remote.held
    for (v, c), o in cases.items():
        assert st.fire(wf_id(v, c), o) == 200
    assert remote.wait_held(held + len(cases)), remote.requests
    st.kill_server()  # every execution dies while the remote holds its answer
    remote.release()
    st.start_server()
    crashed = {}
    for k in cases:
        rows = st.executions(wf_id(*k))[before[k]:]
        assert len(rows) == 1, rows
        crashed[k] = rows[0]
    steps = {"rerun": lambda: rerun_all(st, cases, before), "retry": lambda: retry_all(st, crashed)}
    first, second = order.split("-")
    done = {first: steps[first](), second: steps[second]()}
    for (v, c), o in cases.items():
        r, retried = done["retry"][(v, c)]
        runs = [crashed[(v, c)], *([done["rerun"][(v, c)]] if first == "rerun" else []), *retried,
                *([done["rerun"][(v, c)]] if first == "retry" else [])]
        seen = observe(st, remote, o, runs)
        assert r.status_code == 200, r.text
        progress = "on" if c == "prog" else "off"
        steps_words = "re-run, then Retry" if first == "rerun" else "Retry, then re-run"
        check(f"c{tag}-{progress}", f"(c) kill -9 during the write; {steps_words} (Save Execution Progress {progress})",
              v, seen)


def rerun_all(st, cases, before) -> dict:
    """The same webhook with the same order, for every case; each one's next execution."""
    counts = {k: len(st.executions(wf_id(*k))) for k in cases}
    for k, o in cases.items():
        assert fire_when_up(st, wf_id(*k), o) == 200
    return {k: st.wait_executions(wf_id(*k), counts[k] + 1)[counts[k]] for k in cases}


def retry_all(st, crashed) -> dict:
    out = {}
    for k, e in crashed.items():
        r = st.retry(e["id"], False)
        out[k] = (r, [x for x in st.executions(wf_id(*k)) if x["retry_of"] == e["id"]])
    return out


# ---------------------------------------------------------------------- (d) the same trigger twice

def test_d_same_trigger_twice_sequentially(stack):
    st, remote = stack
    for v in variants():
        o = f"d-seq-{v}"
        ended = run(st, v, "base", o) + run(st, v, "base", o)
        check("d1-seq", "(d) the same webhook twice, one after the other", v, observe(st, remote, o, ended))


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
        check("d2-conc", "(d) the same webhook twice at the same moment", v, observe(st, remote, o, ended))


def test_d_second_trigger_while_the_remote_is_still_writing(stack):
    """The remote takes LATE_S to commit the first order; the same webhook fires again 1 s after
    the first, while the first request is in but nothing is written yet."""
    st, remote = stack
    orders = {v: f"d-late-{v}" for v in variants()}
    for o in orders.values():
        remote.plan[o] = ["late"]
    before = {v: len(st.executions(wf_id(v, "base"))) for v in orders}
    for v, o in orders.items():
        assert st.fire(wf_id(v, "base"), o) == 200
    for o in orders.values():
        assert wait_arrived(remote, o), remote.requests
    first_sent = time.monotonic()
    time.sleep(1.0)
    for v, o in orders.items():
        assert st.fire(wf_id(v, "base"), o) == 200
    for v in orders:
        st.wait_executions(wf_id(v, "base"), before[v] + 2)
    # a third run once the first request can no longer be on its way (the client's timeout is over)
    time.sleep(max(0.0, first_sent + TIMEOUT_MS / 1000 + 0.5 - time.monotonic()))
    for v, o in orders.items():
        ended = st.wait_executions(wf_id(v, "base"), before[v] + 2)[before[v]:] + run(st, v, "base", o)
        check("d3-late", "(d) the same webhook again while the remote is still writing the first; a third "
              "time later", v, observe(st, remote, o, ended))


def wait_arrived(remote, order_id: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r["kind"] == "arrived" and r["order_id"] == order_id for r in list(remote.requests)):
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------- (f) a remote that dedupes

@pytest.mark.parametrize("failure", ["fail500", "slow"])
def test_f_dedupe_retry_on_fail(stack, dedupe_remote, failure):
    """(a) against the deduping remote: Retry On Fail (3 tries); the first write commits, then
    answers 500, or answers only after the client's timeout (then a re-run once it has answered)."""
    st, remote = stack[0], dedupe_remote
    orders = {v: f"f-a-{failure}-{v}" for v in DEDUPE_VARIANTS}
    for o in orders.values():
        remote.plan[o] = [failure]
    ended = run_all(st, "rof", orders)
    if failure == "slow":  # the remote answers the first write SLOW_S after committing it
        written = min(w["t"] for o in orders.values() for w in remote.writes(o))
        time.sleep(max(0.0, written + SLOW_S + 0.5 - time.time()))
        ended = {v: ended[v] + run(st, v, "rof", o) for v, o in orders.items()}
    scenario, what = {"fail500": ("f-a", "commits, then answers 500"),
                      "slow": ("f-a-slow", "commits, then answers after the client's timeout; a re-run later")}[failure]
    for v, o in orders.items():
        check(scenario, f"(a) Retry On Fail (3 tries); the remote {what}", v, observe(st, remote, o, ended[v]))


def test_f_dedupe_retry_execution(stack, dedupe_remote):
    """(b) against the deduping remote: the write commits, then 500; n8n's Retry of the failed
    execution (original workflow), and of that Retry while it fails."""
    st, remote = stack[0], dedupe_remote
    orders = {v: f"f-b-{v}" for v in DEDUPE_VARIANTS}
    for o in orders.values():
        remote.plan[o] = ["fail500"]
    ended = run_all(st, "base", orders)
    for v, o in orders.items():
        chain = [ended[v][0]]
        while chain[-1]["status"] != "success" and len(chain) < 3:
            r = st.retry(chain[-1]["id"], False)
            assert r.status_code == 200, r.text
            chain += [e for e in st.executions(wf_id(v, "base")) if e["retry_of"] == chain[-1]["id"]]
        check("f-b", "(b) Retry of the failed execution, and Retry of that Retry while it fails; the remote "
              "committed, then answered 500", v, observe(st, remote, o, chain))


def test_f_dedupe_kill_then_rerun_and_retry(stack, dedupe_remote):
    """(c) against the deduping remote: kill -9 of n8n while the remote holds the committed
    write's answer; n8n restarts; the same webhook again; then n8n's Retry of the crashed execution."""
    st, remote = stack[0], dedupe_remote
    cases = {(v, "base"): f"f-c-{v}" for v in DEDUPE_VARIANTS}
    for o in cases.values():
        remote.plan[o] = ["hold"]
    before = {k: len(st.executions(wf_id(*k))) for k in cases}
    held = remote.held
    for k, o in cases.items():
        assert st.fire(wf_id(*k), o) == 200
    assert remote.wait_held(held + len(cases)), remote.requests
    st.kill_server()
    remote.release()  # the held writes complete now: their 201 is what a repeat gets
    st.start_server()
    crashed = {}
    for k in cases:
        rows = st.executions(wf_id(*k))[before[k]:]
        assert len(rows) == 1, rows
        crashed[k] = rows[0]
    rerun = rerun_all(st, cases, before)
    retried = retry_all(st, crashed)
    for (v, c), o in cases.items():
        r, retries = retried[(v, c)]
        assert r.status_code == 200, r.text
        check("f-c", "(c) kill -9 of n8n during the write; re-run, then Retry (Save Execution Progress off)", v,
              observe(st, remote, o, [crashed[(v, c)], rerun[(v, c)], *retries]))
