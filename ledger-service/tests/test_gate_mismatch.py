"""A digest_mismatch names the top-level payload fields that differ from the first request
(names only), on both backends and through every path that stores an operation: the one-statement
claim (PostgreSQL), claim_new (SQLite), the batch claim and a PREPARED row waiting for an approval."""

from conftest import auth
from durable_ledger.gate.mismatch import differing, field_digests
from durable_ledger.store.db import db
from durable_ledger.store.models import Operation

FIRST = {"title": "T", "content": "body", "fencing_token": 1, "lease": {"expires_at": 1.5}, "gone": True}
SECOND = {"title": "T", "content": "body", "fencing_token": 2, "lease": {"expires_at": 9.5}, "execution_id": "7"}


def _start(client, job="j1"):
    assert client.put(f"/v1/jobs/{job}", json={}, headers=auth()).status_code == 201
    return client.post(f"/v1/jobs/{job}/lease", json={"owner": "exec-1", "ttl_s": 60},
                       headers=auth()).get_json()["fencing_token"]


def _begin(client, token, payload, action="create_draft", **extra):
    return client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "j1", "action": action, "payload": payload, "fencing_token": token, **extra})


def _mismatch(resp):
    assert resp.status_code == 422, resp.get_json()
    err = resp.get_json()["error"]
    assert err["code"] == "digest_mismatch"
    return err


def test_mismatch_names_changed_added_and_removed_fields(client):
    token = _start(client)
    assert _begin(client, token, FIRST).get_json()["decision"] == "dispatch"
    err = _mismatch(_begin(client, token, SECOND))
    assert err["details"]["fields"] == {"changed": ["fencing_token", "lease"], "added": ["execution_id"],
                                        "removed": ["gone"]}
    assert "changed: fencing_token, lease; added: execution_id; removed: gone" in err["message"]
    # names only: neither the values nor the per-field digests are in the answer
    text = str(err)
    assert "9.5" not in text and "body" not in text
    with db.connection_context():
        stored = Operation.get().field_digests
    assert sorted(stored) == sorted(FIRST) and all(v not in text for v in stored.values())


def test_mismatch_names_fields_of_a_prepared_step(client):
    token = _start(client)
    first = _begin(client, token, FIRST, requires_approval=True, target="site:1").get_json()
    assert first["reason"] == "approval_required"
    err = _mismatch(_begin(client, token, {**FIRST, "title": "U"}, requires_approval=True, target="site:1"))
    assert err["details"]["fields"] == {"changed": ["title"], "added": [], "removed": []}


def test_mismatch_names_fields_after_a_batch_claim(client):
    token = _start(client)
    r = client.post("/v1/operations/batch", headers=auth(), json={"begin": [
        {"job_id": "j1", "action": "a1", "payload": FIRST, "fencing_token": token}]})
    assert r.get_json()["begin"][0]["decision"] == "dispatch"
    err = _mismatch(_begin(client, token, {**FIRST, "content": "other"}, action="a1"))
    assert err["details"]["fields"]["changed"] == ["content"]


def test_mismatch_without_a_stored_map_says_only_that_it_differs(client):
    """Rows stored before m0004 (and requests sent as request_hash only) have no map."""
    token = _start(client)
    assert _begin(client, token, FIRST).get_json()["decision"] == "dispatch"
    with db.connection_context():
        Operation.update(field_digests=None).execute()
    err = _mismatch(_begin(client, token, SECOND))
    assert err["details"]["fields"] is None and "top-level" not in err["message"]


def test_field_digests_bounds():
    assert field_digests([1, 2]) is None and field_digests({str(i): i for i in range(101)}) is None
    assert differing(field_digests({"a": 1, "b": [1]}), field_digests({"a": 1, "b": [2]})) == {
        "changed": ["b"], "added": [], "removed": []}
    assert differing(None, {"a": "x"}) is None
