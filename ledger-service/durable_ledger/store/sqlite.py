"""The gate's statements on SQLite.

Every write runs inside BEGIN IMMEDIATE (`db.write_txn`), which takes the database-wide write
lock up front: the checks and the write of one claim or confirm cannot interleave with
another writer's, so a plain SELECT before the INSERT is as good as a lock.
"""

from .db import db, write_txn
from .models import Lease, Operation
from .rows import EVENT_COLS, INSERT_COLS, JOB_COLS, OP_COLS, JobGuard, LeaseView, job_model, json_codec, op_model

PARAM = "?"
_GUARD = "SELECT status, halt_reason, budgets, cost, created_at FROM job WHERE id = ?"
_DISPATCHES = "SELECT count(*) FROM operation_event WHERE job_id = ? AND to_state = 'SENT'"
_INSERT_OP = "INSERT INTO operation (" + ", ".join(INSERT_COLS) + ") VALUES (" + ", ".join("?" * len(INSERT_COLS)) + ")"
_INSERT_EVENT = "INSERT INTO operation_event (" + EVENT_COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_CONFIRMABLE = ("SELECT o.id, o.job_id, o.state FROM operation o JOIN lease l ON l.job_id = o.job_id"
                " WHERE o.tenant = ? AND o.operation_key = ? AND l.fencing_token = ?"
                " AND o.state IN ('SENT', 'UNKNOWN', 'NEEDS_REVIEW')"
                " AND (? IS NULL OR o.dispatched_by IS NULL OR o.dispatched_by = ?)")
_CONFIRM = ("UPDATE operation SET state = 'CONFIRMED', remote_id = ?, receipt = ?, last_error = NULL, updated_at = ?"
            " WHERE id = ?")
_CONFIRMED = ("SELECT " + ", ".join(f"o.{c}" for c in OP_COLS) + ", j.job_id FROM operation o"
              " JOIN job j ON j.id = o.job_id WHERE o.id = ?")


# The operation is joined by an exact key so that the (tenant, operation_key) index is used.
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


def load_gate(tenant, job_id, operation_key, default_key):
    """(job, lease, operation, key): one query when the caller names the key; two (job, then
    operation) for the default key, which depends on the job's current task version."""
    n = len(JOB_COLS)
    if operation_key:
        row = db.execute_sql(_LOAD_WITH_KEY, (operation_key, tenant, job_id)).fetchone()
        if row is None:
            return None, None, None, None
        key, op_values = operation_key, (row[n + 1:] if row[n + 1] is not None else None)
    else:
        row = db.execute_sql(_LOAD_JOB, (tenant, job_id)).fetchone()
        if row is None:
            return None, None, None, None
        key = default_key(row[JOB_COLS.index("task_version")])
        op_values = db.execute_sql(_LOAD_OP, (tenant, key)).fetchone()
    lease = LeaseView(row[n]) if row[n] is not None else None
    return job_model(row[:n]), lease, (op_model(op_values) if op_values is not None else None), key


def guard(job_pk, exclusive):
    """The job row for a claim's checks (``exclusive`` is moot: IMMEDIATE already serialises)."""
    status, halt_reason, budgets, cost, created_at = db.execute_sql(_GUARD, (job_pk,)).fetchone()
    return JobGuard(status, halt_reason, json_codec.python_value(budgets), cost, created_at,
                    lambda: db.execute_sql(_DISPATCHES, (job_pk,)).fetchone()[0])


def claim_new(new, may_dispatch, detail, counted=True):
    """INSERT the SENT row and its event if the job may dispatch, the token is current and the
    key is free: the new operation, the refusal, or None (key taken or token moved)."""
    with write_txn():
        # The key first: a claim that lost the key to a racing dispatch is a lost race (the next
        # round reads the SENT row and answers reconcile), not a budget refusal. Checked the other
        # way round, the last tool call's racing twin was told budget_exhausted for a step that is
        # in flight, an answer no serial order gives.
        if db.execute_sql("SELECT 1 FROM operation WHERE tenant = ? AND operation_key = ?",
                          (new.tenant, new.key)).fetchone():
            return None
        refused = may_dispatch(guard(new.job_pk, True))
        if refused:
            return refused
        fenced = db.execute_sql("SELECT 1 FROM lease WHERE job_id = ? AND fencing_token = ?",
                                (new.job_pk, new.token)).fetchone()
        if not fenced:
            return None
        op_id = db.execute_sql(_INSERT_OP, new.values("SENT")).lastrowid
        db.execute_sql(_INSERT_EVENT, (op_id, new.job_pk, None, "SENT", new.actor, new.token, detail, new.now))
    return new.model(op_id, "SENT")


def insert_prepared(new, detail):
    """INSERT the PREPARED row (an approval is missing) unless the key exists: the row or None.
    The IMMEDIATE lock means nobody inserts the key between the check and the insert, and
    INSERT OR IGNORE's lastrowid would not be reliable."""
    with write_txn():
        if db.execute_sql("SELECT 1 FROM operation WHERE tenant = ? AND operation_key = ?",
                          (new.tenant, new.key)).fetchone():
            return None
        op_id = db.execute_sql(_INSERT_OP, new.values("PREPARED")).lastrowid
        db.execute_sql(_INSERT_EVENT, (op_id, new.job_pk, None, "PREPARED", new.actor, new.token, detail, new.now))
    return new.model(op_id, "PREPARED")


def confirm(tenant, key, token, remote_id, receipt_text, detail, actor, now, execution_id):
    """SENT/UNKNOWN/NEEDS_REVIEW -> CONFIRMED if the token is current and ``execution_id`` (the
    caller's n8n execution, or None) is the one that dispatched the attempt: the row, or None."""
    with write_txn():
        row = db.execute_sql(_CONFIRMABLE, (tenant, key, token, execution_id, execution_id)).fetchone()
        if row is None:
            return None
        op_id, job_pk, before = row
        db.execute_sql(_CONFIRM, (remote_id, receipt_text, now, op_id))
        db.execute_sql(_INSERT_EVENT, (op_id, job_pk, before, "CONFIRMED", actor, token, detail, now))
        values = db.execute_sql(_CONFIRMED, (op_id,)).fetchone()
    op = op_model(values[:-1])
    op.job_key = values[-1]
    return op


def lease_locked(job_pk):
    """The lease inside a write transaction (IMMEDIATE: no other writer can move it)."""
    return Lease.get_or_none(Lease.job == job_pk)


def operation_locked(op_pk):
    return Operation.get_by_id(op_pk)
