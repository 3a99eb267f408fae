"""The gate's statements on PostgreSQL: each claim and confirm is one statement and one commit.

Fencing stays atomic with the write: the statement's CTE locks the lease row FOR SHARE, so a
concurrent takeover (an UPDATE of that row) either commits first (and the write sees the new
token and does nothing) or waits until the write has committed.

Lock order rule for every writer: never hold the lease row exclusively and then wait for the
job row, or the reverse (see core/lifecycle.py cancel_job and core/resume.py).
"""

import weakref

from .db import db, write_txn
from .models import Lease, Operation
from .rows import EVENT_COLS, INSERT_COLS, JOB_COLS, OP_COLS, JobGuard, LeaseView, json_codec, job_model, op_model

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


# The hot begin: load the job, its lease and the operation, and claim a new operation when the
# request can only mean "dispatch" (row 3 of core/gate/decide.py with nothing else in the way),
# all in one statement and one commit. The claim's conditions are a strict subset of what the
# decision table would check: no row for the key, the job active (locked FOR SHARE, as in
# `_CLAIM`), the token current (the lease locked FOR SHARE), no dispatch budget set, and the
# caller allowed it ($5: no approval can be needed). Anything else inserts nothing and the core
# decides on the rows this statement returned: no second read.
_BEGIN = (
    "WITH j AS (SELECT " + ", ".join(f"job.{c}" for c in JOB_COLS) + ","
    " COALESCE($3::text, job.tenant || ':' || job.job_id || ':v' || job.task_version || ':' || $4::text) AS k"
    " FROM job WHERE job.tenant = $1::text AND job.job_id = $2::text),"
    " l AS (SELECT lease.fencing_token FROM lease WHERE lease.job_id = (SELECT id FROM j)),"
    " o AS (SELECT " + ", ".join(f"operation.{c}" for c in OP_COLS) + " FROM operation"
    " WHERE operation.tenant = $1::text AND operation.operation_key = (SELECT k FROM j)),"
    " live AS (SELECT job.id FROM job WHERE job.id = (SELECT id FROM j)"
    " AND job.status NOT IN ('cancelled', 'halted') FOR SHARE),"
    " fence AS (SELECT lease.id FROM lease WHERE lease.job_id = (SELECT id FROM j)"
    " AND lease.fencing_token = $7::int FOR SHARE),"
    " ins AS (INSERT INTO operation (" + ", ".join(INSERT_COLS) + ")"
    " SELECT $1::text, j.k, j.id, j.task_version, $4::text, $6::text, 'SENT', 1,"
    " COALESCE(NULLIF(trunc((j.budgets::jsonb ->> 'max_attempts')::numeric)::int, 0), $11::int),"
    " $7::int, $8::text, false, $9::text, 0, $10::float8, $10::float8 FROM j, live, fence"
    " WHERE $5::bool AND NOT EXISTS (SELECT 1 FROM o)"
    " AND (j.budgets IS NULL OR NOT (j.budgets::jsonb ?| ARRAY['deadline_s', 'max_cost', 'max_tool_calls']))"
    " AND coalesce(jsonb_typeof(j.budgets::jsonb -> 'max_attempts'), 'number') = 'number'"
    " ON CONFLICT (tenant, operation_key) DO NOTHING RETURNING id, max_attempts),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT ins.id, (SELECT id FROM j), NULL, 'SENT', $12::text, $7::int, $13::text, $10::float8 FROM ins)"
    " SELECT " + ", ".join(f"j.{c}" for c in JOB_COLS) + ", j.k, (SELECT fencing_token FROM l),"
    " (SELECT id FROM ins), (SELECT max_attempts FROM ins), " + ", ".join(f"o.{c}" for c in OP_COLS)
    + " FROM j LEFT JOIN o ON true"
)
_CONFIRM_PREPARED = (
    "WITH old AS (SELECT id, job_id, state FROM operation WHERE tenant = $1::text AND operation_key = $2::text"
    " FOR UPDATE),"
    " upd AS (UPDATE operation o SET state = 'CONFIRMED', remote_id = $3::text, receipt = $4::text,"
    " last_error = NULL, updated_at = $5::float8 FROM old JOIN job j ON j.id = old.job_id"
    " WHERE o.id = old.id AND old.state IN ('SENT', 'UNKNOWN', 'NEEDS_REVIEW')"
    " AND EXISTS (SELECT 1 FROM lease l WHERE l.job_id = old.job_id AND l.fencing_token = $6::int FOR SHARE)"
    " RETURNING " + ", ".join(f"o.{c}" for c in OP_COLS) + ", old.state AS state_before, j.job_id AS job_key),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT id, job_id, state_before, 'CONFIRMED', $7::text, $6::int, $8::text, $5::float8 FROM upd)"
    " SELECT * FROM upd"
)
# Server-side prepared: planning these CTEs costs about as much as running them. Prepared once
# per pooled connection (a connection that is replaced starts without them).
_PREPARED = {"durable_begin": (_BEGIN, 13), "durable_confirm": (_CONFIRM_PREPARED, 8)}
_prepared_on = weakref.WeakSet()


def _execute(name, params):
    conn = db.connection()
    if conn not in _prepared_on:
        cur = conn.cursor()
        for statement, (sql, _n) in _PREPARED.items():
            cur.execute(f"PREPARE {statement} AS {sql}")
        _prepared_on.add(conn)
    return db.execute_sql(f"EXECUTE {name}(" + ", ".join(["%s"] * _PREPARED[name][1]) + ")", params)


def load_gate(tenant, job_id, operation_key, action, claim):
    """(job, lease, operation, key, claimed operation or None) in one round trip; see `_BEGIN`.
    ``claim`` (a `rows.ClaimTemplate`) or None: load only."""
    c = claim
    params = (tenant, job_id, operation_key, action, c is not None, c.digest if c else None,
              c.token if c else None, c.target if c else None, json_codec.db_value(c.summary) if c else None,
              c.now if c else 0.0, c.default_max_attempts if c else 1, c.actor if c else None,
              json_codec.db_value(c.detail) if c else None)
    row = _execute("durable_begin", params).fetchone()
    if row is None:
        return None, None, None, None, None
    n = len(JOB_COLS)
    job, key, token, claimed_id, max_attempts = job_model(row[:n]), row[n], row[n + 1], row[n + 2], row[n + 3]
    lease = LeaseView(token) if token is not None else None
    op_values = row[n + 4:]
    op = op_model(op_values) if op_values[0] is not None else None
    claimed = c.new_op(key, job, max_attempts).model(claimed_id, "SENT") if claimed_id is not None else None
    return job, lease, op, key, claimed


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
    row = _execute("durable_confirm", (tenant, key, remote_id, receipt_text, now, token, actor, detail)).fetchone()
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
