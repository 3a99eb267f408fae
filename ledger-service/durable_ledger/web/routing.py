"""The API's one route table: each route declared once, where its view is, with `api` (method,
path, role, body, summary). The declaration registers the Flask route, enforces the role and
reads the body (kernel/bodies.py) before the view runs; the hot routes (gate/fast_routes.py)
answer from the same entries without Flask; /openapi.json and /v1/whoami are generated from
``ROUTES``.

A view takes its path parameters by name, and ``who`` (the principal, already checked for the
role), ``body`` (the body as read) and ``cfg`` (the Config) when it names them. A hot view
returns the JSON object it answers with (Flask serialises a dict as ``jsonify`` does).
"""

import inspect
import re
from dataclasses import dataclass
from typing import Callable

from flask import request

from . import schemas
from .context import config, principal

ROUTES = []  # every API route in the order declared

# Path parameters as /openapi.json names them (a Flask rule says <path:key>).
_DOC_PARAMS = {"key": "operation_key"}
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


@dataclass(frozen=True)
class Route:
    method: str       # GET, POST, PUT, DELETE
    rule: str         # the Flask rule, prefix included: /v1/operations/<path:key>/confirm
    roles: tuple      # ("runner",), ("runner", "editor"), ("any",): any token; ("none",): no token
    body: object      # a kernel/bodies.py schema class, "<binary>", "<webhook>" or None
    summary: str
    query: tuple      # query parameters, for the document
    view: Callable
    hot: bool         # also answered by gate/fast_routes.py without Flask

    @property
    def path(self):
        """The OpenAPI path: /v1/operations/{operation_key}/confirm."""
        return _CONVERTER.sub(lambda m: "{" + _DOC_PARAMS.get(m.group(1), m.group(1)) + "}", self.rule)

    def allows(self, role):
        """May a token of ``role`` call this route (what the route's role check lets through)?"""
        return "none" not in self.roles and (role == "admin" or "any" in self.roles or role in self.roles)

    def who(self, who):
        """The role check: the principal, or Forbidden."""
        return who if self.roles == ("any",) else who.require(*self.roles)

    def call(self, who, body, cfg, path_args):
        """The view with what it names of who, body and cfg."""
        wants = _wants(self.view)
        kwargs = dict(path_args)
        if "who" in wants:
            kwargs["who"] = who
        if "body" in wants:
            kwargs["body"] = body
        if "cfg" in wants:
            kwargs["cfg"] = cfg
        return self.view(**kwargs)


_wanted = {}


def _wants(view):
    names = _wanted.get(view)
    if names is None:
        names = _wanted[view] = frozenset(inspect.signature(view).parameters)
    return names


def api(bp, method, rule, role, summary, body=None, query=(), hot=False):
    """Declare one API route on blueprint ``bp`` (see the module docstring)."""
    roles = tuple(r.strip() for r in role.split(","))

    def decorate(view):
        route = Route(method, (bp.url_prefix or "") + rule, roles, body, summary, tuple(query), view, hot)

        def endpoint(**path_args):
            who = None if roles == ("none",) else route.who(principal())
            read = schemas.load(body, request) if isinstance(body, type) else None
            return route.call(who, read, config(), path_args)

        endpoint.__name__ = endpoint.__qualname__ = view.__name__
        endpoint.__doc__ = view.__doc__
        bp.add_url_rule(rule, view.__name__, endpoint, methods=[method])
        ROUTES.append(route)
        return view

    return decorate
