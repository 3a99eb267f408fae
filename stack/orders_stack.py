"""The orders sample's stack as processes, for tests/orders.

    n8n (execute, headless): Gated Sub-Workflow nodes ──▶ FaultRelay ──▶ ledger (durable-ledger serve, SQLite)
         └─ their sub-workflows (published):
              ├──Postgres node──▶ PostgreSQL 127.0.0.1:5432, database orders_<random>   (table orders, op_key UNIQUE)
              ├──MySQL node─────▶ MariaDB 127.0.0.1:3306, database orders_<random>      (table orders, op_key UNIQUE)
              ├──Send Email─────▶ SMTP (aiosmtpd) ──▶ Maildir ◀── Dovecot (IMAP; doveadm HTTP API)
              └──HTTP Request (the mailbox lookup) ──▶ doveadm HTTP API

workflows/orders-pipeline.json and its six sub-workflows (orders-*-insert/-send/-find.json) run as
shipped; only the main workflow's Config values (batch id, doveadm URL) and the credentials
differ. Counting is done in the remote systems themselves: rows in PostgreSQL and MariaDB (psql /
mysql), messages in the mailbox through IMAP; what ran is counted in n8n's own execution table.
Databases are created with unique names per stack and dropped by stop().
"""
from __future__ import annotations

import base64
import copy
import json
import secrets
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
from fault_relay import FaultRelay  # noqa: E402
from mail_stack import MailServer  # noqa: E402
from pipeline_stack import TENANT, PipelineStack  # noqa: E402
from localhost import psql  # noqa: E402

WORKFLOW_FILE = REPO / "workflows" / "orders-pipeline.json"
# Per gated side effect (its action): the sub-workflow that writes and the one that looks it up.
SUBWORKFLOWS = {
    "pg_insert_order": ("ordersPgInsert", "ordersPgFind"),
    "mariadb_insert_order": ("ordersMariadbInsert", "ordersMariadbFind"),
    "send_confirmation": ("ordersEmailSend", "ordersEmailFind"),
}
SUB_FILES = tuple(REPO / "workflows" / f"orders-{name}.json" for name in (
    "postgres-insert", "postgres-find", "mariadb-insert", "mariadb-find", "email-send", "email-find"))
CREDS = {
    "ledger": {"id": "durableLedgerCred", "name": "Durable Ledger"},
    "postgres": {"id": "ordersPostgresCred", "name": "Orders PostgreSQL"},
    "mysql": {"id": "ordersMariadbCred", "name": "Orders MariaDB"},
    "smtp": {"id": "ordersSmtpCred", "name": "Orders SMTP"},
    "mailbox": {"id": "ordersMailboxCred", "name": "Orders Mailbox Search"},
}
# The three gated side effects: Begin Step action -> where the test counts it.
ACTIONS = ("pg_insert_order", "mariadb_insert_order", "send_confirmation")
ORDER_IDS = ("ORD-1001", "ORD-1002", "ORD-1003")

PG_TABLE = """CREATE TABLE orders (
  id serial PRIMARY KEY,
  op_key text NOT NULL UNIQUE,
  order_id text NOT NULL,
  customer text NOT NULL,
  email text NOT NULL,
  total_cents integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now())"""
MY_TABLE = """CREATE TABLE orders (
  id INT AUTO_INCREMENT PRIMARY KEY,
  op_key VARCHAR(255) NOT NULL UNIQUE,
  order_id VARCHAR(64) NOT NULL,
  customer VARCHAR(255) NOT NULL,
  email VARCHAR(255) NOT NULL,
  total_cents INT NOT NULL,
  created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"""


def mysql(sql: str, db: str | None = None) -> str:
    out = subprocess.run(["mysql", "-h", "127.0.0.1", "-P", "3306", "-uroot", "-N", "-B", *([db] if db else []), "-e", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"mysql {sql!r}: {out.stderr}")
    return out.stdout


def operation_key(job_id: str, action: str) -> str:
    """The ledger's default key ({tenant}:{job_id}:v{task_version}:{action}): the stamp."""
    return f"{TENANT}:{job_id}:v1:{action}"


class OrdersStack(PipelineStack):
    """Reuses PipelineStack's n8n helpers (node package install, import, execute with a kill)."""

    def __init__(self, workdir: Path, say=lambda *_a: None):
        super().__init__(workdir, say=say)
        tag = secrets.token_hex(4)
        self.pg_db = self.my_db = f"orders_{tag}"
        self.mail = MailServer()

    # ------------------------------------------------------------------ lifecycle

    def start(self, ledger_relay: bool = True):
        subprocess.run(["bash", str(HERE / "ensure-services.sh"), "postgres", "mariadb"], check=True)
        self.say(f"PostgreSQL database {self.pg_db}, MariaDB database {self.my_db} (table orders, op_key UNIQUE)")
        psql(f"CREATE DATABASE {self.pg_db}")
        psql(PG_TABLE, self.pg_db)
        mysql(f"CREATE DATABASE {self.my_db}")
        mysql(MY_TABLE, self.my_db)
        self.say("mail: aiosmtpd -> Maildir, Dovecot IMAP + doveadm HTTP API")
        self.mail.start()
        self._start_ledger()
        self.ledger_relay = FaultRelay(self.ledger_url)
        self._prepare_orders_n8n()
        return self

    def stop(self):
        try:
            super().stop()
        finally:
            self.mail.stop()
            psql(f"DROP DATABASE IF EXISTS {self.pg_db} WITH (FORCE)")
            mysql(f"DROP DATABASE IF EXISTS {self.my_db}")

    def _start_ledger(self):
        t = self.tokens
        tokens = f"{TENANT}:runner:{t['runner']},{TENANT}:editor:{t['editor']}"
        self.start_ledger(f"sqlite:///{self.workdir / 'ledger.db'}", tokens)

    def _prepare_orders_n8n(self):
        self.say("n8n 2.40.7 (cached install) with the packed n8n-nodes-durable package")
        subprocess.run(["bash", str(HERE / "n8n.sh"), "install"], check=True, stdout=subprocess.DEVNULL)
        self.install_node_package()
        m = self.mail.state
        api = base64.b64encode(m["api_key"].encode()).decode()
        creds = [
            {**CREDS["ledger"], "type": "durableLedgerApi",
             "data": {"baseUrl": self.ledger_relay.url, "token": self.tokens["runner"]}},
            {**CREDS["postgres"], "type": "postgres",
             "data": {"host": "127.0.0.1", "port": 5432, "database": self.pg_db, "user": "postgres", "password": "",
                      "ssl": "disable", "allowUnauthorizedCerts": False, "maxConnections": 5}},
            {**CREDS["mysql"], "type": "mySql",
             "data": {"host": "127.0.0.1", "port": 3306, "database": self.my_db, "user": "root", "password": "",
                      "connectTimeout": 10000, "ssl": False}},
            {**CREDS["smtp"], "type": "smtp",
             "data": {"host": "127.0.0.1", "port": m["smtp_port"], "secure": False, "disableStartTls": True,
                      "user": "", "password": "", "hostName": "n8n.shop.test"}},
            {**CREDS["mailbox"], "type": "httpHeaderAuth",
             "data": {"name": "Authorization", "value": f"X-Dovecot-API {api}"}},
        ]
        path = self.n8n_folder / "credentials.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(creds))
        out = self.n8n("import:credentials", f"--input={path}")
        path.unlink()  # plain-text secrets; n8n stored them encrypted
        if out.returncode != 0:
            raise RuntimeError(f"n8n import:credentials failed:\n{out.stdout}\n{out.stderr}")

    def n8n_env(self) -> dict:
        # As for the agent tool (tests/agent_tools/agent_stack.py): CLI runs read a sub-workflow's
        # active version only without the publication service, which a running `n8n start` fills.
        return {**super().n8n_env(), "N8N_USE_WORKFLOW_PUBLICATION_SERVICE": "false"}

    def subworkflows(self) -> list[dict]:
        """The six shipped sub-workflows, unchanged (their settings come in the main workflow's input)."""
        return [json.loads(f.read_text()) for f in SUB_FILES]

    def workflow(self, workflow_id: str, batch: str) -> dict:  # noqa: D102 (PipelineStack has another signature)
        """The shipped workflow with this stack's Config values."""
        wf = copy.deepcopy(json.loads(WORKFLOW_FILE.read_text()))
        wf["id"], wf["name"] = workflow_id, f"{wf['name']} [{batch}]"
        values = {"batch": batch, "doveadm_url": self.mail.state["doveadm_url"], "mailbox_user": self.mail.state["user"]}
        cfg = next(n for n in wf["nodes"] if n["name"] == "Config")
        for a in cfg["parameters"]["assignments"]["assignments"]:
            if a["name"] in values:
                a["value"] = values[a["name"]]
        return wf

    # ------------------------------------------------------------------ counted in the remote systems

    def pg_rows(self, batch: str) -> dict:
        rows = psql(f"SELECT order_id, count(*) FROM orders WHERE op_key LIKE '{TENANT}:{batch}-%' GROUP BY order_id",
                    self.pg_db)
        return {o: int(n) for o, n in (line.split("|") for line in rows.split())}

    def mariadb_rows(self, batch: str) -> dict:
        rows = mysql(f"SELECT order_id, COUNT(*) FROM orders WHERE op_key LIKE '{TENANT}:{batch}-%' GROUP BY order_id",
                     self.my_db)
        return {o: int(n) for o, n in (line.split("\t") for line in rows.splitlines() if line)}

    def emails(self, batch: str) -> dict:
        """Messages per order in the mailbox, counted by the IMAP server (SEARCH SUBJECT "[op <key>]")."""
        out = {}
        for order in ORDER_IDS:
            n = self.mail.imap_count(f"[op {operation_key(f'{batch}-{order}', 'send_confirmation')}]")
            if n:
                out[order] = n
        return out

    def counts(self, batch: str) -> dict:
        return {"postgres": self.pg_rows(batch), "mariadb": self.mariadb_rows(batch), "email": self.emails(batch)}

    # ------------------------------------------------------------------ counted in n8n

    def last_execution_id(self) -> int:
        """The newest execution in n8n's own database (read between runs, never during one)."""
        with self._n8n_db() as db:
            return db.execute("SELECT COALESCE(MAX(id), 0) FROM execution_entity").fetchone()[0]

    def executions_since(self, last_id: int) -> dict:
        """Executions per workflow id after `last_id`: n8n saves every sub-workflow run as an execution
        of its own, so this counts how often each write and lookup sub-workflow ran."""
        with self._n8n_db() as db:
            rows = db.execute('SELECT "workflowId", COUNT(*) FROM execution_entity WHERE id > ? GROUP BY "workflowId"',
                              (last_id,)).fetchall()
        return {w: n for w, n in rows}

    def _n8n_db(self):
        return closing(sqlite3.connect(f"file:{self.n8n_folder / '.n8n' / 'database.sqlite'}?mode=ro", uri=True))

    # ------------------------------------------------------------------ ledger

    def operation(self, key: str) -> dict:
        return self.ledger("GET", f"/v1/operations/{quote(key, safe='')}")
