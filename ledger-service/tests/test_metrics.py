"""/metrics names tenants only to an admin of that tenant; open, it gives totals by code."""

from conftest import auth

BEGIN = {"job_id": "m1", "action": "x", "payload": {}}


def _refuse_stale(client, token_name, job):
    h = auth(token_name)
    client.put(f"/v1/jobs/{job}", headers=h, json={})
    old = client.post(f"/v1/jobs/{job}/lease", headers=h, json={"owner": "a"}).get_json()["fencing_token"]
    client.post(f"/v1/jobs/{job}/lease", headers=h, json={"owner": "b", "takeover": True})
    r = client.post("/v1/operations/begin", headers=h, json={**BEGIN, "job_id": job, "fencing_token": old})
    assert r.status_code == 409


def test_metrics_open_shows_totals_without_tenants(client):
    _refuse_stale(client, "runner-token", "m1")
    _refuse_stale(client, "runner-token", "m2")
    _refuse_stale(client, "other-token", "m3")
    for headers in ({}, auth("runner-token")):
        text = client.get("/metrics", headers=headers).get_data(as_text=True)
        assert 'durable_refusals_total{code="stale_fencing_token"} 3' in text
        assert "tenant=" not in text and "acme" not in text and "other" not in text


def test_metrics_admin_sees_its_own_tenant_labelled(client):
    _refuse_stale(client, "runner-token", "m1")
    _refuse_stale(client, "other-token", "m3")
    text = client.get("/metrics", headers=auth("admin-token")).get_data(as_text=True)
    assert 'durable_refusals_total{code="stale_fencing_token"} 2' in text
    assert 'durable_refusals_total{tenant="acme",code="stale_fencing_token"} 1' in text
    assert 'tenant="other"' not in text
    r = client.get("/metrics", headers=auth("no-such-token"))
    assert (r.status_code, r.get_json()["error"]["code"]) == (401, "unauthorized")
