"""The OpenAI Responses API with a scripted model, for an Agents SDK program run unchanged and
offline: it reaches this server through ``OPENAI_BASE_URL`` (the OpenAI client's own setting).
Not OpenAI.

    POST /v1/responses   -> a `response` of the real wire format: the next planned function call
                            (a new call id each time), or, once every planned call has an output in
                            the conversation, a final assistant message

The turn is read from the conversation the client sends (how many ``function_call_output`` items
it holds), so a killed program started again begins the script again, as a model would ask for
the same refund again.
"""

import json
import threading
import time
import uuid

from support.remote_server import serve


class ScriptedResponses:
    def __init__(self, calls, final="done"):
        """``calls``: [(tool name, arguments)], asked one per turn."""
        self.calls, self.final = list(calls), final
        self.requests, self.lock = [], threading.Lock()
        self.server, url = serve(self._post, self._get)
        self.url = url + "/v1"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, body):
        items = body.get("input") if isinstance(body.get("input"), list) else []
        done = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")
        if done < len(self.calls):
            name, args = self.calls[done]
            out = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": f"call_{uuid.uuid4().hex}",
                   "name": name, "arguments": json.dumps(args), "status": "completed"}
        else:
            out = {"type": "message", "id": f"msg_{uuid.uuid4().hex}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": self.final, "annotations": []}]}
        return {"id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()),
                "status": "completed", "model": body.get("model", "scripted"), "output": [out],
                "parallel_tool_calls": False, "tool_choice": "auto", "tools": body.get("tools", []),
                "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}

    def _post(self, handler, raw):
        body = json.loads(raw or b"{}")
        if handler.path.rstrip("/") != "/v1/responses":
            return _send(handler, 404, {"error": {"message": f"the stand-in serves /v1/responses, not {handler.path}"}})
        with self.lock:
            self.requests.append(body)
        _send(handler, 200, self._answer(body))

    def _get(self, handler):
        _send(handler, 404, {"error": {"message": "POST /v1/responses only"}})


def _send(handler, status, body):
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
