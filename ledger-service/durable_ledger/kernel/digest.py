"""Request digests: sha256 over canonical JSON, the same bytes in every client."""

import hashlib
import json


def canonical_json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def request_digest(payload):
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def default_operation_key(tenant, job_id, task_version, action):
    return f"{tenant}:{job_id}:v{task_version}:{action}"
