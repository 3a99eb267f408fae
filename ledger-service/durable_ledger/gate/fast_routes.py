"""The hot routes without Flask: the routes declared ``hot`` in the route table (web/routing.py;
begin, batch, confirm and outcome in gate/routes.py) as a thin WSGI handler in front of the app.

A gated step is two requests (begin, then confirm or outcome, or a share of two batches), and most of what a request cost
was Werkzeug's request and response objects, Flask's dispatch and marshmallow, none of which
protects anything the gate does not check again. This handler answers exactly those requests
when they are plain: ``POST`` to the exact path, no query string, a JSON body with a
Content-Length within the body limit. Everything else (another route or method, a form, a
chunked or oversized body) goes to the Flask app untouched. Tracing on or off, a hot request
takes the same code: with a tracer, inside a request span as the Flask instrumentation would
make (web/tracing.py server_span).

What it does itself is what the Flask route does: the same database connection per request,
the same n8n provenance, the same token check (401 / 403 through the same error answer, the
same audit rows for counted refusals), then the body read by the same declaration and reader
(kernel/bodies.py, so a refusal is the route's word for word), the same gate call and the same
JSON.
"""

import io
import logging
import re
from contextlib import contextmanager

from werkzeug.http import HTTP_STATUS_CODES

from ..auth import authenticate, bearer_from_header
from ..kernel import bodies, limits, n8n_context
from ..kernel.errors import InvalidValue, LedgerError
from ..store.audit import record_refusal
from ..store.db import DataError, open_request_connection, release_request_connection
from ..web import schemas, tracing
from ..kernel.errors import COUNTED_REFUSALS
from ..web.errors import INTERNAL_ERROR, bounded, unavailable_answer
from ..web.routing import ROUTES
from . import routes  # noqa: F401  (declares the hot routes)

log = logging.getLogger("durable_ledger")

# The request headers the handler reads: WSGI environ key -> lower-case header name.
_HEADER_NAMES = {"HTTP_X_N8N_EXECUTION_ID": "x-n8n-execution-id", "HTTP_X_N8N_WORKFLOW_ID": "x-n8n-workflow-id",
                 "HTTP_AUTHORIZATION": "authorization"}
_KEYED = re.compile(r"(.*)<path:(\w+)>(/[\w-]+)")


def install(app):
    """Put the handler in front of ``app`` (and of the Flask instrumentation's wrapper, when
    tracing is on: that one sees the requests passed on)."""
    app.wsgi_app = FastGate(app, app.wsgi_app)


def _hot_routes():
    """The routes declared ``hot`` (gate/routes.py): exact paths, and rules with one key before a
    fixed last segment (prefix, key name, suffix)."""
    exact, keyed = {}, []
    for route in ROUTES:
        if route.hot:
            m = _KEYED.fullmatch(route.rule)
            if m:
                keyed.append((m.group(1), m.group(2), m.group(3), route))
            else:
                exact[route.rule] = route
    return exact, keyed


_EXACT, _KEYED_ROUTES = _hot_routes()
_PREFIXES = tuple({prefix for prefix, _, _, _ in _KEYED_ROUTES} | set(_EXACT))
_SUFFIXES = tuple(suffix for _, _, suffix, _ in _KEYED_ROUTES)


def _route(path):
    """(route, path arguments) for a hot path, or None. A key must be one the Flask route would
    take as it is (no second hot suffix inside it, the identifier grammar), else Flask decides.
    A path that is not ASCII is Flask's too: WSGI hands it over as Latin-1 text of its UTF-8
    bytes, which Werkzeug decodes and a key read here would not be."""
    if not path.startswith(_PREFIXES) or not path.isascii():
        return None
    route = _EXACT.get(path)
    if route is not None:
        return route, {}
    for prefix, name, suffix, route in _KEYED_ROUTES:
        if path.startswith(prefix) and path.endswith(suffix):
            key = path[len(prefix):-len(suffix)]
            if any(s in key for s in _SUFFIXES) or limits.id_problem(key, 512):
                return None
            return route, {name: key}
    return None


def _plain_json(content_type, length, max_bytes):
    """The body's length if the request is one this handler may take, else None."""
    mimetype = content_type.split(";", 1)[0].strip().lower()
    # ASCII digits only: "²".isdigit() is true and int() refuses it (Werkzeug reads no length).
    if mimetype != "application/json" or not (length.isascii() and length.isdigit()) \
            or not 0 < int(length) <= max_bytes:
        return None
    return int(length)


class FastGate:
    def __init__(self, app, fallback):
        self.app, self.fallback = app, fallback

    def __call__(self, environ, start_response):
        plain = None
        if environ.get("REQUEST_METHOD") == "POST" and not (
                environ.get("QUERY_STRING") or environ.get("SCRIPT_NAME") or environ.get("HTTP_TRANSFER_ENCODING")):
            plain = self._plain(environ.get("PATH_INFO", ""), environ.get("CONTENT_TYPE", ""),
                                environ.get("CONTENT_LENGTH", ""))
        if plain is None:
            return self.fallback(environ, start_response)
        raw = environ["wsgi.input"].read(plain[1])
        environ["wsgi.input"] = io.BytesIO(raw)  # for Flask, if the body is not one to take here
        # A body that ended before its Content-Length (a server handing over a cut-off stream)
        # is Flask's: Werkzeug answers it 400 even when the bytes that came are valid JSON.
        if len(raw) != plain[1]:
            return self.fallback(environ, start_response)
        with tracing.server_span(environ, plain[0][0].rule) if tracing.tracer is not None else _untraced() as answered:
            status, data = self._take(plain, raw, environ.get)
            headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
            answered(status, headers)
        start_response(status, headers)
        return [data]

    def _plain(self, path, content_type, length):
        """(hot route, body length) for a plain request to a hot path, else None."""
        hot = _route(path)
        length = _plain_json(content_type, length, self.app.config["DURABLE"].max_body_bytes) if hot else None
        return None if length is None else (hot, length, path)

    def _take(self, plain, raw, header):
        """(status line, body bytes): the route's answer or its error answer."""
        hot, _length, path = plain
        cfg = self.app.config["DURABLE"]
        status, out = self._answer(header, path, hot, raw, cfg)
        data = (self.app.json.dumps(out, **_dump_args(self.app)) + "\n").encode()
        return f"{status} {HTTP_STATUS_CODES[status].upper()}", data

    def _answer(self, header, path, hot, raw, cfg):
        """(status, JSON): the route's answer or its error answer, in the route's order (the
        token, then the body).
        ``header(environ key)``: the request header's value or None."""
        who = None
        try:
            # Inside the try: a database that cannot be reached is Flask's 503 answer here too.
            open_request_connection()
            n8n_context.set_execution(header("HTTP_X_N8N_EXECUTION_ID"), header("HTTP_X_N8N_WORKFLOW_ID"))
            who = authenticate(bearer_from_header(header("HTTP_AUTHORIZATION")), cfg.token_cache_ttl_s)
            route, path_args = hot
            route.who(who)
            body = bodies.read(route.body, schemas.parse(raw), cfg)
            return 200, route.call(who, body, cfg, path_args)
        except LedgerError as exc:
            return exc.http_status, _error(exc, who, path)
        except DataError as exc:  # as web/errors.py: the caller's value, never the driver's text
            log.warning("database refused a value on POST %s: %s", path, type(exc).__name__)
            return 422, InvalidValue("a value does not fit the database column it is stored in",
                                     {"driver_error": type(exc).__name__}).to_dict()
        except Exception as exc:
            # The database failing (down, the link cut, disk full, locked): Flask's 503 answer.
            unavailable = unavailable_answer(exc, "POST", path)
            if unavailable is not None:
                return unavailable
            if self.app.config.get("PROPAGATE_EXCEPTIONS") or self.app.testing or self.app.debug:
                raise
            log.exception("Exception on %s [POST]", path)
            return 500, INTERNAL_ERROR
        finally:
            release_request_connection()


def _error(exc, who, path):
    """web/errors.py's answer for ``exc``, and its audit row for a counted refusal."""
    if exc.code in COUNTED_REFUSALS and who is not None and not exc.recorded:
        record_refusal(who.tenant, None, who.actor, exc.code,
                       {"path": path, **{k: v for k, v in exc.details.items() if k != "fields"}})
    return bounded(exc.to_dict())


@contextmanager
def _untraced():
    yield lambda _status, _headers: None


def _dump_args(app):
    """What Flask's JSON response passes to dumps: compact unless the app is in debug."""
    compact = app.json.compact
    if (compact is None and app.debug) or compact is False:
        return {"indent": 2, "separators": (", ", ": ")}
    return {"separators": (",", ":")}
