"""A local stand-in of the OpenAI Agents API for the tests (no machine here reaches OpenAI).

Every payload it serves is validated against the SDK's own pydantic models before it goes on
the wire, and every event it accepts is validated against the SDK's input TypedDicts, so the
real ``openai`` client talks to it with real shapes. It keeps counters the tests assert on:
accepted events per Idempotency-Key (a retried send with the same key is one event).
"""

import base64
import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from openai.types.beta.agent_session import AgentSession
from openai.types.beta.agent_session_event import AgentSessionEvent
from openai.types.beta.agent_session_input_param import AgentSessionInputParam
from openai.types.beta.agent_session_item import AgentSessionItem
from openai.types.beta.agents.sessions.turn import Turn
from pydantic import TypeAdapter

ITEM = TypeAdapter(AgentSessionItem)
EVENT = TypeAdapter(AgentSessionEvent)
INPUT = TypeAdapter(AgentSessionInputParam)
PREFIX = "/v1/agents/sessions"


def session_body(session_id, status="idle", required_actions=(), environment=None, model="gpt-5", metadata=None,
                 spend_control=None):
    # spend_control became a required field of AgentSession in openai 3.60; older SDKs ignore it.
    body = {
        "id": session_id, "object": "agent.session", "created_at": int(time.time()),
        "last_active_at": int(time.time()), "metadata": metadata or {}, "status": status, "vault_ids": [],
        "spend_control": spend_control or {"consumed": None, "limit": None},
        "required_actions": list(required_actions), "environment": environment or {"type": "none"},
        "agent": {"id": "agent_test", "model": model, "multi_agent": {"enabled": False}, "reasoning": {},
                  "service_tier": "auto", "text": {"format": {"type": "text"}, "verbosity": "medium"},
                  "tools": []},
    }
    AgentSession.model_validate(body)
    return body


def message_item(n, turn_id="turn_1", status="completed", text=None):
    body = {"id": f"item_{n:06d}", "type": "message", "role": "assistant", "status": status, "turn_id": turn_id,
            "content": [{"type": "output_text", "text": text or f"message {n}"}]}
    ITEM.validate_python(body)
    return body


def function_call_item(n, call_id, name, arguments, turn_id="turn_1", status="in_progress"):
    body = {"id": f"item_{n:06d}", "type": "function_call", "call_id": call_id, "name": name,
            "arguments": arguments, "status": status, "turn_id": turn_id}
    ITEM.validate_python(body)
    return body


def function_call_action(call_id, name, arguments, turn_id="turn_1"):
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments, "turn_id": turn_id}


def turn_body(session_id, turn_id, status="completed"):
    body = {"id": turn_id, "object": "agent.session.turn", "agent_id": "agent_test", "session_id": session_id,
            "created_at": int(time.time()), "status": status,
            "completed_at": int(time.time()) if status in ("completed", "failed", "cancelled") else None}
    Turn.model_validate(body)
    return body


def item_event(session_id, n, item, kind="added"):
    body = {"event_id": f"evt_{n}", "session_id": session_id, "type": f"agent.session.turn.item.{kind}",
            "item": item, "turn_id": item.get("turn_id")}
    if kind == "done":
        body["output_index"] = 0
    EVENT.validate_python(body)
    return body


def sign_webhook(secret, body, webhook_id, timestamp=None):
    """Headers as OpenAI sends them (Standard Webhooks: HMAC-SHA256 over id.timestamp.body)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    key = base64.b64decode(secret[len("whsec_"):]) if secret.startswith("whsec_") else secret.encode()
    mac = hmac.new(key, f"{webhook_id}.{ts}.{body}".encode(), hashlib.sha256).digest()
    return {"webhook-id": webhook_id, "webhook-timestamp": ts, "webhook-signature": "v1," + base64.b64encode(mac).decode(),
            "content-type": "application/json"}


class SyntheticItems:
    """N items generated on demand (page by page), so the stand-in itself holds no history."""

    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.count))]
        if not 0 <= index < self.count:
            raise IndexError(index)
        return {"id": f"item_{index:06d}", "type": "message", "role": "assistant", "status": "completed",
                "turn_id": "turn_1", "content": [{"type": "output_text", "text": f"synthetic message {index}"}]}

    def index_of(self, item_id):
        return int(item_id.split("_")[1])


class StandIn:
    def __init__(self):
        self.lock = threading.Lock()
        self.sessions, self.items, self.turns, self.stream_events = {}, {}, {}, {}
        self.accepted = []  # (session_id, event, idempotency_key)
        self.keys = Counter()  # idempotency key -> posts seen
        self.requests = Counter()
        self.fail_event_posts = 0  # next N POST .../events answer 503 without accepting
        self.lose_event_responses = 0  # next N POST .../events are accepted, then answer 500
        self.validate_pages = True
        self.default_tenant = None  # add_session's tenant when none is given
        self.items_wait_for_stream = False  # items pages wait until an event stream was written
        self.stream_written = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    # --- state ----------------------------------------------------------------------------
    def add_session(self, session_id, items=(), turns=None, tenant=None, **kw):
        """``tenant`` (default ``self.default_tenant``): the session's `durable_tenant` metadata,
        without which the ledger binds it for nobody (docs/agents.md)."""
        tenant = tenant or self.default_tenant
        if tenant:
            kw["metadata"] = {"durable_tenant": tenant}
        self.sessions[session_id] = session_body(session_id, **kw)
        self.items[session_id] = items if isinstance(items, SyntheticItems) else list(items)
        self.turns[session_id] = turns if turns is not None else [turn_body(session_id, "turn_1")]
        self.stream_events[session_id] = []
        return self.sessions[session_id]

    def update_session(self, session_id, **kw):
        cur = self.sessions[session_id]
        body = session_body(session_id, status=kw.get("status", cur["status"]),
                            required_actions=kw.get("required_actions", cur["required_actions"]),
                            environment=kw.get("environment", cur["environment"]),
                            model=kw.get("model", cur["agent"]["model"]), metadata=cur.get("metadata"))
        self.sessions[session_id] = body

    def accepted_events(self, session_id, kind=None):
        return [e for s, e, _ in self.accepted if s == session_id and (kind is None or e["type"] == kind)]

    # --- HTTP -----------------------------------------------------------------------------
    def start(self):
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def _accept(self, session_id, events, key):
        with self.lock:
            self.keys[key] += 1
            if key is not None and self.keys[key] > 1:
                return  # the same Idempotency-Key: already accepted, nothing new happens
            for event in events:
                self.accepted.append((session_id, event, key))
                if event["type"] == "agent.session.input.tool_result":
                    s = self.sessions[session_id]
                    left = [a for a in s["required_actions"] if a.get("call_id") != event["call_id"]]
                    self.update_session(session_id, required_actions=left,
                                        status="in_progress" if not left else s["status"])

    def _page(self, rows, query, validate):
        limit = max(1, min(100, int(query.get("limit", ["20"])[0])))
        order = query.get("order", ["desc"])[0]
        after = query.get("after", [None])[0]
        n = len(rows)
        ids = None
        if order == "asc":
            start = 0
            if after:
                start = (rows.index_of(after) if isinstance(rows, SyntheticItems)
                         else [r["id"] for r in rows].index(after)) + 1
            page = rows[start:start + limit]
            more = start + limit < n
        else:
            ids = list(reversed(range(n)))
            if after:
                pos = [r["id"] for r in rows].index(after)
                ids = [i for i in ids if i < pos]
            page = [rows[i] for i in ids[:limit]]
            more = len(ids) > limit
        if self.validate_pages:
            for row in page:
                validate(row)
        return {"object": "list", "data": page, "has_more": more,
                "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None}

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _json(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self):
                url = urlsplit(self.path)
                if not url.path.startswith(PREFIX + "/"):
                    return None, None, parse_qs(url.query)
                parts = url.path[len(PREFIX) + 1:].split("/")
                return parts[0], "/".join(parts[1:]), parse_qs(url.query)

            def do_GET(self):
                sid, rest, query = self._route()
                standin.requests[f"GET {rest or 'session'}"] += 1
                if sid not in standin.sessions:
                    return self._json(404, {"error": {"message": "no such session", "type": "not_found"}})
                if rest == "":
                    return self._json(200, standin.sessions[sid])
                if rest == "items":
                    if standin.items_wait_for_stream:
                        standin.stream_written.wait(3)
                    return self._json(200, standin._page(standin.items[sid], query, ITEM.validate_python))
                if rest == "turns":
                    return self._json(200, standin._page(standin.turns[sid], query, Turn.model_validate))
                if rest == "events":
                    return self._sse(standin.stream_events[sid])
                return self._json(404, {"error": {"message": "no route"}})

            def _sse(self, events):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in events:
                    EVENT.validate_python(event)
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
                standin.stream_written.set()
                self.close_connection = True

            def do_POST(self):
                sid, rest, _ = self._route()
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                standin.requests[f"POST {rest}"] += 1
                if sid not in standin.sessions or rest != "events":
                    return self._json(404, {"error": {"message": "no route"}})
                for event in body["events"]:
                    INPUT.validate_python(event)
                key = self.headers.get("Idempotency-Key")
                with standin.lock:
                    if standin.fail_event_posts > 0:
                        standin.fail_event_posts -= 1
                        fail = "before"
                    elif standin.lose_event_responses > 0:
                        standin.lose_event_responses -= 1
                        fail = "after"
                    else:
                        fail = None
                if fail == "before":
                    return self._json(503, {"error": {"message": "unavailable"}})
                standin._accept(sid, body["events"], key)
                if fail == "after":
                    return self._json(500, {"error": {"message": "accepted, but the response was lost"}})
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_DELETE(self):
                sid, rest, _ = self._route()
                standin.requests["DELETE session"] += 1
                standin.sessions.pop(sid, None)
                return self._json(200, {"id": sid, "object": "agent.session.deleted", "deleted": True})

        return Handler


# --- test helpers shared by tests/test_agents_*.py ----------------------------------------------
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"durable-steps-test-webhook-secret").decode()


def configure(monkeypatch, standin, tmp_path=None):
    """Point the SDK's own settings at the stand-in (the ledger reads nothing else)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", standin.base_url)
    monkeypatch.setenv("OPENAI_WEBHOOK_SECRET", WEBHOOK_SECRET)
    monkeypatch.setenv("DURABLE_OPENAI_MAX_RETRIES", "0")  # failures surface; our own retries are the test
    if tmp_path is not None:
        monkeypatch.setenv("DURABLE_ARTIFACT_DIR", str(tmp_path / "artifacts"))


def clear_agent_tables():
    from durable_ledger.store.agent_models import AGENT_MODELS
    from durable_ledger.store.db import db

    with db.connection_context():
        for model in reversed(AGENT_MODELS):
            model.delete().execute()


def bound_job(client, headers, job_id="j1", session_id="sess_1", lease=True):
    """Create the job, take its lease, bind the session. Returns the fencing token (or None)."""
    assert client.put(f"/v1/jobs/{job_id}", json={}, headers=headers).status_code in (200, 201)
    token = None
    if lease:
        r = client.post(f"/v1/jobs/{job_id}/lease", json={"owner": "exec-1", "ttl_s": 60}, headers=headers)
        token = r.get_json()["fencing_token"]
    r = client.put(f"/v1/jobs/{job_id}/session", json={"session_id": session_id}, headers=headers)
    assert r.status_code in (200, 201), r.get_json()
    return token
