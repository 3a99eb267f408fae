"""The lookups suite's engine, shared by the pytest module and before_after.py: the stack (the real
ledger on SQLite, one real n8n 2.40.7 server with n8n-nodes-durable installed as users install it),
the cases, two runs of every case at once, and what each case ended with, counted at the remote.

A case is a variant (a / b / c, flows.py), an answer shape (remote.py) and whether the step's
object is at the remote: `present` (the first write commits, then answers 500) or `absent` (the
first write answers 500 before committing). Run 1 makes every write's outcome unknown; run 2 lets
the lookup (a, b) or the ledger's reconciler (c) decide.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import requests
from flows import RECONCILED_ACTION, TIMEOUT_MS, WF, all_workflows
from n8n_server import FINAL, N8nServer
from pipeline_stack import REPO, PipelineStack, node_path
from remote import LIST_SHAPES, RECONCILE_SHAPES, SHAPES, ShapesRemote

DONE_STATES = ("CONFIRMED",)

# What the rule says each case must end with (run 2), for the node and reconciler of this checkout.
#   found       Done Before, the write the first run made
#   resent      absent proven: sent again in the same run, Done (one write in all)
#   undecidable NEEDS_REVIEW, nothing resent
#   no verdict  the lookup failed (timeout): the step stays unknown, asked again next run
# Lookups that address the object by the key (object: 404) or filter by it: 404 or Empty Proves Absence on.
EMPTY_DECLARED = (set(LIST_SHAPES) - {"ignored"}) | {"object"}


def expected(variant: str, shape: str, present: bool) -> str:
    if variant == "c":
        if shape == "rcorrect":
            return "found" if present else "resent"
        return "undecidable"
    if shape == "slow":
        return "no verdict"
    if shape in ("error200", "html200", "html404"):
        return "undecidable"
    if present:
        return "found"
    if shape in ("paginated", "ignored"):  # an empty page with a cursor; other orders only
        return "undecidable"
    return "resent"


def cases(variants=("a", "b", "c")) -> list[dict]:
    out = []
    for v in variants:
        for shape in RECONCILE_SHAPES if v == "c" else SHAPES:
            for present in (True, False):
                out.append({"variant": v, "shape": shape, "present": present,
                            "order_id": f"{v}-{shape}-{'present' if present else 'absent'}"})
    return out


class LookupStack(N8nServer, PipelineStack):
    """The ledger (SQLite, the generic HTTP reconciler on the remote for (c)'s action) and n8n on its
    own SQLite database with the package from `node_pkg` (default: this checkout's build)."""

    def __init__(self, workdir, node_pkg: Path | None = None, say=lambda m: print(f"[lookups] {m}", flush=True)):
        super().__init__(workdir, say=say)
        self.node_pkg = Path(node_pkg or REPO / "n8n-nodes-durable")
        self.openai_url = "http://127.0.0.1:9/v1"  # the stack's credentials file names one; unused

    def start(self, remote: ShapesRemote, variants=("a", "b", "c")):
        t = self.tokens
        template = f"{remote.url}/reconcile/{{job_id}}?key={{key}}"
        self.start_ledger(f"sqlite:///{self.workdir / 'ledger.db'}",
                          f"demo:runner:{t['runner']},demo:editor:{t['editor']}", threads=8,
                          DURABLE_RECONCILE_HTTP=json.dumps({f"generic.{RECONCILED_ACTION}": template}))
        self._prepare_n8n()
        wfs = all_workflows(remote.url, variants)
        self.import_workflows(wfs)
        self.start_server()
        self.activate([w["id"] for w in wfs], [WF[v] for v in variants])
        return self

    def install_node_package(self):
        """As PipelineStack's, from `node_pkg` (before_after.py installs an older build)."""
        if not (self.node_pkg / "dist" / "nodes" / "DurableStep" / "DurableStep.node.js").exists():
            raise RuntimeError(f"{self.node_pkg} is not built: run `make node-build`")
        env = {**os.environ, "PATH": node_path() + os.pathsep + os.environ["PATH"]}
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(["npm", "pack", "--json", "--pack-destination", tmp], cwd=self.node_pkg, env=env,
                                 capture_output=True, text=True, check=True)
            tgz = Path(tmp) / json.loads(out.stdout)[0]["filename"]
            dest = self.n8n_folder / ".n8n" / "nodes" / "node_modules" / "n8n-nodes-durable"
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            with tarfile.open(tgz) as tar:
                members = [m for m in tar.getmembers() if "/" in m.name]
                for m in members:
                    m.name = m.name.split("/", 1)[1]
                tar.extractall(dest, members=members, filter="data")

    # ------------------------------------------------------------------ runs

    def case_of(self, execution_id: str) -> str | None:
        runs = self.run_data(execution_id).get("Webhook") or []
        try:
            return runs[0]["data"]["main"][0][0]["json"]["body"]["order_id"]
        except (IndexError, KeyError, TypeError):
            return None

    def run_phase(self, remote: ShapesRemote, todo: list[dict], timeout: float = 180) -> dict[str, dict]:
        """Fire every case's webhook at once; wait until each one's execution ended. Per order id:
        its execution row."""
        by_wf: dict[str, int] = {}
        before = {e["id"] for e in self.executions()}
        for c in todo:
            body = {"order_id": c["order_id"], "lookup_url": remote.lookup_url(c["shape"]) if c["variant"] != "c" else "",
                    "match_field": "metadata.op_key" if c["shape"] == "stripe" else "idempotency_key",
                    "empty_is_absent": c["shape"] in EMPTY_DECLARED}
            r = requests.post(f"{self.n8n_url}/webhook/{WF[c['variant']]}", json=body, timeout=30)
            assert r.status_code == 200, r.text
            by_wf[WF[c["variant"]]] = by_wf.get(WF[c["variant"]], 0) + 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            new = [e for e in self.executions() if e["id"] not in before and e["workflow_id"] in by_wf]
            if all(sum(1 for e in new if e["workflow_id"] == wf) >= n for wf, n in by_wf.items()) \
                    and all(e["status"] in FINAL for e in new):
                break
            time.sleep(0.3)
        else:
            raise TimeoutError(f"executions did not end: {new}\n{self.server_log()[-3000:]}")
        return {self.case_of(e["id"]): e for e in new}

    def ops(self, order_id: str) -> list[dict]:
        try:
            return self.ledger("GET", f"/v1/jobs/{quote(order_id, safe='')}/operations")["operations"]
        except Exception:  # noqa: BLE001 - no job: the first run never reached Start Job
            return []

    def observe(self, remote: ShapesRemote, case: dict, runs: list[dict]) -> dict:
        """What one case ended with, after its runs (execution rows, oldest first)."""
        oid = case["order_id"]
        ops = self.ops(oid)
        state = ",".join(o["state"] for o in ops) or None
        last = runs[-1]["id"]
        if case["variant"] == "c":
            done_before = (self.outputs(last, "Begin Step") or [0, 0])[1:2] == [1]
            done = (self.outputs(last, "Record Outcome") or [0])[0] == 1
        else:
            routes = self.outputs(last, "Create Order") or [0, 0]
            done, done_before = routes[0] == 1, routes[1] == 1
        with remote.lock:
            arrivals = sum(1 for a in remote.arrivals if a["order_id"] == oid)
            mine = {w["id"] for w in remote.writes if w["order_id"] == oid}
        remote_id = next((o.get("remote_id") for o in ops if o.get("remote_id")), None)
        writes = remote.writes_of(oid)
        if done_before:
            verdict = "found"
        elif done:
            verdict = "resent" if arrivals > 1 else "done"
        elif state == "NEEDS_REVIEW":
            verdict = "undecidable"
        elif state in ("UNKNOWN", "SENT"):
            verdict = "no verdict"
        else:
            verdict = f"{state}: {self.reason_of(last)}"
        return {**case, "verdict": verdict, "writes": writes, "sends": arrivals,
                "lookups": remote.lookups_of(oid), "ledger": state,
                "done_without_write": (done or done_before or state in DONE_STATES) and writes == 0,
                "remote_id": remote_id, "wrong_id": remote_id is not None and str(remote_id) not in mine,
                "executions": [r["status"] for r in runs], "reason": self.reason_of(last),
                "error": (self.error_of(last) or "")[:400]}


def run_cases(st: LookupStack, remote: ShapesRemote, todo: list[dict]) -> list[dict]:
    """Both runs of every case; what each ended with."""
    for c in todo:
        remote.plan[c["order_id"]] = "commit500" if c["present"] else "fail500"
    first = st.run_phase(remote, todo)
    # An absent answer proves nothing while the first attempt may still land (the node's in-flight
    # window is its timeout): the second run starts once every first write is older than that.
    wait = remote.last_arrival() + TIMEOUT_MS / 1000 + 0.5 - time.time()
    if wait > 0:
        time.sleep(wait)
    second = st.run_phase(remote, todo)
    return [st.observe(remote, c, [first[c["order_id"]], second[c["order_id"]]]) for c in todo]


# ---------------------------------------------------------------------- the table

def cell(row: dict | None) -> str:
    if row is None:
        return "(not run)"
    bad = " **DONE WITHOUT A WRITE**" if row["done_without_write"] else ""
    bad += " **ANOTHER ORDER'S ID**" if row["wrong_id"] else ""
    return f"{row['verdict']}, {row['writes']} write{'s' if row['writes'] != 1 else ''}{bad}"


def table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """One line per shape; per column (a key of rows: `variant` or a label) present / absent."""
    by = {(r["column"], r["shape"], r["present"]): r for r in rows}
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    head = "| shape | " + " | ".join(f"{title}: present | {title}: absent" for _, title in columns) + " |"
    out = [head, "|---" * (1 + 2 * len(columns)) + "|"]
    for s in shapes:
        cells = [cell(by.get((col, s, p))) for col, _ in columns for p in (True, False)]
        out.append(f"| {s} | " + " | ".join(cells) + " |")
    totals = [f"{sum(r['writes'] > 1 for r in rows if r['column'] == col)} with 2 writes, "
              f"{sum(r['done_without_write'] for r in rows if r['column'] == col)} done without a write, "
              f"{sum(r['wrong_id'] for r in rows if r['column'] == col)} done with another order's ID"
              for col, _ in columns]
    out.append("\n" + "; ".join(f"{title}: {t}" for (_, title), t in zip(columns, totals)))
    return "\n".join(out) + "\n"


def results_dir() -> Path:
    cache = os.environ.get("DURABLE_CACHE") or str(Path.home() / ".cache" / "durable-steps")
    return Path(os.environ.get("DURABLE_LOOKUPS_RESULTS") or cache)
