#!/usr/bin/env python3
"""OpenAI API STAND-IN for offline demos and CI. Not OpenAI: fixed, deterministic content.

Answers the real wire format of the endpoints the article pipeline uses, so the workflow runs
unchanged against api.openai.com by switching the credential's base URL:
  POST /v1/chat/completions      -> a chat.completion whose message content is article JSON
  POST /v1/images/generations    -> b64_json PNGs (solid colour, 64x64, seeded by the prompt)
  GET  /v1/models, GET /health
The content is derived from a hash of the request, so the same request always gets the same
answer (useful for exactly-once checks), and it says plainly that it is stand-in text.
Standard library only, so it runs in any Python 3.9+ container.
Usage: python stack/openai_standin.py [--host 127.0.0.1] [--port 8789]
"""

import argparse
import base64
import hashlib
import json
import struct
import sys
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "standin-gpt"


def _seed(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def article_for(messages):
    prompt = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    topic = (prompt.split("Topic:", 1)[1].split("\n", 1)[0].strip() if "Topic:" in prompt else prompt[:60]) or "Durable automation"
    seed = _seed(messages)[:8]
    paragraphs = [
        f"<p>This article about {topic} was written by the OpenAI stand-in (fixed demo content, seed {seed}).</p>",
        "<p>Interrupted runs are normal: streams drop, workers restart, responses get lost after the write "
        "already happened. The safe way to continue is to read state, reconcile, then continue.</p>",
        "<p>Every side effect in this pipeline passes through a ledger gate, so a re-run reuses receipts "
        "instead of creating a second draft or a second upload.</p>",
    ]
    return {
        "title": f"{topic}: resuming safely",
        "body_html": "\n".join(paragraphs),
        "excerpt": f"How {topic.lower()} survives interruptions without duplicates.",
        "seo": {
            "title": f"{topic} | exactly-once publishing",
            "description": f"A stand-in article on {topic.lower()}: read state, reconcile, continue.",
            "focus_keyword": topic.lower().split(" ")[0] if topic else "durable",
        },
        "images": [
            {"slot": "hero", "alt": f"{topic} hero image", "prompt": f"hero illustration for {topic}"},
            {"slot": "inline-1", "alt": f"{topic} diagram", "prompt": f"diagram for {topic}"},
            {"slot": "inline-2", "alt": f"{topic} closing image", "prompt": f"closing image for {topic}"},
        ],
    }


def png(seed_hex, size=64):
    """A valid solid-colour PNG (no external libraries)."""
    r, g, b = (int(seed_hex[i:i + 2], 16) for i in (0, 2, 4))
    raw = b"".join(b"\x00" + bytes((r, g, b)) * size for _ in range(size))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


class Handler(BaseHTTPRequestHandler):
    server_version = "openai-standin/1"
    calls = {"chat": 0, "images": 0}

    def log_message(self, fmt, *args):
        sys.stderr.write("[openai-standin] " + (fmt % args) + "\n")

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, message, code):
        self._send(status, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}})

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return None

    def do_GET(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/health", ""):
            return self._send(200, {"status": "ok", "service": "openai-standin", "calls": self.calls})
        if path in ("/v1/models", "/models"):
            return self._send(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "durable-steps-standin"}]})
        self._error(404, f"no route {path}", "not_found")

    def do_POST(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return self._error(401, "missing bearer token (any value works for the stand-in)", "invalid_api_key")
        body = self._body()
        if not isinstance(body, dict):
            return self._error(400, "body must be a JSON object", "invalid_json")
        if path in ("/v1/chat/completions", "/chat/completions"):
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return self._error(400, "messages is required", "missing_messages")
            Handler.calls["chat"] += 1
            content = json.dumps(article_for(messages))
            seed = _seed(messages)
            return self._send(200, {
                "id": f"chatcmpl-standin-{seed[:24]}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model") or MODEL, "system_fingerprint": "standin",
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": content, "refusal": None}}],
                "usage": {"prompt_tokens": len(json.dumps(messages)) // 4, "completion_tokens": len(content) // 4,
                          "total_tokens": (len(json.dumps(messages)) + len(content)) // 4},
            })
        if path in ("/v1/images/generations", "/images/generations"):
            prompt = body.get("prompt")
            if not isinstance(prompt, str) or not prompt:
                return self._error(400, "prompt is required", "missing_prompt")
            Handler.calls["images"] += 1
            n = int(body.get("n") or 1)
            data = [{"b64_json": base64.b64encode(png(_seed([prompt, i]))).decode(), "revised_prompt": prompt}
                    for i in range(n)]
            return self._send(200, {"created": int(time.time()), "data": data})
        self._error(404, f"no route {path}", "not_found")


def serve(host, port):
    httpd = ThreadingHTTPServer((host, port), Handler)
    sys.stderr.write(f"[openai-standin] OpenAI API stand-in (fixed content) on http://{host}:{port}/v1\n")
    httpd.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8789)
    a = ap.parse_args()
    serve(a.host, a.port)
