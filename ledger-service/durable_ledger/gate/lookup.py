"""Reconcile through the caller: the runner looked the object up itself and reports the verdict.

For an operation in SENT/UNKNOWN whose action has no server-side reconciler, `begin` answers
`reconcile` with `reconciliation.outcome = no_reconciler`. An n8n workflow (Begin Step's
*Look Up* output) then searches the remote for the operation key it stamped on the object and
reports found / absent / undecidable here. The verdict is applied exactly as a reconciler's
(`reconciliation.apply_verdict`), then the gate is asked again with the stored digest, so the
answer is a begin answer: found -> `reuse_receipt`, absent -> `dispatch` (a new attempt, SENT
with the caller's token), undecidable -> `needs_review`.

What the caller sends as evidence is its word, not the ledger's: it is stored whole under
``evidence.caller_reported``, beside ``source: caller_lookup`` and ``reported_by`` (the runner),
which the ledger sets. A caller's ``source``, verdict, candidates or n8n execution therefore never
read as a reconciler's verdict, as candidates the ledger found, or as an execution the ledger saw.

The report is bound to the attempt it looked for. The window it closes:

    run 2: begin -> reconcile (attempt 1) -> lookup: absent -> report -> FAILED -> begin: SENT attempt 2
    run 2 crashes before it hears the answer; its HTTP client retries the report ("absent", attempt 1)

Without the attempt the retried report would fail attempt 2, which may already be at the
remote, and dispatch attempt 3: a blind retry. With it the report finds attempt 2 and changes
nothing; the answer is the gate's for attempt 2 (`reconcile`, look up again).
"""

import time

from .. import gate, store
from ..jobs.operations import get_operation
from ..kernel import states as S
from ..kernel.errors import ValidationFailed
from ..kernel.fencing import check_fence
from ..reconciliation import attempts
from ..reconciliation.apply import apply_verdict
from ..reconciliation.verdicts import Absent, Found, Undecidable

FOUND, ABSENT, UNDECIDABLE = "found", "absent", "undecidable"
RESULTS = (FOUND, ABSENT, UNDECIDABLE)


def _verdict(result, remote_id, receipt, evidence, reporter):
    evidence = {"source": "caller_lookup", "reported_by": reporter, "caller_reported": evidence or {}}
    if result == FOUND:
        if remote_id in (None, ""):
            raise ValidationFailed("a found object needs its remote_id", {"field": "remote_id"})
        return Found(str(remote_id), receipt or {}, evidence)
    if result == ABSENT:
        # The caller's word that a late write of this attempt cannot still land (a unique key at
        # the remote, a fence, or a remote that answers for writes in progress): docs/builders.md.
        return Absent(True, evidence)
    return Undecidable(evidence)


def report_lookup(principal, key, fencing_token, attempt, result, remote_id=None, receipt=None, evidence=None,
                  config=None):
    """Apply the caller's lookup verdict, then answer as `begin` would now.

    Returns the begin answer with ``lookup: {outcome, verdict}``; ``outcome`` is `applied`,
    `raced` (the operation moved while the verdict was applied) or `not_in_flight` (it was settled
    meanwhile, or another attempt is in flight); in the last two nothing changed. ``config`` is the gate's (`gate.GateConfig`).
    """
    op = get_operation(principal.tenant, key)
    verdict = _verdict(result, remote_id, receipt, evidence, principal.actor)
    if not isinstance(verdict, Found) and attempts.owner_receipts(op):
        # The attempt's own execution reported a remote id after it was fenced out: "absent" from
        # a lookup does not outvote it (a retry would write twice); an editor sees the id.
        verdict = Undecidable({**verdict.evidence, "reported": result,  # the caller's word, kept as evidence
                               "detail": "the lookup did not find the object the attempt's "
                                         "own execution reported (kept receipt)"})
    outcome = "not_in_flight"
    if op.state in S.IN_FLIGHT and op.attempt == attempt:
        def fenced():
            check_fence(store.lease_of(op.job_id, lock=True), fencing_token)

        n, _ = apply_verdict(op, verdict, principal.actor, time.time(), attempt=attempt, before_txn=fenced)
        outcome = "applied" if n == 1 else "raced"
    answer = gate.begin(principal, op.job.job_id, op.action, fencing_token, request_hash=op.request_hash,
                        operation_key=key, target=op.target, requires_approval=op.requires_approval, config=config)
    answer.extras["lookup"] = {"outcome": outcome, "verdict": verdict.kind, "attempt": attempt}
    return answer
