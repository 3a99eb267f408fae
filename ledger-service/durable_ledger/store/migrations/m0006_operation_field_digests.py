"""`operation.field_digests`: one short digest per top-level field of the payload an operation
key was first used with, so that a `digest_mismatch` can name the fields that changed
(gate/mismatch.py). A nullable column: rows from before it have none, and their mismatches
are answered as before, without names."""

from ..models import Operation

VERSION = 6
NAME = "operation_field_digests"


def up(schema):
    schema.add_column("operation", "field_digests", Operation.field_digests)
