"""The gate's statements on PostgreSQL: each claim and confirm is one statement and one commit.

Fencing stays atomic with the write: the statement's CTE locks the lease row FOR SHARE, so a
concurrent takeover (an UPDATE of that row) either commits first (and the write sees the new
token and does nothing) or waits until the write has committed.

Lock order rule for every writer: never hold the lease row exclusively and then wait for the
job row, or the reverse (see core/lifecycle.py cancel_job and core/resume.py).
"""

from .db import db, write_txn
from .models import Lease, Operation
from .rows import EVENT_COLS, INSERT_COLS, OP_COLS, JobGuard, json_codec, op_model

PARAM = "%s"
# NO KEY UPDATE, not UPDATE: inserts that reference the job (events, audit rows, a takeover's
# audit while it holds the lease row) take KEY SHARE, which it does not block.
_GUARD = "SELECT status, halt_reason, budgets, cost, created_at FROM job WHERE id = %s"
_DISPATCHES = "SELECT count(*) FROM operation_event WHERE job_id = %s AND to_state = 'SENT'"

# `live` locks the job row FOR SHARE: a cancel (an UPDATE of that row) either commits first, and
# then this statement re-checks the row, finds it no longer active and inserts nothing, or waits
# until this claim has committed (the SENT row predates the cancel and the cancel report lists it).
_CLAIM = (
    "WITH live AS (SELECT id FROM job WHERE id = %s AND status NOT IN ('cancelled', 'halted') FOR SHARE),"
    " fence AS (SELECT id FROM lease WHERE job_id = %s AND fencing_token = %s FOR SHARE),"
    " ins AS (INSERT INTO operation (" + ", ".join(INSERT_COLS) + ") SELECT "
    + ", ".join(["%s"] * len(INSERT_COLS)) + " FROM fence, live"
    " ON CONFLICT (tenant, operation_key) DO NOTHING RETURNING id),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT id, %s, NULL, 'SENT', %s, %s, %s, %s FROM ins)"
    " SELECT (SELECT id FROM ins), (SELECT count(*) FROM fence), (SELECT count(*) FROM live)"
)
_PREPARE = (
    "WITH ins AS (INSERT INTO operation (" + ", ".join(INSERT_COLS) + ") VALUES ("
    + ", ".join(["%s"] * len(INSERT_COLS)) + ") ON CONFLICT (tenant, operation_key) DO NOTHING RETURNING id),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT id, %s, NULL, 'PREPARED', %s, %s, %s, %s FROM ins)"
    " SELECT id FROM ins"
)
_CONFIRM = (
    "WITH old AS (SELECT id, job_id, state FROM operation WHERE tenant = %s AND operation_key = %s FOR UPDATE),"
    " upd AS (UPDATE operation o SET state = 'CONFIRMED', remote_id = %s, receipt = %s, last_error = NULL,"
    " updated_at = %s FROM old JOIN job j ON j.id = old.job_id"
    " WHERE o.id = old.id AND old.state IN ('SENT', 'UNKNOWN', 'NEEDS_REVIEW')"
    " AND EXISTS (SELECT 1 FROM lease l WHERE l.job_id = old.job_id AND l.fencing_token = %s FOR SHARE)"
    " RETURNING " + ", ".join(f"o.{c}" for c in OP_COLS) + ", old.state AS state_before, j.job_id AS job_key),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT id, job_id, state_before, 'CONFIRMED', %s, %s, %s, %s FROM upd)"
    " SELECT * FROM upd"
)


def guard(job_pk, exclusive):
    """Inside a write transaction: the job row, locked.

    ``exclusive`` (FOR NO KEY UPDATE) when a counted budget is set, so that concurrent claims of
    one job count one after the other; FOR SHARE otherwise, which only orders claims against a
    cancel and lets claims of one job run side by side."""
    sql = _GUARD + (" FOR NO KEY UPDATE" if exclusive else " FOR SHARE")
    status, halt_reason, budgets, cost, created_at = db.execute_sql(sql, (job_pk,)).fetchone()
    return JobGuard(status, halt_reason, json_codec.python_value(budgets), cost, created_at,
                    lambda: db.execute_sql(_DISPATCHES, (job_pk,)).fetchone()[0])


def claim_new(new, may_dispatch, detail, counted):
    """INSERT the SENT row and its event if the job may dispatch, the token is current and the
    key is free: the new operation, the refusal, or None (key taken or token moved).

    One statement without a counted budget. With one (``counted``), two: the FOR NO KEY UPDATE
    waits for the previous claim of this job to commit, and only a statement started after that
    sees its SENT row when counting."""
    args = [new.job_pk, new.job_pk, new.token, *new.values("SENT"), new.job_pk, new.actor, new.token, detail, new.now]
    if counted:
        with write_txn():
            refused = may_dispatch(guard(new.job_pk, True))
            if refused:
                return refused
            op_id, _fenced, live = db.execute_sql(_CLAIM, args).fetchone()
    else:
        op_id, _fenced, live = db.execute_sql(_CLAIM, args).fetchone()
    if op_id is None:
        if not live:
            with write_txn():
                return may_dispatch(guard(new.job_pk, False))  # None: reopened meanwhile, re-read
        return None
    return new.model(op_id, "SENT")


def insert_prepared(new, detail):
    """INSERT the PREPARED row (an approval is missing) unless the key exists: the row or None."""
    row = db.execute_sql(_PREPARE, [*new.values("PREPARED"), new.job_pk, new.actor, new.token, detail,
                                    new.now]).fetchone()
    return new.model(row[0], "PREPARED") if row else None


def confirm(tenant, key, token, remote_id, receipt_text, detail, actor, now):
    """SENT/UNKNOWN/NEEDS_REVIEW -> CONFIRMED if the token is current: the row, or None."""
    row = db.execute_sql(_CONFIRM, (tenant, key, remote_id, receipt_text, now, token,
                                    actor, token, detail, now)).fetchone()
    if row is None:
        return None
    op = op_model(row[:len(OP_COLS)])
    op.job_key = row[-1]
    return op


def lease_locked(job_pk):
    """The lease inside a write transaction, FOR SHARE: a takeover (UPDATE) waits for our commit."""
    return Lease.select().where(Lease.job == job_pk).for_update("FOR SHARE").get_or_none()


def operation_locked(op_pk):
    return Operation.select().where(Operation.id == op_pk).for_update().get()
