"""HTTP routes of the agents module (session binding, sync, follow-up, webhooks, artifacts).

Views parse, call ``durable_ledger.agents``, serialise. The webhook route has no bearer token:
OpenAI signs it, and the signature is the authentication.
"""

from flask import Blueprint, jsonify, request, send_file

from ..jobs import routes as job_routes
from ..kernel.errors import ValidationFailed
from ..kernel.limits import id_problem
from ..web.context import config
from ..web.routing import api
from ..kernel import bodies
from . import artifacts, control, followup, sessions, webhooks
from .openai_client import get_client

bp = Blueprint("agents", __name__)


@api(bp, "PUT", "/v1/jobs/<job_id>/session", role="runner",
     summary='Bind the job to an Agents API session', body=bodies.BindSchema)
def bind(who, body, job_id):
    binding, created = control.bind(get_client(), who.tenant, job_id, body["session_id"], who.actor)
    return jsonify(binding), 201 if created else 200


@api(bp, "GET", "/v1/jobs/<job_id>/session", role="any", summary='The bound session and its turns')
def show(who, job_id):
    return jsonify(control.show(who.tenant, job_id))


@api(bp, "POST", "/v1/jobs/<job_id>/session/sync", role="runner",
     summary="Sync the session's items and turns", body=bodies.SyncSchema)
def sync_session(who, body, job_id):
    return jsonify(control.sync_session(who, get_client(), job_id, body["fencing_token"], body["answer_actions"],
                                        body["rebuild_stream"], body["expected_artifacts"]))


@api(bp, "POST", "/v1/jobs/<job_id>/session/follow-up", role="runner",
     summary='Send a follow-up message exactly once', body=bodies.FollowUpSchema)
def follow_up(who, body, job_id):
    key = request.headers.get("Idempotency-Key") or body["idempotency_key"]
    if key is not None and id_problem(key, 200):
        raise ValidationFailed(f"Idempotency-Key {id_problem(key, 200)}", {"field": "Idempotency-Key"})
    job, binding = sessions.get_binding(who.tenant, job_id)
    row, sent_now = followup.send_follow_up(get_client(), job, binding, body["message"], body["fencing_token"], key)
    return jsonify({"idempotency_key": row.idempotency_key, "state": row.state, "sent_now": sent_now,
                    "attempts": row.attempts, "packet": row.packet}), 201 if sent_now else 200


@api(bp, "DELETE", "/v1/jobs/<job_id>/session", role="runner", summary='Delete the remote session')
def clean_up(who, job_id):
    """Delete the remote session and say what happened to the compute (self-hosted is not stopped)."""
    _, binding = sessions.get_binding(who.tenant, job_id)
    compute = sessions.delete_session(get_client(), binding)
    return jsonify({"session_id": binding.session_id, "session_deleted": True, "compute": compute})


@api(bp, "POST", "/v1/webhooks/openai", role="none", summary="OpenAI webhook (signed; no bearer token)",
     body="<webhook>")
def openai_webhook():
    status, body = webhooks.receive(request.get_data(cache=True), request.headers)
    return jsonify(body), status


@api(bp, "PUT", "/v1/artifacts", role="runner", summary="Store an artifact (content-addressed)", body="<binary>")
def put_artifact(who):
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


@api(bp, "GET", "/v1/artifacts/<sha256>", role="any", summary='Read an artifact')
def get_artifact(who, sha256):
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
