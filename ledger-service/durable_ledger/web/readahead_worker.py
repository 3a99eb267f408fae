"""The gunicorn worker `serve` and `proxy serve` run: gthread, but a thread only gets a request
that has fully arrived.

gunicorn's gthread worker hands a connection to a thread as soon as it is readable and the
thread then reads the request with a blocking socket: one byte of a request line, or headers
announcing a body that never comes, holds a thread until the client goes away (20 such
connections kept /health unanswered for 20+ s with 2 workers x 8 threads), and a fresh
connection that sends nothing holds one for 5 s.

Here the worker's main loop (the selector gunicorn already runs) reads every request
without blocking into a buffer of its own, until the headers and the Content-Length body
(or a chunked body's last chunk) are in; only then does a thread parse it, from that buffer,
without touching the socket. The buffer is bounded: a body announced larger than
``max_body_bytes`` is answered 413 at once; one between ``readahead_bytes`` (the JSON body
limit) and that (an artifact upload, a proxy media upload) goes to a thread after its headers
and is read there under a socket timeout of ``read_timeout``; a header block larger than
``MAX_HEADER_BYTES`` goes to gunicorn's parser (which refuses it). A request that is not
complete ``read_timeout`` seconds after its first wait began is answered 408 and closed, so
idle and stalled connections cost a socket and a buffer, never a thread.

  main loop                          thread pool
  accept / readable -> recv (non-blocking) into conn.pending
  ... more bytes ...  -> complete?  -- yes --> parse conn.pending, run the app, answer
  deadline passed     -> 408, close          keep-alive: back to the main loop

Not for TLS (the bytes read here would be ciphertext): `serve` binds plain HTTP, behind a
TLS-terminating front where there is one.

The lean lane, for the gate's hot routes (what an app offers as ``app.lean_answer``): a thread
that finds a plain request in its buffer (lean_http.py) answers it without gunicorn's parser,
environ and response objects, in one send. It then keeps the connection for up to ``LINGER_S``
while the pool has nothing queued: a client that gates steps one after the other sends its next
request as soon as it has the answer, and a request that arrives whole in that window is
answered by the same thread, without the round trip through the main loop (a selector
unregister and register, a pipe write to wake the loop, a future's callbacks and a thread
hand-off: more Python per request than the gate's own). A request that is not whole by then
goes back to the main loop with the bytes read so far, under the read timeout as any other,
so a slow client still never holds a thread longer than ``LINGER_S``.
"""

import errno
import json
import os
import re
import select
import selectors
import socket
import time
from functools import partial

from gunicorn.workers.gthread import TConn, ThreadWorker

from ..kernel.errors import LedgerError, PayloadTooLarge
from . import lean_http
from .errors import INTERNAL_ERROR

_INTERNAL_ERROR_BYTES = (json.dumps(INTERNAL_ERROR, separators=(",", ":")) + "\n").encode()

STOP_LINGER_S = 2.0
# How long a thread that answered on the lean lane waits for the same client's next request.
# The client of a sequential workflow sends it within a fraction of a millisecond of reading the
# answer on an idle machine, a few milliseconds on a loaded one; a client with think time (n8n
# calling the remote between begin and confirm) costs the thread this long, never the CPU.
LINGER_S = 0.005
LINGER_SLICE_S = 0.0005  # how soon a lingering thread sees that a request waits for a thread
# What _linger found: the next request whole in the buffer, back to the main loop, or closed.
NEXT, KEEP, CLOSE = "next", "keep", "close"
STREAM = -1
MAX_HEADER_BYTES = 64 * 1024  # gunicorn's own limits (100 fields of 8 KiB) refuse it further
_CONTENT_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*(\S*)[ \t]*$", re.I | re.M)
_CHUNKED = re.compile(rb"^transfer-encoding[ \t]*:.*chunked", re.I | re.M)
_EXPECT = re.compile(rb"^expect[ \t]*:[ \t]*100-continue", re.I | re.M)


class RequestTimeout(LedgerError):
    """The request did not arrive whole within the server's read timeout."""

    code, http_status = "request_timeout", 408


def request_end(buf, readahead_bytes, max_body):
    """Where the first request in ``buf`` ends: its length, ``None`` while it is incomplete,
    ``STREAM`` for a body over ``readahead_bytes`` (the thread reads it, under the read timeout),
    or a ``LedgerError`` to answer instead. Malformed framing counts as complete (gunicorn's
    parser answers it 400)."""
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return len(buf) if len(buf) > MAX_HEADER_BYTES else None
    head = bytes(buf[:head_end])
    body_start = head_end + 4
    if _CHUNKED.search(head):
        return _chunked_end(buf, body_start, readahead_bytes)
    lengths = _CONTENT_LENGTH.findall(head)
    if not lengths:
        return body_start
    if len(set(lengths)) != 1 or not lengths[0].isdigit():
        return len(buf)
    length = int(lengths[0])
    if length > max_body:
        return PayloadTooLarge(f"the request body is larger than {max_body} bytes", {"max_bytes": max_body})
    if length > readahead_bytes:
        return STREAM
    return body_start + length if len(buf) >= body_start + length else None


def _chunked_end(buf, pos, readahead_bytes):
    """The end of a chunked body starting at ``pos`` (trailers included), as request_end."""
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            return None if len(buf) - pos < 1024 else len(buf)
        try:
            size = int(bytes(buf[pos:line_end]).split(b";")[0].strip(), 16)
        except ValueError:
            return len(buf)
        if size == 0:
            trailers_end = buf.find(b"\r\n\r\n", line_end)
            if buf[line_end:line_end + 4] == b"\r\n\r\n" or trailers_end >= 0:
                return (line_end if buf[line_end:line_end + 4] == b"\r\n\r\n" else trailers_end) + 4
            return None
        pos = line_end + 2 + size + 2
        if len(buf) > readahead_bytes:
            return STREAM
        if len(buf) < pos:
            return None


def _answer_and_close(sock, error):
    body = json.dumps(error.to_dict()).encode()
    head = (f"HTTP/1.1 {error.http_status} {error.code.replace('_', ' ').title()}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    try:
        sock.send(head.encode() + body, socket.MSG_DONTWAIT)
    except OSError:
        pass  # the client is gone or not reading: closing is all that is left


class ReadAheadWorker(ThreadWorker):
    """gthread with requests read whole in the main loop (module docstring). ``serve`` makes a
    subclass with the two limits set."""

    readahead_bytes = 2 * 1024 * 1024  # DURABLE_MAX_BODY_BYTES: every JSON route's body
    max_body_bytes = 32 * 1024 * 1024  # artifacts (ledger), media (proxy): streamed by the thread
    read_timeout = 15.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.cfg.is_ssl:
            raise RuntimeError("the read-ahead worker serves plain HTTP; terminate TLS in front of it")
        self.reading = {}  # conn -> deadline; insertion order is deadline order

    def accept(self, listener):
        try:
            client_sock, client_addr = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = TConn(self.cfg, client_sock, client_addr, listener.getsockname())  # non-blocking
        conn.pending = bytearray()
        self._start_reading(conn)

    def _start_reading(self, conn):
        conn.sent_continue = conn.streamed = False
        self.reading[conn] = time.monotonic() + self.read_timeout
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def on_client_socket_readable(self, conn, client):
        """A kept-alive connection has its next request coming: read it here as well."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        conn.pending = bytearray()
        self._start_reading(conn)
        self._on_readable(conn, client)

    def _on_readable(self, conn, client):
        try:
            data = client.recv(65536, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client closed before its request was whole
            self._drop(conn)
            return
        conn.pending += data
        self._advance(conn)

    def _advance(self, conn):
        """Hand the request to a thread once it is whole; refuse it at once if it cannot be."""
        end = request_end(conn.pending, self.readahead_bytes, self.max_body_bytes)
        conn.streamed = end == STREAM
        if isinstance(end, LedgerError):
            _answer_and_close(conn.sock, end)
            self._drop(conn)
        elif end is not None:
            self._stop_reading(conn)
            self.enqueue_req(conn)
        elif not conn.sent_continue and b"\r\n\r\n" in conn.pending \
                and _EXPECT.search(bytes(conn.pending[:conn.pending.find(b"\r\n\r\n")])):
            # The client waits for this before it sends the body; the thread must not send it again.
            conn.sent_continue = True
            try:
                conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n", socket.MSG_DONTWAIT)
            except OSError:
                pass

    def _stop_reading(self, conn):
        self.poller.unregister(conn.sock)
        del self.reading[conn]

    def _drop(self, conn):
        self._stop_reading(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self):
        super().murder_pending()
        now = time.monotonic()
        if not self.alive:
            # Stopping: a connection with no request begun goes now, one mid-request gets
            # STOP_LINGER_S to finish, not the whole read timeout.
            self._stopping_at = getattr(self, "_stopping_at", None) or now
            for conn in [c for c in self.reading if not c.pending or now > self._stopping_at + STOP_LINGER_S]:
                self._drop(conn)
        while self.reading:
            conn, deadline = next(iter(self.reading.items()))
            if deadline > now:
                break
            _answer_and_close(conn.sock, RequestTimeout(
                f"the request did not arrive whole within {self.read_timeout:g} s", {"timeout_s": self.read_timeout}))
            self._drop(conn)

    def load_wsgi(self):
        super().load_wsgi()
        cfg = self.cfg
        # The lean lane writes no access log line and runs no request hooks: only where there are none.
        plain = not (cfg.accesslog or cfg.statsd_host or cfg.is_ssl or os.environ.get("SCRIPT_NAME"))
        self.lean_answer = getattr(self.wsgi, "lean_answer", None) if plain else None
        self.lean_policy = (cfg.limit_request_line or 8190, cfg.limit_request_fields or 100,
                            cfg.limit_request_field_size or 8190,
                            frozenset(name.lower().encode("latin-1") for name in cfg.secure_scheme_headers))

    def handle(self, conn):
        """In a thread: the request is whole in conn.pending. A plain hot one is answered on the
        lean lane (and the next one too, if it comes at once); anything else goes to gunicorn's
        parser, which reads it from there."""
        conn.data_ready = True  # never gthread's wait for a first byte: the bytes are here
        conn.sock.setblocking(True)
        conn.init()
        while self.lean_answer is not None:
            kept = self._lean(conn)
            if kept is None:
                break
            found = self._linger(conn) if kept else CLOSE
            if found != NEXT:
                return found == KEEP
        conn.parser.unreader.unread(bytes(conn.pending))
        conn.pending = bytearray()
        return super().handle(conn)

    def _lean(self, conn):
        """Answer the request in conn.pending here if it is plain and hot: whether the connection
        stays open, or None (nothing was done: gunicorn's path)."""
        head_end = conn.pending.find(b"\r\n\r\n")
        req = lean_http.read(conn.pending, head_end, self.lean_policy) if head_end > 0 else None
        try:
            answer = self.lean_answer(req.path, req.headers, req.body) if req else None
        except Exception:  # the handler answers its own errors; this is one of the lane itself
            self.log.exception("Error handling request %s", req.path)
            answer, req.close = ("500 INTERNAL SERVER ERROR", _INTERNAL_ERROR_BYTES), True
        if answer is None:
            return None
        conn.pending = bytearray()
        self.nr += 1
        if self.nr >= self.max_requests and self.alive:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False
        # As gthread's handle_request decides it for a response of known length.
        close = req.close or not self.alive or not self.cfg.keepalive \
            or len(self.keepalived_conns) >= self.max_keepalived
        try:
            conn.sock.sendall(lean_http.answer(answer[0], "application/json", answer[1], close))
        except OSError:
            return False
        return not close

    def _linger(self, conn):
        """After a lean answer: wait here up to LINGER_S for the client's next request (module
        docstring), in slices, and never while another connection's request waits for a thread.
        NEXT: it is whole in conn.pending; KEEP: back to the main loop (with what came of it, if
        anything); CLOSE: the client closed or the socket failed."""
        sock, deadline = conn.sock, time.monotonic() + LINGER_S
        conn.sent_continue = conn.streamed = False
        try:
            while self.alive and not self._queued() and (left := deadline - time.monotonic()) > 0:
                if not select.select((sock,), (), (), min(left, LINGER_SLICE_S))[0]:
                    continue
                data = sock.recv(65536, socket.MSG_DONTWAIT)
                if not data:
                    return CLOSE
                conn.pending += data
                end = request_end(conn.pending, self.readahead_bytes, self.max_body_bytes)
                if end is not None:  # whole, or one the main loop answers (413) or streams
                    return NEXT if isinstance(end, int) and end > 0 else KEEP
            return KEEP
        except (BlockingIOError, InterruptedError):
            return KEEP
        except (OSError, ValueError):
            return CLOSE

    def _queued(self):
        """Whether a request waits for a thread of the pool (it must not wait on a linger)."""
        work_queue = getattr(self.tpool, "_work_queue", None)
        return work_queue is None or not work_queue.empty()

    def handle_request(self, req, conn):
        if conn.sent_continue:  # answered from the main loop already
            req.headers = [(name, value) for name, value in req.headers if name != "EXPECT"]
        if conn.streamed:
            # A large upload is read here, in the thread: a stall ends it after the read timeout
            # (the socket raises TimeoutError) instead of holding the thread.
            conn.sock.settimeout(self.read_timeout)
        return super().handle_request(req, conn)

    def finish_request(self, conn, fs):
        """A pipelined request already read past the last one goes through the read-ahead too,
        never straight to a thread that would block on the rest of it; so does the start of a
        request a lingering thread gave back (``conn.pending``), stopping or not."""
        if not fs.cancelled() and fs.exception() is None and fs.result():
            if not conn.pending and self.alive and conn.parser is not None and conn.parser.unreader.buf.getvalue():
                conn.pending = bytearray(conn.parser.unreader.take_buffered())
            if conn.pending:
                conn.sock.setblocking(False)
                self._start_reading(conn)
                self._advance(conn)
                return
        super().finish_request(conn, fs)


def worker_class(readahead_bytes, max_body_bytes, read_timeout):
    """A ReadAheadWorker with these limits (gunicorn takes a class as ``worker_class``)."""
    return type("ReadAheadWorker", (ReadAheadWorker,),
                {"readahead_bytes": int(readahead_bytes), "max_body_bytes": int(max(max_body_bytes, readahead_bytes)),
                 "read_timeout": float(read_timeout)})
