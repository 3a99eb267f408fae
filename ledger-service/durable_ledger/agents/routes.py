"""HTTP routes of the agents module (session binding, sync, follow-up, webhooks, artifacts).

Views parse, call ``durable_ledger.agents``, serialise. The webhook route has no bearer token:
OpenAI signs it, and the signature is the authentication.
"""

from flask import Blueprint, jsonify, request, send_file

from ..jobs import routes as job_routes
from ..kernel.errors import ValidationFailed
from ..kernel.limits import id_problem
from ..web.context import config, principal
from ..kernel import bodies
from ..web.schemas import load
from . import artifacts, control, followup, sessions, webhooks
from .openai_client import get_client

bp = Blueprint("agents", __name__)


@bp.put("/v1/jobs/<job_id>/session")
def bind(job_id):
    who = principal().require("runner")
    body = load(bodies.BindSchema, request)
    binding, created = control.bind(get_client(), who.tenant, job_id, body["session_id"], who.actor)
    return jsonify(binding), 201 if created else 200


@bp.get("/v1/jobs/<job_id>/session")
def show(job_id):
    who = principal()
    return jsonify(control.show(who.tenant, job_id))


@bp.post("/v1/jobs/<job_id>/session/sync")
def sync_session(job_id):
    who = principal().require("runner")
    body = load(bodies.SyncSchema, request)
    return jsonify(control.sync_session(who, get_client(), job_id, body["fencing_token"], body["answer_actions"],
                                        body["rebuild_stream"], body["expected_artifacts"]))


@bp.post("/v1/jobs/<job_id>/session/follow-up")
def follow_up(job_id):
    who = principal().require("runner")
    body = load(bodies.FollowUpSchema, request)
    key = request.headers.get("Idempotency-Key") or body["idempotency_key"]
    if key is not None and id_problem(key, 200):
        raise ValidationFailed(f"Idempotency-Key {id_problem(key, 200)}", {"field": "Idempotency-Key"})
    job, binding = sessions.get_binding(who.tenant, job_id)
    row, sent_now = followup.send_follow_up(get_client(), job, binding, body["message"], body["fencing_token"], key)
    return jsonify({"idempotency_key": row.idempotency_key, "state": row.state, "sent_now": sent_now,
                    "attempts": row.attempts, "packet": row.packet}), 201 if sent_now else 200


@bp.delete("/v1/jobs/<job_id>/session")
def clean_up(job_id):
    """Delete the remote session and say what happened to the compute (self-hosted is not stopped)."""
    who = principal().require("runner")
    _, binding = sessions.get_binding(who.tenant, job_id)
    compute = sessions.delete_session(get_client(), binding)
    return jsonify({"session_id": binding.session_id, "session_deleted": True, "compute": compute})


@bp.post("/v1/webhooks/openai")
def openai_webhook():
    status, body = webhooks.receive(request.get_data(cache=True), request.headers)
    return jsonify(body), status


@bp.put("/v1/artifacts")
def put_artifact():
    who = principal().require("runner")
    cfg = config()
    # Before the stream is first touched: the body limit for JSON routes is far smaller.
    request.max_content_length = cfg.max_artifact_bytes
    expected = request.headers.get("X-Content-SHA256") or request.args.get("sha256")
    if expected is not None and not artifacts.SHA_RE.match(expected):
        raise ValidationFailed("X-Content-SHA256 must be 64 lowercase hex digits", {"field": "sha256"})
    sha, size, created = artifacts.put_stream(who.tenant, request.stream, expected, max_bytes=cfg.max_artifact_bytes,
                                              quota_bytes=cfg.artifact_quota_bytes,
                                              announced=request.content_length)
    return jsonify({"sha256": sha, "size": size, "created": created}), 201 if created else 200


@bp.get("/v1/artifacts/<sha256>")
def get_artifact(sha256):
    who = principal()
    path, size = artifacts.open_artifact(who.tenant, sha256)
    resp = send_file(path, mimetype="application/octet-stream", etag=sha256, conditional=True)
    resp.headers["X-Content-SHA256"] = sha256
    return resp


def install(app):
    """The blueprint, and the session binder `PUT /v1/jobs/{id}` calls with a session_id."""
    app.register_blueprint(bp)
    app.extensions[job_routes.SESSION_BINDER] = (
        lambda tenant, job_id, session_id, actor, **spec:
        sessions.create_job_with_session(get_client(), tenant, job_id, session_id, actor, **spec))
