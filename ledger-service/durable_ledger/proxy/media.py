"""Getting media bytes from a multipart upload, base64 JSON or a URL to fetch."""
from __future__ import annotations

import base64
import binascii
import mimetypes
import posixpath
from urllib.parse import urlsplit

import requests

from ..errors import ValidationFailed
from .errors import MediaFetchFailed


def fetch_url(url: str, max_bytes: int, timeout: tuple[float, float]) -> tuple[bytes, str | None]:
    """Download with a size cap (streamed, so a huge file is cut off early)."""
    try:
        with requests.get(url, stream=True, timeout=timeout) as resp:
            if resp.status_code != 200:
                raise MediaFetchFailed(f"fetching the media URL answered {resp.status_code}", {"url": url})
            chunks, size = [], 0
            for chunk in resp.iter_content(65536):
                size += len(chunk)
                if size > max_bytes:
                    raise MediaFetchFailed(f"media is larger than {max_bytes} bytes", {"url": url})
                chunks.append(chunk)
            ctype = (resp.headers.get("Content-Type") or "").split(";")[0].strip() or None
            return b"".join(chunks), ctype
    except requests.RequestException as exc:
        raise MediaFetchFailed(f"could not fetch the media URL ({type(exc).__name__})", {"url": url}) from exc


def media_bytes(data: dict, upload, max_bytes: int, timeout) -> tuple[bytes, str, str]:
    """(content, filename, mime_type) from exactly one source."""
    sources = [s for s in ("upload" if upload else None, data.get("url") and "url",
                           data.get("content_base64") and "content_base64") if s]
    if len(sources) != 1:
        raise ValidationFailed("send exactly one of: a multipart 'file', 'url', 'content_base64'",
                               {"sources": sources})
    ctype = None
    if upload:
        content, filename, ctype = upload.read(max_bytes + 1), upload.filename, upload.mimetype
    elif data.get("url"):
        content, ctype = fetch_url(data["url"], max_bytes, timeout)
        filename = posixpath.basename(urlsplit(data["url"]).path)
    else:
        try:
            content = base64.b64decode(data["content_base64"], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValidationFailed("content_base64 is not valid base64", {}) from exc
        filename = None
    if len(content) > max_bytes:
        raise ValidationFailed(f"media is larger than {max_bytes} bytes", {"max_bytes": max_bytes})
    filename = data.get("filename") or filename
    if not filename:
        raise ValidationFailed("a filename is needed (WordPress derives the type from it)", {})
    mime = data.get("mime_type") or (ctype if ctype and ctype != "application/octet-stream" else None) \
        or mimetypes.guess_type(filename)[0] or "application/octet-stream"
    return content, filename, mime
