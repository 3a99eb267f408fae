"""GET /v1/whoami: what the n8n credential test checks (tenant, role, what the token may do)."""

from conftest import auth


def test_whoami_runner_may_run_workflows(client):
    r = client.get("/v1/whoami", headers=auth("runner-token"))
    assert r.status_code == 200
    body = r.get_json()
    assert (body["tenant"], body["role"], body["runs_workflows"]) == ("acme", "runner", True)
    assert "POST /v1/operations/begin" in body["actions"] and "PUT /v1/jobs/{job_id}" in body["actions"]
    assert "POST /v1/approvals" not in body["actions"] and "GET /health" not in body["actions"]
    assert "runs workflows" in body["may"]
    assert "tenant_matches" not in body


def test_whoami_approver_and_editor_cannot_run_workflows(client):
    approver = client.get("/v1/whoami", headers=auth("approver-token")).get_json()
    assert (approver["role"], approver["runs_workflows"]) == ("approver", False)
    assert "POST /v1/operations/{operation_key}/approve" in approver["actions"]
    assert "POST /v1/operations/begin" not in approver["actions"]
    assert "cannot run workflows" in approver["may"]
    editor = client.get("/v1/whoami", headers=auth("editor-token")).get_json()
    assert (editor["role"], editor["runs_workflows"]) == ("editor", False)
    assert "POST /v1/reviews/{operation_key}/resolve" in editor["actions"]
    admin = client.get("/v1/whoami", headers=auth("admin-token")).get_json()
    assert admin["runs_workflows"] is True and "POST /v1/approvals" in admin["actions"]


def test_whoami_checks_the_expected_tenant(client):
    assert client.get("/v1/whoami?tenant=acme", headers=auth()).get_json()["tenant_matches"] is True
    other = client.get("/v1/whoami?tenant=acme", headers=auth("other-token")).get_json()
    assert (other["tenant"], other["tenant_matches"]) == ("other", False)


def test_whoami_without_or_with_a_wrong_token_is_401(client):
    for headers in ({}, auth("nope")):
        r = client.get("/v1/whoami", headers=headers)
        assert r.status_code == 401 and r.get_json()["error"]["code"] == "unauthorized"


def test_whoami_is_in_the_openapi_document(client):
    op = client.get("/openapi.json").get_json()["paths"]["/v1/whoami"]["get"]
    assert op["security"] == [{"bearer": []}]
    assert [p["name"] for p in op["parameters"]] == ["tenant"]
