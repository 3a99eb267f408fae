"""The fencing check: is this token the job's current one? A leaf (errors only), so that the
store can check inside the write that it fences and core can check before it writes.

A lease says who may act for a job *now*; the fencing token says who acted *last*. Expiry
alone cannot stop a paused worker (GC pause, n8n restart, stalled VM) from waking up and
writing after its lease was taken over:

    worker A: acquire (token 4) ... pause ..................... wake, write(token 4)
    worker B:                        lease expired, acquire (5), write(token 5)

so every write carries the token and the ledger (and WordPress, via the mu-plugin) refuse a
token lower than the highest one issued for the job.
"""

from .errors import FencingTokenNotIssued, LeaseLost, StaleFencingToken, ValidationFailed


def check_fence(lease, token):
    """Raise unless ``token`` is the job's current fencing token (``lease`` has ``fencing_token``)."""
    if lease is None:
        raise LeaseLost("the job has no lease: call Start Job / POST /v1/jobs/{id}/lease first", {})
    if token is None:
        raise ValidationFailed("fencing_token is required", {"field": "fencing_token"})
    if token < lease.fencing_token:
        raise StaleFencingToken(
            f"fencing token {token} is older than the job's current token {lease.fencing_token}: "
            "another worker took over this job",
            {"given": token, "current": lease.fencing_token},
        )
    if token > lease.fencing_token:
        raise FencingTokenNotIssued(
            f"fencing token {token} was never issued for this job (current {lease.fencing_token})",
            {"field": "fencing_token", "given": token, "current": lease.fencing_token},
        )
