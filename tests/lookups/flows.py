"""The suite's workflows, each started by a production webhook whose body names the case:
`{order_id, lookup_url, match_field, empty_is_absent}` (the order id is also the ledger's job id).

    a  Webhook -> Start Job -> Create Order (Gated HTTP Request, built-in Look Up: URL, Match Field
                                             and 404 or Empty Proves Absence from the case)
    b  Webhook -> Start Job -> Create Order (Gated Sub-Workflow)
          lkWrite: When Called -> Send Order (HTTP Request, Idempotency-Key: the operation key)
          lkFind:  When Looked Up -> Find Order (HTTP Request: status, headers, body as text in `data`, never
                   an error) -> Verdict (Set, JSON: {result, remote_id, receipt}; docs/builders.md)
    c  Webhook -> Start Job -> Begin Step (no Look Up) -> Create Order (HTTP Request, error
                  output) -> Record Outcome; the ledger's generic HTTP reconciler settles it
"""
from __future__ import annotations

import uuid

from pipeline_stack import CRED_LEDGER

DURABLE = "n8n-nodes-durable.durableStep"
TIMEOUT_MS = 3000  # the writes' and the lookups' client timeout; the remote's slow lookup answers after 5 s
BODY = "$('Webhook').item.json.body"
WF = {"a": "lkGated", "b": "lkSub", "c": "lkBegin"}
SUB_WRITE, SUB_FIND = "lkWrite", "lkFind"
RECONCILED_ACTION = "reconciled_order"  # (c)'s action: the ledger's reconciler is registered for it only

# The lookup sub-workflow's verdict (Set node, JSON output): found only for an object carrying the
# step's key; absent only for a 404 that is not a web page, or an empty list of a lookup declared to
# filter by the key with no more pages; a status other than 2xx/404 proves nothing (no verdict: the
# next run asks again); anything else undecidable. (No two closing braces in a row: n8n's Set node
# cuts its JSON output's expressions at the first pair.)
VERDICT = """={{ (() => {
  const step = $('When Looked Up').item.json;
  const key = step.durable.operation_key;
  const field = step.match_field || 'idempotency_key';
  const get = (o, path) => path.split('.').reduce((v, k) => (v == null ? undefined : v[k]), o);
  const status = $json.statusCode;
  const type = String(($json.headers || {})['content-type'] || '');
  if (/html/i.test(type)) return { result: 'undecidable', evidence: { status, why: 'a web page, not the API' } };
  if (status === 404) return { result: step.empty_is_absent ? 'absent' : 'undecidable', evidence: { status } };
  if (status < 200 || status > 299) return { result: 'no answer', evidence: { status } };
  let body;
  try { body = JSON.parse($json.data); } catch (e) { return { result: 'undecidable', evidence: { why: 'not JSON' } }; }
  if (body && !Array.isArray(body) && (body.error || body.errors)) return { result: 'undecidable', evidence: { why: 'an error object', body } };
  const list = Array.isArray(body) ? body : get(body, field) !== undefined ? [body] : body.data || body.results || body.items;
  if (!Array.isArray(list)) return { result: 'undecidable', evidence: { why: 'no list and no ' + field } };
  const hit = list.find((o) => o && String(get(o, field)) === key);
  if (hit && hit.id) return { result: 'found', remote_id: hit.id, receipt: { id: hit.id } };
  const more = Boolean(body.next || body.has_more);
  if (list.length === 0 && step.empty_is_absent && !more) return { result: 'absent', evidence: { objects: 0 } };
  return { result: 'undecidable', evidence: { objects: list.length, more } };
})() }}"""
assert "}}" not in VERDICT[3:-2], "n8n's Set node would cut the expression there"


def _node(name: str, type_: str, version: float, parameters: dict, **extra) -> dict:
    return {"name": name, "type": type_, "typeVersion": version, "parameters": parameters, **extra}


def _durable(name: str, parameters: dict) -> dict:
    return _node(name, DURABLE, 1.2, parameters, credentials={"durableLedgerApi": CRED_LEDGER})


def _webhook(path: str) -> dict:
    return _node("Webhook", "n8n-nodes-base.webhook", 2, {"httpMethod": "POST", "path": path,
                                                           "responseMode": "onReceived", "options": {}},
                 webhookId=str(uuid.uuid4()))


def _post_order(name: str, remote_url: str, key_expr: str, order_expr: str, **extra) -> dict:
    return _node(name, "n8n-nodes-base.httpRequest", 4.2, {
        "method": "POST", "url": f"{remote_url}/orders", "sendHeaders": True,
        "headerParameters": {"parameters": [{"name": "Idempotency-Key", "value": key_expr}]},
        "sendBody": True, "specifyBody": "json", "jsonBody": f"={{{{ JSON.stringify({{ order_id: {order_expr} }}) }}}}",
        "options": {"timeout": TIMEOUT_MS}}, **extra)


def _start() -> dict:
    return _durable("Start Job", {"operation": "startJob", "jobId": f"={{{{ {BODY}.order_id }}}}"})


def _workflow(wf_id: str, name: str, nodes: list[dict], chain: list[str], extra_connections: dict | None = None,
              settings: dict | None = None) -> dict:
    for i, n in enumerate(nodes):
        n.update(id=str(uuid.uuid4()), position=[220 * i, 300])

    def to(*names):
        return {"main": [[{"node": n, "type": "main", "index": 0}] for n in names]}

    connections = {a: to(b) for a, b in zip(chain, chain[1:])}
    for src, dests in (extra_connections or {}).items():
        connections[src] = to(*dests)
    return {"id": wf_id, "name": name, "nodes": nodes, "connections": connections, "active": False,
            "settings": {"executionOrder": "v1", "saveDataErrorExecution": "all", "saveDataSuccessExecution": "all",
                         **(settings or {})}}


def gated_request(remote_url: str) -> dict:
    """(a) Gated HTTP Request with its built-in Look Up, read by the case's Match Field."""
    gated = _durable("Create Order", {
        "operation": "gatedRequest", "action": "create_order", "method": "POST", "url": f"{remote_url}/orders",
        "bodyType": "json", "jsonBody": f"={{{{ {{ order_id: {BODY}.order_id }} }}}}",
        "lookUp": True, "lookUpUrl": f"={{{{ {BODY}.lookup_url }}}}",
        "lookUpMatchField": f"={{{{ {BODY}.match_field }}}}",
        "lookUpEmptyIsAbsent": f"={{{{ {BODY}.empty_is_absent }}}}",
        # the old node's (before the match rule) ID path for the same answers
        "lookUpRemoteIdPath": "id",
        "gateOptions": {"timeout": TIMEOUT_MS}})
    return _workflow(WF["a"], "Lookups (a): Gated HTTP Request", [_webhook(WF["a"]), _start(), gated],
                     ["Webhook", "Start Job", "Create Order"])


def gated_subworkflow() -> dict:
    """(b) Gated Sub-Workflow: lkWrite writes, lkFind looks up."""
    ref = lambda wf_id: {"__rl": True, "value": wf_id, "mode": "id"}  # noqa: E731
    gated = _durable("Create Order", {
        "operation": "gatedSubworkflow", "action": "create_order", "workflowId": ref(SUB_WRITE),
        "inputSource": "custom", "subworkflowInput": f"={{{{ {BODY} }}}}",
        "payloadSource": "custom", "payload": f"={{{{ {{ order_id: {BODY}.order_id }} }}}}",
        "lookUp": True, "lookUpWorkflowId": ref(SUB_FIND)})
    return _workflow(WF["b"], "Lookups (b): Gated Sub-Workflow", [_webhook(WF["b"]), _start(), gated],
                     ["Webhook", "Start Job", "Create Order"])


def _trigger(name: str) -> dict:
    return _node(name, "n8n-nodes-base.executeWorkflowTrigger", 1.1, {"inputSource": "passthrough"})


def write_subworkflow(remote_url: str) -> dict:
    nodes = [_trigger("When Called"),
             _post_order("Send Order", remote_url, "={{ $json.durable.operation_key }}", "$json.order_id")]
    return _workflow(SUB_WRITE, "Lookups (b): Send Order", nodes, ["When Called", "Send Order"],
                     settings={"callerPolicy": "workflowsFromSameOwner"})


def find_subworkflow() -> dict:
    find = _node("Find Order", "n8n-nodes-base.httpRequest", 4.2, {
        "method": "GET",
        "url": "={{ $json.lookup_url.split('{operation_key}').join(encodeURIComponent($json.durable.operation_key)) }}",
        "options": {"timeout": TIMEOUT_MS, "response": {"response": {
            "fullResponse": True, "neverError": True, "responseFormat": "text"}}}})
    verdict = _node("Verdict", "n8n-nodes-base.set", 3.4, {"mode": "raw", "jsonOutput": VERDICT, "options": {}})
    return _workflow(SUB_FIND, "Lookups (b): Find Order", [_trigger("When Looked Up"), find, verdict],
                     ["When Looked Up", "Find Order", "Verdict"], settings={"callerPolicy": "workflowsFromSameOwner"})


def begin_record(remote_url: str) -> dict:
    """(c) Begin Step without Look Up: the ledger's reconciler asks the remote on the next begin."""
    nodes = [_webhook(WF["c"]), _start(),
             _durable("Begin Step", {"operation": "beginStep", "action": RECONCILED_ACTION}),
             _post_order("Create Order", remote_url, "={{ $json.durable.operation_key }}", f"{BODY}.order_id",
                         onError="continueErrorOutput"),
             _durable("Record Outcome", {"operation": "recordOutcome"})]
    return _workflow(WF["c"], "Lookups (c): Begin Step + ledger reconciler", nodes,
                     ["Webhook", "Start Job", "Begin Step", "Create Order", "Record Outcome"],
                     {"Create Order": ["Record Outcome", "Record Outcome"]})


def all_workflows(remote_url: str, variants=("a", "b", "c")) -> list[dict]:
    out = []
    if "a" in variants:
        out.append(gated_request(remote_url))
    if "b" in variants:
        out += [write_subworkflow(remote_url), find_subworkflow(), gated_subworkflow()]
    if "c" in variants:
        out.append(begin_record(remote_url))
    return out
