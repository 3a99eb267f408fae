"""Many begins at once (POST /v1/operations/batch): one statement claims every new step that
nothing stands in the way of; every other item gets the single-item gate, so its answer is
exactly what POST /v1/operations/begin would have said."""

import time

from .. import store
from ..approvals import rules as approvals
from ..kernel import states as S
from ..kernel.errors import LedgerError
from ..kernel.n8n_context import stamp
from .request import Answer, GateConfig
from .run import request, run


def begin_many(principal, bodies, config=None):
    """One slot per body, in order: an `Answer`, or the `LedgerError` its begin raised."""
    config = config or GateConfig()
    slots, reqs = [], {}
    for i, body in enumerate(bodies):
        try:
            reqs[i] = request(config=config, **body)
            slots.append(None)
        except LedgerError as exc:
            slots.append(exc)
    claims = _claims(reqs)
    if not any(c[-1] for c in claims):
        claims = []  # nothing the statement could claim: skip the round trip
    claimed = store.begin_many(principal.tenant, claims, principal.actor, time.time(),
                               stamp({"attempt": 1}), config.default_max_attempts)
    for i, req in reqs.items():
        if i in claimed:
            slots[i] = Answer(S.DISPATCH, claimed[i], req.job_id)
            continue
        try:
            slots[i] = run(principal, req)
        except LedgerError as exc:
            slots[i] = exc
    return slots


def _claims(reqs):
    """Every item for the one statement, with whether it may be claimed there (no approval could
    be needed); the statement itself leaves alone every key two items name (store/postgres.py)."""
    return [(i, req.job_id, req.operation_key, req.action, req.digest, req.fencing_token, req.target,
             req.summary,
             not approvals.may_need_approval(req.action, req.requires_approval), req.fields)
            for i, req in reqs.items()]
