"""Refusing a body cheaply: item counts before any item is validated, field errors capped."""

from marshmallow import fields, validate

from ..kernel.errors import ValidationFailed

MAX_FIELD_ERRORS = 50  # listed in a 422's details.fields; the rest are counted in omitted_errors


def check_counts(schema, data):
    """Item-count limits of top-level lists, on the raw body, before any item is validated: a
    2 MiB batch of a million items took 23-33 s to refuse (every item validated and reported
    first) with a 47 MB answer."""
    for name, field in schema.fields.items():
        value = data.get(field.data_key or name)
        if not isinstance(field, fields.List) or not isinstance(value, list):
            continue
        for check in field.validators:
            if isinstance(check, validate.Length) and check.max is not None and len(value) > check.max:
                raise ValidationFailed(f"{name} has {len(value)} items; at most {check.max} are taken",
                                       {"fields": {name: [f"at most {check.max} items"]}, "max_items": check.max})


def cap_messages(messages, limit=MAX_FIELD_ERRORS):
    """marshmallow's nested messages, keeping the first ``limit`` fields that failed (in the
    body's order) and counting the rest: an error answer stays small whatever the body."""
    kept, omitted = 0, 0

    def walk(node):
        nonlocal kept, omitted
        out = {}
        for key, value in node.items():
            if isinstance(value, dict):
                sub = walk(value)
                if sub:
                    out[key] = sub
            elif kept < limit:
                kept += 1
                out[key] = value
            else:
                omitted += 1
        return out

    return (walk(messages) if isinstance(messages, dict) else messages), omitted


def validation_failed(messages):
    """The 422 for marshmallow's ``messages``, at most MAX_FIELD_ERRORS of them listed."""
    listed, omitted = cap_messages(messages)
    return ValidationFailed("request validation failed",
                            {"fields": listed, **({"omitted_errors": omitted} if omitted else {})})
