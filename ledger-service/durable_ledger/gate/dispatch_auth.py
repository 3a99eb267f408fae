"""What a gateway may forward: exactly the write the ledger dispatched, once, under the current lease.

The publishing proxy holds the WordPress credentials, so it is the door a hostile or stale caller
would use to skip the gate. It therefore never takes the caller's word for a job, a token, a
target or a digest; it asks the ledger (same database) about the operation key and forwards
only what the ledger recorded:

    runner:  begin(K, payload P) -> SENT (token 7) ... POST /proxy {K, body B}
    proxy:   K in the caller's tenant? SENT? token 7 still the job's? target = this site?
             digest(B) == digest(P)? publish: approved action?   -> forward B with job/token from the ledger

A CONFIRMED operation authorizes nothing new (its receipt is the answer); a SENT operation
authorizes its own write again (a retry after a lost response is deduplicated by WordPress under
the same key), never another one. Checked on every write, not cached: a takeover, a cancel or a
confirm takes effect on the next request.
"""

from ..approvals import rules as approvals
from ..kernel import states as S
from ..kernel.digest import request_digest
from ..kernel.errors import LedgerError, StaleFencingToken
from ..kernel.fencing import check_fence
from ..store import operations as op_store
from ..store.rows import LeaseView


class WriteNotDispatched(LedgerError):
    """The ledger did not dispatch this write (unknown key, other tenant, not SENT, other target)."""

    code, http_status = "write_not_dispatched", 403


class WriteDigestMismatch(LedgerError):
    """The write forwarded is not the request the ledger dispatched (digest differs)."""

    code, http_status = "digest_mismatch", 422


class Grant:
    """The ledger's facts for one authorized write: what the gateway forwards downstream."""

    __slots__ = ("tenant", "operation_key", "job_id", "fencing_token", "action", "target")

    def __init__(self, op, job_id):
        self.tenant, self.operation_key, self.job_id = op.tenant, op.operation_key, job_id
        self.fencing_token, self.action, self.target = op.fencing_token, op.action, op.target

    @property
    def remote_job_id(self):
        return remote_job_id(self.tenant, self.job_id)

    @property
    def remote_key(self):
        return remote_key(self.tenant, self.operation_key)


def remote_job_id(tenant, job_id):
    """The job's identity in the remote system. Job ids are unique per tenant only; unqualified,
    two tenants' "article-42" would share one fence in WordPress and raise each other's."""
    return f"{tenant}:{job_id}"


def remote_key(tenant, key):
    """The key's identity in the remote system: default keys already start with the tenant; a
    custom key is qualified so two tenants' "k1" never replay each other's object."""
    return key if key.startswith(tenant + ":") else f"{tenant}:{key}"


def is_publish(action):
    return action == "publish" or action.endswith(".publish") or action.startswith("publish:")


def _refuse(message, key, **details):
    raise WriteNotDispatched(message, {"operation_key": key, **details})


def authorize_write(tenant, operation_key, target, write, *, job_id=None, fencing_token=None, publish=False):
    """Return the Grant for forwarding ``write`` to ``target``, or raise.

    ``write`` is the request as the gateway forwards it (identity fields removed), digested like
    `begin`'s payload; ``job_id``/``fencing_token`` are the caller's claims, checked, never used.
    An unknown key and another tenant's key get the same answer (no existence oracle).
    """
    row = op_store.operation_for_dispatch_check(tenant, operation_key)
    if row is None:
        _refuse("the ledger has not dispatched this operation: call begin first", operation_key)
    if job_id is not None and job_id != row.job_key:
        _refuse("the operation belongs to another job", operation_key, job_id=job_id)
    if row.status in ("cancelled", "halted"):
        _refuse(f"the job is {row.status} ({row.halt_reason}); nothing is forwarded", operation_key,
                job_status=row.status, reason=row.halt_reason)
    if row.state != S.SENT:
        hint = {S.CONFIRMED: "it is confirmed: use its receipt, nothing new is written",
                S.PREPARED: "it waits for an approval", S.FAILED: "it failed: begin it again",
                S.UNKNOWN: "its outcome is unknown: begin it again to reconcile first",
                S.NEEDS_REVIEW: "an editor must decide it first", S.ABANDONED: "an editor abandoned it"}
        _refuse(f"the operation is {row.state}; {hint.get(row.state, 'it is not dispatched')}", operation_key,
                state=row.state)
    if fencing_token is not None:
        check_fence(LeaseView(row.lease_token) if row.lease_token is not None else None, fencing_token)
    if row.lease_token != row.fencing_token:
        # Dispatched under an older lease: a newer worker owns the job and decides again.
        raise StaleFencingToken("the operation was dispatched under a fencing token that is no longer current",
                                {"dispatched_with": row.fencing_token, "current": row.lease_token})
    if row.target != target:
        _refuse(f"the operation was dispatched for target {row.target!r}, not {target!r}", operation_key,
                dispatched_target=row.target, target=target)
    if publish and not (row.requires_approval and is_publish(row.action)):
        _refuse("publishing needs a publish operation the ledger dispatched after an approval", operation_key,
                action=row.action)
    if row.requires_approval and approvals.find_live(op_store.job_for_approval_check(row.job_id), row.action,
                                                     row.request_hash, row.target,
                                                     policy=row.approval_policy) is None:
        # The gate spent a live approval when it dispatched; the write is forwarded only while
        # one is still live (revoked, expired or bound to an older version: nothing goes out).
        _refuse("this write needs a live approval for this version, content and target; none is live",
                operation_key, action=row.action, reason="approval_required")
    digest = request_digest(write)
    if digest != row.request_hash:
        raise WriteDigestMismatch("this write is not the request the ledger dispatched under this key",
                                  {"operation_key": operation_key, "dispatched": row.request_hash, "write": digest})
    return Grant(row, row.job_key)
