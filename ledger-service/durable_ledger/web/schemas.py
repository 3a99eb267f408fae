"""A request's JSON body read by its declaration (kernel/bodies.py): 400 for non-JSON, 413 past
the body limit (raised by the read itself), 422 for bad values or fields."""

from flask import current_app

from ..kernel import bodies, limits
from ..kernel.errors import MalformedJson


def parse(raw):
    """The body bytes as a JSON object (empty: {})."""
    data = limits.parse_json(raw) if raw.strip() else {}
    if not isinstance(data, dict):
        raise MalformedJson("request body must be a JSON object", {})
    return data


def load(schema_cls, request):
    return bodies.read(schema_cls, parse(request.get_data(cache=True)), current_app.config["DURABLE"])
