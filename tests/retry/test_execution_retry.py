"""n8n's Retry of a crashed execution must not confirm a second write (issue 22, defect 10).

    execution A (n8n execute): Start Job -> Begin: Order (SENT, dispatched by A) -> Create Order
        remote: order-1 committed, its answer held ............ kill -9 of n8n (A never records)
    n8n start; POST /rest/executions/A/retry = execution B (a new id), resumed from A's saved
    progress after Begin Step: Create Order again (order-2) -> Record: Order confirm, A's token

The fencing token is still current (nobody took the job over), so before the fix the ledger
confirmed order-2 and the node said Done, order-1 orphaned. Counted: the writes at the counting
remote, the ledger's events (SENT by A, no CONFIRMED, B's receipt kept), the items on Record
Outcome's outputs in B's run data (n8n's own execution table). The remote sees two writes: n8n
repeats the node without asking anyone, and nothing outside the remote can stop that; what the
ledger guarantees is that the second write is never taken for the attempt's outcome.
"""
from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest
from n8n_server import signed_in
from retry_stack import RetryStack
from pipeline_stack import CRED_LEDGER

WORKFLOW_ID = "wfRetryCrash"
JOB_ID = "retry-crash-1"
NODE = "n8n-nodes-durable.durableStep"


class CountingRemote:
    """POST /orders: counts every write and answers {"id": "order-N"}. The first write is
    committed (counted) and its answer held until `release`: n8n dies waiting for it."""

    def __init__(self):
        self.writes: list[dict] = []
        self.written = threading.Event()
        self._release = threading.Event()
        remote = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                remote.writes.append(body)
                n = len(remote.writes)
                if n == 1:
                    remote.written.set()
                    remote._release.wait(120)
                out = json.dumps({"id": f"order-{n}", "op_key": body.get("op_key")}).encode()
                try:
                    self.send_response(201)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass  # the caller was killed while we held the answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


def durable(name, parameters):
    return {"name": name, "type": NODE, "typeVersion": 1.1, "parameters": parameters, "credentials": {"durableLedgerApi": CRED_LEDGER}}


def workflow(remote_url: str) -> dict:
    begin = "$('Begin: Order').item.json.durable"
    nodes = [
        {"name": "Run", "type": "n8n-nodes-base.manualTrigger", "typeVersion": 1, "parameters": {}},
        durable("Start Job", {"operation": "startJob", "jobId": JOB_ID, "startOptions": {"takeover": True, "ttlS": 300}}),
        durable("Begin: Order", {"operation": "beginStep", "jobId": "={{ $('Start Job').item.json.job_id }}",
                                 "fencingToken": "={{ $('Start Job').item.json.fencing_token }}",
                                 "action": "create_order", "payload": "={{ { order: 7 } }}",
                                 "beginOptions": {"target": "shop:orders"}}),
        {"name": "Create Order", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2, "onError": "continueErrorOutput",
         "parameters": {"method": "POST", "url": f"{remote_url}/orders", "sendBody": True, "specifyBody": "json",
                        "jsonBody": "={{ JSON.stringify({ order: 7, op_key: $json.durable.operation_key }) }}",
                        "options": {"timeout": 120000}}},
        durable("Record: Order", {"operation": "recordOutcome", "operationKey": f"={{{{ {begin}.operation_key }}}}",
                                  "fencingToken": f"={{{{ {begin}.fencing_token }}}}", "remoteId": "={{ $json.id }}",
                                  "receipt": "={{ { id: $json.id } }}"}),
        {"name": "Order Done", "type": "n8n-nodes-base.noOp", "typeVersion": 1, "parameters": {}},
        {"name": "Order Needs Attention", "type": "n8n-nodes-base.noOp", "typeVersion": 1, "parameters": {}},
    ]
    for i, n in enumerate(nodes):
        n.update(id=f"n{i}", position=[220 * i, 300])

    def to(*names):
        return [[{"node": n, "type": "main", "index": 0}] if n else [] for n in names]

    connections = {"Run": {"main": to("Start Job")}, "Start Job": {"main": to("Begin: Order")},
                   "Begin: Order": {"main": to("Create Order", "Order Done", "Order Needs Attention")},
                   "Create Order": {"main": to("Record: Order", "Record: Order")},
                   "Record: Order": {"main": to("Order Done", "Order Needs Attention")}}
    return {"id": WORKFLOW_ID, "name": "Retry after a crash", "nodes": nodes, "connections": connections,
            "active": False, "settings": {"executionOrder": "v1", "saveExecutionProgress": True,
                                          "saveManualExecutions": True}}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    remote = CountingRemote()
    st = RetryStack(tmp_path_factory.mktemp("retry"))
    try:
        st.start()
        st.import_workflows([workflow(remote.url)])
        yield st, remote
    finally:
        remote.close()
        st.stop()


def wait_finished(st: RetryStack, retry_of: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = [e for e in st.executions() if e["retry_of"] == retry_of]
        if rows and rows[-1]["status"] in ("success", "error", "crashed", "canceled"):
            return rows[-1]
        time.sleep(0.3)
    raise TimeoutError(f"no finished retry of execution {retry_of}: {st.executions()}\n"
                       + st.server.log_path.read_text(errors="replace")[-3000:])


def test_retry_of_a_crashed_execution_does_not_confirm_the_second_write(stack):
    st, remote = stack
    first = st.execute(WORKFLOW_ID, trap=SimpleNamespace(hit=remote.written))
    assert first["killed"], f"the run ended before the write was held: {first['error']}"
    assert len(remote.writes) == 1
    (crashed,) = st.executions()
    assert not crashed["finished"], crashed
    key = f"demo:{JOB_ID}:v1:create_order"
    op = st.ledger("GET", f"/v1/operations/{quote(key, safe='')}")
    assert (op["operation"]["state"], op["operation"]["dispatched_by"]) == ("SENT", crashed["id"])

    st.start_server()
    session = signed_in(st.n8n_url)
    r = session.post(f"{st.n8n_url}/rest/executions/{crashed['id']}/retry", json={"loadWorkflow": False}, timeout=60)
    assert r.status_code == 200, r.text
    retried = wait_finished(st, crashed["id"])
    assert retried["id"] != crashed["id"]

    # n8n resumed after Begin Step (its saved progress) and wrote again: the remote counts two.
    assert len(remote.writes) == 2 and {w["op_key"] for w in remote.writes} == {key}, remote.writes
    runs = st.run_data(retried["id"])
    assert len(runs["Begin: Order"]) == 1  # from A's saved progress: the gate was not asked again
    done, attention = (runs["Record: Order"][-1]["data"]["main"] + [[], []])[:2]
    assert (len(done or []), len(attention or [])) == (0, 1), runs["Record: Order"]
    d = attention[0]["json"]["durable"]
    assert (d["reason"], d["attempt_binding"]["dispatched_by"], d["attempt_binding"]["reported_by"]) == \
        ("execution_mismatch", crashed["id"], retried["id"])

    op = st.ledger("GET", f"/v1/operations/{quote(key, safe='')}")
    assert (op["operation"]["state"], op["operation"]["remote_id"]) == ("NEEDS_REVIEW", None)
    evs = op["events"]
    sent = [e["detail"]["n8n"]["execution_id"] for e in evs if e["to_state"] == "SENT"]
    kept = [e["detail"]["receipt_kept"] for e in evs if "receipt_kept" in (e["detail"] or {})]
    assert sent == [crashed["id"]]
    assert [e for e in evs if e["to_state"] == "CONFIRMED"] == []
    assert [(k["execution_id"], k["remote_id"]) for k in kept] == [(retried["id"], "order-2")]
    item = st.ledger("GET", f"/v1/reviews/{quote(key, safe='')}", role="editor")
    assert [c["id"] for c in item["candidates"]] == ["order-2"]
    print(f"\nDURABLE_RETRY crashed execution {crashed['id']}, retry {retried['id']}: remote writes "
          f"{len(remote.writes)}, Record Outcome done/attention {len(done or [])}/{len(attention)}, "
          f"ledger {op['operation']['state']}")
