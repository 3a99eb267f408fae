"""Executions waiting for an approval (approvals/waits.py) over HTTP."""

from flask import Blueprint, jsonify, request
from marshmallow import fields, validate

from ..web import schemas
from ..web.context import config, principal
from . import calls
from . import waits as approval_waits

bp = Blueprint("waits", __name__)

_n8n_id = validate.Regexp(r"^[A-Za-z0-9_.:-]{1,64}$", error="must be 1-64 of A-Z a-z 0-9 _ . : -")


class WaitSchema(schemas.Strict):
    fencing_token = fields.Integer(required=True, strict=True, validate=schemas._int32(min=0))
    resume_url = fields.String(required=True, validate=validate.Length(min=1, max=approval_waits.MAX_URL))
    execution_id = fields.String(load_default=None, allow_none=True, validate=_n8n_id)
    workflow_id = fields.String(load_default=None, allow_none=True, validate=_n8n_id)


@bp.post("/v1/operations/<path:key>/wait")
def register_wait(key):
    who = principal().require("runner")
    b = schemas.load(WaitSchema, request)
    answer, created = calls.register_wait(who, key, config(), b["resume_url"], b["fencing_token"],
                                             b["execution_id"], b["workflow_id"])
    return jsonify(answer), 201 if created else 200


@bp.get("/v1/jobs/<job_id>/waits")
def job_waits(job_id):
    who = principal()
    return jsonify(calls.job_waits(who.tenant, job_id))
