"""Reconcilers keyed by action kind (`wordpress.create_draft`, `http.<action>`, ...).

An operation's kind comes from its target's system and its action's base name:
target `wordpress:test:101` + action `upload_media:hero` -> `wordpress.upload_media`.
An action already written as `system.action` keeps its own system.
"""

_REGISTRY = {}


def register(kind, reconciler):
    _REGISTRY[kind] = reconciler


def unregister(kind):
    _REGISTRY.pop(kind, None)


def action_kind(action, target):
    base = action.split(":", 1)[0]
    if "." in base:
        return base
    system = (target or "").split(":", 1)[0] or "generic"
    return f"{system}.{base}"


def find(action, target):
    kind = action_kind(action, target)
    return _REGISTRY.get(kind) or _REGISTRY.get(kind.split(".", 1)[0] + ".*")


def kinds():
    return sorted(_REGISTRY)
