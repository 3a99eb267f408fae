"""The holder's liveness beside the lease's TTL.

``lease.live_until``: the holder said it is working until then (Start Job, then a heartbeat every
few seconds while a Durable Step node works). Past it, the holder is dead or between steps and a
takeover that respects liveness takes the lease at once; before it, such a takeover is answered
409 `holder_live` and the caller waits. Nullable: leases of callers that never beat (API clients,
Start Job before node 1.4) have no liveness and are taken over as before.
"""

from peewee import DoubleField

VERSION = 8
NAME = "lease_liveness"


def up(schema):
    schema.add_column("lease", "live_until", DoubleField(null=True))
