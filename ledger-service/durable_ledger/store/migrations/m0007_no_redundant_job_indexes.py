"""Drop `operation(job_id)` and `operation_event(job_id)`: each is the leading column of another
index of its table ((job_id, state), (job_id, to_state)), which serves every lookup and every
ON DELETE CASCADE by job that they served. Every begin wrote both and every confirm the first
(a confirm changes `state`, so its new row version goes into every index of `operation`), and
each index is one more relation a statement opens and locks: at 16 concurrent gated steps that
pushed PostgreSQL's per-statement locks past its fast-path slots."""

VERSION = 7
NAME = "no_redundant_job_indexes"


def up(schema):
    schema.drop_index("operation", ["job_id"])
    schema.drop_index("operation_event", ["job_id"])
