"""Schema fuzzing (schemathesis) against the live OpenAPI document of a real app, both backends.

Every operation in /openapi.json gets generated requests, valid ones (positive) and ones that
break the schema (negative), sent through the Flask app with an admin token. Asserted for
every answer: never a 5xx, and every 4xx in the one error shape.

Generation is seeded by the day (DURABLE_FUZZ_SEED, default YYYYMMDD, named in every failure):
a failure reproduces with that seed, and each day's runs try other requests than yesterday's.
DURABLE_FUZZ_EXAMPLES scales the run (per operation and mode; default 30 on SQLite, a third of
that on PostgreSQL). Generating the requests is most of the cost (three quarters of a profile).
"""

import json
import os
import time

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from conftest import auth

EXAMPLES = {"sqlite": int(os.environ.get("DURABLE_FUZZ_EXAMPLES", "30")),
            "postgres": max(1, int(os.environ.get("DURABLE_FUZZ_EXAMPLES", "30")) // 3)}
SEED = int(os.environ.get("DURABLE_FUZZ_SEED") or time.strftime("%Y%m%d"))
# Objects that exist, so that a third pass reaches past "not found" into the core.
KNOWN = {"job_id": "j1", "operation_key": "acme:j1:v1:create_draft"}


def _error_shape(response):
    if not 400 <= response.status_code < 500:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        return f"{response.status_code} body is not JSON: {response.content[:200]!r}"
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or set(err) - {"http_status"} != {"code", "message", "details"} \
            or not isinstance(err["code"], str) or not isinstance(err["details"], dict):
        return f"{response.status_code} is not in the error shape: {body!r:.300}"
    return None


def _strict_json(response):
    if "json" not in response.headers.get("content-type", [""])[0]:
        return None
    try:
        json.loads(response.content, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as exc:
        return f"{response.status_code} answer is not strict JSON: {exc}"
    return None


def _fuzz(operation, mode, examples, headers, failures, counter, path_parameters=None):
    @seed(SEED)
    @settings(max_examples=examples, deadline=None, database=None, print_blob=False,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    def run(case):
        counter[0] += 1
        response = case.call(headers=headers)
        case.validate_response(response, checks=[not_a_server_error])
        problem = _error_shape(response) or _strict_json(response)
        assert problem is None, f"{case.method} {case.formatted_path}: {problem}"

    try:
        run()
    except Unsatisfiable:  # nothing to break: no parameters and no body (GET /health in negative mode)
        pass
    except Exception as exc:  # noqa: BLE001 - collect every operation's failure, then report all
        failures.append(f"{operation.label} [{mode}] (DURABLE_FUZZ_SEED={SEED}): {str(exc)[:1500]}")


@pytest.fixture
def fuzz_app(app, standin):
    """The real app, its Agents API pointed at the local stand-in (session routes answer for real)."""
    client = app.test_client()
    client.put("/v1/jobs/j1", json={"pipeline": "article"}, headers=auth())
    token = client.post("/v1/jobs/j1/lease", json={"owner": "fuzz"}, headers=auth()).get_json()["fencing_token"]
    r = client.post("/v1/operations/begin", json={"job_id": "j1", "action": "create_draft", "payload": {"t": 1},
                                                  "fencing_token": token}, headers=auth())
    assert r.get_json()["operation"]["operation_key"] == KNOWN["operation_key"]
    return app


# The operations are fuzzed in SHARDS tests (every SHARDS-th operation each), so the suite's
# workers share the run: one test of every operation took 5 minutes on SQLite, the last to end.
SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_openapi_no_5xx_and_every_4xx_in_the_error_shape(fuzz_app, backend, shard):
    kind = "sqlite" if backend.startswith("sqlite") else "postgres"
    schema = schemathesis.openapi.from_wsgi("/openapi.json", fuzz_app)
    everything = [result.ok() for result in schema.get_all_operations()]
    assert len(everything) >= 35, [op.label for op in everything]
    operations = everything[shard::SHARDS]
    failures, counter = [], [0]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(operation, mode, EXAMPLES[kind], auth("admin-token"), failures, counter)
        known = {p.name: KNOWN[p.name] for p in operation.path_parameters if p.name in KNOWN}
        if known:
            _fuzz(operation, GenerationMode.POSITIVE, EXAMPLES[kind], auth("admin-token"), failures, counter, known)
    print(f"fuzz[{kind}, shard {shard}]: {counter[0]} generated requests over {len(operations)} operations")
    assert not failures, "\n\n".join(failures)


def test_fuzz_openapi_describes_every_route(app):
    """The document is the contract: every API route, its body and its error answers."""
    import re

    spec = app.test_client().get("/openapi.json").get_json()
    names = {"key": "operation_key"}
    missing = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.rule.startswith(("/review", "/console")):  # HTML pages
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: "{" + names.get(m.group(1), m.group(1)) + "}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            op = spec["paths"].get(path, {}).get(method.lower())
            if op is None:
                missing.append(f"{method} {path}")
                continue
            assert {"400", "401", "404", "413", "422"} <= set(op["responses"]), (method, path)
            assert op["responses"]["422"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    assert not missing, missing
    cancel = spec["paths"]["/v1/jobs/{job_id}/cancel"]["post"]["requestBody"]
    assert cancel["required"] is False  # every field optional: the body may be left out
    assert spec["paths"]["/v1/operations/begin"]["post"]["requestBody"]["required"] is True
