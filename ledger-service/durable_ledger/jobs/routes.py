"""Jobs, leases and checkpoints over HTTP. Views parse, call the features, serialise."""

from flask import Blueprint, current_app, jsonify, request

from ..jobs import operations as ops
from ..kernel import bodies
from ..kernel import states as S
from ..web import schemas
from ..web.context import config, principal
from . import checkpoints, jobs, leases, lifecycle, report, resume, start
from .serialize import checkpoint_dict, iso, job_dict, lease_dict, operation_dict

bp = Blueprint("jobs", __name__, url_prefix="/v1/jobs")

# `PUT /v1/jobs/{id}` with a session_id creates the job bound to an Agents API session. Session
# control is a feature above jobs (agents/), so it plugs its binder in when the app is built
# (agents/routes.py `install`) instead of jobs importing it.
SESSION_BINDER = "durable_ledger.session_binder"


@bp.put("/<job_id>")
def put_job(job_id):
    who = principal().require("runner")
    body = schemas.load(bodies.JobPutSchema, request)
    session_id = body.pop("session_id", None)
    if session_id is None:
        job, created = jobs.create_or_get_job(who.tenant, job_id, actor=who.actor, **body)
    else:  # bound exactly as PUT /v1/jobs/{id}/session binds (one source of truth: the binding)
        bind = current_app.extensions[SESSION_BINDER]
        job, created = bind(who.tenant, job_id, session_id, who.actor, **body)
    lease = jobs.current_lease(job)
    return jsonify(job_dict(job, lease)), 201 if created else 200


@bp.get("/<job_id>")
def get_job(job_id):
    who = principal()
    job, lease = jobs.get_job_and_lease(who.tenant, job_id)
    return jsonify(job_dict(job, lease))


@bp.post("/<job_id>/versions")
def bump_version(job_id):
    who = principal().require("runner")
    body = schemas.load(bodies.VersionSchema, request)
    job = jobs.bump_version(who.tenant, job_id, body["fencing_token"], who.actor, body["task_version"])
    return jsonify(job_dict(job, jobs.current_lease(job)))


def _lease_body(job, lease):
    _, pending = ops.list_job_operations(job.tenant, job.job_id, S.NEEDS_ATTENTION)
    out = lease_dict(lease)
    out["job"] = job_dict(job, lease)
    out["needs_reconcile"] = [operation_dict(op, job.job_id) for op in pending]
    return out


@bp.post("/<job_id>/lease")
def acquire(job_id):
    who = principal().require("runner")
    body = schemas.load(bodies.LeaseSchema, request)
    ttl = body["ttl_s"] or config().default_lease_ttl_s
    job, lease = leases.acquire_lease(who.tenant, job_id, body["owner"], ttl, body["takeover"], who.actor)
    return jsonify(_lease_body(job, lease))


@bp.post("/<job_id>/start")
def start_job(job_id):
    """PUT /v1/jobs/{id} + POST .../lease + (a higher task_version) POST .../versions, in one transaction."""
    who = principal().require("runner")
    body = schemas.load(bodies.StartSchema, request)
    owner, ttl = body.pop("owner"), body.pop("ttl_s") or config().default_lease_ttl_s
    job, lease, created = start.start_job(who.tenant, job_id, owner, ttl, actor=who.actor, **body)
    out = _lease_body(job, lease)
    out["created"] = created
    return jsonify(out), 201 if created else 200


@bp.post("/<job_id>/lease/renew")
def renew(job_id):
    who = principal().require("runner")
    body = schemas.load(bodies.LeaseRenewSchema, request)
    ttl = body["ttl_s"] or config().default_lease_ttl_s
    _, lease = leases.renew_lease(who.tenant, job_id, body["owner"], body["fencing_token"], ttl,
                                  live_s=body["live_s"])
    return jsonify(lease_dict(lease))


@bp.delete("/<job_id>/lease")
def release(job_id):
    who = principal().require("runner")
    body = schemas.load(bodies.LeaseReleaseSchema, request)
    leases.release_lease(who.tenant, job_id, body["owner"], body["fencing_token"])
    return "", 204


@bp.get("/<job_id>/operations")
def job_operations(job_id):
    who = principal()
    states = [s for s in request.args.get("state", "").split(",") if s]
    _, rows = ops.list_job_operations(who.tenant, job_id, states or None)
    return jsonify({"operations": [operation_dict(op, job_id) for op in rows]})


@bp.post("/<job_id>/checkpoints")
def save_checkpoint(job_id):
    who = principal().require("runner", "approver")
    body = schemas.load(bodies.CheckpointSchema, request)
    token, phase = body.pop("fencing_token"), body.pop("phase")
    job, cp = checkpoints.save_checkpoint(who, job_id, token, phase, body)
    return jsonify({"checkpoint": checkpoint_dict(cp), "job": job_dict(job, jobs.current_lease(job))}), 201


@bp.get("/<job_id>/checkpoints")
def list_checkpoints(job_id):
    who = principal()
    return jsonify({"checkpoints": [checkpoint_dict(cp) for cp in checkpoints.list_checkpoints(who.tenant, job_id)],
                    "generated_at": iso(None)})


@bp.post("/<job_id>/cancel")
def cancel(job_id):
    who = principal().require("runner", "editor", "approver")
    body = schemas.load(bodies.CancelSchema, request)
    return jsonify(lifecycle.cancel_job(who, job_id, body["reason"]))


@bp.post("/<job_id>/reauthorize")
def reauthorize(job_id):
    who = principal().require("approver")
    body = schemas.load(bodies.ReauthorizeSchema, request)
    job = lifecycle.reauthorize(who, job_id, body["policy_hash"], body["note"])
    return jsonify(job_dict(job, jobs.current_lease(job)))


@bp.post("/<job_id>/resume")
def resume_job(job_id):
    who = principal().require("runner")
    b = schemas.load(bodies.ResumeSchema, request)
    packet = resume.resume_job(who, job_id, b["owner"], b["ttl_s"] or config().default_lease_ttl_s,
                               b["takeover"], b["artifacts"], b["policy_hash"])
    return jsonify(packet)


@bp.get("/<job_id>/report")
def job_report(job_id):
    who = principal()
    return jsonify(report.job_report(who.tenant, job_id))
