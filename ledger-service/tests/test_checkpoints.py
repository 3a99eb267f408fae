"""Checkpoints are evidence: ordered phases, fresh tokens, confirmed drafts, no secrets."""

import pytest

from durable_ledger.auth import Principal
from durable_ledger.jobs import checkpoints, jobs, leases
from durable_ledger import gate
from durable_ledger.gate import outcomes as ops
from durable_ledger.kernel.secrets import find_secrets
from durable_ledger.kernel.errors import (Forbidden, PhaseSkipped, PreconditionFailed, SecretInCheckpoint,
                                          StaleFencingToken, UnknownPhase)
from durable_ledger.store.models import Checkpoint, Job

SHA = "a" * 64


@pytest.fixture
def token(conn):
    jobs.create_or_get_job("acme", "art", pipeline="article")
    return leases.acquire_lease("acme", "art", "w1", 60)[1].fencing_token


def _save(runner, token, phase, **body):
    return checkpoints.save_checkpoint(runner, "art", token, phase, body)


def test_phases_advance_in_order_with_history(token, runner):
    _save(runner, token, "SOURCES_COLLECTED", artifacts=[{"role": "sources", "uri": "file:///s.json", "sha256": SHA}])
    job, cp = _save(runner, token, "BODY_GENERATED", remote={"note": "body"})
    assert job.phase == "BODY_GENERATED" and cp.seq == 2
    assert job.checkpoint["remote"] == {"note": "body"}
    assert [c.phase for c in Checkpoint.select().order_by(Checkpoint.seq)] == ["SOURCES_COLLECTED", "BODY_GENERATED"]


def test_skipping_a_phase_is_refused(token, runner):
    _save(runner, token, "SOURCES_COLLECTED")
    with pytest.raises(PhaseSkipped) as exc:
        _save(runner, token, "QA_PASSED")
    assert exc.value.details["next_allowed"] == "BODY_GENERATED"
    assert Job.get().phase == "SOURCES_COLLECTED"


def test_unknown_phase_is_refused(token, runner):
    with pytest.raises(UnknownPhase):
        _save(runner, token, "DONE")


def test_going_back_to_rebuild_is_allowed(token, runner):
    _save(runner, token, "SOURCES_COLLECTED")
    _save(runner, token, "BODY_GENERATED")
    job, _ = _save(runner, token, "SOURCES_COLLECTED")
    assert job.phase == "SOURCES_COLLECTED"


def test_stale_token_cannot_advance(token, runner):
    leases.acquire_lease("acme", "art", "w2", 60, takeover=True)
    with pytest.raises(StaleFencingToken):
        _save(runner, token, "SOURCES_COLLECTED")
    assert Job.get().phase is None


def test_draft_confirmed_needs_a_confirmed_draft_operation(token, runner):
    for phase in ("SOURCES_COLLECTED", "BODY_GENERATED", "QA_PASSED", "IMAGES_READY", "MEDIA_UPLOADED"):
        _save(runner, token, phase)
    with pytest.raises(PreconditionFailed):
        _save(runner, token, "DRAFT_CONFIRMED")
    key = gate.begin(runner, "art", "create_draft", token, payload={"t": 1}).op.operation_key
    with pytest.raises(PreconditionFailed):  # SENT is not CONFIRMED
        _save(runner, token, "DRAFT_CONFIRMED")
    ops.confirm(runner, key, token, 101)
    job, _ = _save(runner, token, "DRAFT_CONFIRMED", remote={"draft_id": 101})
    assert job.phase == "DRAFT_CONFIRMED"


def test_only_approvers_set_approval_status(token, runner):
    with pytest.raises(Forbidden):
        _save(runner, token, "SOURCES_COLLECTED", approval_status="approved")
    approver = Principal("acme", "approver", "ed")
    job, _ = checkpoints.save_checkpoint(approver, "art", token, "SOURCES_COLLECTED", {"approval_status": "approved"})
    assert job.checkpoint["approval_status"] == "approved"


@pytest.mark.parametrize("body", [
    {"remote": {"api_key": "abc123"}},
    {"remote": {"wp": {"app_password": "x"}}},
    {"remote": {"note": "use sk-abcdefghij0123456789Kl"}},
    {"remote": {"header": "Bearer eyJhbGciOiJIUzI1NiJ9.payload"}},
    {"artifacts": [{"role": "x", "uri": "https://user:hunter2@example.test/a", "sha256": SHA}]},
    {"remote": {"pw": "Xk3p 9QmZ r7Tw Lb2N hY8c Dv4s"}},
    {"next_allowed_actions": ["Authorization: Basic dXNlcjpwYXNzd29yZA=="]},
])
def test_secrets_are_refused(token, runner, body):
    with pytest.raises(SecretInCheckpoint):
        _save(runner, token, "SOURCES_COLLECTED", **body)
    assert Checkpoint.select().count() == 0


def test_harmless_token_words_pass():
    assert list(find_secrets({"fencing_token": 3, "usage": {"total_tokens": 10}, "title": "Passwords 101"})) == []
