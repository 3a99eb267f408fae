"""Executions waiting for an approval (approvals/waits.py) over HTTP."""

from flask import Blueprint, jsonify, request

from ..kernel import bodies
from ..web import schemas
from ..web.context import config, principal
from . import calls

bp = Blueprint("waits", __name__)

@bp.post("/v1/operations/<path:key>/wait")
def register_wait(key):
    who = principal().require("runner")
    b = schemas.load(bodies.WaitSchema, request)
    answer, created = calls.register_wait(who, key, config(), b["resume_url"], b["fencing_token"],
                                             b["execution_id"], b["workflow_id"])
    return jsonify(answer), 201 if created else 200


@bp.get("/v1/jobs/<job_id>/waits")
def job_waits(job_id):
    who = principal()
    return jsonify(calls.job_waits(who.tenant, job_id))
