"""One set of input checks for both doors (issue 22, defect 9), on SQLite and PostgreSQL.

Every bad input below goes through HttpLedger (a real `serve`: the route's checks) and
through LocalLedger (the same checks, durable_ledger/kernel/checks.py, in this process); both must
raise the same class with the same code, and refuse before anything is written (the rows of the
table are counted). Then a job whose stored budgets cannot be read (written by a client before
the checks covered budgets) must get a 4xx from begin, never a 500.
"""

import uuid
from types import SimpleNamespace

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TOKENS
from durable_ledger.kernel import checks
from durable_ledger.client import HttpLedger, LocalLedger
from durable_ledger.client.ledger import begin_body
from durable_ledger.kernel.config import Config
from durable_ledger.store.db import db
from durable_ledger.store.models import Job, Operation, OperationEvent
from servers import LedgerServer

H = {"Authorization": "Bearer runner-token"}
CFG = Config.from_env({})
MAX_BODY, MAX_RECEIPT = CFG.max_body_bytes, CFG.max_receipt_bytes


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stack(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("checks")
    url = f"sqlite:///{tmp / 'ledger.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    LocalLedger(url, tenant="acme", actor="probe").close()
    with LedgerServer(url, TOKENS, workers=1, threads=4, log_path=tmp / "ledger.log") as server:
        yield SimpleNamespace(url=url, server=server.url, log=tmp / "ledger.log")


@pytest.fixture
def both(stack):
    local = LocalLedger(stack.url, tenant="acme", actor="checks", migrate=False)
    http = HttpLedger(stack.server, token="runner-token")
    yield {"local": local, "http": http}
    local.close()
    http.close()


def jid(name="c"):
    return f"{name}-{uuid.uuid4().hex[:8]}"


def counts():
    """Jobs, operations and SENT events in the tables (a refusal writes none)."""
    with db.connection_context():
        return (Job.select().count(), Operation.select().count(),
                OperationEvent.select().where(OperationEvent.to_state == "SENT").count())


# -- the calls ------------------------------------------------------------------------------

def job_with(**fields):
    return lambda ledger: ledger.job(jid("job"), owner="w", **fields)


def lease_with(**kw):
    return lambda ledger: ledger.job(jid("lease"), **{"owner": "w", **kw})


def begin_with(token=None, **kw):
    def call(ledger):
        job = ledger.job(jid("begin"), owner="w")
        if token is not None:
            job.fencing_token = token
        args = {"action": "send", "payload": {"p": 1}, **kw}
        step = job.step(args.pop("action"), args.pop("payload"), **args)
        step.__enter__()
        step.unknown()  # only reached when accepted
    return call


def sized_begin(extra):
    """A begin whose body, as HttpLedger sends it, is ``MAX_BODY + extra`` bytes."""
    def call(ledger):
        job = ledger.job(jid("size"), owner="w")
        base = len(checks.encode(begin_body(job.job_id, "big", job.fencing_token, {"b": ""}, None, None, False)))
        payload = {"b": "x" * (MAX_BODY + extra - base)}
        assert len(checks.encode(begin_body(job.job_id, "big", job.fencing_token, payload, None, None, False))) \
            == MAX_BODY + extra
        step = job.step("big", payload)
        step.__enter__()
        step.unknown()
    return call


def nested(levels):
    value = []
    for _ in range(levels - 1):
        value = [value]
    return value


def outcome_with(kind, **fields):
    def call(ledger):
        job = ledger.job(jid("out"), owner="w")
        step = job.step("send", {"p": 1})
        step.__enter__()
        getattr(step, kind)(**fields)
    return call


def renew_with(ttl_s):
    return lambda ledger: ledger.job(jid("renew"), owner="w").renew(ttl_s)


def cancel_with(reason):
    def call(ledger):
        job_id = jid("cancel")
        ledger.job(job_id, owner="w")
        ledger.cancel(job_id, reason)
    return call


def operations_with(states):
    def call(ledger):
        job_id = jid("ops")
        ledger.job(job_id, owner="w")
        ledger.operations(job_id, states)
    return call


V, I, M, P = "validation_error", "invalid_value", "malformed_json", "payload_too_large"
CASES = [
    # budgets: types, ranges, names, the whole object
    ("max_attempts not a number", job_with(budgets={"max_attempts": "abc"}), V),
    ("max_attempts 0", job_with(budgets={"max_attempts": 0}), V),
    ("max_attempts 101", job_with(budgets={"max_attempts": 101}), V),
    ("max_attempts true", job_with(budgets={"max_attempts": True}), V),
    ("max_attempts null", job_with(budgets={"max_attempts": None}), V),
    ("max_tool_calls -1", job_with(budgets={"max_tool_calls": -1}), V),
    ("max_tool_calls 2**31", job_with(budgets={"max_tool_calls": 2 ** 31}), V),
    ("max_cost text", job_with(budgets={"max_cost": "lots"}), V),
    ("max_cost over the job cap", job_with(budgets={"max_cost": 1e16}), V),
    ("deadline_s negative", job_with(budgets={"deadline_s": -1}), V),
    ("deadline_s NaN", job_with(budgets={"deadline_s": float("nan")}), I),
    ("unknown budget", job_with(budgets={"colour": 1}), V),
    ("budgets not an object", job_with(budgets=["max_cost"]), V),
    ("max_attempts as text of a number", job_with(budgets={"max_attempts": "5"}), None),
    # the other job fields
    ("task_version 0", job_with(task_version=0), V),
    ("task_version text", job_with(task_version="two"), V),
    ("task_version 2**31", job_with(task_version=2 ** 31), V),
    ("task_version 2**63", job_with(task_version=2 ** 63), I),
    ("pipeline empty", job_with(pipeline=""), V),
    ("pipeline not a string", job_with(pipeline=5), V),
    ("pipeline 65 characters", job_with(pipeline="p" * 65), V),
    ("phases not a list", job_with(phases="A,B"), V),
    ("phases empty", job_with(phases=[]), V),
    ("policy_hash 129 characters", job_with(policy_hash="h" * 129), V),
    ("job_id with a slash", lambda ledger: ledger.job("a/b", owner="w"), V),
    ("job_id with a newline", lambda ledger: ledger.job("job\n", owner="w"), V),
    # the lease
    ("owner empty (the default owner)", lease_with(owner=""), None),
    ("owner 256 characters", lease_with(owner="o" * 256), V),
    ("owner with a newline", lease_with(owner="worker\n"), V),
    ("ttl_s 0", lease_with(ttl_s=0), V),
    ("ttl_s 86401", lease_with(ttl_s=86401), V),
    ("ttl_s text", lease_with(ttl_s="abc"), V),
    ("takeover not a boolean", lease_with(takeover="maybe"), V),
    ("renew ttl_s text", renew_with("abc"), V),
    # begin: targets, actions, keys, tokens, payloads
    ("target with a trailing newline", begin_with(target="wordpress:x\n"), V),
    ("target with //", begin_with(target="a//b"), V),
    ("target 256 characters", begin_with(target="t" * 256), V),
    ("target with a leading space", begin_with(target=" wordpress:x"), V),
    ("target not a string", begin_with(target=5), V),
    ("target unicode", begin_with(target="wördpress:prød"), None),
    ("action with //", begin_with(action="a//b"), V),
    ("action with a tab", begin_with(action="send\tnow"), V),
    ("action 256 characters", begin_with(action="a" * 256), V),
    ("action a dot segment", begin_with(action="a/./b"), V),
    ("action not a string", begin_with(action=7), V),
    ("operation_key with a trailing newline", begin_with(operation_key="k:1\n"), V),
    ("operation_key 513 characters", begin_with(operation_key="k" * 513), V),
    ("operation_key with a NUL", begin_with(operation_key="k\x00"), I),
    ("requires_approval not a boolean", begin_with(requires_approval="maybe"), V),
    ("fencing_token as text", begin_with(token="1"), V),
    ("fencing_token true", begin_with(token=True), V),
    ("fencing_token 2**31", begin_with(token=2 ** 31), V),
    ("fencing_token 2**63", begin_with(token=2 ** 63), I),
    ("payload NUL", begin_with(payload={"s": "a\x00b"}), I),
    ("payload lone surrogate", begin_with(payload={"s": "\ud800"}), I),
    ("payload NaN", begin_with(payload={"n": float("nan")}), I),
    ("payload integer over 64 bits", begin_with(payload={"n": 2 ** 64}), I),
    ("payload not JSON (a set)", begin_with(payload={"s": {1, 2}}), I),
    ("payload 63 levels (body 64)", begin_with(payload=nested(63)), None),
    ("payload 64 levels (body 65)", begin_with(payload=nested(64)), M),
    ("body at DURABLE_MAX_BODY_BYTES", sized_begin(0), None),
    ("body one byte over", sized_begin(1), P),
    ("payload of 3 MiB", begin_with(payload={"b": "x" * (3 * 1024 * 1024)}), P),
    # outcomes: receipts, errors, remote ids, cost
    ("receipt at the limit", outcome_with("confirm", remote_id="1", receipt={"b": "x" * (MAX_RECEIPT - 8)}), None),
    ("receipt one byte over", outcome_with("confirm", remote_id="1", receipt={"b": "x" * (MAX_RECEIPT - 7)}), V),
    ("receipt not an object", outcome_with("confirm", remote_id="1", receipt=["a"]), V),
    ("remote_id 256 characters", outcome_with("confirm", remote_id="r" * 256), V),
    ("remote_id an object", outcome_with("confirm", remote_id={"id": 1}), V),
    ("cost negative", outcome_with("confirm", remote_id="1", cost=-1), V),
    ("cost text", outcome_with("confirm", remote_id="1", cost="abc"), V),
    ("cost over one call's cap", outcome_with("confirm", remote_id="1", cost=1e13), V),
    ("error one byte over", outcome_with("unknown", error={"b": "x" * (MAX_RECEIPT - 7)}), V),
    ("fail error not an object", outcome_with("fail", error=["a"]), V),
    # cancel and the operations list
    ("cancel reason 501 characters", cancel_with("r" * 501), V),
    ("cancel reason not a string", cancel_with(5), V),
    ("state with a NUL", operations_with(["SENT\x00"]), I),
]


def outcome(call, ledger):
    try:
        call(ledger)
    except Exception as exc:  # noqa: BLE001 - what each transport raised is the point
        return type(exc).__name__, getattr(exc, "code", None), getattr(exc, "details", {})
    return None


@pytest.mark.parametrize("name,call,code", CASES, ids=[c[0] for c in CASES])
def test_checks_the_same_bad_input_is_refused_the_same_way_on_both_transports(both, name, call, code):
    results = {}
    for transport, ledger in both.items():
        before = counts()
        results[transport] = outcome(call, ledger)
        if code is not None and call.__qualname__.split(".")[0] != "outcome_with":
            # A refused call claims nothing (the job and lease the case made are not operations).
            assert counts()[1:] == before[1:], (name, transport)
    local, http = results["local"], results["http"]
    assert (local and local[:2]) == (http and http[:2]), (name, local, http)
    if code is None:
        assert local is None, (name, local)
    else:
        assert local[1] == code, (name, local)
    if local and local[1] == "validation_error" and "fields" in http[2]:
        assert set(local[2]["fields"]) <= set(http[2]["fields"]), (local, http)


def test_checks_at_least_25_cases_and_every_field_is_covered():
    names = " ".join(c[0] for c in CASES)
    assert len(CASES) >= 25
    for field in ("max_attempts", "max_tool_calls", "max_cost", "deadline_s", "task_version", "target", "action",
                  "operation_key", "job_id", "fencing_token", "payload", "receipt", "error", "owner", "ttl_s"):
        assert field in names, field


# -- what is already stored ------------------------------------------------------------------

def _store_budgets(job_id, budgets):
    """Write budgets as an older client could (it stored them without checking their values)."""
    with db.connection_context():
        Job.update(budgets=budgets).where(Job.tenant == "acme", Job.job_id == job_id).execute()


def _ops(job_id):
    with db.connection_context():
        return Operation.select().join(Job).where(Job.job_id == job_id).count()


@pytest.mark.parametrize("budgets", [{"max_attempts": "abc"}, {"max_cost": "abc"}, {"deadline_s": "soon"},
                                     {"max_tool_calls": [1]}, ["max_attempts", "max_cost"], ["max_attempts"]],
                         ids=["max_attempts", "max_cost", "deadline_s", "max_tool_calls", "list", "list_of_one"])
def test_checks_a_stored_budget_that_is_not_a_number_is_a_4xx_never_a_500(stack, both, budgets):
    job_id = jid("stored")
    lease = both["local"].job(job_id, owner="w")
    _store_budgets(job_id, budgets)
    body = {"job_id": job_id, "action": "send", "payload": {"p": 1}, "fencing_token": lease.fencing_token}
    r = requests.post(stack.server + "/v1/operations/begin", json=body, headers=H, timeout=10)
    assert r.status_code == 409, (r.status_code, r.text[:300])
    err = r.json()["error"]
    assert err["code"] == "stored_value_invalid" and err["details"]["job_id"] == job_id, err
    # The batch route answers the same in the item's slot.
    r = requests.post(stack.server + "/v1/operations/batch", json={"begin": [body]}, headers=H, timeout=10)
    assert r.status_code == 200 and r.json()["begin"][0]["error"]["code"] == "stored_value_invalid", r.text[:300]
    for transport, ledger in both.items():
        job = ledger.job(job_id, owner="w")
        got = outcome(lambda _: job.step("send", {"p": 1}).__enter__(), ledger)
        assert got[:2] == ("StoredValueInvalid", "stored_value_invalid"), (transport, got)
    assert _ops(job_id) == 0  # nothing was claimed


def test_checks_stored_budgets_as_text_of_numbers_still_work(stack, both):
    """A budget an older client stored as "2" was always read as 2: it still is."""
    job_id = jid("stored-ok")
    job = both["local"].job(job_id, owner="w")
    _store_budgets(job_id, {"max_attempts": "2", "max_tool_calls": "5"})
    body = {"job_id": job_id, "action": "send", "payload": {"p": 1}, "fencing_token": job.fencing_token}
    r = requests.post(stack.server + "/v1/operations/begin", json=body, headers=H, timeout=10)
    assert r.status_code == 200 and r.json()["decision"] == "dispatch", r.text[:300]
    with db.connection_context():
        assert Operation.select().join(Job).where(Job.job_id == job_id).get().max_attempts == 2


def test_checks_a_stored_resume_budget_that_is_not_a_number_is_a_4xx(stack, both):
    job_id = jid("resume")
    both["local"].job(job_id, owner="w")
    _store_budgets(job_id, {"max_resume_attempts": "many"})
    r = requests.post(f"{stack.server}/v1/jobs/{job_id}/resume", json={"owner": "w2", "takeover": True},
                      headers=H, timeout=10)
    assert r.status_code == 409 and r.json()["error"]["code"] == "stored_value_invalid", r.text[:300]


def test_checks_local_refuses_what_http_refuses_before_storing_a_job(both):
    """The defect as reported: LocalLedger stored budgets {"max_attempts": "abc"}."""
    jobs_before = counts()[0]
    for ledger in both.values():
        got = outcome(job_with(budgets={"max_attempts": "abc"}), ledger)
        assert got[:2] == ("ValidationFailed", "validation_error"), got
        assert got[2]["fields"] == {"budgets": {"max_attempts": ["Not a valid integer."]}}, got
    assert counts()[0] == jobs_before


_leaf = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                  st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                  st.sampled_from(["\x00", "\ud800", "a\udfffb", "\ud83d\ude00", "NaN", "é"]))
_json = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6) | st.sampled_from(["\x00k", "\udc00"]), inner,
                                                 max_size=3)), max_leaves=12)


def _nested(depth):
    value = {"x": 1}
    for i in range(depth):
        value = [value] if i % 2 else {"d": value}
    return value


@settings(max_examples=400, deadline=None)
@given(_json)
def test_the_walk_is_skipped_only_where_it_cannot_refuse(value):
    """LocalLedger skips the per-value walk of `checks.values` when the encoded body shows it
    cannot refuse anything (`may_hold_bad_values`): whatever the walk refuses, the guard lets it
    walk."""
    try:
        encoded = checks.encode({"v": value})
    except Exception:
        return  # not JSON at all: encode refuses it before any walk
    try:
        checks.values({"v": value}, "$", 0)
    except Exception:
        assert checks.may_hold_bad_values(encoded), value


@pytest.mark.parametrize("depth", [60, 62, 63, 64, 70])
def test_the_walk_is_not_skipped_for_deep_bodies(depth):
    value = {"v": _nested(depth)}
    try:
        checks.values(value, "$", 0)
    except Exception:
        assert checks.may_hold_bad_values(checks.encode(value))
