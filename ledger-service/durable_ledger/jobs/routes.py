"""Jobs, leases and checkpoints over HTTP. Views parse, call the features, serialise."""

from flask import Blueprint, current_app, jsonify, request

from ..jobs import operations as ops
from ..kernel import bodies
from ..kernel import states as S
from ..web.context import config
from ..web.routing import api
from . import checkpoints, jobs, leases, lifecycle, report, resume, start
from .serialize import checkpoint_dict, iso, job_dict, lease_dict, operation_dict

bp = Blueprint("jobs", __name__, url_prefix="/v1/jobs")

# `PUT /v1/jobs/{id}` with a session_id creates the job bound to an Agents API session. Session
# control is a feature above jobs (agents/), so it plugs its binder in when the app is built
# (agents/routes.py `install`) instead of jobs importing it.
SESSION_BINDER = "durable_ledger.session_binder"


@api(bp, "PUT", "/<job_id>", role="runner", summary='Create or get a job', body=bodies.JobPutSchema)
def put_job(who, body, job_id):
    session_id = body.pop("session_id", None)
    if session_id is None:
        job, created = jobs.create_or_get_job(who.tenant, job_id, actor=who.actor, **body)
    else:  # bound exactly as PUT /v1/jobs/{id}/session binds (one source of truth: the binding)
        bind = current_app.extensions[SESSION_BINDER]
        job, created = bind(who.tenant, job_id, session_id, who.actor, **body)
    lease = jobs.current_lease(job)
    return jsonify(job_dict(job, lease)), 201 if created else 200


@api(bp, "GET", "/<job_id>", role="any", summary='Read a job')
def get_job(who, job_id):
    job, lease = jobs.get_job_and_lease(who.tenant, job_id)
    return jsonify(job_dict(job, lease))


@api(bp, "POST", "/<job_id>/versions", role="runner",
     summary='Start a higher task version (the next, or task_version)', body=bodies.VersionSchema)
def bump_version(who, body, job_id):
    job = jobs.bump_version(who.tenant, job_id, body["fencing_token"], who.actor, body["task_version"])
    return jsonify(job_dict(job, jobs.current_lease(job)))


def _lease_body(job, lease, created=False):
    # A job made by this very request has no operations yet: nothing to read.
    pending = [] if created else ops.operations_in(job, S.NEEDS_ATTENTION)
    out = lease_dict(lease)
    out["job"] = job_dict(job, lease)
    out["needs_reconcile"] = [operation_dict(op, job.job_id) for op in pending]
    return out


@api(bp, "POST", "/<job_id>/lease", role="runner",
     summary="Acquire (or take over) the job's lease", body=bodies.LeaseSchema)
def acquire(who, body, job_id):
    ttl = body["ttl_s"] or config().default_lease_ttl_s
    job, lease = leases.acquire_lease(who.tenant, job_id, body["owner"], ttl, body["takeover"], who.actor)
    return jsonify(_lease_body(job, lease))


@api(bp, "POST", "/<job_id>/start", role="runner",
     summary='Start Job in one call: create or get the job, take the lease, start a higher task_version', body=bodies.StartSchema)
def start_job(who, body, job_id):
    """PUT /v1/jobs/{id} + POST .../lease + (a higher task_version) POST .../versions, in one transaction."""
    owner, ttl = body.pop("owner"), body.pop("ttl_s") or config().default_lease_ttl_s
    job, lease, created = start.start_job(who.tenant, job_id, owner, ttl, actor=who.actor, **body)
    out = _lease_body(job, lease, created)
    out["created"] = created
    return jsonify(out), 201 if created else 200


@api(bp, "POST", "/<job_id>/lease/renew", role="runner", summary='Renew the lease', body=bodies.LeaseRenewSchema)
def renew(who, body, job_id):
    ttl = body["ttl_s"] or config().default_lease_ttl_s
    _, lease = leases.renew_lease(who.tenant, job_id, body["owner"], body["fencing_token"], ttl,
                                  live_s=body["live_s"])
    return jsonify(lease_dict(lease))


@api(bp, "DELETE", "/<job_id>/lease", role="runner", summary='Release the lease', body=bodies.LeaseReleaseSchema)
def release(who, body, job_id):
    leases.release_lease(who.tenant, job_id, body["owner"], body["fencing_token"])
    return "", 204


@api(bp, "GET", "/<job_id>/operations", role="any", summary="List the job's operations", query=('state',))
def job_operations(who, job_id):
    states = [s for s in request.args.get("state", "").split(",") if s]
    _, rows = ops.list_job_operations(who.tenant, job_id, states or None)
    return jsonify({"operations": [operation_dict(op, job_id) for op in rows]})


@api(bp, "POST", "/<job_id>/checkpoints", role="runner, approver",
     summary='Save a checkpoint', body=bodies.CheckpointSchema)
def save_checkpoint(who, body, job_id):
    token, phase = body.pop("fencing_token"), body.pop("phase")
    job, cp = checkpoints.save_checkpoint(who, job_id, token, phase, body)
    return jsonify({"checkpoint": checkpoint_dict(cp), "job": job_dict(job, jobs.current_lease(job))}), 201


@api(bp, "GET", "/<job_id>/checkpoints", role="any", summary='Checkpoint history')
def list_checkpoints(who, job_id):
    return jsonify({"checkpoints": [checkpoint_dict(cp) for cp in checkpoints.list_checkpoints(who.tenant, job_id)],
                    "generated_at": iso(None)})


@api(bp, "POST", "/<job_id>/cancel", role="runner, editor, approver",
     summary='Cancel a job (never reopened)', body=bodies.CancelSchema)
def cancel(who, body, job_id):
    return jsonify(lifecycle.cancel_job(who, job_id, body["reason"]))


@api(bp, "POST", "/<job_id>/reauthorize", role="approver",
     summary='Lift an authorization or policy halt', body=bodies.ReauthorizeSchema)
def reauthorize(who, body, job_id):
    job = lifecycle.reauthorize(who, job_id, body["policy_hash"], body["note"])
    return jsonify(job_dict(job, jobs.current_lease(job)))


@api(bp, "POST", "/<job_id>/resume", role="runner",
     summary='Take the lease, check stop conditions, get the recovery packet', body=bodies.ResumeSchema)
def resume_job(who, body, job_id):
    packet = resume.resume_job(who, job_id, body["owner"], body["ttl_s"] or config().default_lease_ttl_s,
                               body["takeover"], body["artifacts"], body["policy_hash"])
    return jsonify(packet)


@api(bp, "GET", "/<job_id>/report", role="any", summary='Job report: completed / failed / unknown / pending human')
def job_report(who, job_id):
    return jsonify(report.job_report(who.tenant, job_id))
