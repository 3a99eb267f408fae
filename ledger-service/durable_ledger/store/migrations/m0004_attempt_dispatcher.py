"""An attempt belongs to the n8n execution that began it (issue 22, defects 10 and 11).

``operation.dispatched_by``: the n8n execution id whose begin moved the current attempt into
SENT (the same id the SENT event's detail names). The confirm statements compare it with the
caller's execution in the same conditional UPDATE that checks the fencing token, so a confirm
from another execution (n8n's Retry of a crashed execution runs as a new one) cannot settle the
attempt. Nullable: rows claimed before this migration, and by callers without an n8n execution,
are bound by the fencing token alone, as before.
"""

from peewee import CharField

VERSION = 4
NAME = "attempt_dispatcher"


def up(schema):
    schema.add_column("operation", "dispatched_by", CharField(max_length=64, null=True))
