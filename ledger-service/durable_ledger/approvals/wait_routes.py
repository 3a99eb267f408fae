"""Executions waiting for an approval (approvals/waits.py) over HTTP."""

from flask import Blueprint, jsonify, request

from ..kernel import bodies
from ..web.context import config
from ..web.routing import api
from . import calls

bp = Blueprint("waits", __name__)

@api(bp, "POST", "/v1/operations/<path:key>/wait", role="runner",
     summary="Register an n8n execution's resume URL for an operation halted with approval_required", body=bodies.WaitSchema)
def register_wait(who, body, key):
    answer, created = calls.register_wait(who, key, config(), body["resume_url"], body["fencing_token"],
                                          body["execution_id"], body["workflow_id"], body["link_expires_in_s"],
                                          request.host_url)
    return jsonify(answer), 201 if created else 200


@api(bp, "GET", "/v1/jobs/<job_id>/waits", role="any",
     summary='Executions waiting for an approval, and their resume deliveries')
def job_waits(who, job_id):
    return jsonify(calls.job_waits(who.tenant, job_id))
