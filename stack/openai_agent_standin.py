#!/usr/bin/env python3
"""OpenAI API STAND-IN with scripted tool calls, for n8n's AI Agent in offline tests. Not OpenAI.

An additive extension of stack/openai_standin.py (which it serves unchanged for every other
request): a `POST /v1/chat/completions` that carries `tools` (what n8n's OpenAI Chat Model node,
LangChain's ChatOpenAI, sends when the AI Agent has tools) is answered by a script instead of the
article generator:

  * the tool: the first function in `tools` (or the one named by a `standin_tool: NAME` line);
  * its arguments: every parameter of that function's JSON schema is read from a `name: value`
    line of the user messages (typed by the schema: integer, number, boolean, string);
  * the model calls that tool with the SAME arguments `--tool-calls` times (default 3; a
    `standin_tool_calls: N` line overrides), one call per turn (all in one turn with a
    `standin_parallel: true` line), each under a NEW call id (`call_<random>`), the way a model
    repeats a call it is unsure about;
  * when the conversation holds that many `tool` messages for the script's tool, the model
    answers with a final message that quotes every tool result in order (its `message` field
    when the result is JSON with one, else the raw content).

Stateless: the turn is derived from the conversation the client sends, so a killed and re-run
execution starts the script again from the first call. Every answer is a `chat.completion` of
the real wire format (`choices[0].message.tool_calls[].function.arguments` is a JSON string,
`finish_reason` is `tool_calls` or `stop`); `GET /standin/requests` returns the request bodies of
the scripted conversations (what n8n sent), for tests.
Usage: python stack/openai_agent_standin.py [--host 127.0.0.1] [--port 8789] [--tool-calls 3]
"""
from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
import threading
import time
from http.server import ThreadingHTTPServer

import openai_standin  # noqa: E402

TOOL_CALLS = 3
_log_lock = threading.Lock()
REQUESTS: list[dict] = []


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _line(text: str, name: str):
    m = re.search(rf"^\s*{re.escape(name)}\s*[:=]\s*(.+?)\s*$", text, re.MULTILINE)
    return m.group(1) if m else None


def _typed(value: str, schema: dict):
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            f = float(value)
            return int(f) if f.is_integer() else f
        if kind == "boolean":
            return value.strip().lower() in ("true", "yes", "1")
    except ValueError:
        pass
    return value


def script_turn(body: dict, tool_calls: int = TOOL_CALLS) -> dict:
    """The assistant message (and finish_reason) for this conversation: a tool call or the answer."""
    messages = body.get("messages") or []
    functions = [t["function"] for t in body.get("tools") or [] if t.get("type") == "function" and t.get("function")]
    user = "\n".join(_text(m.get("content")) for m in messages if m.get("role") in ("user", "system", "developer"))
    wanted = _line(user, "standin_tool")
    fn = next((f for f in functions if f.get("name") == wanted), functions[0])
    n = int(_line(user, "standin_tool_calls") or tool_calls)
    props = (fn.get("parameters") or {}).get("properties") or {}
    args = {}
    for name, schema in props.items():
        raw = _line(user, name)
        if raw is not None:
            args[name] = _typed(raw, schema or {})
    # Which tool messages answer calls of the script's tool: match tool_call_id to the assistant's calls.
    ours = {c.get("id") for m in messages if m.get("role") == "assistant"
            for c in (m.get("tool_calls") or []) if (c.get("function") or {}).get("name") == fn["name"]}
    results = [_text(m.get("content")) for m in messages if m.get("role") == "tool" and m.get("tool_call_id") in ours]
    if len(results) < n:
        # One call per turn; with a `standin_parallel: true` line all remaining calls in one turn
        # (parallel tool calls, as models do when they fan out).
        parallel = (_line(user, "standin_parallel") or "").lower() in ("true", "yes", "1")
        calls = [{"id": f"call_{secrets.token_hex(12)}", "type": "function",
                  "function": {"name": fn["name"], "arguments": json.dumps(args)}}
                 for _ in range(n - len(results) if parallel else 1)]
        return {"finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": calls, "refusal": None}}
    lines = [f"I called {fn['name']} {len(results)} times with the same arguments {json.dumps(args, sort_keys=True)} "
             f"(the OpenAI stand-in's script, not a real model). What the tool returned each time:"]
    for i, content in enumerate(results, 1):
        try:
            value = json.loads(content)
        except ValueError:
            value = content
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        said = value.get("message") if isinstance(value, dict) and value.get("message") else content
        lines.append(f"{i}. {said}")
    lines.append("Tool results verbatim: " + json.dumps(results))
    return {"finish_reason": "stop", "message": {"role": "assistant", "content": "\n".join(lines), "refusal": None}}


class Handler(openai_standin.Handler):
    server_version = "openai-agent-standin/1"
    tool_calls = TOOL_CALLS

    def do_GET(self):
        if self.path.split("?", 1)[0].rstrip("/") == "/standin/requests":
            with _log_lock:
                return self._send(200, {"requests": list(REQUESTS)})
        return super().do_GET()

    def do_POST(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/chat/completions"):
            return super().do_POST()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not (isinstance(body, dict) and body.get("tools")):
            # Not a tool conversation: the article stand-in answers (hand it the body we read).
            self.rfile = _Replay(raw)
            return super().do_POST()
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return self._error(401, "missing bearer token (any value works for the stand-in)", "invalid_api_key")
        if body.get("stream"):
            return self._error(400, "the agent stand-in does not stream (n8n's AI Agent does not ask for it "
                                    "outside a streaming chat trigger)", "stream_unsupported")
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return self._error(400, "messages is required", "missing_messages")
        with _log_lock:
            REQUESTS.append(body)
        turn = script_turn(body, self.tool_calls)
        out = json.dumps(turn["message"])
        return self._send(200, {
            "id": f"chatcmpl-standin-{secrets.token_hex(12)}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model") or openai_standin.MODEL,
            "system_fingerprint": "standin",
            "choices": [{"index": 0, "finish_reason": turn["finish_reason"], "logprobs": None,
                         "message": turn["message"]}],
            "usage": {"prompt_tokens": len(json.dumps(body["messages"])) // 4, "completion_tokens": len(out) // 4,
                      "total_tokens": (len(json.dumps(body["messages"])) + len(out)) // 4},
        })


class _Replay:
    def __init__(self, data: bytes):
        self.data = data

    def read(self, n=-1):
        out, self.data = (self.data, b"") if n is None or n < 0 else (self.data[:n], self.data[n:])
        return out


def serve(host: str, port: int, tool_calls: int = TOOL_CALLS):
    Handler.tool_calls = tool_calls
    httpd = ThreadingHTTPServer((host, port), Handler)
    sys.stderr.write(f"[openai-agent-standin] OpenAI API stand-in with scripted tool calls ({tool_calls} per "
                     f"conversation) on http://{host}:{port}/v1\n")
    httpd.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8789)
    ap.add_argument("--tool-calls", type=int, default=TOOL_CALLS)
    a = ap.parse_args()
    serve(a.host, a.port, a.tool_calls)
