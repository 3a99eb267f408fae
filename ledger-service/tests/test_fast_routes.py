"""gate/fast_routes.py: plain begin / confirm / outcome requests are answered without Flask, with
the answers the Flask routes give; everything else reaches the Flask app. On both backends."""

import pytest

from conftest import auth


@pytest.fixture
def leased(client):
    assert client.put("/v1/jobs/j1", json={"pipeline": "generic"}, headers=auth()).status_code == 201
    r = client.post("/v1/jobs/j1/lease", json={"owner": "exec-1", "ttl_s": 60}, headers=auth())
    return r.get_json()["fencing_token"]


@pytest.fixture
def flask_calls(app):
    """Requests that reached the Flask app (the fast handler passed them on)."""
    calls, fallback = [], app.wsgi_app.fallback

    def counted(environ, start_response):
        calls.append((environ["REQUEST_METHOD"], environ["PATH_INFO"]))
        return fallback(environ, start_response)

    app.wsgi_app.fallback = counted
    return calls


def _strip(answer):
    """An answer without what differs between two operations (keys, ids, times)."""
    if isinstance(answer, dict):
        return {k: _strip(v) for k, v in answer.items()
                if k not in ("operation_key", "id", "created_at", "updated_at", "at")}
    if isinstance(answer, list):
        return [_strip(v) for v in answer]
    return answer


def _step(client, token, key, query=""):
    b = client.post(f"/v1/operations/begin{query}", headers={**auth(), "X-N8N-Execution-Id": "77"},
                    json={"job_id": "j1", "action": "send", "operation_key": key, "payload": {"title": "T"},
                          "fencing_token": token})
    c = client.post(f"/v1/operations/{key}/confirm{query}", headers={**auth(), "X-N8N-Execution-Id": "77"},
                    json={"fencing_token": token, "remote_id": 7, "receipt": {"link": "l"}})
    return b, c


def test_fast_routes_answer_as_flask_does(client, leased, flask_calls):
    fast = _step(client, leased, "k-fast")
    assert flask_calls == []
    slow = _step(client, leased, "k-slow", "?via=flask")  # a query string: Flask's route
    assert len(flask_calls) == 2
    for f, s in zip(fast, slow):
        assert (f.status_code, f.headers["Content-Type"]) == (s.status_code, s.headers["Content-Type"]) == (
            200, "application/json")
        assert _strip(f.get_json()) == _strip(s.get_json())
        assert sorted(f.headers.keys()) == sorted(s.headers.keys())
        assert f.data.endswith(b"\n") and b'": ' not in f.data  # compact, as jsonify writes it
    events = client.get("/v1/operations/k-fast", headers=auth()).get_json()["events"]
    assert [e["detail"].get("n8n", {}).get("execution_id") for e in events] == ["77", "77"]


def test_fast_routes_outcome_and_refusals(client, leased, flask_calls):
    client.post("/v1/operations/begin", headers=auth(),
                json={"job_id": "j1", "action": "send", "operation_key": "k1", "payload": {}, "fencing_token": leased})
    r = client.post("/v1/operations/k1/outcome", headers=auth(), json={"fencing_token": leased, "http_status": 400})
    assert r.status_code == 200 and r.get_json()["classification"] == "fail"
    r = client.post("/v1/operations/k1/confirm", headers=auth(), json={"fencing_token": leased - 1, "remote_id": 1})
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "stale_fencing_token"
    r = client.post("/v1/operations/k1/confirm", headers=auth("editor-token"), json={"fencing_token": leased,
                                                                                   "remote_id": 1})
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"
    r = client.post("/v1/operations/begin", json={"job_id": "j1", "action": "send", "payload": {}, "fencing_token": 1})
    assert r.status_code == 401 and r.get_json()["error"]["code"] == "unauthorized"
    assert flask_calls == []


def test_fast_routes_refuse_bad_bodies_as_flask_does(client, leased, flask_calls):
    for query in ("", "?via=flask"):
        r = client.post(f"/v1/operations/begin{query}", headers=auth(),
                        json={"job_id": "j1", "action": "a", "fencing_token": "1"})
        assert r.status_code == 422 and r.get_json()["error"] == {
            "code": "validation_error", "message": "request validation failed",
            "details": {"fields": {"fencing_token": ["Not a valid integer."]}}}
        r = client.post(f"/v1/operations/k1/confirm{query}", headers=auth(),
                        json={"fencing_token": leased, "remote_id": None})
        assert r.status_code == 422 and r.get_json()["error"]["details"] == {
            "fields": {"remote_id": ["Field may not be null."]}}
    assert len(flask_calls) == 2  # the two with a query string


def test_fast_routes_pass_other_requests_to_flask(client, leased, flask_calls):
    r = client.post("/v1/operations/begin", headers=auth(), data="job_id=j1",
                    content_type="application/x-www-form-urlencoded")
    assert r.status_code == 415
    r = client.put("/v1/operations/begin", headers=auth(), json={})
    assert r.status_code == 405
    r = client.post("/v1/operations/clé/confirm", headers=auth(), json={"fencing_token": leased, "remote_id": 1})
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "operation_not_found"
    assert len(flask_calls) == 3


def test_fast_routes_batch_answers_as_flask_does(client, leased, flask_calls):
    def batch(prefix, query=""):
        begins = [{"job_id": "j1", "action": "send", "operation_key": f"{prefix}-{i}", "payload": {"i": i},
                   "fencing_token": leased} for i in range(3)]
        begins.append({"job_id": "j1", "action": "send", "operation_key": f"{prefix}-0", "payload": {"i": 9},
                       "fencing_token": leased})  # the same key, another payload: its own slot's refusal
        first = client.post(f"/v1/operations/batch{query}", headers=auth(), json={"begin": begins})
        confirms = [{"operation_key": f"{prefix}-{i}", "fencing_token": leased, "remote_id": i} for i in range(3)]
        confirms.append({"operation_key": f"{prefix}-0", "fencing_token": leased - 1, "remote_id": 1})
        second = client.post(f"/v1/operations/batch{query}", headers=auth(), json={"confirm": confirms})
        return first, second

    fast = batch("f")
    assert flask_calls == []
    slow = batch("s", "?via=flask")
    assert len(flask_calls) == 2
    for f, s in zip(fast, slow):
        assert f.status_code == s.status_code == 200
        assert _strip(f.get_json()) == _strip(s.get_json())
    r = client.post("/v1/operations/batch", headers=auth(), json={"confirm": [{"operation_key": None}]})
    assert r.status_code == 422 and len(flask_calls) == 2
