"""The HTTP server `serve` and `proxy serve` run: waitress, in ``workers`` processes sharing one
listening socket. Nothing here reads or writes HTTP bytes: waitress frames every request.

Why waitress (chosen by measurement, docs/operations.md "The server"): its I/O loop reads each
request whole, head and body, before a thread of its pool sees it (a body over 512 KiB is spooled
to a temporary file), so an idle connection, a head cut short, a body that stalls after its
Content-Length or in the middle of a chunk, or an ``Expect: 100-continue`` the client never
follows holds a connection slot, never a thread: a normal request is still answered at once.
Malformed framing is refused by waitress before the app is called, answered in the API's error
shape (web/server_errors.py) and the connection closed.

The settings below are waitress's own:
- ``channel_timeout``: a connection with no request running that sent nothing for
  ``read_timeout`` seconds is closed (an idle keep-alive, a stalled head or body alike); checked
  every ``cleanup_interval``;
- ``max_request_header_size`` (64 KiB: 431 past it) and ``max_request_body_size`` (413 when a
  Content-Length announces more, or a chunked body grows past it);
- ``connection_limit`` per process (``--connection-limit``, 1000): past it waitress stops
  accepting until a slot frees (the kernel's backlog queues the rest);
- ``asyncore_use_poll``: poll(), not select(), so descriptors past 1024 work.

Processes: one waitress is one interpreter (one GIL), so a second core needs a second process. The
parent binds the socket, forks the workers (each builds its own app and database connections),
starts a new one when one dies, and passes SIGTERM / SIGINT on; a worker stops with its parent,
SIGKILL included (Linux: PR_SET_PDEATHSIG).
"""

import logging
import os
import signal
import socket
import sys
import time

log = logging.getLogger("durable_ledger")

MAX_HEADER_BYTES = 64 * 1024
CONNECTIONS_PER_WORKER = 1000
# A worker that dies this soon after its start is started again only after this long: an app that
# cannot start (a database that refuses) must not turn the parent into a fork loop.
RESTART_PAUSE_S = 1.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def run(app_factory, host, port, workers, threads, read_timeout, max_body_bytes,
        connection_limit=CONNECTIONS_PER_WORKER):
    """Serve until SIGTERM or SIGINT; returns once every worker has stopped."""
    sock = socket.create_server((host, port), backlog=2048)
    sock.setblocking(False)
    settings = {"threads": threads, "channel_timeout": read_timeout,
                "cleanup_interval": max(1, min(5, int(read_timeout // 3) or 1)),
                "max_request_header_size": MAX_HEADER_BYTES, "max_request_body_size": int(max_body_bytes),
                "connection_limit": connection_limit, "asyncore_use_poll": True, "ident": "durable-ledger"}
    children = {}
    stopping = []

    def stop(signum, _frame):
        stopping.append(signum)
        for pid in children:
            _signal(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for _ in range(max(1, workers)):
        pid = _fork(app_factory, sock, settings)
        children[pid] = time.monotonic()
    log.info("serving on http://%s:%s (%d workers x %d threads)", host, port, len(children), threads)
    while children:
        time.sleep(0.2)
        for pid, started in list(children.items()):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if not done:
                continue
            del children[pid]
            if stopping:
                continue
            log.warning("worker %d exited (%s): starting another", pid, _how(status))
            if time.monotonic() - started < RESTART_PAUSE_S:
                time.sleep(RESTART_PAUSE_S)
            children[_fork(app_factory, sock, settings)] = time.monotonic()
    sock.close()


def _fork(app_factory, sock, settings):
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        _die_with_parent(parent)
        # SystemExit in the main thread: waitress's loop ends and its pool finishes the requests
        # it is running (task_dispatcher.shutdown) before the process exits.
        signal.signal(signal.SIGTERM, _exit)
        signal.signal(signal.SIGINT, _exit)
        from waitress.server import TcpWSGIServer, create_server  # in the worker: the parent never loads the app

        from .server_errors import Channel

        # "Task queue depth is N" on every request that waits for a thread: load, not news.
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)
        srv = create_server(app_factory(), sockets=[sock], **settings)
        assert isinstance(srv, TcpWSGIServer), srv  # one socket: one server, whose accept makes the channels
        srv.channel_class = Channel  # waitress's refusals in the API's error shape
        srv.run()
        code = 0
    except BaseException:  # noqa: BLE001 - the worker reports why it ends, then leaves
        log.exception("worker %d failed", os.getpid())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # never back into the parent's code (its loop, its finally blocks)


def _exit(_signum, _frame):
    # Once: `stop` above and a signal to the whole process group may both deliver one, and a
    # second SystemExit would cut waitress's shutdown short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise SystemExit(0)


def _die_with_parent(parent):
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the parent died between fork and prctl
        raise SystemExit(0)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _how(status):
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"code {os.WEXITSTATUS(status)}"
