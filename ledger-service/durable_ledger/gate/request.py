"""What the gate takes and gives, as plain objects: the API renders them, the core never
speaks HTTP."""

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .summary import summary as summarise

MISSING = object()  # "no payload sent" (None is a payload)


@dataclass(frozen=True)
class GateConfig:
    default_max_attempts: int = 3
    backoff_base_s: float = 0.0
    reconcile_claim_s: float = 60.0


@dataclass(frozen=True)
class BeginRequest:
    job_id: str
    action: str
    fencing_token: int | None
    digest: str
    payload: Any = MISSING
    operation_key: str | None = None
    target: str | None = None
    requires_approval: bool = False
    reconcile: bool = True
    config: GateConfig = GateConfig()
    fields: dict | None = None  # per-top-level-field digests (gate/mismatch.py)
    policy: dict | None = None  # the approval policy's rule, normalized (approvals/policy.py)

    @cached_property
    def summary(self):
        """The stored request summary (gate/summary.py), computed once per request however many
        claims or rounds ask for it, and never for a begin that stores no row."""
        return summarise(self.payload) if self.payload is not MISSING else None


@dataclass
class Answer:
    """The gate's answer: ``decision`` (dispatch, reuse_receipt, reconcile, needs_review, halt)
    for the operation ``op`` (None when a halt came before any row existed)."""

    decision: str
    op: Any
    job_id: str
    reason: str | None = None
    receipt: dict | None = None  # reuse_receipt: what the remote returned, as stored
    budget: str | None = None
    extras: dict = field(default_factory=dict)  # retry_after, denial, reconciliation, lookup
