"""One plain HTTP/1.1 request read from bytes already in hand, and its answer as bytes.

The read-ahead worker (readahead_worker.py) has every request whole in a buffer before a thread
sees it. For the hot gate routes, gunicorn's parser, its WSGI environ and its response object
cost about as much Python as the gate itself; this module reads such a request directly. It is
deliberately narrow: it accepts only what it can read exactly as gunicorn would (the same path
decoding, the same header values) and returns None for anything else (another version or
method, a query string, a folded, repeated, oversized or malformed header, an underscore in a
name, a framing header other than one Content-Length, an upgrade, an Expect). gunicorn then
reads that request as before and answers or refuses it itself, so no request that gunicorn
would refuse is answered here.
"""

import re
import time
from email.utils import formatdate
from urllib.parse import unquote_to_bytes

from gunicorn import SERVER

# The request line: POST, an origin-form target of visible ASCII without a query or a fragment, HTTP/1.1.
_REQUEST_LINE = re.compile(rb"POST (/[!$&'()*+,\-./0-9:;=@A-Z_a-z~%]*) HTTP/1\.1")
# RFC 9110 token, without "_" (gunicorn drops or refuses names with one, as configured).
_NAME = re.compile(rb"[!#$%&'*+\-.^`|~0-9A-Za-z]+")
# A field value: visible ASCII, SP, HTAB and obs-text; never a control character.
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
# Names whose presence means the request is not a plain one (framing, protocol switches).
_NOT_PLAIN = frozenset((b"transfer-encoding", b"expect", b"upgrade", b"http2-settings", b"te", b"trailer"))


class Request:
    __slots__ = ("path", "headers", "body", "close")

    def __init__(self, path, headers, body, close):
        self.path, self.headers, self.body, self.close = path, headers, body, close


def read(buf, end_of_head, policy):
    """The request in ``buf`` (exactly one, whole, its head ending at ``end_of_head``), or None.

    ``policy``, gunicorn's configuration: (longest request line, most header fields, longest
    header field, the lower-case names of its secure scheme headers)."""
    max_line, max_fields, max_field, scheme_headers = policy
    lines = bytes(buf[:end_of_head]).split(b"\r\n")
    if len(lines[0]) > max_line or len(lines) - 1 > max_fields:
        return None
    target = _REQUEST_LINE.fullmatch(lines[0])
    if target is None or target.group(1).startswith(b"//"):
        return None
    headers = _headers(lines[1:], max_field, scheme_headers)
    if headers is None or b"content-length" not in headers or b"host" not in headers:
        return None
    connection = headers.get(b"connection", b"keep-alive").lower()
    if connection not in (b"keep-alive", b"close"):
        return None
    length = headers[b"content-length"]
    body = bytes(buf[end_of_head + 4:])
    if not (length.isdigit() and int(length) == len(body)):
        return None
    # As gunicorn's PATH_INFO: the target's bytes percent-decoded, as Latin-1 text.
    path = unquote_to_bytes(target.group(1).decode("ascii")).decode("latin-1")
    return Request(path, {k.decode("ascii"): v.decode("latin-1") for k, v in headers.items()}, body,
                   connection == b"close")


def _headers(lines, max_field, scheme_headers):
    """{lower-case name: value without surrounding blanks}, or None when one is not plain.
    A scheme header (X-Forwarded-Proto, ...) is not: gunicorn checks those from trusted peers
    against each other (400 when they disagree)."""
    headers = {}
    for line in lines:
        name, colon, value = line.partition(b":")
        # gunicorn counts a field line with its CRLF against the limit.
        if not colon or len(line) + 2 > max_field or not _NAME.fullmatch(name) or not _VALUE.fullmatch(value):
            return None  # also a folded line (it starts with a blank, which no name has)
        name = name.lower()
        if name in headers or name in _NOT_PLAIN or name in scheme_headers:
            return None
        headers[name] = value.strip(b" \t")
    return headers


_date = (0, "")  # (second, its Date value): replaced whole, so threads never see half of one


def _http_date():
    """gunicorn's Date value, formatted once a second instead of once a request."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, formatdate(now, localtime=False, usegmt=True))
    return _date[1]


def answer(status_line, content_type, data, close):
    """The bytes gunicorn would send for this WSGI answer: its status line and its own headers
    (Server, Date, Connection) first, then the application's, then the body."""
    head = (f"HTTP/1.1 {status_line}\r\nServer: {SERVER}\r\nDate: {_http_date()}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n\r\n")
    return head.encode("latin-1") + data
