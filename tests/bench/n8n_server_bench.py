"""The n8n section, second half: a gated step's cost inside a running n8n server.

`tests/n8n/bench.mjs` times one `n8n execute` process per run: every run is a new process, so
its first node that makes an HTTP request also pays the process's first-use costs (loading the
request stack, the first credential decryption, the first connection). In production n8n is a
long-running `n8n start` server that takes its triggers on webhooks; this script measures that:

    plain1   Webhook -> Create Draft (HTTP Request)
    gated1   Webhook -> Start Job -> Create Draft (Gated HTTP Request)
    plainN   Webhook -> N HTTP Requests in a row
    gatedN   Webhook -> Start Job -> N Gated HTTP Requests in a row

Real n8n 2.40.7 (SQLite), the real ledger server (SQLite, one worker) and a local remote that
counts every write (tests/retry/remote.py). Every round fires each workflow once, interleaved
(gated next to plain of the same shape), each with a new order id, so every gated run starts a
new job, as a new trigger does. The times are n8n's own, read from its execution tables: the
execution's startedAt..stoppedAt and each node's executionTime. A run counts only if the remote
saw exactly one write per step. The first WARMUP rounds are left out (n8n compiles and caches
on first use; a server runs warm).

Prints one JSON document (also written to --out): medians over rounds of the per-round
differences, like the `n8n execute` half.
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from retry_stack import RetryStack
from pipeline_stack import CRED_LEDGER
from remote import RecordingRemote

DURABLE = "n8n-nodes-durable.durableStep"
# Issue 36: Start Job plus one gated step at most 25 ms over the same workflow without Durable Step.
TARGETS = {"overhead_ms_per_gated_step": 25, "start_job_ms": 30, "one_step_overhead_ms": 25}
ORDER_ID = "$('Webhook').item.json.body.order_id"


def _node(name: str, node_type: str, version: float, parameters: dict, **extra) -> dict:
    return {"name": name, "type": node_type, "typeVersion": version, "parameters": parameters, **extra}


def _plain_step(i: int, remote_url: str) -> dict:
    return _node(f"Create Draft {i}", "n8n-nodes-base.httpRequest", 4.2, {
        "method": "POST", "url": f"{remote_url}/orders", "sendBody": True, "specifyBody": "json",
        "jsonBody": f"={{{{ JSON.stringify({{ order_id: {ORDER_ID} }}) }}}}", "options": {"timeout": 5000}})


def _gated_step(i: int, remote_url: str, version: float) -> dict:
    return _node(f"Create Draft {i}", DURABLE, version, {
        "operation": "gatedRequest", "action": f"create_draft_{i}", "method": "POST", "url": f"{remote_url}/orders",
        "bodyType": "json", "jsonBody": f"={{{{ {{ order_id: {ORDER_ID} }} }}}}",
        "gateOptions": {"timeout": 5000}}, credentials={"durableLedgerApi": CRED_LEDGER})


def workflow(kind: str, steps: int, remote_url: str, version: float) -> dict:
    gated = kind.startswith("gated")
    webhook = _node("Webhook", "n8n-nodes-base.webhook", 2, {
        "httpMethod": "POST", "path": f"bench-{kind}", "responseMode": "onReceived", "options": {}},
        webhookId=str(uuid.uuid4()))
    nodes = [webhook]
    if gated:
        nodes.append(_node("Start Job", DURABLE, version, {"operation": "startJob", "jobId": "={{ $json.body.order_id }}"},
                           credentials={"durableLedgerApi": CRED_LEDGER}))
    nodes += [_gated_step(i + 1, remote_url, version) if gated else _plain_step(i + 1, remote_url)
              for i in range(steps)]
    for i, n in enumerate(nodes):
        n.update(id=str(uuid.uuid4()), position=[220 * i, 300])
    chain = [n["name"] for n in nodes]
    connections = {a: {"main": [[{"node": b, "type": "main", "index": 0}]]} for a, b in zip(chain, chain[1:])}
    return {"id": f"bench{kind}", "name": f"Bench {kind}", "nodes": nodes, "connections": connections,
            "active": False, "settings": {"executionOrder": "v1", "saveDataSuccessExecution": "all",
                                          "saveDataErrorExecution": "all"}}


def median(xs):
    return statistics.median(xs) if xs else None


def r1(x):
    return None if x is None else round(x, 1)


class Bench:
    def __init__(self, stack: RetryStack, remote: RecordingRemote, shapes: dict[str, int]):
        self.stack, self.remote, self.shapes = stack, remote, shapes
        self.times: dict[str, list[dict]] = {k: [] for k in shapes}
        self.failures: list[str] = []

    def run(self, kind: str, order_id: str) -> dict:
        """Fires the workflow's webhook once; returns n8n's times for that execution."""
        wf_id = f"bench{kind}"
        before = len(self.stack.executions(wf_id))
        status = self.stack.fire(f"bench-{kind}", order_id)
        assert status == 200, f"webhook bench-{kind} answered {status}"
        row = self.stack.wait_executions(wf_id, before + 1, timeout=60)[before]
        writes = len(self.remote.writes(order_id))
        if row["status"] != "success" or writes != self.shapes[kind]:
            raise RuntimeError(f"{kind} {order_id}: {row['status']}, {writes} of {self.shapes[kind]} writes, "
                               f"{self.stack.error_of(row['id'])}")
        run_data = self.stack.run_data(row["id"])
        node_ms = {name: sum(r.get("executionTime") or 0 for r in runs) for name, runs in run_data.items()}
        return {"exec": self.execution_ms(row["id"]), "start_job": node_ms.get("Start Job", 0),
                "steps": sum(v for k, v in node_ms.items() if k.startswith("Create Draft")),
                "webhook": node_ms.get("Webhook", 0)}

    def execution_ms(self, execution_id: str) -> float:
        con = sqlite3.connect(self.stack.db_path)
        try:
            (ms,) = con.execute("SELECT (julianday(\"stoppedAt\") - julianday(\"startedAt\")) * 86400000.0 "
                                "FROM execution_entity WHERE id = ?", (execution_id,)).fetchone()
        finally:
            con.close()
        return float(ms)

    def round(self, i: int, keep: bool):
        for kind in self.shapes:  # dict order: gated1, plain1, gatedN, plainN (interleaved)
            t = self.run(kind, f"b{i}-{kind}-{uuid.uuid4().hex[:6]}")
            if keep:
                self.times[kind].append(t)

    def report(self, steps: int, rounds: int, warmup: int) -> dict:
        t = self.times
        pairs = lambda g, p: list(zip(t[g], t[p]))  # noqa: E731 (rounds pair up in order)
        one = [g["exec"] - p["exec"] for g, p in pairs("gated1", "plain1")]
        many = [(g["exec"] - p["exec"] - g["start_job"]) / steps for g, p in pairs("gatedN", "plainN")]
        start_job = [x["start_job"] for x in t["gated1"] + t["gatedN"]]
        out = {
            "mode": "n8n start (a running server), production webhooks",
            "rounds": rounds, "warmup_rounds": warmup, "steps": steps,
            "one_step": {"execution_ms": r1(median([x["exec"] for x in t["gated1"]])),
                         "plain_execution_ms": r1(median([x["exec"] for x in t["plain1"]])),
                         "overhead_ms": r1(median(one)),
                         "gated_request_node_ms": r1(median([x["steps"] for x in t["gated1"]])),
                         "http_request_node_ms": r1(median([x["steps"] for x in t["plain1"]]))},
            "n_steps": {"execution_ms": r1(median([x["exec"] for x in t["gatedN"]])),
                        "plain_execution_ms": r1(median([x["exec"] for x in t["plainN"]])),
                        "overhead_ms_per_step_without_start_job": r1(median(many)),
                        "gated_request_node_ms_per_step": r1(median([x["steps"] / steps for x in t["gatedN"]])),
                        "http_request_node_ms_per_step": r1(median([x["steps"] / steps for x in t["plainN"]]))},
            "start_job_ms": r1(median(start_job)),
            "start_job_ms_p90": r1(statistics.quantiles(start_job, n=10)[-1]) if len(start_job) >= 10 else None,
        }
        per_step = out["n_steps"]["overhead_ms_per_step_without_start_job"]
        one_step = out["one_step"]["overhead_ms"]
        out["targets"] = {
            "one_step_overhead_ms": {"value": one_step, "target_ms": TARGETS["one_step_overhead_ms"],
                                     "met": one_step is not None and one_step <= TARGETS["one_step_overhead_ms"]},
            "overhead_ms_per_gated_step_one_node": {"value": per_step, "target_ms": TARGETS["overhead_ms_per_gated_step"],
                                                   "met": per_step is not None and per_step <= TARGETS["overhead_ms_per_gated_step"]},
            "start_job_ms": {"value": out["start_job_ms"], "target_ms": TARGETS["start_job_ms"],
                             "met": out["start_job_ms"] is not None and out["start_job_ms"] <= TARGETS["start_job_ms"]},
        }
        return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("DURABLE_BENCH_RUNS", "21")))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=int(os.environ.get("DURABLE_BENCH_STEPS", "5")))
    ap.add_argument("--node-version", type=float, default=float(os.environ.get("DURABLE_BENCH_NODE_VERSION", "1.5")),
                    help="the Durable Step node's typeVersion (1.5: what the editor adds today; 1.2: no liveness beats)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    shapes = {"gated1": 1, "plain1": 1, "gatedN": args.steps, "plainN": args.steps}
    remote = RecordingRemote()
    with tempfile.TemporaryDirectory(prefix="durable-n8n-server-bench-") as tmp:
        stack = RetryStack(Path(tmp), say=lambda m: print(f"[bench n8n server] {m}", file=sys.stderr))
        try:
            stack.start()
            stack.import_workflows([workflow(k, n, remote.url, args.node_version) for k, n in shapes.items()])
            stack.start_server()
            stack.activate([f"bench{k}" for k in shapes], [f"bench-{k}" for k in shapes])
            bench = Bench(stack, remote, shapes)
            started = time.monotonic()
            for i in range(args.warmup + args.rounds):
                bench.round(i, keep=i >= args.warmup)
            report = bench.report(args.steps, args.rounds, args.warmup)
            report["node_version"] = args.node_version
            report["seconds"] = round(time.monotonic() - started, 1)
            report["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        finally:
            remote.close()
            stack.stop()
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
