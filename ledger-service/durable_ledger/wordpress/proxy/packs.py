"""The article's "resource pack": a block at the end of the body, bound to post id and key.

The block is delimited by HTML comments that name the post and the operation key. Building the
content strips every earlier block first, so writing it twice gives the same content, never a
body with two packs (a plain "append" would duplicate it on every retry).
"""
from __future__ import annotations

import re

_BLOCK = re.compile(r"\s*<!-- durable:resource-pack [^>]*-->.*?<!-- /durable:resource-pack -->", re.S)


def _opening(post_id: int, key: str) -> str:
    return f"<!-- durable:resource-pack post={int(post_id)} op={key} -->"


def with_resource_pack(body: str, html: str, post_id: int, key: str) -> str:
    base = _BLOCK.sub("", body or "").rstrip()
    return f"{base}\n{_opening(post_id, key)}\n{html.strip()}\n<!-- /durable:resource-pack -->"


def count_packs(content: str, post_id: int, key: str) -> int:
    """How many pack blocks the content holds; 0 unless one is bound to this post and key."""
    blocks = _BLOCK.findall(content or "")
    if not any(_opening(post_id, key) in b for b in blocks):
        return 0
    return len(blocks)
