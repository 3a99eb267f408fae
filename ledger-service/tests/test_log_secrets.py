"""Resume URLs' signatures never reach a log, at any level: the real deliver-approvals process
at DEBUG, every line it writes captured."""

import os
import subprocess

from conftest import TOKENS
from servers import BIN
from test_approval_waits import approve, halted, n8n, register  # noqa: F401 - fixtures

assert halted and n8n  # fixtures used by name below


def test_deliver_approvals_at_debug_never_logs_the_signature(client, database, halted, n8n):  # noqa: F811
    key, tok, digest = halted
    assert register(client, key, tok, n8n.url()).status_code == 201
    assert approve(key, digest) == 1
    env = {**os.environ, "DURABLE_DATABASE_URL": database, "DURABLE_BOOTSTRAP_TOKENS": TOKENS,
           "DURABLE_LOG_LEVEL": "DEBUG"}
    out = subprocess.run([str(BIN), "deliver-approvals"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    logged = out.stdout + out.stderr
    assert [c["path"] for c in n8n.calls] == ["/webhook-waiting/5?signature=s3cr3t-5"]  # delivered, once
    assert " DEBUG " in logged and "/webhook-waiting/5" in logged  # DEBUG on, the delivery logged
    assert "s3cr3t" not in logged
