"""The OpenAI stand-in speaks the real wire format: the official SDK parses its answers."""

import base64
import json
import os
import sys
from pathlib import Path

import pytest
from localhost import free_port
from services import Service
from openai import BadRequestError, OpenAI

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    port = free_port()
    svc = Service.start("standin", [sys.executable, str(ROOT / "stack" / "openai_standin.py"), "--port", str(port)],
                        dict(os.environ), tmp_path_factory.mktemp("standin") / "standin.log",
                        ready=f"http://127.0.0.1:{port}/health")
    yield f"http://127.0.0.1:{port}/v1"
    svc.stop()


def test_chat_completion_parses_with_the_sdk(standin):
    client = OpenAI(base_url=standin, api_key="test")
    msgs = [{"role": "system", "content": "Write JSON."}, {"role": "user", "content": "Topic: Solar roofs"}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=msgs)
    article = json.loads(first.choices[0].message.content)
    assert article["title"] == "Solar roofs: resuming safely"
    assert set(article["seo"]) == {"title", "description", "focus_keyword"} and len(article["images"]) == 3
    again = client.chat.completions.create(model="gpt-4o-mini", messages=msgs)
    assert again.choices[0].message.content == first.choices[0].message.content  # deterministic


def test_images_are_valid_pngs(standin):
    client = OpenAI(base_url=standin, api_key="test")
    out = client.images.generate(prompt="hero illustration", n=2)
    blobs = [base64.b64decode(d.b64_json) for d in out.data]
    assert all(b.startswith(b"\x89PNG\r\n\x1a\n") for b in blobs) and blobs[0] != blobs[1]


def test_errors_use_openai_shapes(standin):
    import requests

    r = requests.post(standin + "/chat/completions", json={"messages": []})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(BadRequestError):
        OpenAI(base_url=standin, api_key="t", max_retries=0).chat.completions.create(model="m", messages=[])
