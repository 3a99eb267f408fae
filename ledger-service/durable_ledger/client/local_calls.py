"""LocalLedger's half of calls.py: each call checks the body HttpLedger would send as its route
reads it (its declaration, kernel/bodies.py), asks for the role the route asks for, then calls the feature
function the route calls (gate/replies.py, gate/lookup.py, jobs/checkpoints.py,
approvals/calls.py, agents/control.py, agents/artifacts.py), so the decision, the refusals and
the audit events are the route's. The agents feature (and the SDK client it needs) is imported
on first use: a ledger that never binds a session or stores an artifact does not load it."""

import io

from ..gate import lookup, replies
from ..jobs import checkpoints, jobs
from ..jobs.serialize import checkpoint_dict, job_dict
from ..kernel import bodies
from ..kernel.errors import ValidationFailed
from .answers import gate_answer
from .calls import Batch
from .ledger import GateAnswer


_DECISIONS = {"approve": bodies.ApproveOperationSchema, "deny": bodies.DenyOperationSchema}


def _agents():
    from ..agents import artifacts, control
    from ..agents.openai_client import get_client

    return artifacts, control, get_client


class LocalCalls:
    """Mixed into LocalLedger (it provides principal, config, gate_config, _session, _checked)."""

    def _who(self, *roles):
        """The route's ``principal().require(*roles)``; a refusal is counted as the server counts it."""
        if self.principal.role == "admin" or self.principal.role in roles:
            return self.principal
        with self._session():
            return self.principal.require(*roles)

    def _version(self, job_id, body):
        who = self._who("runner")
        b = self._checked(bodies.VersionSchema, body)
        with self._session():
            job = jobs.bump_version(who.tenant, job_id, b["fencing_token"], who.actor, b["task_version"])
            return job_dict(job, jobs.current_lease(job))

    def _get_job(self, job_id):
        with self._session():
            job, lease = jobs.get_job_and_lease(self.principal.tenant, job_id)
            return job_dict(job, lease)

    def _raw_outcome(self, key, body):
        who = self._who("runner")
        b = self._checked(bodies.OutcomeSchema, body)
        with self._session():
            return replies.outcome(who, key, b)

    def _lookup(self, key, body):
        who = self._who("runner")
        b = self._checked(bodies.LookupResultSchema, body)
        with self._session():
            return gate_answer(lookup.report_lookup(who, key, config=self.gate_config, **b))

    def _batch(self, body):
        who = self._who("runner")
        b = self._checked(bodies.BatchSchema, body)
        with self._session():
            return Batch.from_json(replies.batch(who, b["confirm"], b["begin"], self.gate_config), GateAnswer)

    def _checkpoint(self, job_id, body):
        who = self._who("runner", "approver")
        b = self._checked(bodies.CheckpointSchema, body)
        token, phase = b.pop("fencing_token"), b.pop("phase")
        with self._session():
            job, cp = checkpoints.save_checkpoint(who, job_id, token, phase, b)
            return {"checkpoint": checkpoint_dict(cp), "job": job_dict(job, jobs.current_lease(job))}

    def _checkpoints(self, job_id):
        with self._session():
            return [checkpoint_dict(cp) for cp in checkpoints.list_checkpoints(self.principal.tenant, job_id)]

    def _wait(self, key, body):
        from ..approvals import calls

        who = self._who("runner")
        b = self._checked(bodies.WaitSchema, body)
        with self._session():
            return calls.register_wait(who, key, self.config, b["resume_url"], b["fencing_token"],
                                       b["execution_id"], b["workflow_id"], b["link_expires_in_s"])[0]

    def _waits(self, job_id):
        from ..approvals import calls

        with self._session():
            return calls.job_waits(self.principal.tenant, job_id)["waits"]

    def _pending(self):
        from ..approvals import calls

        who = self._who("approver")
        with self._session():
            return calls.pending(who)

    def _decide(self, kind, key, body):
        from ..approvals import calls

        who = self._who("approver")
        b = self._checked(_DECISIONS[kind], body)
        with self._session():
            if kind == "approve":
                return calls.approve(who, key, b["content_digest"], self.config, b["expires_in_s"], b["note"])
            return calls.deny(who, key, b["content_digest"], b["reason"])

    def _grant(self, body):
        from ..approvals import calls

        who = self._who("approver")
        b = self._checked(bodies.ApprovalSchema, body)
        with self._session():
            return calls.grant(who, b["job_id"], b["task_version"], b["action"], b["content_digest"], b["target"],
                               b["expires_at"], b["note"])

    def _revoke(self, approval_id):
        from ..approvals import calls

        who = self._who("approver")
        with self._session():
            return calls.revoke(who, approval_id)

    def _put_artifact(self, data, sha256):
        artifacts, _, _ = _agents()
        who = self._who("runner")
        if sha256 is not None and not artifacts.SHA_RE.match(sha256):
            raise ValidationFailed("X-Content-SHA256 must be 64 lowercase hex digits", {"field": "sha256"})
        with self._session():
            sha, size, created = artifacts.put_stream(who.tenant, io.BytesIO(data), sha256,
                                                      max_bytes=self.config.max_artifact_bytes,
                                                      quota_bytes=self.config.artifact_quota_bytes,
                                                      announced=len(data))
        return {"sha256": sha, "size": size, "created": created}

    def _artifact(self, sha256):
        artifacts, _, _ = _agents()
        with self._session():
            path, _ = artifacts.open_artifact(self.principal.tenant, sha256)
        return path.read_bytes()

    def _bind(self, job_id, body):
        _, control, get_client = _agents()
        who = self._who("runner")
        b = self._checked(bodies.BindSchema, body)
        with self._session():
            return control.bind(get_client(), who.tenant, job_id, b["session_id"], who.actor)[0]

    def _session_of(self, job_id):
        _, control, _ = _agents()
        with self._session():
            return control.show(self.principal.tenant, job_id)

    def _sync(self, job_id, body):
        _, control, get_client = _agents()
        who = self._who("runner")
        b = self._checked(bodies.SyncSchema, body)
        with self._session():
            return control.sync_session(who, get_client(), job_id, **b)

    def _put_job_with_session(self, job_id, session_id, fields):
        """PUT /v1/jobs/{id} with a session_id: the job created bound, as the route's binder does."""
        _, _, get_client = _agents()
        from ..agents import sessions

        with self._session():
            return sessions.create_job_with_session(get_client(), self.principal.tenant, job_id, session_id,
                                                    self.principal.actor, **fields)
