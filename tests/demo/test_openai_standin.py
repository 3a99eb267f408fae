"""The OpenAI stand-in speaks the real wire format: the official SDK parses its answers."""

import base64
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai import BadRequestError, OpenAI

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def standin():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(ROOT / "stack" / "openai_standin.py"), "--port", str(port)],
                            stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(5)


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
