"""The orders sample end to end: real n8n 2.40.7 running workflows/orders-pipeline.json (three
Gated Sub-Workflow nodes) and its six published sub-workflows against a real PostgreSQL, MariaDB
and mail server (SMTP -> Maildir -> Dovecot IMAP), with the real ledger behind a fault relay. One
stack per session; each case has its own batch of three orders (its own jobs and operation keys)
and its own copy of the main workflow, all imported at once; the sub-workflows are shared. The
cases' copies start from a production webhook; they and the sub-workflows are published through the
server, as the owner would. Their runs share one `n8n start` server, killed once
(stack/n8n_server.py)."""
import json
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

from n8n_server import N8nServer, webhook_triggered  # noqa: E402
from orders_stack import ACTIONS, WORKFLOW_FILE, OrdersStack  # noqa: E402

POINTS = ("before_send", "after_write", "after_receipt")
SHORT = {"pg_insert_order": "pg", "mariadb_insert_order": "maria", "send_confirmation": "mail",
         "before_send": "bs", "after_write": "aw", "after_receipt": "ar"}
CASES = [(a, p) for a in ACTIONS for p in POINTS]


def batch_for(action, point):
    return f"o-{SHORT[action]}-{SHORT[point]}"


def workflow_for(action, point):
    return f"wfOrders{SHORT[action].title()}{SHORT[point].upper()}"


class OrdersServerStack(N8nServer, OrdersStack):
    """The orders stack whose n8n can also run as a server (`n8n start`) on a fixed port."""


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    st = OrdersServerStack(tmp_path_factory.mktemp("orders"), say=lambda m: print(f"[orders] {m}"))
    try:
        st.start()
        shipped = json.loads(WORKFLOW_FILE.read_text())  # as shipped, for the editor screenshot
        cases = [webhook_triggered(st.workflow(workflow_for(a, p), batch_for(a, p)), workflow_for(a, p))
                 for a, p in CASES]
        st.import_workflows(st.subworkflows() + cases + [shipped])
        yield st
    finally:
        st.stop()
