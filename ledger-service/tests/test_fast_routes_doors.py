"""Attacks on gate/fast_routes.py: for odd-but-valid HTTP, other tenants, stale workers, wrong
roles and bad tokens, the fast handler answers exactly as the Flask routes do (status, JSON,
headers) and writes exactly what they write (operations, events, audit rows). On both backends;
the HTTP-level cases also through `durable-ledger serve` (waitress), with raw sockets."""

import json
import socket

import pytest

from conftest import TOKENS, auth
from durable_ledger.auth import create_token, revoke_token
from durable_ledger.store.db import db
from durable_ledger.store.models import AuditLog, Operation, OperationEvent
from servers import LedgerServer

HEADERS_COMPARED = ("Content-Type", "Content-Length", "Allow", "WWW-Authenticate", "Location", "Set-Cookie", "Vary")


def _rows():
    with db.connection_context():
        return (
            Operation.select().count(),
            OperationEvent.select().count(),
            AuditLog.select().count(),
            Operation.select().where(Operation.state != "PENDING").count(),
        )


@pytest.fixture
def world(app, client):
    """j1 (acme) leased, k1 begun under its token; the token before it is stale; o1 is another tenant's."""
    assert client.put("/v1/jobs/j1", json={"pipeline": "generic"}, headers=auth()).status_code == 201
    client.post("/v1/jobs/j1/lease", json={"owner": "old", "ttl_s": 60}, headers=auth())
    token = client.post(
        "/v1/jobs/j1/lease", json={"owner": "new", "ttl_s": 60, "takeover": True}, headers=auth()
    ).get_json()["fencing_token"]
    for key in ("k1", "k2"):
        r = client.post("/v1/operations/begin", headers=auth(), json=_begin(token, key))
        assert r.get_json()["decision"] == "dispatch"
    assert client.put("/v1/jobs/o1", json={"pipeline": "generic"}, headers=auth("other-token")).status_code == 201
    with db.connection_context():
        revoke_token(create_token("acme", "runner", raw="revoked-token"))
    return {"token": token, "stale": token - 1}


def both(app, client, path, method="POST", warm=False, **kw):
    """The request through the fast handler, then through Flask alone, on the same state: the two
    answers and what each wrote, and whether the fast handler passed the first one on. ``warm``:
    Flask answers it once before, for a request whose first refusal writes more than the next
    ones (a stale confirm keeps its receipt the first time: test_first_stale_receipt_...)."""
    fast_gate, passed = app.wsgi_app, []
    if warm:
        app.wsgi_app = fast_gate.fallback
        try:
            client.open(path, method=method, **kw)
        finally:
            app.wsgi_app = fast_gate

    def fallback(environ, start_response):
        passed.append(environ["PATH_INFO"])
        return fast_gate.fallback(environ, start_response)

    before = _rows()
    app.wsgi_app = type(fast_gate)(app, fallback)
    try:
        fast = client.open(path, method=method, **kw)
        middle = _rows()
        app.wsgi_app = fast_gate.fallback
        slow = client.open(path, method=method, **kw)
    finally:
        app.wsgi_app = fast_gate
    after = _rows()
    return fast, slow, [m - b for m, b in zip(middle, before)], [a - m for a, m in zip(after, middle)], bool(passed)


def assert_same(fast, slow, wrote_fast, wrote_slow):
    assert fast.status == slow.status
    assert fast.data == slow.data
    for name in HEADERS_COMPARED:
        assert fast.headers.get(name) == slow.headers.get(name), name
    assert wrote_fast == wrote_slow


def _begin(token, key="k1", **extra):
    return {"job_id": "j1", "action": "send", "operation_key": key, "fencing_token": token, "payload": {}, **extra}


# (name, path, request keyword arguments built from the world's tokens)
WHO = [
    ("no-token", "/v1/operations/k1/confirm", lambda w: {"json": {"fencing_token": w["token"], "remote_id": 1}}),
    (
        "unknown-token",
        "/v1/operations/k1/confirm",
        lambda w: {"json": {"fencing_token": w["token"], "remote_id": 1}, "headers": auth("nobody")},
    ),
    (
        "revoked-token",
        "/v1/operations/k1/confirm",
        lambda w: {"json": {"fencing_token": w["token"], "remote_id": 1}, "headers": auth("revoked-token")},
    ),
    (
        "editor",
        "/v1/operations/k1/confirm",
        lambda w: {"json": {"fencing_token": w["token"], "remote_id": 1}, "headers": auth("editor-token")},
    ),
    (
        "approver-begin",
        "/v1/operations/begin",
        lambda w: {"json": _begin(w["token"], "k-new"), "headers": auth("approver-token")},
    ),
    (
        "approver-batch",
        "/v1/operations/batch",
        lambda w: {
            "json": {"confirm": [{"operation_key": "k1", "fencing_token": w["token"], "remote_id": 1}]},
            "headers": auth("approver-token"),
        },
    ),
    (
        "other-tenant-confirm",
        "/v1/operations/k1/confirm",
        lambda w: {"json": {"fencing_token": w["token"], "remote_id": 1}, "headers": auth("other-token")},
    ),
    (
        "other-tenant-outcome",
        "/v1/operations/k1/outcome",
        lambda w: {
            "json": {"fencing_token": w["token"], "http_status": 201, "remote_id": 1},
            "headers": auth("other-token"),
        },
    ),
    (
        "other-tenant-begin",
        "/v1/operations/begin",
        lambda w: {"json": _begin(w["token"], "k-new"), "headers": auth("other-token")},
    ),
    (
        "other-tenant-begin-existing",
        "/v1/operations/begin",
        lambda w: {"json": _begin(w["token"]), "headers": auth("other-token")},
    ),
    (
        "other-tenant-batch",
        "/v1/operations/batch",
        lambda w: {
            "json": {
                "confirm": [{"operation_key": "k1", "fencing_token": w["token"], "remote_id": 1}],
                "begin": [_begin(w["token"], "k-new")],
            },
            "headers": auth("other-token"),
        },
    ),
    (
        "stale-confirm",
        "/v1/operations/k1/confirm",
        lambda w: {"json": {"fencing_token": w["stale"], "remote_id": 1}, "headers": auth()},
    ),
    (
        "stale-outcome",
        "/v1/operations/k1/outcome",
        lambda w: {"json": {"fencing_token": w["stale"], "http_status": 201}, "headers": auth()},
    ),
    ("stale-begin", "/v1/operations/begin", lambda w: {"json": _begin(w["stale"], "k-new"), "headers": auth()}),
    (
        "stale-batch",
        "/v1/operations/batch",
        lambda w: {
            "json": {
                "confirm": [{"operation_key": "k1", "fencing_token": w["stale"], "remote_id": 1}],
                "begin": [_begin(w["stale"], "k-new")],
            },
            "headers": auth(),
        },
    ),
    (
        "future-token",
        "/v1/operations/k1/confirm",
        lambda w: {"json": {"fencing_token": w["token"] + 5, "remote_id": 1}, "headers": auth()},
    ),
    (
        "unknown-key",
        "/v1/operations/nope/confirm",
        lambda w: {"json": {"fencing_token": w["token"], "remote_id": 1}, "headers": auth()},
    ),
]


def test_who_may_not(app, client, world):
    """Each case on the same world (one per backend, to keep the file fast); every difference listed."""
    differ = []
    for name, path, make in WHO:
        fast, slow, wrote_fast, wrote_slow, _ = both(app, client, path, warm=name.startswith("stale"), **make(world))
        try:
            assert_same(fast, slow, wrote_fast, wrote_slow)
            assert fast.status_code >= 400 or name.endswith("batch")
            assert wrote_fast[0] == wrote_fast[3] == 0  # nothing begun, nothing moved past PENDING
            if fast.status_code == 200:
                assert all("error" in slot for slots in fast.get_json().values() for slot in slots)
        except AssertionError as exc:
            differ.append((name, str(exc)[:300]))
    assert differ == []


def _stale_confirm(world, **kw):
    return {"json": {"fencing_token": world["stale"], "remote_id": 1}, **kw}


def _stale_body(world):
    return json.dumps({"fencing_token": world["stale"], "remote_id": 1})


def _raw(world, data, content_type="application/json", **kw):
    return {"data": data, "content_type": content_type, "headers": auth(), **kw}


T = "__TOKEN__"  # replaced by the world's current token in raw bodies
# Requests whose answer is a refusal (so the same request twice sees the same state).
ODD = [
    (
        "bearer-lowercase",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(w, headers={"Authorization": "bearer runner-token"}),
    ),
    (
        "bearer-uppercase",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(w, headers={"Authorization": "BEARER runner-token"}),
    ),
    (
        "bearer-two-spaces",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(w, headers={"Authorization": "Bearer  runner-token"}),
    ),
    (
        "bearer-trailing-space",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(w, headers={"Authorization": "Bearer runner-token  "}),
    ),
    (
        "bearer-tab",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(w, headers={"Authorization": "Bearer\trunner-token"}),
    ),
    ("bearer-empty", "/v1/operations/k1/confirm", lambda w: _stale_confirm(w, headers={"Authorization": "Bearer "})),
    (
        "basic",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(w, headers={"Authorization": "Basic cnVubmVyOng="}),
    ),
    (
        "two-authorizations",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(
            w, headers=[("Authorization", "Bearer other-token"), ("Authorization", "Bearer runner-token")]
        ),
    ),
    (
        "no-content-type",
        "/v1/operations/k1/confirm",
        lambda w: {"data": json.dumps({"fencing_token": w["stale"], "remote_id": 1}), "headers": auth()},
    ),
    (
        "charset",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}), "application/json; charset=utf-8"),
    ),
    (
        "latin1-charset",
        "/v1/operations/k1/confirm",
        lambda w: _raw(
            w, json.dumps({"fencing_token": w["stale"], "remote_id": "é"}).encode(), "application/json; charset=latin-1"
        ),
    ),
    (
        "uppercase-type",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}), "APPLICATION/JSON"),
    ),
    (
        "plus-json",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}), "application/vnd.x+json"),
    ),
    (
        "text-plain",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}), "text/plain"),
    ),
    (
        "form",
        "/v1/operations/begin",
        lambda w: _raw(w, "job_id=j1&fencing_token=1", "application/x-www-form-urlencoded"),
    ),
    (
        "length-superscript",
        "/v1/operations/k1/confirm",
        lambda w: _raw(
            w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}), environ_overrides={"CONTENT_LENGTH": "\u00b2"}
        ),
    ),
    (
        "length-fullwidth",
        "/v1/operations/k1/confirm",
        lambda w: _raw(
            w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}), environ_overrides={"CONTENT_LENGTH": "\uff19"}
        ),
    ),
    (
        "length-short",
        "/v1/operations/k1/confirm",
        lambda w: _raw(
            w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}), environ_overrides={"CONTENT_LENGTH": "10"}
        ),
    ),
    (
        "length-zero",
        "/v1/operations/k1/confirm",
        lambda w: _raw(
            w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}), environ_overrides={"CONTENT_LENGTH": "0"}
        ),
    ),
    (
        "length-padded",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, _stale_body(w), environ_overrides={"CONTENT_LENGTH": f"000{len(_stale_body(w))}"}),
    ),
    # A server whose wsgi.input ends before Content-Length: Werkzeug answers 400, whatever the bytes say.
    (
        "length-longer-than-body",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, _stale_body(w), environ_overrides={"CONTENT_LENGTH": str(len(_stale_body(w)) + 5)}),
    ),
    (
        "length-over-limit",
        "/v1/operations/k1/confirm",
        lambda w: _raw(
            w,
            json.dumps({"fencing_token": w["stale"], "remote_id": 1}),
            environ_overrides={"CONTENT_LENGTH": "99999999"},
        ),
    ),
    (
        "chunked",
        "/v1/operations/k1/confirm",
        lambda w: _raw(
            w,
            json.dumps({"fencing_token": w["stale"], "remote_id": 1}),
            environ_overrides={"HTTP_TRANSFER_ENCODING": "chunked"},
        ),
    ),
    (
        "body-over-limit",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, json.dumps({"fencing_token": w["stale"], "remote_id": 1, "receipt": {"x": "a" * (2 << 20)}})),
    ),
    (
        "receipt-over-limit",
        "/v1/operations/k1/confirm",
        lambda w: _raw(
            w, json.dumps({"fencing_token": w["token"], "remote_id": 1, "receipt": {"x": "a" * (300 << 10)}})
        ),
    ),
    ("invalid-utf8", "/v1/operations/k1/confirm", lambda w: _raw(w, b'{"fencing_token": 1, "remote_id": "\xff"}')),
    (
        "utf8-bom",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, b"\xef\xbb\xbf" + json.dumps({"fencing_token": w["stale"], "remote_id": 1}).encode()),
    ),
    (
        "utf16",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, json.dumps({"fencing_token": w["stale"], "remote_id": 1}).encode("utf-16")),
    ),
    (
        "duplicate-keys-stale-last",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, f'{{"fencing_token": {w["token"]}, "remote_id": 1, "fencing_token": {w["stale"]}}}'),
    ),
    (
        "duplicate-keys-null-last",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, f'{{"fencing_token": {w["token"]}, "remote_id": 1, "remote_id": null}}'),
    ),
    (
        "nan",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, f'{{"fencing_token": {w["token"]}, "remote_id": 1, "cost": NaN}}'),
    ),
    (
        "infinity",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, f'{{"fencing_token": {w["token"]}, "remote_id": 1, "cost": Infinity}}'),
    ),
    (
        "overflow-float",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, f'{{"fencing_token": {w["token"]}, "remote_id": 1, "cost": 1e400}}'),
    ),
    (
        "huge-int",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, f'{{"fencing_token": {w["token"]}, "remote_id": {10**30}}}'),
    ),
    (
        "token-as-float",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, f'{{"fencing_token": {w["token"]}.0, "remote_id": 1}}'),
    ),
    ("token-as-bool", "/v1/operations/k1/confirm", lambda w: _raw(w, '{"fencing_token": true, "remote_id": 1}')),
    (
        "token-as-string",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, f'{{"fencing_token": "{w["token"]}", "remote_id": 1}}'),
    ),
    ("token-int64", "/v1/operations/k1/confirm", lambda w: _raw(w, f'{{"fencing_token": {2**40}, "remote_id": 1}}')),
    (
        "deep-payload",
        "/v1/operations/begin",
        lambda w: _raw(
            w, '{"job_id": "j1", "action": "a", "fencing_token": 1, "payload": ' + "[" * 70 + "]" * 70 + "}"
        ),
    ),
    ("nul-in-key", "/v1/operations/begin", lambda w: _raw(w, json.dumps(_begin(w["token"], "k\u0000x")))),
    (
        "surrogate",
        "/v1/operations/begin",
        lambda w: _raw(w, json.dumps(_begin(w["token"], "k-s", payload={"x": "\ud800"}))),
    ),
    ("array-body", "/v1/operations/k1/confirm", lambda w: _raw(w, "[]")),
    ("string-body", "/v1/operations/k1/confirm", lambda w: _raw(w, '"x"')),
    ("null-body", "/v1/operations/k1/confirm", lambda w: _raw(w, "null")),
    ("empty-object", "/v1/operations/k1/confirm", lambda w: _raw(w, "{}")),
    ("whitespace-body", "/v1/operations/k1/confirm", lambda w: _raw(w, "   ")),
    (
        "unknown-field",
        "/v1/operations/k1/confirm",
        lambda w: _raw(w, json.dumps({"fencing_token": w["token"], "remote_id": 1, "tenant": "other"})),
    ),
    (
        "request-hash-newline",
        "/v1/operations/begin",
        lambda w: _raw(w, json.dumps(_begin(w["stale"], "k-h", request_hash="a" * 64 + "\n"))),
    ),
    (
        "batch-101",
        "/v1/operations/batch",
        lambda w: _raw(w, json.dumps({"begin": [_begin(w["stale"], f"b{i}") for i in range(101)]})),
    ),
    ("batch-null-list", "/v1/operations/batch", lambda w: _raw(w, '{"confirm": null}')),
    (
        "outcome-status-string",
        "/v1/operations/k1/outcome",
        lambda w: _raw(w, json.dumps({"fencing_token": w["stale"], "http_status": "201"})),
    ),
    (
        "outcome-status-bool",
        "/v1/operations/k1/outcome",
        lambda w: _raw(w, json.dumps({"fencing_token": w["stale"], "http_status": True})),
    ),
    ("encoded-slash-key", "/v1/operations/k1%2Fx/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("encoded-slash-leading", "/v1/operations/%2Fk1/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("dot-segment", "/v1/operations/./k1/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("dotdot-segment", "/v1/operations/x/../k1/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("double-slash", "/v1/operations//k1/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("trailing-slash", "/v1/operations/k1/confirm/", lambda w: _stale_confirm(w, headers=auth())),
    ("begin-trailing-slash", "/v1/operations/begin/", lambda w: {"json": _begin(w["stale"], "k-t"), "headers": auth()}),
    ("leading-double-slash", "//v1/operations/begin", lambda w: {"json": _begin(w["stale"], "k-t"), "headers": auth()}),
    ("query-string", "/v1/operations/k1/confirm?x=1", lambda w: _stale_confirm(w, headers=auth())),
    ("empty-query", "/v1/operations/k1/confirm?", lambda w: _stale_confirm(w, headers=auth())),
    ("unicode-key", "/v1/operations/cl\u00e9/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("space-key", "/v1/operations/a%20b/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("trailing-space-key", "/v1/operations/k1%20/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("control-key", "/v1/operations/k%01/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("nested-verbs", "/v1/operations/k1/outcome/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("key-named-begin", "/v1/operations/begin/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("empty-key", "/v1/operations//confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("long-key", "/v1/operations/" + "k" * 513 + "/confirm", lambda w: _stale_confirm(w, headers=auth())),
    ("case-path", "/v1/Operations/begin", lambda w: {"json": _begin(w["stale"], "k-t"), "headers": auth()}),
    (
        "n8n-headers",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(
            w, headers={**auth(), "X-N8N-Execution-Id": "e" * 5000, "X-N8N-Workflow-Id": "w\u0001"}
        ),
    ),
    (
        "request-id-traceparent",
        "/v1/operations/k1/confirm",
        lambda w: _stale_confirm(
            w,
            headers={
                **auth(),
                "X-Request-Id": "r-1",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            },
        ),
    ),
]


def test_odd_requests_answered_as_flask_does(app, client, world):
    differ = []
    for name, path, make in ODD:
        fast, slow, wrote_fast, wrote_slow, _ = both(app, client, path, warm=True, **make(world))
        try:
            assert_same(fast, slow, wrote_fast, wrote_slow)
            assert fast.status_code >= 400 and wrote_fast[3] == 0
        except AssertionError as exc:
            differ.append((name, str(exc)[:300]))
    assert differ == []


def test_other_methods(app, client, world):
    for method in ("HEAD", "OPTIONS", "GET", "PUT", "PATCH", "DELETE"):
        fast, slow, wrote_fast, wrote_slow, passed = both(
            app,
            client,
            "/v1/operations/k1/confirm",
            method=method,
            json={"fencing_token": world["token"], "remote_id": 1},
            headers=auth(),
        )
        assert passed and wrote_fast == wrote_slow, method
        assert_same(fast, slow, wrote_fast, wrote_slow)


def _audit(since):
    with db.connection_context():
        rows = AuditLog.select().where(AuditLog.id > since).order_by(AuditLog.id)
        return [(r.action, _strip(r.detail)) for r in rows]


def test_first_stale_receipt_is_kept_as_flask_does(app, client, world):
    """A stale worker's first receipt is kept (an audit row) and refused: the same rows either way."""
    _first_stale(client, world, "confirm", {"remote_id": 9, "receipt": {"l": 1}}, ("k1", "k2"))
    client.post("/v1/operations/begin", headers=auth(), json=_begin(world["token"], "k3"))
    client.post("/v1/operations/begin", headers=auth(), json=_begin(world["token"], "k4"))
    _first_stale(client, world, "outcome", {"http_status": 201, "remote_id": 9}, ("k3", "k4"))


def _first_stale(client, world, verb, body, keys):
    with db.connection_context():
        start = AuditLog.select().count() and max(r.id for r in AuditLog.select())
    answers = []
    for key, via in zip(keys, ("", "?via=flask")):
        r = client.post(
            f"/v1/operations/{key}/{verb}{via}", headers=auth(), json={"fencing_token": world["stale"], **body}
        )
        answers.append((r.status_code, _strip(r.get_json())))
    assert answers[0] == answers[1] and answers[0][0] == 409
    rows = _audit(start)
    assert len(rows) == 4 and rows[:2] == rows[2:]


# Requests that succeed: each side gets its own key, the answers are compared without keys and times.
def _strip(answer):
    if isinstance(answer, dict):
        return {
            k: _strip(v)
            for k, v in answer.items()
            if k not in ("operation_key", "id", "created_at", "updated_at", "at", "remote_id", "path")
        }
    if isinstance(answer, list):
        return [_strip(v) for v in answer]
    return answer


GOOD = [
    ("bearer-lowercase", {"Authorization": "bearer runner-token"}, "application/json"),
    ("bearer-padded", {"Authorization": "Bearer   runner-token \t"}, "application/json"),
    ("charset", auth(), "application/json; charset=utf-8"),
    ("uppercase-type", auth(), "Application/JSON ; Charset=UTF-8"),
    ("n8n", {**auth(), "X-N8N-Execution-Id": "ex-9", "X-N8N-Workflow-Id": "wf-1"}, "application/json"),
]


def test_odd_but_valid_requests_succeed_as_in_flask(app, client, world):
    for name, headers, ctype in GOOD:
        answers = []
        for side, via in (("f", ""), ("s", "?via=flask")):
            key = f"g-{name}-{side}"
            b = client.post(
                f"/v1/operations/begin{via}",
                headers=headers,
                content_type=ctype,
                data=json.dumps(_begin(world["token"], key, payload={"t": 1})),
            )
            c = client.post(
                f"/v1/operations/{key}/outcome{via}",
                headers=headers,
                content_type=ctype,
                data=json.dumps({"fencing_token": world["token"], "http_status": 201, "remote_id": 5}),
            )
            events = client.get(f"/v1/operations/{key}", headers=auth()).get_json()["events"]
            answers.append([(r.status_code, _strip(r.get_json())) for r in (b, c)] + [_strip(events)])
        assert answers[0] == answers[1], name
        assert answers[0][1][0] == 200, name


def _http(port, raw):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = sorted(line.split(":", 1)[0].lower() for line in lines[1:])
    return lines[0], [h for h in headers if h != "date"], body


def _request(path, body, *header_lines, length=None):
    body = body if isinstance(body, bytes) else body.encode()
    lines = [f"POST {path} HTTP/1.1", "Host: x", "Connection: close", *header_lines]
    if length is not False:
        lines.append(f"Content-Length: {len(body) if length is None else length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # HTTP framing: the backend plays no part
def test_serve_raw_requests_answer_as_flask_does(database, tmp_path):
    """Each raw request twice: as sent (the fast handler's if plain) and with a query string
    (always Flask's route); the same status line, header names and body."""
    with LedgerServer(database, TOKENS, workers=1, threads=2, log_path=tmp_path / "ledger.log") as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        h = "Authorization: Bearer runner-token"
        _http(
            port,
            _request("/v1/jobs/r1", '{"pipeline": "generic"}', h, "Content-Type: application/json").replace(
                b"POST", b"PUT", 1
            ),
        )
        token = json.loads(
            _http(port, _request("/v1/jobs/r1/lease", '{"owner": "a"}', h, "Content-Type: application/json"))[2]
        )["fencing_token"]
        _http(
            port,
            _request(
                "/v1/operations/begin",
                json.dumps(_begin(token).__or__({"job_id": "r1"})),
                h,
                "Content-Type: application/json",
            ),
        )
        stale = json.dumps({"fencing_token": token - 1, "remote_id": 1})
        cases = [
            ("/v1/operations/k1/confirm", stale, (h, "Content-Type: application/json"), None),
            (
                "/v1/operations/k1/confirm",
                stale,
                ("authorization:   bearer runner-token  ", "content-type: APPLICATION/JSON"),
                None,
            ),
            (
                "/v1/operations/k1/confirm",
                stale,
                ("Authorization: Bearer other-token", h, "Content-Type: application/json"),
                None,
            ),
            ("/v1/operations/k1/confirm", stale, ("Content-Type: application/json",), None),
            ("/v1/operations/k1/confirm", stale, (h, "Content-Type: application/json; charset=utf-8"), None),
            ("/v1/operations/k1/confirm", stale, (h,), None),
            (
                "/v1/operations/k1/confirm",
                stale,
                (h, "Content-Type: application/json", "Transfer-Encoding: chunked"),
                False,
            ),
            (
                "/v1/operations/k1/confirm",
                b'{"fencing_token": 1, "remote_id": "\xff"}',
                (h, "Content-Type: application/json"),
                None,
            ),
            ("/v1/operations/k1/confirm", stale, (h, "Content-Type: application/json"), len(stale) - 3),
            ("/v1/operations/k1%2Fx/confirm", stale, (h, "Content-Type: application/json"), None),
            ("/v1/operations/%2Fk1/confirm", stale, (h, "Content-Type: application/json"), None),
            ("/v1/operations/./k1/confirm", stale, (h, "Content-Type: application/json"), None),
            ("/v1/operations/k1/confirm/", stale, (h, "Content-Type: application/json"), None),
            ("/v1/operations/cl%C3%A9/confirm", stale, (h, "Content-Type: application/json"), None),
            ("/v1/operations/k%FF/confirm", stale, (h, "Content-Type: application/json"), None),
            (
                "/v1/operations/k1/confirm",
                stale,
                ("Authorization: Bearer editor-token", "Content-Type: application/json"),
                None,
            ),
            (
                "/v1/operations/k1/confirm",
                stale,
                ("Authorization: Bearer other-token", "Content-Type: application/json"),
                None,
            ),
        ]
        for path, body, lines, length in cases:
            if length is False:
                chunked = f"{len(body):x}\r\n{body}\r\n0\r\n\r\n"
                raw = (
                    _request(path, chunked, *lines, length=False),
                    _request(path + "?via=flask", chunked, *lines, length=False),
                )
            else:
                raw = (
                    _request(path, body, *lines, length=length),
                    _request(path + "?via=flask", body, *lines, length=length),
                )
            fast, slow = _http(port, raw[0]), _http(port, raw[1])
            assert fast == slow, (path, lines, fast, slow)


def test_tracing_on_a_hot_request_takes_the_same_code(app, client, world, exporter):
    """With a tracer the hot routes still answer (the code that answers with tracing off), inside
    a request span whose parent is the caller's traceparent, with the gate's span under it."""
    from opentelemetry.trace import SpanKind

    taken, fallback = [], app.wsgi_app.fallback
    app.wsgi_app.fallback = lambda environ, start_response: taken.append(environ["PATH_INFO"]) or fallback(
        environ, start_response)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = client.post("/v1/operations/begin", headers={**auth(), "traceparent": parent, "X-N8N-Execution-Id": "9"},
                    json={"job_id": "j1", "action": "traced", "payload": {}, "fencing_token": world["token"]})
    assert r.status_code == 200 and taken == []
    spans = {s.name: s for s in exporter.get_finished_spans()}
    server, gate = spans["POST /v1/operations/begin"], spans["durable.gate"]
    assert server.kind == SpanKind.SERVER and server.parent.is_remote
    assert f"{server.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert gate.parent.span_id == server.context.span_id and server.attributes["n8n.execution.id"] == "9"
    assert server.attributes["http.route"] == "/v1/operations/begin"


@pytest.fixture
def exporter():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from durable_ledger.web import tracing

    exp, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    tracing.use(provider)
    tracing.tracer = provider.get_tracer("test")
    yield exp
    tracing.reset()
    provider.shutdown()


ROUTED = [
    "/v1/operations/begin",
    "/v1/operations/batch",
    "/v1/operations/a/b/confirm",
    "/v1/operations/a/fail/outcome",
    "/v1/operations/begin/confirm",
    "/v1/operations/batch/outcome",
    "/v1/operations/x/lookup-result/confirm",
    "/v1/operations/a b/confirm",
    "/v1/operations/a%2Fb/confirm",
    "/v1/operations/a;b/confirm",
    "/v1/operations/-/outcome",
    "/v1/operations/k/approve/confirm",
    "/v1/operations/" + "k" * 512 + "/confirm",
]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_hot_path_is_the_route_flask_would_pick(app):
    """Where the fast handler takes a path, Werkzeug's map picks that route with that key."""
    from durable_ledger.gate import fast_routes

    adapter = app.url_map.bind("localhost")
    for path in ROUTED:
        route, args = fast_routes._route(path)
        endpoint, flask_args = adapter.match(path, "POST")
        assert (f"operations.{route.view.__name__}", args) == (endpoint, flask_args), path
