"""The suite's stack: a private PostgreSQL cluster (tests/dbfault/pg_cluster.py) behind a relay the
test controls (pg_relay.py), the real ledger server on it, a second ledger server on SQLite, a
real n8n 2.40.7 server (`n8n start`) with the packed node and one workflow per ledger:

    Webhook -> Start Job -> Create Order (Gated HTTP Request, its defaults + a Look Up)

and the counting remote (remote.py). The n8n server half is stack/n8n_server.py's.
"""
from __future__ import annotations

import uuid
from pathlib import Path

from n8n_server import N8nServer
from pg_cluster import PrivateCluster
from pg_relay import PgRelay
from pipeline_stack import CRED_LEDGER, PipelineStack
from services import LedgerServer, free_port

DURABLE = "n8n-nodes-durable.durableStep"
CRED_SQLITE = {"id": "durableLedgerSqlite", "name": "Durable Ledger (SQLite)"}
WORKFLOWS = {"dbpg": CRED_LEDGER, "dbsq": CRED_SQLITE}  # workflow id (= webhook path) -> its ledger
THREADS = 16
TIMEOUT_MS = 5000


def workflow(wf_id: str, remote_url: str, credential: dict) -> dict:
    """The smallest gated workflow (workflows/first-gated-step.json's shape) started by a webhook
    whose body names the order; the Gated HTTP Request keeps its defaults except the request
    itself and the Look Up on the remote's by-key route (the re-run after a fault settles an
    attempt whose outcome the ledger could not record)."""
    order = "={{ $json.body.order_id }}"
    nodes = [
        {"name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2, "webhookId": str(uuid.uuid4()),
         "parameters": {"httpMethod": "POST", "path": wf_id, "responseMode": "onReceived", "options": {}}},
        {"name": "Start Job", "type": DURABLE, "typeVersion": 1.2, "credentials": {"durableLedgerApi": credential},
         "parameters": {"operation": "startJob", "jobId": order}},
        {"name": "Create Order", "type": DURABLE, "typeVersion": 1.2, "credentials": {"durableLedgerApi": credential},
         "parameters": {"operation": "gatedRequest", "action": "create_order", "method": "POST",
                        "url": f"{remote_url}/orders",
                        "jsonBody": "={{ { order_id: $('Webhook').item.json.body.order_id } }}",
                        "lookUp": True, "lookUpUrl": f"{remote_url}/orders/by-key/{{operation_key}}",
                        "lookUpMatchField": "idempotency_key",
                        # the URL addresses the order by the key: its 404 proves nothing was written
                        "lookUpEmptyIsAbsent": True,
                        # A begin whose commit landed and whose answer was lost leaves the attempt
                        # SENT: the node's Look Up treats it as possibly in flight for the request's
                        # timeout (30 s by default) before it trusts a 404. 5 s keeps the re-run short.
                        "gateOptions": {"timeout": TIMEOUT_MS}}},
    ]
    for i, n in enumerate(nodes):
        n.update(id=str(uuid.uuid4()), position=[220 * i, 300])
    chain = [n["name"] for n in nodes]
    connections = {a: {"main": [[{"node": b, "type": "main", "index": 0}]]} for a, b in zip(chain, chain[1:])}
    return {"id": wf_id, "name": f"Database faults {wf_id}", "nodes": nodes, "connections": connections,
            "active": False, "settings": {"executionOrder": "v1", "saveManualExecutions": True,
                                          "saveDataErrorExecution": "all", "saveDataSuccessExecution": "all"}}


class DbFaultStack(N8nServer, PipelineStack):
    def __init__(self, workdir: Path, say=lambda m: print(f"[dbfault] {m}", flush=True)):
        super().__init__(workdir, say=say)
        self.openai_url = "http://127.0.0.1:9/v1"  # the stack's credentials file names one; unused
        self.cluster: PrivateCluster | None = None
        self.relay: PgRelay | None = None
        self.sqlite: LedgerServer | None = None

    def start_all(self, remote_url: str):
        self.say("private PostgreSQL cluster (initdb on a tmpfs, own port and socket directory)")
        self.cluster = PrivateCluster(self.workdir, free_port(), say=self.say).create()
        self.relay = PgRelay(self.cluster.port)
        tokens = f"demo:runner:{self.tokens['runner']}"
        # 16 threads: a fault holds up to six requests at once (the relay keeps their statements, a
        # lock keeps them for the busy timeout); with 4 the n8n runs' calls would queue behind them.
        self.start_ledger(self.cluster.url(self.relay.port), tokens, threads=THREADS)
        self.sqlite_db = self.workdir / "ledger-sqlite.db"
        self.say("second ledger on SQLite")
        self.sqlite = LedgerServer(f"sqlite:///{self.sqlite_db}", tokens, workers=1, threads=THREADS,
                                   log_path=self.workdir / "ledger-sqlite.log", log_level="INFO",
                                   DURABLE_DATA_DIR=str(self.workdir)).start()
        self._prepare_n8n()
        self.import_workflows([workflow(wf, remote_url, cred) for wf, cred in WORKFLOWS.items()])
        self.start_server()
        self.activate(list(WORKFLOWS), list(WORKFLOWS))
        return self

    def openai_credential(self) -> dict:
        """The stack imports this one beside the ledger's (one n8n CLI run): here the SQLite ledger's."""
        return {**CRED_SQLITE, "type": "durableLedgerApi",
                "data": {"baseUrl": self.sqlite.url, "token": self.tokens["runner"]}}

    def stop(self):
        if self.sqlite is not None:
            self.sqlite.stop()
        super().stop()  # n8n and the PostgreSQL ledger
        if self.relay is not None:
            self.relay.close()
        if self.cluster is not None:
            self.cluster.destroy()

    def ledger_log(self) -> str:
        return (self.workdir / "ledger.log").read_text(errors="replace")
