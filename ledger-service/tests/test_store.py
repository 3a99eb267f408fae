"""The store's contract: each gate statement behaves the same on SQLite and PostgreSQL.

Every test runs on both backends (the `backend` fixture); the rest of the suite goes through
the store too, by way of the HTTP API and the core.
"""

import time

import pytest

from durable_ledger import store
from durable_ledger.jobs import jobs, leases
from durable_ledger.kernel.digest import default_operation_key
from durable_ledger.gate.decide import Refused
from durable_ledger.kernel.errors import InvalidTransition, StaleFencingToken
from durable_ledger.store.models import Operation, OperationEvent


@pytest.fixture
def job(conn):
    job, _ = jobs.create_or_get_job("acme", "store-job")
    _, lease = leases.acquire_lease("acme", "store-job", "w1", 60)
    return job, lease.fencing_token


def new_op(job, token, key="k-1", **kw):
    return store.NewOp(**{"tenant": "acme", "key": key, "job_pk": job.id, "task_version": 1, "action": "send",
                          "digest": "d" * 64, "token": token, "target": "t:x", "requires_approval": False,
                          "max_attempts": 3, "actor": "runner", "summary": {"title": "T"}, "now": time.time(),
                          **kw})


def allow(_guard):
    return None


def events(op_id):
    return [(e.from_state, e.to_state) for e in OperationEvent.select().where(OperationEvent.operation == op_id).order_by(OperationEvent.id)]


@pytest.mark.parametrize("counted", [False, True])
def test_claim_new_inserts_sent_with_its_event_once(job, counted):
    j, token = job
    op = store.claim_new(new_op(j, token), allow, counted, {"attempt": 1})
    assert (op.state, op.attempt, op.fencing_token) == ("SENT", 1, token)
    assert events(op.id) == [(None, "SENT")]
    assert store.claim_new(new_op(j, token), allow, counted, {"attempt": 1}) is None  # key taken
    assert Operation.select().where(Operation.operation_key == "k-1").count() == 1
    assert store.count_dispatches(j.id) == 1


@pytest.mark.parametrize("counted", [False, True])
def test_claim_new_with_a_stale_token_inserts_nothing(job, counted):
    j, token = job
    leases.acquire_lease("acme", "store-job", "w2", 60, takeover=True)
    assert store.claim_new(new_op(j, token), allow, counted, {}) is None
    assert Operation.select().count() == 0


def test_claim_new_asks_the_rule_under_the_lock(job):
    """With a counted budget the rule sees the job row (and the dispatch count) under its lock.
    Without one, PostgreSQL checks the job's status inside the claim statement itself and asks
    the rule only for a job that is not active (next test)."""
    j, token = job
    seen = []

    def refuse(guard):
        seen.append((guard.status, guard.dispatches()))
        return Refused("budget_exhausted", "max_tool_calls")

    out = store.claim_new(new_op(j, token), refuse, True, {})
    assert isinstance(out, Refused) and out.budget == "max_tool_calls"
    assert Operation.select().count() == 0
    assert seen == [("active", 0)]


def test_claim_new_on_a_cancelled_job_is_refused_by_the_statement(job):
    j, token = job
    from durable_ledger.store.models import Job

    Job.update(status="cancelled").where(Job.id == j.id).execute()
    out = store.claim_new(new_op(j, token), lambda g: Refused(g.status) if g.status != "active" else None, False, {})
    assert isinstance(out, Refused) and out.reason == "cancelled"
    assert Operation.select().count() == 0


def test_insert_prepared_is_idempotent(job):
    j, token = job
    first = store.insert_prepared(new_op(j, token, requires_approval=True), {"reason": "approval_required"})
    again = store.insert_prepared(new_op(j, token, requires_approval=True), {"reason": "approval_required"})
    assert first.id == again.id and again.state == "PREPARED" and again.requires_approval
    assert events(first.id) == [(None, "PREPARED")]


def test_claim_retry_moves_failed_to_sent_with_the_next_attempt(job):
    j, token = job
    op = store.claim_new(new_op(j, token), allow, False, {})
    Operation.update(state="FAILED", retryable=True).where(Operation.id == op.id).execute()
    failed = Operation.get_by_id(op.id)
    again = store.claim_retry(failed, token, "runner", time.time(), allow, False, {})
    assert (again.state, again.attempt) == ("SENT", 2)
    assert store.claim_retry(failed, token, "runner", time.time(), allow, False, {}) is None  # moved meanwhile
    assert store.count_dispatches(j.id) == 2


def test_claim_retry_checks_the_fence(job):
    j, token = job
    op = store.insert_prepared(new_op(j, token), {})
    leases.acquire_lease("acme", "store-job", "w2", 60, takeover=True)
    with pytest.raises(StaleFencingToken):
        store.claim_retry(op, token, "runner", time.time(), allow, True, {})
    assert Operation.get_by_id(op.id).state == "PREPARED"


def test_confirm_is_fenced_and_once(job):
    j, token = job
    store.claim_new(new_op(j, token), allow, False, {})
    assert store.confirm("acme", "k-1", token + 1, "r-1", {}, "runner", {}) is None  # wrong token
    op = store.confirm("acme", "k-1", token, "r-1", {"id": 1}, "runner", {})
    assert (op.state, op.remote_id, op.receipt, op.job_key) == ("CONFIRMED", "r-1", {"id": 1}, "store-job")
    assert store.confirm("acme", "k-1", token, "r-1", {}, "runner", {}) is None  # already confirmed
    assert events(op.id) == [(None, "SENT"), ("SENT", "CONFIRMED")]


def test_transition_names_the_state_it_leaves(job):
    j, token = job
    op = store.claim_new(new_op(j, token), allow, False, {})
    store.transition(op, token, "UNKNOWN", {"last_error": {"kind": "timeout"}}, "runner", None, time.time())
    with pytest.raises(InvalidTransition):  # `op` still says SENT: the row moved
        store.transition(op, token, "FAILED", {}, "runner", None, time.time())
    assert Operation.get_by_id(op.id).state == "UNKNOWN"


def test_load_gate_by_key_and_by_default_key(job):
    j, token = job
    store.claim_new(new_op(j, token, key="acme:store-job:v1:send"), allow, False, {})
    default = default_operation_key("acme", "store-job", 1, "send")
    store.claim_new(new_op(j, token, key=default), allow, False, {})
    loaded, lease, op, key, claimed = store.load_gate("acme", "store-job", None, "send",
                                                      lambda v: default_operation_key("acme", "store-job", v, "send"))
    assert (loaded.id, lease.fencing_token, op.state, key, claimed) == (j.id, token, "SENT", default, None)
    _, _, none, key, _ = store.load_gate("acme", "store-job", "other", "send", None)
    assert (none, key) == (None, "other")
    assert store.load_gate("acme", "nope", "k", "send", None) == (None, None, None, None, None)
    assert store.load_gate("other-tenant", "store-job", "k", "send", None)[0] is None


def test_load_gate_claims_in_the_same_statement_on_postgres(job, backend):
    """PostgreSQL claims a free key while it loads; a taken key, a stale token, a dispatch budget
    or a stopped job leave it to the gate. SQLite only loads."""
    j, token = job
    claim = store.ClaimTemplate("send", "d" * 64, token, None, "runner", None, {"attempt": 1}, 3, time.time())
    *_, claimed = store.load_gate("acme", "store-job", "free", "send", None, claim)
    if backend.startswith("sqlite"):
        assert claimed is None and Operation.select().count() == 0
        return
    assert (claimed.state, claimed.operation_key, claimed.max_attempts) == ("SENT", "free", 3)
    assert events(claimed.id) == [(None, "SENT")]
    *_, again = store.load_gate("acme", "store-job", "free", "send", None, claim)  # taken now
    stale = store.ClaimTemplate("send", "d" * 64, token - 1, None, "runner", None, {}, 3, time.time())
    *_, refused = store.load_gate("acme", "store-job", "other", "send", None, stale)
    from durable_ledger.store.models import Job

    Job.update(budgets={"max_tool_calls": 9}).where(Job.id == j.id).execute()
    *_, budgeted = store.load_gate("acme", "store-job", "third", "send", None, claim)
    Job.update(budgets={"max_attempts": 7}).where(Job.id == j.id).execute()
    *_, seven = store.load_gate("acme", "store-job", "fourth", "send", None, claim)
    Job.update(status="cancelled").where(Job.id == j.id).execute()
    *_, cancelled = store.load_gate("acme", "store-job", "fifth", "send", None, claim)
    assert (again, refused, budgeted, cancelled) == (None, None, None, None)
    assert seven.max_attempts == 7
    assert Operation.select().count() == 2


def test_lease_of_with_and_without_lock(job):
    j, token = job
    assert store.lease_of(j.id).fencing_token == token
    with store.write_txn():
        assert store.lease_of(j.id, lock=True).fencing_token == token


def test_prepared_statements_keep_the_key_index_as_the_table_grows(job, backend):
    """Planned while the table is empty, executed when it is not: the lookups by key, the batch's
    included, must use the unique (tenant, operation_key) index, never scan the tenant's rows (m0003)."""
    if backend.startswith("sqlite"):
        return
    from durable_ledger.store import postgres as P
    from durable_ledger.store.db import db

    j, token = job
    for i in range(8):  # past PostgreSQL's five custom plans: the generic plan is made here, on a tiny table
        claim = store.ClaimTemplate(f"early-{i}", "d" * 64, token, None, "runner", None, {}, 3, time.time())
        store.load_gate("acme", "store-job", None, f"early-{i}", None, claim)
        store.confirm("acme", f"acme:store-job:v1:early-{i}", token, "r", {}, "runner", {})
        # the batch's forms too (POST /v1/operations/batch): one begin and one confirm each time
        store.begin_many("acme", [(0, "store-job", None, f"many-{i}", "d" * 64, token, None, None, True, None)],
                         "runner", time.time(), {}, 3)
        store.confirm_many("acme", [(0, f"acme:store-job:v1:many-{i}", "r", {}, token)], "runner", {})
    db.execute_sql(
        "INSERT INTO operation (tenant, operation_key, job_id, task_version, action, request_hash, state, attempt,"
        " max_attempts, fencing_token, requires_approval, reconcile_attempts, created_at, updated_at)"
        " SELECT 'acme', 'bulk-' || g, %s, 1, 'bulk', 'd', 'CONFIRMED', 1, 3, 1, false, 0, 0, 0"
        " FROM generate_series(1, 20000) g", (j.id,))
    # The plan the server may settle on after five executions: the generic one, made without the
    # values (an array of unknown length, a tenant of unknown size), on an install of many
    # tenants: to the planner a tenant is then a few rows, and scanning all of them looks cheap.
    db.execute_sql("ALTER TABLE operation ALTER COLUMN tenant SET (n_distinct = 5000)")
    db.execute_sql("ANALYZE operation")
    db.execute_sql("SET plan_cache_mode = force_generic_plan")
    try:
        _explain_keyed_statements(db, token)
    finally:
        db.execute_sql("RESET plan_cache_mode")
        db.execute_sql("ALTER TABLE operation ALTER COLUMN tenant RESET (n_distinct)")
        db.execute_sql("ANALYZE operation")
    assert P._PREPARED  # the statements above ran prepared


def _explain_keyed_statements(db, token):
    begin = db.execute_sql("EXPLAIN EXECUTE durable_begin(%s)" % ", ".join(["%s"] * 14),
                           ("acme", "store-job", None, "late", True, "d" * 64, token, None, None, 0.0, 3, "r", "{}",
                            None))
    confirm = db.execute_sql("EXPLAIN EXECUTE durable_confirm(%s)" % ", ".join(["%s"] * 9),
                             ("acme", "bulk-7", "r", "{}", 0.0, token, "r", "{}", "n8n-7"))
    begin_many = db.execute_sql("EXPLAIN EXECUTE durable_begin_many(%s)" % ", ".join(["%s"] * 15),
                                ("acme", [0], ["store-job"], [None], ["late-many"], ["d" * 64], [token], [None],
                                 [None], 3, 0.0, "r", "{}", [True], [None]))
    confirm_many = db.execute_sql("EXPLAIN EXECUTE durable_confirm_many(%s)" % ", ".join(["%s"] * 9),
                                  ("acme", [0], ["bulk-7"], ["r"], ["{}"], [token], 0.0, "r", "{}"))
    plans = ["\n".join(r[0] for r in q.fetchall()) for q in (begin, confirm, begin_many, confirm_many)]
    for plan in plans:
        assert "operation_tenant_operation_key" in plan, plan
        assert "state_tenant_updated_at" not in plan and "Seq Scan on operation" not in plan, plan
        # an index read by tenant alone reads every row of the tenant and filters them by key
        by_tenant = [line for line in plan.splitlines() if "Cond: " in line and "(tenant)::text" in line]
        assert all("operation_key" in line or "job_id)::text =" in line for line in by_tenant), plan
