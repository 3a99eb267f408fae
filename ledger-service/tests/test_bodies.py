"""The request bodies' one declaration (kernel/bodies.py): what it says is what every reader
reads, and what /openapi.json shows.

The readers are one function (`bodies.read`: the HTTP routes, the hot routes and LocalLedger
call it), so nothing here compares copies; these tests pin the declaration itself: its limits,
its refusals in the error shape the clients and the n8n node read, and the document.
"""

import pytest
from marshmallow import ValidationError, fields, validate

from durable_ledger.kernel import bodies, states
from durable_ledger.kernel.config import Config
from durable_ledger.kernel.errors import ValidationFailed

CFG = Config.from_env({})


def _read(schema, data):
    try:
        return bodies.read(schema, data, CFG)
    except ValidationFailed as exc:
        return exc.to_dict()["error"]


# -- the limits and rules each written once ---------------------------------------------------

def test_the_batch_limit_is_declared_once_and_refused_before_any_item_is_read():
    items = [{"nonsense": i} for i in range(bodies.MAX_BATCH_ITEMS + 1)]
    for name in ("confirm", "begin"):
        err = _read(bodies.BatchSchema, {name: items})
        assert err == {"code": "validation_error", "message": f"{name} has 101 items; at most 100 are taken",
                       "details": {"fields": {name: ["at most 100 items"]}, "max_items": 100}}


def test_the_error_kinds_are_the_classifiers():
    assert bodies.OutcomeSchema().fields["error_kind"].validators[0].choices == list(states.ERROR_KINDS)
    for kind in states.ERROR_KINDS:
        assert states.classify_outcome(error_kind=kind) in ("unknown", "fail")
    err = _read(bodies.OutcomeSchema, {"fencing_token": 1, "error_kind": "eof"})
    assert err["details"]["fields"] == {"error_kind": ["Must be one of: timeout, connection_reset, "
                                                      "connection_refused, dns."]}


@pytest.mark.parametrize("value, message", [
    ("tomorrow", "must be an ISO 8601 timestamp"),
    ("9999-12-31T23:00:00-12:00", "must be at most 100 years from now"),
])
def test_the_expiry_rule(value, message):
    body = {"job_id": "j", "task_version": 1, "action": "a", "content_digest": "a" * 64, "target": "t",
            "expires_at": value}
    assert _read(bodies.ApprovalSchema, body)["details"]["fields"] == {"expires_at": [message]}


def test_defaults_are_filled_in():
    out = bodies.read(bodies.BeginSchema, {"job_id": "j", "action": "a", "fencing_token": 1}, CFG)
    assert out == {"job_id": "j", "action": "a", "fencing_token": 1, "operation_key": None, "target": None,
                   "requires_approval": False, "approval_policy": None}
    assert bodies.read(bodies.JobPutSchema, {}, CFG) == {"task_version": 1, "pipeline": "generic", "phases": None,
                                                         "budgets": {}, "session_id": None, "policy_hash": None}


def test_refusals_in_the_error_shape():
    err = _read(bodies.BeginSchema, {"job_id": "a/b", "action": "", "fencing_token": "1", "colour": 1})
    assert err == {"code": "validation_error", "message": "request validation failed", "details": {"fields": {
        "job_id": ["must not contain '/'"], "action": ["must be 1 to 255 characters"],
        "fencing_token": ["Not a valid integer."], "colour": ["Unknown field."]}}}
    err = _read(bodies.JobPutSchema, {"budgets": {"max_attempts": "abc", "max_cost": -1}})
    assert err["details"]["fields"] == {"budgets": {
        "max_attempts": ["Not a valid integer."],
        "max_cost": ["Must be greater than or equal to 0 and less than or equal to 1000000000000000.0."]}}


def test_sized_fields_and_nested_items():
    big = {"x": "y" * CFG.max_receipt_bytes}
    err = _read(bodies.ConfirmSchema, {"fencing_token": 1, "remote_id": 1, "receipt": big})
    assert err["details"]["max_bytes"] == CFG.max_receipt_bytes and "receipt" in err["details"]["fields"]
    err = _read(bodies.BatchSchema, {"confirm": [{"operation_key": "k", "fencing_token": 1, "remote_id": 1,
                                                  "receipt": big}]})
    assert err["details"]["max_bytes"] == CFG.max_receipt_bytes


def test_field_errors_are_capped():
    body = {f"f{i}": i for i in range(80)}
    err = _read(bodies.CancelSchema, body)
    assert len(err["details"]["fields"]) == bodies.MAX_FIELD_ERRORS and err["details"]["omitted_errors"] == 30


# -- the plain read is Schema.load for every body it takes -------------------------------------

VALUES = {
    "fencing_token": [1, 0, -1, 2**31, 1.0, True, "1", None],
    "remote_id": [1, "r", "", True, 1.5, None, "x" * 256, 10**300, []],
    "receipt": [{}, {"a": 1}, None, [], "x"],
    "cost": [None, 0, 1.5, -1, 1e13, True, "1"],
    "http_status": [None, 100, 599, 600, 99, "200", 200.0, True],
    "error_kind": [None, "timeout", "other", 1],
    "error": [{}, None, []],
    "job_id": ["j1", "a/b", "", " j", ".", 1, None],
    "action": ["send", "a//b", "x" * 256, None],
    "operation_key": [None, "k", "k/", "a/./b", "\u00e9", 1, ""],
    "target": [None, "wordpress:prod", "", "x" * 256, 1],
    "requires_approval": [False, True, "yes", "no", 1, 0, 2, None, "maybe"],
    "payload": [None, {"a": 1}, [], "x"],
    "request_hash": ["a" * 64, "A" * 64, "a" * 63, "a" * 64 + "\n", None],
}


def _variants(base, names):
    yield dict(base)
    for name in names:
        for value in VALUES[name]:
            yield {**base, name: value}
        yield {k: v for k, v in base.items() if k != name}


PLAIN = [
    (bodies.ConfirmSchema, {"fencing_token": 1, "remote_id": 1}),
    (bodies.OutcomeSchema, {"fencing_token": 1}),
    (bodies.BeginSchema, {"job_id": "j1", "action": "a", "fencing_token": 1}),
    (bodies.BatchConfirmSchema, {"operation_key": "k", "fencing_token": 1, "remote_id": 1}),
]


@pytest.mark.parametrize("schema, base", PLAIN, ids=lambda v: getattr(v, "__name__", ""))
def test_the_plain_read_takes_only_what_load_takes_and_reads_it_alike(schema, base):
    inst = bodies.instance(schema)
    names = [n for n in VALUES if n in inst.fields]
    for body in _variants(base, names):
        plain = bodies._plain(inst, body)
        try:
            loaded = inst.load(body)
        except ValidationError:
            loaded = None
        assert plain is None or plain == loaded, body
        assert loaded is None or plain == loaded, body  # a good body is never left to the slow read


# -- /openapi.json shows every declared body with its limits -----------------------------------

def _limits(field):
    """What the document must show of a field: (JSON key, value) pairs."""
    out = []
    for v in field.validators:
        if isinstance(v, validate.Length):
            key = ("minItems", "maxItems") if isinstance(field, fields.List) else ("minLength", "maxLength")
            out += [(k, n) for k, n in zip(key, (v.min, v.max)) if n is not None]
        elif isinstance(v, validate.Range):
            out += [(k, n) for k, n in (("minimum", v.min), ("maximum", v.max)) if n is not None]
        elif isinstance(v, validate.OneOf):
            out.append(("enum", list(v.choices)))
        elif isinstance(v, validate.Regexp):
            out.append(("pattern", v.regex.pattern))
    return out


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_every_declared_body_is_in_the_document_with_its_limits(client):
    doc = client.get("/openapi.json").get_json()
    shown = doc["components"]["schemas"]
    declared = bodies.declared()
    assert set(declared) <= set(shown), set(declared) - set(shown)
    for name, cls in declared.items():
        props = shown[name]["properties"]
        schema = bodies.instance(cls)
        assert set(props) == set(schema.fields), name
        assert set(shown[name].get("required", [])) == {n for n, fd in schema.fields.items() if fd.required}, name
        for field_name, field in schema.fields.items():
            prop = props[field_name]
            for key, value in _limits(field):
                if key == "enum" and field.allow_none:
                    value = [*value, None]  # apispec lists null among a nullable field's values
                assert prop.get(key) == value, (name, field_name, key, prop)
    # and every body a route takes is one of them
    used = {op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
            for ops in doc["paths"].values() for op in ops.values()
            if "application/json" in op.get("requestBody", {}).get("content", {})
            and "$ref" in op["requestBody"]["content"]["application/json"]["schema"]}
    assert used <= set(declared)
