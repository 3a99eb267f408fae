"""Sessions belong to a tenant (issue 12, build item 6), against the Agents API stand-in.

All tenants may share one OpenAI account, so the ledger binds a session for tenant T only if
the session's metadata says ``durable_tenant = T``. Another tenant's session, an untagged one
and an id that does not exist get the same answer; ``PUT /v1/jobs/{id}`` with a session_id
binds it exactly like ``PUT /v1/jobs/{id}/session`` (one source of truth: the binding).
"""

from conftest import auth

from durable_ledger.store.agent_models import SessionBinding
from durable_ledger.store.db import db
from durable_ledger.store.models import Job

ACME, OTHER = auth(), auth("other-token")


def _session(standin, session_id, tenant):
    body = standin.add_session(session_id)
    body["metadata"] = {"durable_tenant": tenant} if tenant else {}
    return body


def _bind(client, headers, job_id, session_id):
    assert client.put(f"/v1/jobs/{job_id}", json={}, headers=headers).status_code in (200, 201)
    return client.put(f"/v1/jobs/{job_id}/session", json={"session_id": session_id}, headers=headers)


def _as_unknown(response, session_id):
    """The body with the session id abstracted away, to compare with the answer for another id."""
    return response.status_code, response.get_data(as_text=True).replace(session_id, "<sid>")


def test_cross_tenant_bind_answers_exactly_like_an_unknown_session(client, standin):
    _session(standin, "sess_acme", "acme")
    assert _bind(client, ACME, "j1", "sess_acme").status_code == 201

    taken = _bind(client, OTHER, "o1", "sess_acme")  # bound by acme: other must not learn that
    unknown = _bind(client, OTHER, "o1", "sess_missing")  # no such session anywhere
    assert _as_unknown(taken, "sess_acme") == _as_unknown(unknown, "sess_missing")
    assert taken.status_code == 404
    assert taken.get_json()["error"] == {"code": "session_not_found",
                                         "message": "no session 'sess_acme' for this tenant",
                                         "details": {"session_id": "sess_acme"}}
    with db.connection_context():
        assert [b.session_id for b in SessionBinding.select()] == ["sess_acme"]
        assert Job.get(Job.tenant == "other", Job.job_id == "o1").session_id is None


def test_squatting_an_unbound_session_fails_and_the_owner_binds_afterwards(client, standin):
    _session(standin, "sess_acme", "acme")
    before = standin.requests["GET session"]
    squat = _bind(client, OTHER, "o1", "sess_acme")  # other tries first: the session is not bound yet
    unknown = _bind(client, OTHER, "o2", "sess_missing")
    assert _as_unknown(squat, "sess_acme") == _as_unknown(unknown, "sess_missing")
    assert standin.requests["GET session"] - before == 2  # one retrieve each: the same work either way
    for _ in range(5):
        assert _bind(client, OTHER, "o1", "sess_acme").status_code == 404

    owner = _bind(client, ACME, "j1", "sess_acme")  # no 409 session_conflict for the owner
    assert owner.status_code == 201, owner.get_json()
    assert client.get("/v1/jobs/j1/session", headers=ACME).get_json()["session_id"] == "sess_acme"
    assert client.get("/v1/jobs/o1/session", headers=OTHER).status_code == 404


def test_untagged_and_foreign_sessions_are_unknown_to_everyone_else(client, standin):
    _session(standin, "sess_untagged", None)
    _session(standin, "sess_other", "other")
    untagged = _bind(client, ACME, "j1", "sess_untagged")
    foreign = _bind(client, ACME, "j1", "sess_other")
    unknown = _bind(client, ACME, "j1", "sess_missing")
    assert (_as_unknown(untagged, "sess_untagged") == _as_unknown(foreign, "sess_other")
            == _as_unknown(unknown, "sess_missing"))
    assert unknown.status_code == 404
    assert _bind(client, OTHER, "o1", "sess_other").status_code == 201  # its owner binds it


def test_put_job_with_session_id_binds_the_session(client, standin):
    _session(standin, "sess_1", "acme")
    r = client.put("/v1/jobs/j1", json={"session_id": "sess_1"}, headers=ACME)
    assert r.status_code == 201 and r.get_json()["session_id"] == "sess_1"
    shown = client.get("/v1/jobs/j1/session", headers=ACME)
    assert shown.status_code == 200, shown.get_json()
    assert shown.get_json()["session_id"] == "sess_1"
    # A retried PUT, and the explicit bind route, see the same binding.
    assert client.put("/v1/jobs/j1", json={"session_id": "sess_1"}, headers=ACME).status_code == 200
    assert client.put("/v1/jobs/j1/session", json={"session_id": "sess_1"}, headers=ACME).status_code == 200
    # Sync works on it: the binding is real, not a copy on the job row.
    assert client.post("/v1/jobs/j1/session/sync", json={}, headers=ACME).status_code == 200


def test_put_job_with_a_session_it_may_not_bind_creates_nothing(client, standin):
    _session(standin, "sess_acme", "acme")
    _session(standin, "sess_2", "acme")
    foreign = client.put("/v1/jobs/o1", json={"session_id": "sess_acme"}, headers=OTHER)
    unknown = client.put("/v1/jobs/o1", json={"session_id": "sess_missing"}, headers=OTHER)
    assert _as_unknown(foreign, "sess_acme") == _as_unknown(unknown, "sess_missing")
    assert foreign.status_code == 404 and foreign.get_json()["error"]["code"] == "session_not_found"
    assert client.get("/v1/jobs/o1", headers=OTHER).status_code == 404  # never silently stored

    assert client.put("/v1/jobs/j1", json={"session_id": "sess_acme"}, headers=ACME).status_code == 201
    taken = client.put("/v1/jobs/j2", json={"session_id": "sess_acme"}, headers=ACME)  # acme's other job
    assert taken.status_code == 409 and taken.get_json()["error"]["code"] == "session_conflict"
    assert client.get("/v1/jobs/j2", headers=ACME).status_code == 404  # refused bind: no job either
    other_session = client.put("/v1/jobs/j1", json={"session_id": "sess_2"}, headers=ACME)
    assert other_session.status_code == 409 and other_session.get_json()["error"]["code"] == "session_conflict"
    assert client.get("/v1/jobs/j1/session", headers=ACME).get_json()["session_id"] == "sess_acme"
