"""The agent stand-in speaks the Chat Completions tools protocol: the official SDK drives a whole
tool loop against it (what LangChain's ChatOpenAI in n8n's OpenAI Chat Model node does)."""
import json
import os
import sys
from pathlib import Path

import pytest
from localhost import free_port
from services import Service
from openai import OpenAI

ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {
    "name": "issue_refund", "description": "Issue a refund",
    "parameters": {"type": "object", "additionalProperties": False,
                   "required": ["customer_id", "refund_id", "amount_cents", "currency"],
                   "properties": {"customer_id": {"type": "string"}, "refund_id": {"type": "string"},
                                  "amount_cents": {"type": "number"}, "currency": {"type": "string"}}}}}]
PROMPT = "Refund this.\ncustomer_id: C-7\nrefund_id: RF-9\namount_cents: 1250\ncurrency: EUR"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    port = free_port()
    svc = Service.start("standin", [sys.executable, str(ROOT / "stack" / "openai_agent_standin.py"), "--port", str(port)],
                        dict(os.environ), tmp_path_factory.mktemp("standin") / "standin.log",
                        ready=f"http://127.0.0.1:{port}/health")
    yield f"http://127.0.0.1:{port}/v1"
    svc.stop()


def test_three_tool_calls_with_new_ids_then_an_answer_quoting_the_results(base_url):
    client = OpenAI(base_url=base_url, api_key="test", max_retries=0)
    messages = [{"role": "system", "content": "You refund."}, {"role": "user", "content": PROMPT}]
    ids = []
    for n in range(1, 5):
        resp = client.chat.completions.create(model="standin-gpt", messages=messages, tools=TOOLS)
        choice = resp.choices[0]
        if choice.finish_reason == "stop":
            break
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert call.function.name == "issue_refund"
        assert json.loads(call.function.arguments) == {"customer_id": "C-7", "refund_id": "RF-9",
                                                       "amount_cents": 1250, "currency": "EUR"}
        ids.append(call.id)
        messages.append(choice.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": json.dumps([{"message": f"result {n}", "refund": {"id": "re_1"}}])})
    assert n == 4 and len(set(ids)) == 3
    text = choice.message.content
    assert "1. result 1\n2. result 2\n3. result 3\n" in text, text
    assert "Tool results verbatim: " in text


def test_requests_without_tools_still_get_the_article_stand_in(base_url):
    client = OpenAI(base_url=base_url, api_key="test", max_retries=0)
    resp = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Topic: Solar roofs"}])
    assert json.loads(resp.choices[0].message.content)["title"] == "Solar roofs: resuming safely"
    assert client.models.list().data[0].id == "standin-gpt"


def test_the_requests_n8n_sent_are_kept_for_tests(base_url):
    import requests

    OpenAI(base_url=base_url, api_key="test", max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], tools=TOOLS)
    logged = requests.get(base_url.rsplit("/v1", 1)[0] + "/standin/requests", timeout=5).json()["requests"]
    assert logged and all(body.get("tools") for body in logged)
