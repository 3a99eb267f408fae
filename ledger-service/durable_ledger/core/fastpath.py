"""The gate's hot path in hand-written SQL: one read and one write round trip per call.

`begin` and `confirm` run on every side effect, so they must cost little more than the two
statements a hand-rolled ledger would run. Building the same queries through the ORM costs
more CPU than the database work itself, so the three hot statements are written out here.
Everything unusual (conflicts, refusals, retries, reconciliation) goes through the general
code in `operations.py`, which re-reads and decides with the ORM.

Fencing stays atomic with the write:
- PostgreSQL: the write's WHERE/EXISTS locks the lease row FOR SHARE inside the same
  statement, so a concurrent takeover (an UPDATE of that row) either commits first (and the
  write sees the new token and does nothing) or waits until the write has committed.
- SQLite: the write runs inside BEGIN IMMEDIATE, which serialises every writer.
"""

import time

from ..db import db, is_sqlite, write_txn
from ..models import Job, JSONText, Operation
from . import budgets as B
from . import states as S
from .n8n_context import stamp

_json = JSONText()
JOB_COLS = [f.column_name for f in Job._meta.sorted_fields]
OP_COLS = [f.column_name for f in Operation._meta.sorted_fields]
_JOB_FIELDS = [Job._meta.columns[c] for c in JOB_COLS]
_OP_FIELDS = [Operation._meta.columns[c] for c in OP_COLS]


def _sql(text):
    return text if is_sqlite() else text.replace("?", "%s")


class LeaseView:
    __slots__ = ("fencing_token",)

    def __init__(self, token):
        self.fencing_token = token


def _model(cls, fields, values):
    obj = cls(**{f.name: f.python_value(v) for f, v in zip(fields, values)})
    obj._dirty.clear()
    return obj


# The operation is joined by an exact key so that the (tenant, operation_key) index is used;
# a key computed in SQL from the job's columns made PostgreSQL scan the tenant's operations.
_LOAD_WITH_KEY = (
    "SELECT " + ", ".join(f"j.{c}" for c in JOB_COLS) + ", l.fencing_token, "
    + ", ".join(f"o.{c}" for c in OP_COLS)
    + " FROM job j LEFT JOIN lease l ON l.job_id = j.id"
    " LEFT JOIN operation o ON o.tenant = j.tenant AND o.operation_key = ?"
    " WHERE j.tenant = ? AND j.job_id = ?"
)
_LOAD_JOB = ("SELECT " + ", ".join(f"j.{c}" for c in JOB_COLS) + ", l.fencing_token"
             " FROM job j LEFT JOIN lease l ON l.job_id = j.id WHERE j.tenant = ? AND j.job_id = ?")
_LOAD_OP = "SELECT " + ", ".join(OP_COLS) + " FROM operation WHERE tenant = ? AND operation_key = ?"


def load(tenant, job_id, operation_key, action):
    """(job, lease or None, operation or None); (None, None, None) if no job.

    One query when the caller names the key; two (job, then operation) for the default key,
    which depends on the job's current task version.
    """
    from .digest import default_operation_key

    n = len(JOB_COLS)
    if operation_key:
        row = db.execute_sql(_sql(_LOAD_WITH_KEY), (operation_key, tenant, job_id)).fetchone()
        if row is None:
            return None, None, None
        op_values = row[n + 1:] if row[n + 1] is not None else None
    else:
        row = db.execute_sql(_sql(_LOAD_JOB), (tenant, job_id)).fetchone()
        if row is None:
            return None, None, None
        key = default_operation_key(tenant, job_id, row[JOB_COLS.index("task_version")], action)
        op_values = db.execute_sql(_sql(_LOAD_OP), (tenant, key)).fetchone()
    job = _model(Job, _JOB_FIELDS, row[:n])
    lease = LeaseView(row[n]) if row[n] is not None else None
    op = _model(Operation, _OP_FIELDS, op_values) if op_values is not None else None
    return job, lease, op


_INSERT_COLS = ["tenant", "operation_key", "job_id", "task_version", "action", "request_hash", "state", "attempt",
                "max_attempts", "fencing_token", "target", "requires_approval", "request_summary",
                "reconcile_attempts", "created_at", "updated_at"]
_EVENT_COLS = "operation_id, job_id, from_state, to_state, actor, fencing_token, detail, created_at"

# `live` locks the job row FOR SHARE: a cancel (an UPDATE of that row) either commits first, and
# then this statement re-checks the row, finds it no longer active and inserts nothing, or waits
# until this claim has committed (the SENT row predates the cancel and the cancel report lists it).
_CLAIM_PG = (
    "WITH live AS (SELECT id FROM job WHERE id = %s AND status NOT IN ('cancelled', 'halted') FOR SHARE),"
    " fence AS (SELECT id FROM lease WHERE job_id = %s AND fencing_token = %s FOR SHARE),"
    " ins AS (INSERT INTO operation (" + ", ".join(_INSERT_COLS) + ") SELECT "
    + ", ".join(["%s"] * len(_INSERT_COLS)) + " FROM fence, live"
    " ON CONFLICT (tenant, operation_key) DO NOTHING RETURNING id),"
    " ev AS (INSERT INTO operation_event (" + _EVENT_COLS + ")"
    " SELECT id, %s, NULL, 'SENT', %s, %s, %s, %s FROM ins)"
    " SELECT (SELECT id FROM ins), (SELECT count(*) FROM fence), (SELECT count(*) FROM live)"
)
_JOB_GUARD = "SELECT status, halt_reason, budgets, cost, created_at FROM job WHERE id = ?"


class Refused:
    """The job may not dispatch now: cancelled/halted (``reason``) or a budget (``budget``)."""

    __slots__ = ("reason", "budget")

    def __init__(self, reason, budget=None):
        self.reason, self.budget = reason, budget


def guard_txn(job_pk, now, exclusive):
    """Inside a write transaction: lock the job row and say whether it may dispatch.

    ``exclusive`` (PostgreSQL FOR NO KEY UPDATE) when a counted budget is set, so that concurrent
    claims of one job count one after the other; FOR SHARE otherwise, which only orders
    claims against a cancel and lets claims of one job run side by side.
    """
    sql = _sql(_JOB_GUARD)
    if not is_sqlite():
        # NO KEY UPDATE, not UPDATE: inserts that reference the job (events, audit rows, a
        # takeover's audit while it holds the lease row) take KEY SHARE, which it does not block.
        # Lock order rule for every writer: never hold the lease row exclusively and then wait
        # for the job row, or the reverse (see lifecycle.cancel_job).
        sql += " FOR NO KEY UPDATE" if exclusive else " FOR SHARE"
    status, halt_reason, budgets, cost, created_at = db.execute_sql(sql, (job_pk,)).fetchone()
    refusal = B.dispatch_refusal(job_pk, status, halt_reason, _json.python_value(budgets), cost, created_at, now)
    return Refused(*refusal) if refusal else None


def claim_new(tenant, job, key, action, digest, token, target, requires_approval, max_attempts, actor,
              summary, now):
    """INSERT the operation as SENT if the job may dispatch, the token is current and the key is free.

    Returns the new Operation; a `Refused` when the job is cancelled/halted or a budget is used up
    (checked in the claim's own transaction); None when the key was taken or the token is no
    longer current (the caller re-reads and decides on the general path).
    """
    values = [tenant, key, job.id, job.task_version, action, digest, S.SENT, 1, max_attempts, token, target,
              bool(requires_approval), _json.db_value(summary), 0, now, now]
    detail = _json.db_value(stamp({"attempt": 1}))
    if is_sqlite():
        with write_txn():
            refused = guard_txn(job.id, now, exclusive=True)
            if refused:
                return refused
            fenced = db.execute_sql("SELECT 1 FROM lease WHERE job_id = ? AND fencing_token = ?",
                                    (job.id, token)).fetchone()
            taken = db.execute_sql("SELECT 1 FROM operation WHERE tenant = ? AND operation_key = ?",
                                   (tenant, key)).fetchone()
            if not fenced or taken:
                return None
            cur = db.execute_sql("INSERT INTO operation (" + ", ".join(_INSERT_COLS) + ") VALUES ("
                                 + ", ".join(["?"] * len(_INSERT_COLS)) + ")", values)
            op_id = cur.lastrowid
            db.execute_sql("INSERT INTO operation_event (" + _EVENT_COLS + ") VALUES (?, ?, NULL, 'SENT', ?, ?, ?, ?)",
                           (op_id, job.id, actor, token, detail, now))
    else:
        args = [job.id, job.id, token, *values, job.id, actor, token, detail, now]
        if B.counted(job.budgets):
            # Two statements: the FOR UPDATE waits for the previous claim of this job to commit,
            # and only a statement started after that sees its SENT row when counting.
            with write_txn():
                refused = guard_txn(job.id, now, exclusive=True)
                if refused:
                    return refused
                row = db.execute_sql(_CLAIM_PG, args).fetchone()
        else:
            row = db.execute_sql(_CLAIM_PG, args).fetchone()
        op_id, _fenced, live = row
        if op_id is None:
            if not live:
                with write_txn():
                    return guard_txn(job.id, now, exclusive=False)  # None: reopened meanwhile, re-read
            return None
    op = Operation(id=op_id, tenant=tenant, operation_key=key, job=job.id, task_version=job.task_version,
                   action=action, request_hash=digest, state=S.SENT, attempt=1, max_attempts=max_attempts,
                   retryable=None, fencing_token=token, target=target, requires_approval=bool(requires_approval),
                   remote_id=None, receipt=None, last_error=None, request_summary=summary, reconcile_attempts=0,
                   reconciling_until=None, evidence=None, created_at=now, updated_at=now)
    op._dirty.clear()
    return op


_CONFIRM_PG = (
    "WITH old AS (SELECT id, job_id, state FROM operation WHERE tenant = %s AND operation_key = %s FOR UPDATE),"
    " upd AS (UPDATE operation o SET state = 'CONFIRMED', remote_id = %s, receipt = %s, last_error = NULL,"
    " updated_at = %s FROM old JOIN job j ON j.id = old.job_id"
    " WHERE o.id = old.id AND old.state IN ('SENT', 'UNKNOWN', 'NEEDS_REVIEW')"
    " AND EXISTS (SELECT 1 FROM lease l WHERE l.job_id = old.job_id AND l.fencing_token = %s FOR SHARE)"
    " RETURNING " + ", ".join(f"o.{c}" for c in OP_COLS) + ", old.state AS state_before, j.job_id AS job_key),"
    " ev AS (INSERT INTO operation_event (" + _EVENT_COLS + ")"
    " SELECT id, job_id, state_before, 'CONFIRMED', %s, %s, %s, %s FROM upd)"
    " SELECT * FROM upd"
)


def confirm(tenant, key, token, remote_id, receipt, actor):
    """SENT/UNKNOWN/NEEDS_REVIEW -> CONFIRMED if the token is current; None means "general path"."""
    now = time.time()
    receipt_text = _json.db_value(receipt or {})
    detail = _json.db_value(stamp({"remote_id": str(remote_id), "cost": None}))
    if is_sqlite():
        with write_txn():
            row = db.execute_sql(
                "SELECT o.id, o.job_id, o.state FROM operation o JOIN lease l ON l.job_id = o.job_id"
                " WHERE o.tenant = ? AND o.operation_key = ? AND l.fencing_token = ?"
                " AND o.state IN ('SENT', 'UNKNOWN', 'NEEDS_REVIEW')", (tenant, key, token)).fetchone()
            if row is None:
                return None
            op_id, job_pk, before = row
            db.execute_sql("UPDATE operation SET state = 'CONFIRMED', remote_id = ?, receipt = ?, last_error = NULL,"
                           " updated_at = ? WHERE id = ?", (str(remote_id), receipt_text, now, op_id))
            db.execute_sql("INSERT INTO operation_event (" + _EVENT_COLS + ") VALUES (?, ?, ?, 'CONFIRMED', ?, ?, ?, ?)",
                           (op_id, job_pk, before, actor, token, detail, now))
            values = db.execute_sql("SELECT " + ", ".join(f"o.{c}" for c in OP_COLS) + ", j.job_id FROM operation o"
                                    " JOIN job j ON j.id = o.job_id WHERE o.id = ?", (op_id,)).fetchone()
        op = _model(Operation, _OP_FIELDS, values[:-1])
        op.job_key = values[-1]
        return op
    row = db.execute_sql(_CONFIRM_PG, (tenant, key, str(remote_id), receipt_text, now, token,
                                       actor, token, detail, now)).fetchone()
    if row is None:
        return None
    op = _model(Operation, _OP_FIELDS, row[:len(OP_COLS)])
    op.job_key = row[-1]
    return op
