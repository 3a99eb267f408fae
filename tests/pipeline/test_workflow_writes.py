"""Static check of workflows/article-pipeline.json (no stack): each Begin Step's payload is the
write the Proxy HTTP Request after it sends, spelled with the same expressions.

The proxy forwards a write only if its digest equals the begin payload's digest (docs/proxy.md,
"Every write is one the ledger dispatched"): the body without operation_key / job_id /
fencing_token, plus post_id from the path for post routes, content_base64 replaced by
content_base64_sha256. A drift between the two sides would only show as a 422 digest_mismatch in
a real run; this names the field at once.
"""
import json
import re
from pathlib import Path

import pytest

WORKFLOW = Path(__file__).resolve().parents[2] / "workflows" / "article-pipeline.json"
IDENTITY = {"operation_key": "$json.durable.operation_key", "job_id": "$json.durable.job_id",
            "fencing_token": "$json.durable.fencing_token"}
PAIRS = [("Begin: Upload Media", "Proxy: Upload Media"), ("Begin: Create Draft", "Proxy: Create Draft"),
         ("Begin: Set SEO", "Proxy: Set SEO"), ("Begin: Add Resource Pack", "Proxy: Add Resource Pack"),
         ("Begin: Publish", "Proxy: Publish")]
EXPECTED_FIELDS = {
    "Begin: Upload Media": {"content_base64_sha256", "filename", "mime_type", "alt_text", "title"},
    "Begin: Create Draft": {"title", "content", "excerpt", "featured_media"},
    "Begin: Set SEO": {"post_id", "seo"},
    "Begin: Add Resource Pack": {"post_id", "content", "resource_pack"},
    "Begin: Publish": {"post_id", "content_sha256", "title", "featured_media"},
}


def _nodes():
    return {n["name"]: n for n in json.loads(WORKFLOW.read_text())["nodes"]}


def _split_top(text):
    """Split `a: x, b: f(y, z), c: { d: 1 }` at its top-level commas."""
    parts, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == "," and depth == 0 and not quote:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in parts + [cur] if p.strip()]


def _object(expr, wrapper):
    """{key: expression} of the object literal inside `wrapper({ ... })` of an n8n expression."""
    m = re.fullmatch(r"=\{\{ " + re.escape(wrapper) + r"\(\{ (.*) \}\)" + r"\)" * wrapper.count("(") + r" \}\}",
                     expr, re.S)
    assert m, f"not of the form {wrapper}({{ ... }}): {expr}"
    fields = {}
    for part in _split_top(m.group(1)):
        key, _, value = part.partition(":")
        fields[key.strip()] = value.strip()
    return fields


@pytest.mark.parametrize("begin,proxy", PAIRS, ids=[b for b, _ in PAIRS])
def test_workflow_begin_payload_is_the_proxy_write(begin, proxy):
    nodes = _nodes()
    payload = _object(nodes[begin]["parameters"]["payload"], "JSON.parse(JSON.stringify")
    body = _object(nodes[proxy]["parameters"]["jsonBody"], "JSON.stringify")
    assert set(payload) == EXPECTED_FIELDS[begin], payload
    for key, value in IDENTITY.items():
        assert body.pop(key) == value, (proxy, key)
    write = dict(body)
    if "content_base64" in write:
        write["content_base64_sha256"] = write.pop("content_base64") + ".hash('sha256')"
    if "post_id" in payload:
        url = nodes[proxy]["parameters"]["url"]
        m = re.search(r"/posts/\{\{ (.*?) \}\}", url)
        assert m, url
        write["post_id"] = m.group(1)
    assert write == payload, f"{begin} payload differs from the write {proxy} sends"
