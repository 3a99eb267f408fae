"""OpenTelemetry traces (durable_ledger/web/tracing.py): one gated step is one connected trace.

The ledger app and the publishing proxy run in process (Flask test clients) on one SQLite
ledger, both traced into the SDK's InMemorySpanExporter; "WordPress" is a tiny local HTTP
server that records the traceparent header of every request it gets. The caller (n8n's place)
sends one W3C traceparent on begin, on the proxy write and on confirm.

Run with -s to see the trace printed.
"""
import json
import os
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id

from durable_ledger.web import tracing
from durable_ledger.app import create_app
from durable_ledger.kernel.config import Config
from durable_ledger.wordpress.proxy import create_proxy_app

TOKENS = "acme:runner:runner-token"
APP_PASSWORD = "abcd EFGH ijkl MNOP qrst UVWX"


class FakeWordPress:
    """Just enough of the REST API for one draft: create, read back; no durable-ops plugin."""

    def __init__(self):
        self.received = []  # (method, rest_route, traceparent)
        self.posts = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _route(self):
                return parse_qs(urlparse(self.path).query).get("rest_route", [""])[0]

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                route = self._route()
                outer.received.append(("GET", route, self.headers.get("traceparent")))
                if route.startswith("/wp/v2/posts/") and int(route.rsplit("/", 1)[1]) in outer.posts:
                    return self._send(200, outer.posts[int(route.rsplit("/", 1)[1])])
                self._send(404, {"code": "rest_no_route", "message": "No route"})

            def do_POST(self):
                route = self._route()
                outer.received.append(("POST", route, self.headers.get("traceparent")))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                post_id = 100 + len(outer.posts)
                outer.posts[post_id] = {"id": post_id, "status": body.get("status", "draft"), "link": f"/?p={post_id}",
                                        **{k: {"raw": v, "rendered": v} for k, v in body.items()
                                           if k in ("title", "content", "excerpt")}}
                self._send(201, outer.posts[post_id])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def exporter():
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    tracing.use(provider)
    yield exp
    tracing.reset()
    provider.shutdown()


def _print_trace(spans):
    by_id = {s.context.span_id: s for s in spans}
    depth = {}

    def level(s):
        if s.context.span_id not in depth:
            parent = s.parent.span_id if s.parent else None
            depth[s.context.span_id] = level(by_id[parent]) + 1 if parent in by_id else 0
        return depth[s.context.span_id]

    print(f"\ntrace {format_trace_id(spans[0].context.trace_id)} ({len(spans)} spans)")
    for s in sorted(spans, key=lambda s: s.start_time):
        parent = format_span_id(s.parent.span_id) if s.parent else "-"
        print(f"{'  ' * level(s)}{s.name} [{s.kind.name.lower()}, {s.instrumentation_scope.name}] "
              f"span={format_span_id(s.context.span_id)} parent={parent}"
              f"{' (remote)' if s.parent and s.parent.is_remote else ''}")
        for k, v in sorted(s.attributes.items()):
            print(f"{'  ' * level(s)}    {k} = {v!r}")


def test_one_gated_step_is_one_connected_trace(exporter, tmp_path):
    cfg = Config(database_url=f"sqlite:///{tmp_path / 'ledger.db'}", bootstrap_tokens=TOKENS, log_level="WARNING")
    with FakeWordPress() as wp:
        ledger = create_app(cfg).test_client()
        proxy = create_proxy_app({"sites": {"test": {"url": wp.url, "user": "editor", "app_password": APP_PASSWORD}},
                                  "ledger": cfg}).test_client()
        auth = {"Authorization": "Bearer runner-token"}
        assert ledger.put("/v1/jobs/trace-job", json={"pipeline": "article"}, headers=auth).status_code == 201
        fence = ledger.post("/v1/jobs/trace-job/lease", json={"owner": "exec-4711"}, headers=auth).get_json()
        fence = fence["fencing_token"]
        exporter.clear()  # the job and its lease are other traces; the step starts here

        # The caller's context: what an instrumented n8n (or any caller) sends on each call.
        trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
        headers = {**auth, "traceparent": f"00-{trace_id}-{caller_span}-01",
                   "X-N8N-Execution-Id": "4711", "X-N8N-Workflow-Id": "wfArticle01"}
        write = {"title": "Secret launch plan", "content": "<p>embargoed body text</p>"}
        began = ledger.post("/v1/operations/begin", headers=headers, json={
            "job_id": "trace-job", "action": "create_draft", "fencing_token": fence, "payload": write,
            "target": "wordpress:test"}).get_json()
        assert began["decision"] == "dispatch", began
        key = began["operation"]["operation_key"]
        identity = {"operation_key": key, "job_id": "trace-job", "fencing_token": fence}
        wrote = proxy.post("/v1/sites/test/drafts", headers=headers, json={**write, **identity}).get_json()
        assert wrote["outcome"] == "confirmed", wrote
        done = ledger.post(f"/v1/operations/{key}/confirm", headers=headers, json={
            "fencing_token": fence, "remote_id": wrote["remote_id"], "receipt": {"link": wrote["post"]["link"]}})
        assert done.status_code == 200, done.get_json()

    spans = exporter.get_finished_spans()
    _print_trace(spans)

    # One trace: every span carries the caller's trace id.
    assert {format_trace_id(s.context.trace_id) for s in spans} == {trace_id}
    servers = {s.name: s for s in spans if s.kind == SpanKind.SERVER}
    begin_span = servers["POST /v1/operations/begin"]
    proxy_span = servers["POST /v1/sites/<site>/drafts"]
    confirm_span = servers["POST /v1/operations/<path:key>/confirm"]
    for s in (begin_span, proxy_span, confirm_span):  # traceparent accepted: the caller is the parent
        assert s.parent.is_remote and format_span_id(s.parent.span_id) == caller_span
        assert s.attributes["n8n.execution.id"] == "4711"
        assert s.attributes["n8n.workflow.id"] == "wfArticle01"

    gate = [s for s in spans if s.name == "durable.gate"]
    assert len(gate) == 1 and gate[0].parent.span_id == begin_span.context.span_id
    assert {k: gate[0].attributes[k] for k in ("durable.job_id", "durable.action", "durable.operation_key",
                                               "durable.decision", "durable.fencing_token")} == {
        "durable.job_id": "trace-job", "durable.action": "create_draft", "durable.operation_key": key,
        "durable.decision": "dispatch", "durable.fencing_token": fence}

    # The proxy's WordPress calls are client spans under the proxy's request span, and each one
    # told WordPress its own span as the parent.
    wp_spans = [s for s in spans if s.kind == SpanKind.CLIENT]
    assert len(wp_spans) == len(wp.received) >= 2  # plugin check, create, read-back
    assert all(s.parent.span_id == proxy_span.context.span_id for s in wp_spans)
    assert any(m == "POST" and route == "/wp/v2/posts" for m, route, _ in wp.received)
    sent = {format_span_id(s.context.span_id) for s in wp_spans}
    for _method, _route, traceparent in wp.received:
        assert traceparent is not None
        version, tid, parent, _flags = traceparent.split("-")
        assert (version, tid) == ("00", trace_id) and parent in sent

    # Never payloads, receipts or secrets in any attribute.
    everything = json.dumps([dict(s.attributes) for s in spans] + [s.name for s in spans])
    for value in ("Secret launch plan", "embargoed", "runner-token", APP_PASSWORD, "Bearer", "/?p="):
        assert value not in everything


def test_refused_gate_is_recorded_without_details(exporter, tmp_path):
    cfg = Config(database_url=f"sqlite:///{tmp_path / 'ledger.db'}", bootstrap_tokens=TOKENS, log_level="WARNING")
    ledger = create_app(cfg).test_client()
    auth = {"Authorization": "Bearer runner-token"}
    ledger.put("/v1/jobs/j", json={"pipeline": "article"}, headers=auth)
    fence = ledger.post("/v1/jobs/j/lease", json={"owner": "x"}, headers=auth).get_json()["fencing_token"]
    r = ledger.post("/v1/operations/begin", headers=auth, json={
        "job_id": "j", "action": "a", "fencing_token": fence + 5, "payload": {"p": "classified"}})
    assert r.status_code == 422 and r.get_json()["error"]["code"] == "fencing_token_not_issued"
    gate = [s for s in exporter.get_finished_spans() if s.name == "durable.gate"]
    assert len(gate) == 1
    assert gate[0].attributes["durable.decision"] == "refused"
    assert gate[0].attributes["durable.error_code"] == r.get_json()["error"]["code"]
    assert gate[0].status.status_code.name == "ERROR" and not gate[0].events  # no exception text
    assert "classified" not in json.dumps(dict(gate[0].attributes))


_PROBE = """
import sys, requests
from durable_ledger.web import tracing
from durable_ledger.app import create_app
from durable_ledger.kernel.config import Config
from durable_ledger.wordpress.proxy import create_proxy_app
cfg = Config(database_url=sys.argv[1], bootstrap_tokens="acme:runner:t", log_level="WARNING")
apps = [create_app(cfg), create_proxy_app({"sites": {}, "ledger": cfg})]
print(tracing.tracer is not None, any(m.startswith("opentelemetry") for m in sys.modules),
      any(getattr(a, "_is_instrumented_by_opentelemetry", False) for a in apps),
      hasattr(requests.Session.send, "__wrapped__") or "opentelemetry" in repr(requests.Session.send))
"""


def _probe(tmp_path, **otel):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(otel)
    out = subprocess.run([sys.executable, "-c", _PROBE, f"sqlite:///{tmp_path / 'probe.db'}"], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def test_off_without_otel_variables_nothing_is_set_up(tmp_path):
    # tracer, OpenTelemetry imported, Flask instrumented, requests instrumented
    assert _probe(tmp_path) == ["False", "False", "False", "False"]
    assert _probe(tmp_path, OTEL_TRACES_EXPORTER="none") == ["False", "False", "False", "False"]


def test_on_with_standard_variables(tmp_path):
    assert _probe(tmp_path, OTEL_TRACES_EXPORTER="console") == ["True", "True", "True", "True"]
    assert _probe(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9") == ["True", "True", "True", "True"]
    assert _probe(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
                  OTEL_SDK_DISABLED="true") == ["False", "False", "False", "False"]


def test_enabled_follows_the_standard_variables():
    assert not tracing.enabled({})
    assert not tracing.enabled({"OTEL_TRACES_EXPORTER": "none"})
    assert tracing.enabled({"OTEL_TRACES_EXPORTER": "otlp"})
    assert tracing.enabled({"OTEL_TRACES_EXPORTER": "none,console"})
    assert tracing.enabled({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not tracing.enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"})
