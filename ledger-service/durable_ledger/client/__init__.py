"""One client API for Python code, two transports (docs/client.md).

    from durable_ledger.client import LocalLedger, HttpLedger, NotSent, StepBlocked

    ledger = LocalLedger("sqlite:///path/ledger.db", tenant="acme", actor="script")  # no HTTP
    ledger = HttpLedger("http://127.0.0.1:8080", token="...")                       # over HTTP
    job = ledger.job("job-1", owner="worker-a", ttl_s=300)
    with job.step("create_draft", {"title": "T"}) as step:
        if step.done:
            return step.receipt
        step.confirm(remote_id=create_the_draft(), receipt={...})

The ledger's refusals are the classes of durable_ledger.kernel.errors on both transports.
"""

from ..kernel.errors import LeaseHeld, LeaseLost, LedgerError, StaleFencingToken
from .errors import (
                     ConfirmForgotten,
                     Halted,
                     LedgerUnavailable,
                     NeedsReconcile,
                     NeedsReview,
                     NotSent,
                     StepBlocked,
                     StepUsageError,
)
from .calls import Batch
from .http import HttpLedger
from .ledger import GateAnswer, Job, Ledger
from .local import LocalLedger
from .steps import Step, split_result

__all__ = ["LocalLedger", "HttpLedger", "Ledger", "Job", "Step", "GateAnswer", "Batch", "split_result",
           "StepBlocked", "NeedsReconcile", "NeedsReview", "Halted", "NotSent", "ConfirmForgotten",
           "StepUsageError", "LedgerUnavailable", "LedgerError", "LeaseHeld", "LeaseLost", "StaleFencingToken"]
