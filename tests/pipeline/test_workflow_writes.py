"""Static check of workflows/article-pipeline.json (no stack): each proxy write is a Gated HTTP
Request whose Digest Payload is the write its JSON Body sends, spelled with the same expressions.

The proxy forwards a write only if its digest equals the operation's digest (docs/proxy.md,
"Every write is one the ledger dispatched"): the body without operation_key / job_id /
fencing_token (the node adds them, "Add Step Ticket to Body", outside the digest), plus post_id
from the path for post routes, content_base64 replaced by content_base64_sha256. A drift between
the two sides would only show as a 422 digest_mismatch in a real run; this names the field at once.
"""
import json
import re
from pathlib import Path

import pytest

WORKFLOW = Path(__file__).resolve().parents[2] / "workflows" / "article-pipeline.json"
EXPECTED_FIELDS = {
    "Upload Media": {"content_base64_sha256", "filename", "mime_type", "alt_text", "title"},
    "Create Draft": {"title", "content", "excerpt", "featured_media"},
    "Set SEO": {"post_id", "seo"},
    "Add Resource Pack": {"post_id", "content", "resource_pack"},
    "Publish": {"post_id", "content_sha256", "title", "featured_media"},
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


def _object(expr):
    """{key: expression} of the object literal of an n8n expression `={{ { ... } }}`."""
    m = re.fullmatch(r"=\{\{ \{ (.*) \} \}\}", expr, re.S)
    assert m, f"not of the form {{{{ {{ ... }} }}}}: {expr}"
    fields = {}
    for part in _split_top(m.group(1)):
        key, _, value = part.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def test_workflow_every_proxy_write_is_a_gated_request_with_the_ticket():
    nodes = _nodes()
    writes = {name for name, n in nodes.items() if "/v1/sites/" in n["parameters"].get("url", "")
              and n["parameters"].get("method", "GET") != "GET"}
    assert writes == set(EXPECTED_FIELDS), writes
    for name in writes:
        p = nodes[name]["parameters"]
        assert p["operation"] == "gatedRequest" and p["authentication"] == "durableLedgerApi", name
        assert p["gateOptions"]["ticketInBody"] is True, name
        assert p["gateOptions"]["target"] == "={{ 'wordpress:' + $('Config').first().json.site }}", name
        assert "?strict=1" in p["url"], name


@pytest.mark.parametrize("name", sorted(EXPECTED_FIELDS))
def test_workflow_digest_payload_is_the_proxy_write(name):
    p = _nodes()[name]["parameters"]
    payload = _object(p["gateOptions"]["payload"])
    write = _object(p["jsonBody"])
    assert set(payload) == EXPECTED_FIELDS[name], payload
    assert not {"operation_key", "job_id", "fencing_token"} & set(write), "the node adds the ticket itself"
    if "content_base64" in write:
        write["content_base64_sha256"] = write.pop("content_base64") + ".hash('sha256')"
    if "post_id" in payload:
        m = re.search(r"/posts/\{\{ (.*?) \}\}", p["url"])
        assert m, p["url"]
        write["post_id"] = m.group(1)
    assert write == payload, f"{name}: the Digest Payload differs from the write it sends"
