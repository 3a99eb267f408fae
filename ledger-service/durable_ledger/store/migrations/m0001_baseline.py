"""Baseline: the schema of release 0.1.0 (commit c91f4dc), the last one without migrations.

On a database made by that release this changes nothing. On one made by an older build it
creates the tables and nullable/defaulted columns that build lacked, which is what 0.1.0's
init-db did ad hoc on every start.
"""

from ..agent_models import AGENT_MODELS
from ..models import ApiToken, Approval, AuditLog, Checkpoint, Job, Lease, Operation, OperationEvent, Setting

VERSION = 1
NAME = "baseline_0_1_0"


def baseline_models():
    return [ApiToken, Job, Lease, Operation, OperationEvent, Checkpoint, AuditLog, Approval, Setting] + AGENT_MODELS


def up(schema):
    models = baseline_models()
    schema.create_tables(models)
    schema.add_missing_columns(models)
