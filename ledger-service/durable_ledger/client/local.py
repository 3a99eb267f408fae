"""LocalLedger: the client API over the features, in this process, no HTTP.

The same calls the HTTP views make (jobs.jobs, jobs.leases, gate.begin, gate.outcomes here;
the rest of the surface in local_calls.py), on the same tables, after the same boundary checks
(durable_ledger/kernel/checks.py, on the bodies HttpLedger would send: bodies.py builds them).
Connections are peewee's: one per thread. A pooled database (PostgreSQL) gets each connection
back after every call the client opened it for; SQLite keeps the thread's connection open, as the server does.

The store's database is one per process (store.db.db, a proxy bound by init_database): every
LocalLedger of a process uses the same database, and a call refuses to run if something bound
another one since.
"""

import logging
import os
import threading
from contextlib import contextmanager

from .. import gate
from ..auth import Principal
from ..gate import outcomes as ops
from ..gate import replies
from ..jobs import jobs, leases, lifecycle
from ..jobs import operations as job_ops
from ..jobs.serialize import job_dict, lease_dict, operation_dict
from ..kernel import bodies, checks
from ..kernel import states as S
from ..kernel.config import Config
from ..kernel.errors import COUNTED_REFUSALS, InvalidValue, LedgerError
from ..kernel.limits import check_query_value
from ..kernel.secrets import install_log_redaction
from ..reconciliation.setup import configure as configure_reconcilers
from ..store.audit import record_refusal
from ..store.db import DataError, InterfaceError, OperationalError, db, init_database, is_pooled
from ..store.migrations import create_schema
from .answers import gate_answer
from .bodies import begin_body, lease_body, outcome_body, release_body, renew_body
from .errors import LedgerUnavailable
from .ledger import Ledger
from .local_calls import LocalCalls

log = logging.getLogger("durable_ledger.client")
_OUTCOMES = {"confirm": bodies.ConfirmSchema, "fail": bodies.FailSchema, "unknown": bodies.UnknownSchema}
_bound = {}  # the last url a LocalLedger bound -> its database (init_database rebinds a PostgreSQL url)
_bind_lock = threading.Lock()


def _bind(url):
    with _bind_lock:
        database = _bound.get(url)
        if database is None or db.obj is not database:
            database = init_database(url)
            _bound.clear()
            _bound[url] = database
        return database


class LocalLedger(LocalCalls, Ledger):
    """``LocalLedger("postgresql://..." | "sqlite:///path", tenant="acme", actor="script")``.

    Binds the database and creates or migrates its schema (as ``durable-ledger serve`` does),
    registers the configured reconcilers, keeps SQL and secrets out of the logs. Acts as a
    runner of ``tenant`` (``role="approver"``: an approver, for approve/deny): whoever can open
    the database is trusted with it."""

    def __init__(self, database_url, tenant, actor="local", config=None, migrate=True, role="runner"):
        self.config = config or Config.from_env({**os.environ, "DURABLE_DATABASE_URL": database_url})
        self.principal = Principal(tenant, role, actor)
        self.gate_config = gate.GateConfig(self.config.default_max_attempts, self.config.backoff_base_s,
                                           self.config.reconcile_claim_s)
        # peewee logs statements with their parameters at DEBUG; the server never lets it (app.py).
        logging.getLogger("peewee").setLevel(max(logging.INFO, logging.getLogger("peewee").getEffectiveLevel()))
        install_log_redaction()
        self._database = _bind(database_url)
        self._pooled = is_pooled(self._database)
        if migrate:
            create_schema()
        configure_reconcilers(self.config)

    def __repr__(self):
        return f"LocalLedger(tenant={self.principal.tenant!r}, actor={self.principal.name!r})"

    @contextmanager
    def _session(self):
        if db.obj is not self._database:
            raise RuntimeError("the process's ledger database was rebound since this LocalLedger was made; "
                               "a process uses one ledger database")
        opened = db.is_closed()
        if opened:
            db.connect()
        try:
            yield
        except LedgerError as exc:
            # Counted for /v1/metrics/acceptance as the server's error handler counts them.
            if exc.code in COUNTED_REFUSALS and not exc.recorded:
                record_refusal(self.principal.tenant, None, self.principal.actor, exc.code,
                               {"client": "local", **{k: v for k, v in exc.details.items() if k != "fields"}})
            raise
        except DataError as exc:  # the driver's message may quote the value: only its class goes on
            raise InvalidValue("a value does not fit the database column it is stored in",
                               {"driver_error": type(exc).__name__}) from None
        except (OperationalError, InterfaceError) as exc:
            raise LedgerUnavailable(f"the ledger database could not be used ({type(exc).__name__})",
                                    {"driver_error": type(exc).__name__}) from exc
        finally:
            if opened and self._pooled and not db.is_closed():
                db.close()

    def close(self):
        """Hand the calling thread's connection back (to the pool on PostgreSQL)."""
        if db.obj is self._database and not db.is_closed():
            db.close()

    def _checked(self, schema_cls, body):
        """``body`` as the route declared with ``schema_cls`` reads it, or the route's refusal."""
        return checks.body(schema_cls, body, self.config)

    def _put_job(self, job_id, fields):
        checks.identifier("job_id", job_id, slashes=False)
        self._who("runner")
        fields = self._checked(bodies.JobPutSchema, fields)
        session_id = fields.pop("session_id", None)
        if session_id is not None:
            job, created = self._put_job_with_session(job_id, session_id, fields)
            with self._session():
                return job_dict(job, jobs.current_lease(job)), created
        with self._session():
            job, created = jobs.create_or_get_job(self.principal.tenant, job_id, actor=self.principal.actor, **fields)
            return job_dict(job, jobs.current_lease(job)), created

    def _acquire(self, job_id, owner, ttl_s, takeover):
        self._who("runner")
        b = self._checked(bodies.LeaseSchema, lease_body(owner, ttl_s, takeover))
        with self._session():
            job, lease = leases.acquire_lease(self.principal.tenant, job_id, b["owner"],
                                              b["ttl_s"] or self.config.default_lease_ttl_s, b["takeover"],
                                              self.principal.actor)
            _, pending = job_ops.list_job_operations(self.principal.tenant, job_id, S.NEEDS_ATTENTION)
            out = lease_dict(lease)
            out["job"] = job_dict(job, lease)
            out["needs_reconcile"] = [operation_dict(op, job_id) for op in pending]
            return out

    def _renew(self, job_id, owner, token, ttl_s):
        self._who("runner")
        b = self._checked(bodies.LeaseRenewSchema, renew_body(owner, token, ttl_s))
        with self._session():
            return lease_dict(leases.renew_lease(self.principal.tenant, job_id, b["owner"], b["fencing_token"],
                                                 b["ttl_s"] or self.config.default_lease_ttl_s)[1])

    def _release(self, job_id, owner, token):
        self._who("runner")
        b = self._checked(bodies.LeaseReleaseSchema, release_body(owner, token))
        with self._session():
            leases.release_lease(self.principal.tenant, job_id, b["owner"], b["fencing_token"])

    def _begin(self, job_id, action, token, payload, operation_key, target, requires_approval, approval_policy=None):
        self._who("runner")
        b = self._checked(bodies.BeginSchema, begin_body(job_id, action, token, payload, operation_key, target,
                                                          requires_approval, approval_policy))
        with self._session():
            answer = gate.begin(self.principal, config=self.gate_config, **b)
        return gate_answer(answer)

    def _outcome(self, kind, job_id, key, token, **fields):
        self._who("runner")
        b = self._checked(_OUTCOMES[kind], outcome_body(token, fields))
        token = b["fencing_token"]
        with self._session():
            if kind == "confirm":
                replies.check_cost(self.principal, key, b["cost"])
                op = ops.confirm(self.principal, key, token, b["remote_id"], b["receipt"], b["cost"])
            elif kind == "fail":
                op = ops.fail(self.principal, key, token, b["retryable"], b["error"])
            else:
                op = ops.mark_unknown(self.principal, key, token, b["error"])
            return operation_dict(op, job_id)

    def _operations(self, job_id, states):
        if states:  # the query parameter HttpLedger sends
            check_query_value("state", ",".join(states))
            states = [st for st in ",".join(states).split(",") if st] or None
        with self._session():
            _, rows = job_ops.list_job_operations(self.principal.tenant, job_id, states)
            return [operation_dict(op, job_id) for op in rows]

    def _operation(self, key):
        with self._session():
            return operation_dict(job_ops.get_operation(self.principal.tenant, key))

    def _cancel(self, job_id, reason):
        self._who("runner", "editor", "approver")
        b = self._checked(bodies.CancelSchema, {"reason": reason})
        with self._session():
            return lifecycle.cancel_job(self.principal, job_id, b["reason"])
