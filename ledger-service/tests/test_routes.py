"""The route table (web/routing.py): /openapi.json is generated from it, and the roles it shows
are what each role can call: every route of the document, called with no token and with each
role's token against a real app, answers 401 / 403 forbidden exactly where the document says,
on the hot routes both without Flask and through it."""

import pytest

from conftest import auth
from durable_ledger.web.routing import ROUTES

TOKENS = {"runner": "runner-token", "editor": "editor-token", "approver": "approver-token", "admin": "admin-token"}
PARAMS = {"job_id": "j-roles", "operation_key": "k-roles", "approval_id": "1", "sha256": "a" * 64}


def _url(path):
    for name, value in PARAMS.items():
        path = path.replace("{" + name + "}", value)
    return path


def _forbidden(r):
    return r.status_code == 403 and (r.get_json() or {}).get("error", {}).get("code") == "forbidden"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_documents_roles_are_what_each_role_can_call(app, client):
    doc = client.get("/openapi.json").get_json()
    ops = [(path, method, op) for path, methods in doc["paths"].items() for method, op in methods.items()]
    assert len(ops) == len(ROUTES) >= 45
    hot = {r.path for r in ROUTES if r.hot}
    assert hot == {"/v1/operations/begin", "/v1/operations/batch", "/v1/operations/{operation_key}/confirm",
                   "/v1/operations/{operation_key}/outcome"}
    checked = 0
    for path, method, op in ops:
        roles = op["description"].removeprefix("Roles: ").removesuffix(".").split(", ")
        for query in ("", "?via=flask") if path in hot else ("",):
            url = _url(path) + query
            anonymous = client.open(url, method=method.upper(), json={})
            if roles == ["none"]:
                assert "security" not in op and anonymous.status_code != 401, (method, path)
                continue
            assert op["security"] == [{"bearer": []}]
            assert anonymous.status_code == 401, (method, path, anonymous.status_code)
            for role, token in TOKENS.items():
                r = client.open(url, method=method.upper(), json={}, headers=auth(token))
                may = role == "admin" or "any" in roles or role in roles
                assert _forbidden(r) != may, (method, url, role, roles, r.status_code, r.get_data(as_text=True)[:200])
                checked += 1
    assert checked >= 150


def test_every_route_is_declared_once():
    seen = [(r.method, r.rule) for r in ROUTES]
    assert len(seen) == len(set(seen))
