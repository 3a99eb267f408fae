"""The issue's scripted check, against a real `durable-ledger serve` on both backends."""

from urllib.parse import quote

import pytest
import requests

from conftest import TOKENS
from servers import LedgerServer

H = {"Authorization": "Bearer runner-token"}


@pytest.fixture
def server(database, tmp_path):
    with LedgerServer(database, TOKENS, workers=2, threads=4, log_path=tmp_path / "ledger.log") as srv:
        yield srv.url


def test_serve_scripted_contract(server):
    s = requests.Session()
    assert s.put(f"{server}/v1/jobs/s1", headers=H, json={"pipeline": "article"}).status_code == 201
    tok = s.post(f"{server}/v1/jobs/s1/lease", headers=H, json={"owner": "a"}).json()["fencing_token"]
    body = {"job_id": "s1", "action": "create_draft", "payload": {"title": "T"}, "fencing_token": tok}
    first = s.post(f"{server}/v1/operations/begin", headers=H, json=body).json()
    assert first["decision"] == "dispatch"
    assert s.post(f"{server}/v1/operations/begin", headers=H, json=body).json()["decision"] == "reconcile"
    key = quote(first["operation"]["operation_key"], safe="")
    r = s.post(f"{server}/v1/operations/{key}/confirm", headers=H, json={"fencing_token": tok, "remote_id": 101})
    assert r.json()["operation"]["state"] == "CONFIRMED"
    again = s.post(f"{server}/v1/operations/begin", headers=H, json=body).json()
    assert (again["decision"], again["receipt"]["remote_id"]) == ("reuse_receipt", "101")
    r = s.post(f"{server}/v1/operations/begin", headers=H, json={**body, "payload": {"title": "other"}})
    assert (r.status_code, r.json()["error"]["code"]) == (422, "digest_mismatch")
    s.post(f"{server}/v1/jobs/s1/lease", headers=H, json={"owner": "b", "takeover": True}).raise_for_status()
    r = s.post(f"{server}/v1/operations/begin", headers=H, json={**body, "action": "set_seo"})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "stale_fencing_token")
    r = s.post(f"{server}/v1/operations/begin", headers={**H, "Content-Type": "application/json"}, data="{oops")
    assert (r.status_code, r.json()["error"]["code"]) == (400, "malformed_json")
    r = requests.post(f"{server}/v1/operations/begin", json=body)
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
