"""The request bodies, built once for both transports: HttpLedger sends them as they are,
LocalLedger runs them through durable_ledger.kernel.checks exactly as the routes read them, so
both refuse the same input with the same class."""


def begin_body(job_id, action, token, payload, operation_key, target, requires_approval, approval_policy=None):
    body = {"job_id": job_id, "action": action, "payload": payload, "fencing_token": token,
            "operation_key": operation_key, "target": target, "requires_approval": requires_approval}
    if approval_policy is not None:
        body["approval_policy"] = approval_policy  # who may approve the step (docs/api.md)
    return body


def lease_body(owner, ttl_s, takeover):
    return {"owner": owner, "ttl_s": ttl_s, "takeover": takeover}


def renew_body(owner, token, ttl_s):
    return {"owner": owner, "fencing_token": token, "ttl_s": ttl_s}


def release_body(owner, token):
    return {"owner": owner, "fencing_token": token}


def outcome_body(token, fields):
    return {"fencing_token": token, **fields}


def version_body(token, task_version):
    return {"fencing_token": token, "task_version": task_version}


def outcome_fields(http_status, error_kind, remote_id, receipt, error, cost):
    return {"http_status": http_status, "error_kind": error_kind, "remote_id": remote_id,
            "receipt": receipt or {}, "error": error or {}, "cost": cost}


def lookup_body(token, attempt, result, remote_id, receipt, evidence):
    return {"fencing_token": token, "attempt": attempt, "result": result, "remote_id": remote_id,
            "receipt": receipt or {}, "evidence": evidence or {}}


def checkpoint_body(token, phase, task_version, artifacts, remote, next_allowed_actions, approval_status):
    body = {"fencing_token": token, "phase": phase, "artifacts": list(artifacts or []), "remote": remote or {},
            "next_allowed_actions": list(next_allowed_actions or []), "approval_status": approval_status}
    if task_version is not None:  # absent: the job's current version (the route's default)
        body["task_version"] = task_version
    return body


def wait_body(token, resume_url, execution_id, workflow_id):
    return {"fencing_token": token, "resume_url": resume_url, "execution_id": execution_id,
            "workflow_id": workflow_id}


def sync_body(token, answer_actions, rebuild_stream, expected_artifacts):
    return {"fencing_token": token, "answer_actions": answer_actions, "rebuild_stream": rebuild_stream,
            "expected_artifacts": list(expected_artifacts or [])}


def approve_body(content_digest, expires_in_s, note):
    return {"content_digest": content_digest, "expires_in_s": expires_in_s, "note": note}


def deny_body(content_digest, reason):
    return {"content_digest": content_digest, "reason": reason}


def grant_body(job_id, task_version, action, content_digest, target, expires_at, note):
    return {"job_id": job_id, "task_version": task_version, "action": action, "content_digest": content_digest,
            "target": target, "expires_at": expires_at, "note": note}
