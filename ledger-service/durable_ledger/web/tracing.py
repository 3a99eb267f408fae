"""OpenTelemetry traces for the ledger and the publishing proxy (optional extra ``otel``).

Off unless the standard variables ask for it: ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``,
or any exporter installed under the SDK's ``opentelemetry_traces_exporter`` entry point;
``none`` keeps it off) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
(implies ``otlp``). ``OTEL_SDK_DISABLED=true`` wins over both. When off, nothing here imports
OpenTelemetry and the views pay one attribute check (``tracing.tracer is None``).

When on, the SDK and its instrumentations do the work (no hand-written propagation):

* Flask instrumentation: one server span per request on each app; a W3C ``traceparent`` from
  the caller becomes the parent (``OTEL_PROPAGATORS``, default tracecontext + baggage). The n8n
  node's ``X-N8N-Execution-Id`` / ``X-N8N-Workflow-Id`` headers become the attributes
  ``n8n.execution.id`` / ``n8n.workflow.id`` on that span.
* requests instrumentation: one client span per outgoing call (the proxy's WordPress calls, the
  reconcilers' lookups), child of the request span, and ``traceparent`` injected into it.
* ``gate()``: one ``durable.gate`` span per gate decision (begin, each batch begin, lookup
  report) with job id, action, operation key, decision and fencing token. Never payloads,
  receipts, errors' details or tokens.

The other ``OTEL_*`` variables keep their standard meaning (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, the OTLP exporter's own).
"""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager

from .. import __version__
from ..kernel.errors import LedgerError
from ..kernel.n8n_context import clean_id

log = logging.getLogger("durable_ledger.tracing")

# The tracer for durable spans; None while tracing is off (the views check this and nothing else).
tracer = None
_provider = None      # the process's TracerProvider, made once (both apps share it in one process)
_own_provider = False  # made here from the environment (shut down by reset()), not passed in by use()
_ENV_TRUE = ("true", "1", "yes")


def enabled(env=None) -> bool:
    """Do the standard OTEL_* variables (or a provider given to use()) ask for traces?"""
    if _provider is not None:
        return True
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _ENV_TRUE:
        return False
    exporters = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if exporters:
        return any(e != "none" for e in exporters)
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def use(provider) -> None:
    """Trace into this TracerProvider instead of one built from the environment (tests: the
    SDK's InMemorySpanExporter). Call before create_app / create_proxy_app."""
    global _provider, _own_provider
    _provider, _own_provider = provider, False


def setup(app, service_name: str) -> None:
    """Instrument one Flask app, and requests process-wide (once)."""
    global tracer
    # optional extra 'otel': imported only once tracing is on
    from opentelemetry.instrumentation.flask import FlaskInstrumentor
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    provider = _process_provider(service_name)
    FlaskInstrumentor.instrument_app(app, tracer_provider=provider, request_hook=_request_hook)
    requests_instrumentor = RequestsInstrumentor()
    if not requests_instrumentor.is_instrumented_by_opentelemetry:
        requests_instrumentor.instrument(tracer_provider=provider)
    tracer = provider.get_tracer("durable_ledger", __version__)
    log.info("OpenTelemetry tracing on for %s", service_name)


def reset() -> None:
    """Undo setup() (tests): requests uninstrumented, tracer off, our own provider flushed and shut down."""
    global tracer, _provider, _own_provider
    # optional extra 'otel': imported only once tracing is on
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    if RequestsInstrumentor().is_instrumented_by_opentelemetry:
        RequestsInstrumentor().uninstrument()
    if _own_provider and _provider is not None:
        _provider.shutdown()
    tracer, _provider, _own_provider = None, None, False


def _process_provider(service_name):
    """The process's TracerProvider, made by the SDK from the OTEL_* variables (OpenTelemetry's
    own configurator, as ``opentelemetry-instrument`` runs it: exporters by entry point, sampler,
    resource, batch processor settings). Like OpenTelemetry's distro, this only sets defaults
    in the environment first: OTLP over HTTP/protobuf (the exporter the extra installs; the SDK
    alone would pick gRPC), and OTLP traces when only an OTLP endpoint is given (`enabled`)."""
    global _provider, _own_provider
    if _provider is not None:
        return _provider
    # optional extra 'otel': imported only once tracing is on
    from opentelemetry import trace
    from opentelemetry.distro import OpenTelemetryConfigurator
    from opentelemetry.sdk.resources import SERVICE_NAME

    os.environ.setdefault("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    if not os.environ.get("OTEL_TRACES_EXPORTER", "").strip():
        os.environ["OTEL_TRACES_EXPORTER"] = "otlp"
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by the SDK; ours is the default only.
    attrs = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name}
    OpenTelemetryConfigurator().configure(resource_attributes=attrs)
    _provider, _own_provider = trace.get_tracer_provider(), True
    return _provider


def _request_hook(span, environ):
    """The n8n execution that made the call, as attributes of the request span (ids checked as the
    job timeline checks them: anything that is not a short id is dropped)."""
    if not span or not span.is_recording():
        return
    for header, attr in (("HTTP_X_N8N_EXECUTION_ID", "n8n.execution.id"),
                         ("HTTP_X_N8N_WORKFLOW_ID", "n8n.workflow.id")):
        value = clean_id(environ.get(header))
        if value:
            span.set_attribute(attr, value)


@contextmanager
def server_span(environ, route):
    """The request span of a request the hot routes answer without Flask (gate/fast_routes.py),
    as the Flask instrumentation makes it for the others: a W3C ``traceparent`` as the parent,
    the WSGI instrumentation's request attributes, the route, the n8n ids. Yields a function
    to call with the status line and headers of the answer."""
    # optional extra 'otel': imported only once tracing is on
    from opentelemetry import trace
    from opentelemetry.instrumentation.wsgi import add_response_attributes, collect_request_attributes, wsgi_getter
    from opentelemetry.propagate import extract

    method = environ.get("REQUEST_METHOD", "POST")
    attrs = {**collect_request_attributes(environ), "http.route": route}
    with tracer.start_as_current_span(f"{method} {route}", context=extract(environ, getter=wsgi_getter),
                                      kind=trace.SpanKind.SERVER, attributes=attrs) as span:
        _request_hook(span, environ)
        yield lambda status, headers: add_response_attributes(span, status, headers)


# Attributes of a gate span: identifiers and the decision, never payloads, receipts or errors' text.
_REQUEST_ATTRS = (("job_id", "durable.job_id"), ("action", "durable.action"),
                  ("operation_key", "durable.operation_key"), ("fencing_token", "durable.fencing_token"))
_OPERATION_ATTRS = _REQUEST_ATTRS + (("state", "durable.operation.state"), ("attempt", "durable.operation.attempt"))


def _set(span, pairs, source):
    for field, attr in pairs:
        value = source.get(field)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            span.set_attribute(attr, value)


def gate(body: dict, decide):
    """``decide()`` (a gate decision) under a ``durable.gate`` span; only called when tracing is on."""
    # optional extra 'otel': imported only once tracing is on
    from opentelemetry.trace import Status, StatusCode

    # No exception events: a refusal's message and details may quote what the caller sent.
    with tracer.start_as_current_span("durable.gate", record_exception=False, set_status_on_exception=False) as span:
        _set(span, _REQUEST_ATTRS, body)
        try:
            out = decide()
        except LedgerError as exc:
            span.set_attribute("durable.decision", "refused")
            span.set_attribute("durable.error_code", exc.code)
            span.set_status(Status(StatusCode.ERROR, exc.code))
            raise
        except Exception as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        span.set_attribute("durable.decision", str(out.get("decision")))
        if isinstance(out.get("operation"), dict):
            _set(span, _OPERATION_ATTRS, out["operation"])
        if isinstance(out.get("reason"), str):
            span.set_attribute("durable.reason", out["reason"])
        return out
