"""The generic HTTP reconciler (reconciliation/http_lookup.py) against the answers real lookup
endpoints give (HTTP mocked with `responses`): a verdict only from an answer that proves it
(issue 35). The cross-component run with a real lookup server is tests/acceptance."""

from types import SimpleNamespace

import pytest
import requests
import responses

from durable_ledger.reconciliation.http_lookup import HttpLookupReconciler
from durable_ledger.reconciliation.verdicts import Absent, Found, ReconcilerError, Undecidable

URL = "http://crm.test/lookup"
KEY = "acme:j1:v1:notify"
OP = SimpleNamespace(operation_key=KEY, job=SimpleNamespace(job_id="j1"), tenant="acme", target="crm:x",
                     action="notify", request_summary={})
MINE = {"id": "r-1", "operation_key": KEY, "amount": 5}
OTHER = {"id": "r-9", "operation_key": "acme:j2:v1:notify", "amount": 7}
HTML = "<!doctype html><html><head><title>Error</title></head><body><h1>Something went wrong</h1></body></html>"


def lookup(body=None, status=200, content_type="application/json", text=None, error=None):
    rec = HttpLookupReconciler(URL + "?key={key}")
    with responses.RequestsMock() as mock:
        if error is not None:
            mock.get(URL, body=error)
        elif text is not None:
            mock.get(URL, body=text, status=status, content_type=content_type)
        else:
            mock.get(URL, json=body, status=status)
        verdict = rec.lookup(OP)
        assert mock.calls[0].request.url == f"{URL}?key=acme%3Aj1%3Av1%3Anotify"
    return verdict


# -------------------------------------------------------------------------------- the protocol


def test_http_lookup_found_names_the_key_and_an_id():
    v = lookup({"found": True, "operation_key": KEY, "remote_id": "r-1", "receipt": {"row": 1}})
    assert isinstance(v, Found) and (v.remote_id, v.receipt) == ("r-1", {"row": 1})
    assert isinstance(lookup({"found": True, "operation_key": KEY, "remote_id": 17}), Found)


@pytest.mark.parametrize("definitive, expected", [(True, True), (False, False), (None, False), ("yes", False),
                                                  (1, False)])
def test_http_lookup_absent_is_found_false_for_this_key(definitive, expected):
    body = {"found": False, "operation_key": KEY, **({} if definitive is None else {"definitive": definitive})}
    v = lookup(body)
    assert isinstance(v, Absent) and v.definitive is expected


@pytest.mark.parametrize("body", [
    {"found": True, "remote_id": "r-1"},  # the old protocol: does not name the key it answers for
    {"found": False, "definitive": True},
    {"found": True, "operation_key": "acme:j2:v1:notify", "remote_id": "r-9"},  # another key's object
    {"found": False, "operation_key": "acme:j2:v1:notify", "definitive": True},
    {"found": True, "operation_key": KEY},  # no id
    {"found": True, "operation_key": KEY, "remote_id": ""},
    {"found": True, "operation_key": KEY, "remote_id": None},
    {"found": True, "operation_key": KEY, "remote_id": True},
    {"found": True, "operation_key": KEY, "remote_id": {"id": 1}},
    {"found": "true", "operation_key": KEY, "remote_id": "r-1"},  # not the JSON boolean
    {"found": 1, "operation_key": KEY, "remote_id": "r-1"},
    {"found": "false", "operation_key": KEY, "definitive": True},
    {"found": 0, "operation_key": KEY, "definitive": True},
    {"found": None, "operation_key": KEY},
    {"operation_key": KEY, "definitive": True},  # found missing: a default is not a verdict
], ids=lambda b: str(b)[:60])
def test_http_lookup_a_protocol_answer_without_proof_is_undecidable(body):
    v = lookup(body)
    assert isinstance(v, Undecidable), v
    assert v.evidence["status"] == 200 and v.evidence["detail"].endswith("proof of nothing")


# ------------------------------------------------------ real API shapes, with and without ours


SHAPES = {
    "plain object": lambda objs: objs[0] if objs else {},
    "bare list": lambda objs: objs,
    "wrapped data": lambda objs: {"data": objs},
    "wrapped results": lambda objs: {"results": objs, "count": len(objs)},
    "wrapped items": lambda objs: {"items": objs, "total": len(objs)},
    "stripe list": lambda objs: {"object": "list", "url": "/v1/charges/search", "data": objs, "has_more": False},
    "paginated": lambda objs: {"data": objs[:1], "page": 1, "per_page": 1, "total": len(objs),
                               "next": "http://crm.test/lookup?page=2"},
    "filter ignored": lambda objs: {"data": [OTHER, *objs, {**OTHER, "id": "r-10"}]},
    "error object": lambda objs: {"error": {"code": "rate_limited", "message": "slow down"}},
    "error with found": lambda objs: {"found": False, "operation_key": KEY, "definitive": True,
                                      "error": {"code": "db_down"}},
}


@pytest.mark.parametrize("present", [True, False], ids=["present", "missing"])
@pytest.mark.parametrize("shape", SHAPES)
def test_http_lookup_other_shapes_never_give_a_verdict(shape, present):
    body = SHAPES[shape]([MINE] if present else [])
    v = lookup(body)
    assert isinstance(v, Undecidable), (shape, v)
    assert not isinstance(v, (Found, Absent))
    assert v.evidence["lookup"] == f"{URL}?key=acme%3Aj1%3Av1%3Anotify" and v.evidence["status"] == 200
    assert v.evidence["body"].startswith(("{", "["))  # the answer is kept for the editor


@pytest.mark.parametrize("text, content_type", [(HTML, "text/html"), ("OK", "text/plain"), ("", "text/plain"),
                                                ("{\"found\": true,", "application/json"), ("null", "application/json"),
                                                ("true", "application/json"), ("\"found\"", "application/json")])
def test_http_lookup_a_200_that_is_not_a_json_object_is_undecidable_with_the_answer_kept(text, content_type):
    v = lookup(text=text, content_type=content_type)
    assert isinstance(v, Undecidable)
    assert (v.evidence["status"], v.evidence["content_type"], v.evidence["body"]) == (200, content_type, text)
    assert "not a JSON object" in v.evidence["detail"]


def test_http_lookup_keeps_the_first_500_characters_of_a_long_page():
    page = "<html>" + "x" * 5000
    v = lookup(text=page, content_type="text/html")
    assert isinstance(v, Undecidable) and v.evidence["body"] == page[:500]


@pytest.mark.parametrize("text, content_type", [("", "application/json"), ('{"found": false}', "application/json"),
                                                ('{"error": "not_found"}', "application/json")])
def test_http_lookup_404_from_the_lookup_is_absent_not_definitive(text, content_type):
    v = lookup(text=text, status=404, content_type=content_type)
    assert isinstance(v, Absent) and v.definitive is False and v.evidence["status"] == 404


@pytest.mark.parametrize("text", [HTML, "Not Found"])
def test_http_lookup_404_page_is_not_proof(text):
    v = lookup(text=text, status=404, content_type="text/html")
    assert isinstance(v, Undecidable) and v.evidence["body"] == text and "not JSON" in v.evidence["detail"]


@pytest.mark.parametrize("status", [500, 502, 503, 429, 401, 403, 400, 409, 410])
@pytest.mark.parametrize("text, content_type", [(HTML, "text/html"), ('{"found": false, "operation_key": "%s", '
                                                                      '"definitive": true}' % KEY, "application/json")])
def test_http_lookup_any_other_status_is_no_verdict(status, text, content_type):
    with pytest.raises(ReconcilerError, match=f"answered HTTP {status}"):
        lookup(text=text, status=status, content_type=content_type)


@pytest.mark.parametrize("error", [requests.exceptions.ReadTimeout("slow"), requests.exceptions.ConnectTimeout("x"),
                                   requests.exceptions.ConnectionError("reset")])
def test_http_lookup_slow_or_unreachable_is_no_verdict(error):
    with pytest.raises(ReconcilerError, match="unreachable"):
        lookup(error=error)


def test_http_lookup_slow_answer_times_out_on_a_real_socket():
    """A lookup that answers after the read timeout: ReconcilerError, not a verdict."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    done = threading.Event()

    def accept():
        conn, _ = srv.accept()
        done.wait(5)
        conn.close()

    threading.Thread(target=accept, daemon=True).start()
    rec = HttpLookupReconciler(f"http://127.0.0.1:{srv.getsockname()[1]}/lookup?key={{key}}", timeout=(1.0, 0.3))
    try:
        with pytest.raises(ReconcilerError, match="ReadTimeout"):
            rec.lookup(OP)
    finally:
        done.set()
        srv.close()
