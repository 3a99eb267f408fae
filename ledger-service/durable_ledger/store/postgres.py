"""The gate's statements on PostgreSQL: each claim and confirm is one statement and one commit.

Fencing stays atomic with the write: the statement's CTE locks the lease row FOR SHARE, so a
concurrent takeover (an UPDATE of that row) either commits first (and the write sees the new
token and does nothing) or waits until the write has committed.

Lock order rule for every writer: never hold the lease row exclusively and then wait for the
job row, or the reverse (see jobs/lifecycle.py cancel_job and jobs/resume.py).
"""

import weakref

from .db import db, write_txn
from .models import Lease, Operation
from .rows import (
    EVENT_COLS,
    INSERT_COLS,
    JOB_COLS,
    OP_COLS,
    JobGuard,
    LeaseView,
    NewOp,
    dispatcher,
    job_model,
    json_codec,
    op_model,
)

PARAM = "%s"
# NO KEY UPDATE, not UPDATE: inserts that reference the job (events, audit rows, a takeover's
# audit while it holds the lease row) take KEY SHARE, which it does not block.
_GUARD = "SELECT status, halt_reason, budgets, cost, created_at FROM job WHERE id = %s"
_DISPATCHES = "SELECT count(*) FROM operation_event WHERE job_id = %s AND to_state = 'SENT'"
_TAKEN = "SELECT 1 FROM operation WHERE tenant = %s AND operation_key = %s"

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
# request can only mean "dispatch" (row 3 of gate/decide.py with nothing else in the way),
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
    " $7::int, $8::text, false, $9::text, 0, $10::float8, $10::float8, ($13::text)::jsonb -> 'n8n' ->> 'execution_id',"
    " $14::text, NULL FROM j, live, fence"
    " WHERE $5::bool AND NOT EXISTS (SELECT 1 FROM o)"
    " AND (j.budgets IS NULL OR NOT (j.budgets::jsonb ?| ARRAY['deadline_s', 'max_cost', 'max_tool_calls']))"
    " AND (j.budgets IS NULL OR jsonb_typeof(j.budgets::jsonb) = 'object')"
    " AND coalesce(jsonb_typeof(j.budgets::jsonb -> 'max_attempts'), 'number') = 'number'"
    " ON CONFLICT (tenant, operation_key) DO NOTHING RETURNING id, max_attempts),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT ins.id, (SELECT id FROM j), NULL, 'SENT', $12::text, $7::int, $13::text, $10::float8 FROM ins)"
    " SELECT " + ", ".join(f"j.{c}" for c in JOB_COLS) + ", j.k, (SELECT fencing_token FROM l),"
    " (SELECT id FROM ins), (SELECT max_attempts FROM ins), " + ", ".join(f"o.{c}" for c in OP_COLS)
    + " FROM j LEFT JOIN o ON true"
)
_CONFIRM_PREPARED = (
    "WITH old AS (SELECT id, job_id, state, dispatched_by FROM operation"
    " WHERE tenant = $1::text AND operation_key = $2::text"
    " FOR UPDATE),"
    " upd AS (UPDATE operation o SET state = 'CONFIRMED', remote_id = $3::text, receipt = $4::text,"
    " last_error = NULL, updated_at = $5::float8 FROM old JOIN job j ON j.id = old.job_id"
    " WHERE o.id = old.id AND old.state IN ('SENT', 'UNKNOWN', 'NEEDS_REVIEW')"
    " AND ($9::text IS NULL OR old.dispatched_by IS NULL OR old.dispatched_by = $9::text)"
    " AND EXISTS (SELECT 1 FROM lease l WHERE l.job_id = old.job_id AND l.fencing_token = $6::int FOR SHARE)"
    " RETURNING " + ", ".join(f"o.{c}" for c in OP_COLS) + ", old.state AS state_before, j.job_id AS job_key),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT id, job_id, state_before, 'CONFIRMED', $7::text, $6::int, $8::text, $5::float8 FROM upd)"
    " SELECT * FROM upd"
)
# Server-side prepared: planning these CTEs costs about as much as running them. Prepared once
# per pooled connection (a connection that is replaced starts without them).
_PREPARED = {"durable_begin": (_BEGIN, 14), "durable_confirm": (_CONFIRM_PREPARED, 9)}
_prepared_on = weakref.WeakSet()


def _execute(name, params):
    conn = db.connection()
    if conn not in _prepared_on:
        # Through execute_sql, not the driver's cursor: a connection PostgreSQL dropped fails here
        # first, and only peewee's wrapped error is the database_unavailable answer (web/errors.py).
        for statement, (sql, _n) in _PREPARED.items():
            db.execute_sql(f"PREPARE {statement} AS {sql}")
        _prepared_on.add(conn)
    return db.execute_sql(f"EXECUTE {name}(" + ", ".join(["%s"] * _PREPARED[name][1]) + ")", params)


def load_gate(tenant, job_id, operation_key, action, claim):
    """(job, lease, operation, key, claimed operation or None) in one round trip; see `_BEGIN`.
    ``claim`` (a `rows.ClaimTemplate`, or a callable building one) or None: load only."""
    c = claim() if callable(claim) else claim
    params = (tenant, job_id, operation_key, action, c is not None, c.digest if c else None,
              c.token if c else None, c.target if c else None, json_codec.db_value(c.summary) if c else None,
              c.now if c else 0.0, c.default_max_attempts if c else 1, c.actor if c else None,
              json_codec.db_value(c.detail) if c else None, json_codec.db_value(c.fields) if c else None)
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
            job_row = guard(new.job_pk, True)
            # After the job lock, so a racing claim of this job has committed: a key it took is a
            # lost race (the next round answers reconcile), not a budget refusal (store/sqlite.py).
            if db.execute_sql(_TAKEN, (new.tenant, new.key)).fetchone():
                return None
            refused = may_dispatch(job_row)
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


def confirm(tenant, key, token, remote_id, receipt_text, detail, actor, now, execution_id):
    """SENT/UNKNOWN/NEEDS_REVIEW -> CONFIRMED if the token is current and ``execution_id`` (the
    caller's n8n execution, or None) is the one that dispatched the attempt: the row, or None."""
    row = _execute("durable_confirm", (tenant, key, remote_id, receipt_text, now, token, actor, detail,
                                       execution_id)).fetchone()
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


# Multi-row forms for POST /v1/operations/batch: one statement claims every item that nothing
# stands in the way of, one confirms every item it can. Items are passed as parallel arrays
# (unnest), each keeps its own checks: its job active, its own token current (locked FOR SHARE),
# its key free. An item a statement leaves alone goes through the single-item path, which
# answers it exactly as POST /begin or /confirm would.
# Only an item whose computed key (`k`: explicit, or the job's default key) is named by no other
# item of the batch is claimed here, whatever the other item's job or eligibility: two items of
# one key must be answered in order, the second seeing what the first left (a default key and
# an explicit key can be the same row, and so can one explicit key sent for two jobs). Joining
# the inserted rows back on a repeated key answered both items dispatch for one row.
# Every lookup by key is a LATERAL equality on the (tenant, key) unique index (OFFSET 0 keeps the
# planner from folding it back into a join), never a join it may turn into a scan of the
# tenant's rows: these are prepared statements, and a generic plan made while the statistics
# said the tenant had 4 rows scanned every operation of the tenant for each batch (8 ms at 10k
# rows, growing with the table; the single routes never did). Rows are still locked in id
# order, so two batches naming the same keys in another order cannot deadlock.
_BEGIN_MANY = (
    "WITH v AS (SELECT * FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],"
    " $8::text[], $9::text[], $14::bool[],"
    " $15::text[]) AS v(ord, job_id, key, action, digest, token, target, summary, eligible, fields)),"
    " j AS (SELECT v.*, job.id AS job_pk, job.task_version, job.budgets,"
    " COALESCE(v.key, $1::text || ':' || v.job_id || ':v' || job.task_version || ':' || v.action) AS k"
    " FROM v CROSS JOIN LATERAL (SELECT id, task_version, budgets FROM job"
    " WHERE job.tenant = $1::text AND job.job_id = v.job_id OFFSET 0) job),"
    " u AS (SELECT j.* FROM j WHERE j.eligible AND NOT EXISTS (SELECT 1 FROM j AS other"
    " WHERE other.k = j.k AND other.ord <> j.ord) AND NOT EXISTS (SELECT 1 FROM v AS other"
    " WHERE other.key = j.k AND other.ord <> j.ord)),"
    " live AS (SELECT job.id FROM job WHERE job.id IN (SELECT job_pk FROM u)"
    " AND job.status NOT IN ('cancelled', 'halted') FOR SHARE),"
    " fence AS (SELECT lease.job_id, lease.fencing_token FROM lease WHERE lease.job_id IN (SELECT job_pk FROM u)"
    " FOR SHARE),"
    " ins AS (INSERT INTO operation (" + ", ".join(INSERT_COLS) + ")"
    " SELECT $1::text, u.k, u.job_pk, u.task_version, u.action, u.digest, 'SENT', 1,"
    " COALESCE(NULLIF(trunc((u.budgets::jsonb ->> 'max_attempts')::numeric)::int, 0), $10::int),"
    " u.token, u.target, false, u.summary, 0, $11::float8, $11::float8, ($13::text)::jsonb -> 'n8n' ->> 'execution_id',"
    " u.fields, NULL"
    " FROM u JOIN live ON live.id = u.job_pk JOIN fence ON fence.job_id = u.job_pk AND fence.fencing_token = u.token"
    " WHERE (u.budgets IS NULL OR NOT (u.budgets::jsonb ?| ARRAY['deadline_s', 'max_cost', 'max_tool_calls']))"
    " AND (u.budgets IS NULL OR jsonb_typeof(u.budgets::jsonb) = 'object')"
    " AND coalesce(jsonb_typeof(u.budgets::jsonb -> 'max_attempts'), 'number') = 'number'"
    " ON CONFLICT (tenant, operation_key) DO NOTHING RETURNING id, operation_key, job_id, task_version, max_attempts),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT ins.id, ins.job_id, NULL, 'SENT', $12::text, u.token, $13::text, $11::float8"
    " FROM ins JOIN u ON u.k = ins.operation_key)"
    " SELECT u.ord, ins.id, ins.operation_key, ins.job_id, ins.task_version, ins.max_attempts"
    " FROM ins JOIN u ON u.k = ins.operation_key"
)
_CONFIRM_MANY = (
    "WITH v AS (SELECT * FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::int[])"
    " AS v(ord, key, remote_id, receipt, token)),"
    " found AS (SELECT f.id, v.ord, v.remote_id, v.receipt, v.token FROM v CROSS JOIN LATERAL"
    " (SELECT id FROM operation WHERE tenant = $1::text AND operation_key = v.key OFFSET 0) f),"
    " old AS (SELECT o.id, o.job_id, o.state, found.ord, found.remote_id, found.receipt, found.token FROM found"
    " JOIN operation o ON o.id = found.id ORDER BY o.id FOR UPDATE OF o),"
    " upd AS (UPDATE operation o SET state = 'CONFIRMED', remote_id = old.remote_id, receipt = old.receipt,"
    " last_error = NULL, updated_at = $7::float8 FROM old JOIN job j ON j.id = old.job_id"
    " WHERE o.id = old.id AND old.state IN ('SENT', 'UNKNOWN', 'NEEDS_REVIEW')"
    " AND EXISTS (SELECT 1 FROM lease l WHERE l.job_id = old.job_id AND l.fencing_token = old.token FOR SHARE)"
    " RETURNING " + ", ".join(f"o.{c}" for c in OP_COLS) + ", old.state AS state_before, old.token AS token,"
    " old.ord AS ord, j.job_id AS job_key),"
    " ev AS (INSERT INTO operation_event (" + EVENT_COLS + ")"
    " SELECT id, job_id, state_before, 'CONFIRMED', $8::text, token,"
    " ($9::jsonb || jsonb_build_object('remote_id', remote_id))::text, $7::float8 FROM upd)"
    " SELECT * FROM upd"
)
_PREPARED.update({"durable_begin_many": (_BEGIN_MANY, 15), "durable_confirm_many": (_CONFIRM_MANY, 9)})


def begin_many(tenant, claims, actor, now, detail, default_max_attempts):
    """Claim new operations for ``claims`` [(ord, job_id, key or None, action, digest, token, target,
    summary, eligible, field digests)] in one statement: {ord: operation} for the items claimed. Every item of the
    batch is passed, the ineligible ones (an approval may be needed) too: their keys count when the
    statement looks for keys named twice."""
    cols = list(zip(*claims))
    params = (tenant, list(cols[0]), list(cols[1]), list(cols[2]), list(cols[3]), list(cols[4]), list(cols[5]),
              list(cols[6]), [json_codec.db_value(s) for s in cols[7]], default_max_attempts, now, actor,
              json_codec.db_value(detail), list(cols[8]), [json_codec.db_value(f) for f in cols[9]])
    by_ord = {c[0]: c for c in claims}
    by = dispatcher(detail)
    out = {}
    for ord_, op_id, key, job_pk, version, max_attempts in _execute("durable_begin_many", params).fetchall():
        _o, _job_id, _key, action, digest, token, target, summary, _eligible, fields = by_ord[ord_]
        new = NewOp(tenant, key, job_pk, version, action, digest, token, target, False, max_attempts, actor, summary,
                    now, by, fields)
        out[ord_] = new.model(op_id, "SENT")
    return out


def confirm_many(tenant, items, actor, now, detail):
    """Confirm ``items`` [(ord, key, remote_id, receipt, token)] in one statement: {ord: operation}
    for the items confirmed (each only if its own token is current)."""
    cols = list(zip(*items))
    params = (tenant, list(cols[0]), list(cols[1]), [str(r) for r in cols[2]],
              [json_codec.db_value(r or {}) for r in cols[3]], list(cols[4]), now, actor, json_codec.db_value(detail))
    out = {}
    n = len(OP_COLS)
    for row in _execute("durable_confirm_many", params).fetchall():
        op = op_model(row[:n])
        op.job_key = row[-1]
        out[row[-2]] = op
    return out
