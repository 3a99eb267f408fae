"""The same event delivered many times (issue 37): one order workflow per pattern, node version
and Look Up, each started by a production webhook whose body names the order (also the job id):

    http   Webhook -> Start Job -> Create Order (Gated HTTP Request; Look Up: the remote's by-key route)
    sub    Webhook -> Start Job -> Create Order (Gated Sub-Workflow: svWrite; Look Up: svFind)
              svWrite: When Called -> Send Order (HTTP Request, Idempotency-Key: the operation key)
              svFind:  When Looked Up -> Find Order (GET by key, never an error) -> Verdict (Set)
    begin  Webhook -> Start Job -> Begin Step -> Create Order (HTTP Request, error output) -> Record
           Outcome; Look Up: Begin Step's Look Up output -> Find Order -> Report Lookup -> Create Order

Every Durable Step node at the given version with its defaults (the fields a builder fills in:
job id, action, what is sent); node 1.3 is the behaviour before liveness, 1.5 the newest.
"""
from __future__ import annotations

import uuid

from pipeline_stack import CRED_LEDGER

DURABLE = "n8n-nodes-durable.durableStep"
OPS = ("http", "sub", "begin")
TIMEOUT_MS = 5000
ORDER = "$('Webhook').item.json.body.order_id"
SUB_WRITE, SUB_FIND = "svWrite", "svFind"
# svFind's verdict: the by-key route answers the order (200) or 404 (no order with that key). No two
# closing braces in a row: n8n's Set node cuts a JSON output's expression at the first pair.
VERDICT = ("={{ $json.statusCode === 200 && $json.body.idempotency_key === $('When Looked Up').item.json.durable.operation_key"
           " ? { result: 'found', remote_id: $json.body.id, receipt: { id: $json.body.id } }"
           " : $json.statusCode === 404 ? { result: 'absent' } : { result: 'no answer' } }}")
assert "}}" not in VERDICT[3:-2]


def wf_id(version: float, op: str, look_up: bool) -> str:
    return f"sv{str(version).replace('.', '')}{op}{'L' if look_up else 'N'}"


def _node(name: str, type_: str, version: float, parameters: dict, **extra) -> dict:
    return {"name": name, "type": type_, "typeVersion": version, "parameters": parameters, **extra}


def _durable(name: str, version: float, parameters: dict) -> dict:
    return _node(name, DURABLE, version, parameters, credentials={"durableLedgerApi": CRED_LEDGER})


def _post_order(remote_url: str, key_expr: str, order_expr: str, **extra) -> dict:
    return _node("Create Order" if "onError" in extra else "Send Order", "n8n-nodes-base.httpRequest", 4.2, {
        "method": "POST", "url": f"{remote_url}/orders", "sendHeaders": True,
        "headerParameters": {"parameters": [{"name": "Idempotency-Key", "value": key_expr}]},
        "sendBody": True, "specifyBody": "json", "jsonBody": f"={{{{ JSON.stringify({{ order_id: {order_expr} }}) }}}}",
        "options": {"timeout": TIMEOUT_MS}}, **extra)


def _find(remote_url: str, key_expr: str) -> dict:
    return _node("Find Order", "n8n-nodes-base.httpRequest", 4.2, {
        "method": "GET", "url": f"={remote_url}/orders/by-key/{{{{ encodeURIComponent({key_expr}) }}}}",
        "options": {"timeout": TIMEOUT_MS, "response": {"response": {"fullResponse": True, "neverError": True}}}})


def _workflow(wf: str, name: str, nodes: list[dict], connections: dict, settings: dict | None = None) -> dict:
    for i, n in enumerate(nodes):
        n.update(id=str(uuid.uuid4()), position=[220 * i, 300])
    return {"id": wf, "name": name, "nodes": nodes, "connections": connections, "active": False,
            "settings": {"executionOrder": "v1", "saveDataErrorExecution": "all", "saveDataSuccessExecution": "all",
                         **(settings or {})}}


def _to(*outputs):
    """n8n's connections of one node: per output, the nodes it feeds."""
    return {"main": [[{"node": n, "type": "main", "index": 0} for n in names] for names in outputs]}


def subworkflows(remote_url: str) -> list[dict]:
    trigger = lambda name: _node(name, "n8n-nodes-base.executeWorkflowTrigger", 1.1, {"inputSource": "passthrough"})  # noqa: E731
    write = _workflow(SUB_WRITE, "Same event: Send Order", [
        trigger("When Called"), _post_order(remote_url, "={{ $json.durable.operation_key }}", "$json.order_id")],
        {"When Called": _to(["Send Order"])}, {"callerPolicy": "workflowsFromSameOwner"})
    find = _workflow(SUB_FIND, "Same event: Find Order", [
        trigger("When Looked Up"), _find(remote_url, "$json.durable.operation_key"),
        _node("Verdict", "n8n-nodes-base.set", 3.4, {"mode": "raw", "jsonOutput": VERDICT, "options": {}})],
        {"When Looked Up": _to(["Find Order"]), "Find Order": _to(["Verdict"])}, {"callerPolicy": "workflowsFromSameOwner"})
    return [write, find]


def workflow(version: float, op: str, look_up: bool, remote_url: str) -> dict:
    wf = wf_id(version, op, look_up)
    webhook = _node("Webhook", "n8n-nodes-base.webhook", 2, {"httpMethod": "POST", "path": wf,
                                                             "responseMode": "onReceived", "options": {}},
                    webhookId=str(uuid.uuid4()))
    start = _durable("Start Job", version, {"operation": "startJob", "jobId": f"={{{{ {ORDER} }}}}"})
    chain = {"Webhook": _to(["Start Job"]), "Start Job": _to(["Create Order"])}
    if op == "http":
        p = {"operation": "gatedRequest", "action": "create_order", "method": "POST", "url": f"{remote_url}/orders",
             "bodyType": "json", "jsonBody": f"={{{{ {{ order_id: {ORDER} }} }}}}", "gateOptions": {"timeout": TIMEOUT_MS}}
        if look_up:
            p.update(lookUp=True, lookUpUrl=f"{remote_url}/orders/by-key/{{operation_key}}",
                     lookUpMatchField="idempotency_key", lookUpEmptyIsAbsent=True)
        nodes = [webhook, start, _durable("Create Order", version, p)]
    elif op == "sub":
        ref = lambda i: {"__rl": True, "value": i, "mode": "id"}  # noqa: E731
        p = {"operation": "gatedSubworkflow", "action": "create_order", "workflowId": ref(SUB_WRITE),
             "inputSource": "custom", "subworkflowInput": "={{ $('Webhook').item.json.body }}",
             "payloadSource": "custom", "payload": f"={{{{ {{ order_id: {ORDER} }} }}}}"}
        if look_up:
            # In-Flight Window: an absent answer proves nothing while another run's write may still land
            p.update(lookUp=True, lookUpWorkflowId=ref(SUB_FIND), gateOptions={"inFlightMs": TIMEOUT_MS})
        nodes = [webhook, start, _durable("Create Order", version, p)]
    elif op == "begin":
        begin = _durable("Begin Step", version, {"operation": "beginStep", "action": "create_order",
                                                 "beginOptions": {"routeToLookUp": look_up}})
        nodes = [webhook, start, begin,
                 _post_order(remote_url, "={{ $json.durable.operation_key }}", ORDER, onError="continueErrorOutput"),
                 _durable("Record Outcome", version, {"operation": "recordOutcome"})]
        chain["Start Job"] = _to(["Begin Step"])
        chain["Begin Step"] = _to(["Create Order"])
        chain["Create Order"] = _to(["Record Outcome"], ["Record Outcome"])
        if look_up:  # Begin Step: Proceed, Done Before, Look Up
            nodes += [_find(remote_url, "$json.durable.operation_key"), _durable("Report Lookup", version, {
                "operation": "reportLookup",
                "lookupResult": "={{ $json.statusCode === 200 ? 'found' : $json.statusCode === 404 ? 'absent' : 'undecidable' }}",
                "remoteId": "={{ $json.body.id }}", "receipt": "={{ $json.body }}"})]
            chain["Begin Step"] = _to(["Create Order"], [], ["Find Order"])
            chain["Find Order"] = _to(["Report Lookup"])
            chain["Report Lookup"] = _to(["Create Order"])
    else:
        raise ValueError(op)
    return _workflow(wf, f"Same event ({op}, node {version}, Look Up {'on' if look_up else 'off'})", nodes, chain)


def editor_built(wf: str, remote_url: str, start_options: dict | None = None, elsewhere: bool = False) -> dict:
    """The smallest gated workflow as the editor builds it: a Webhook that answers when the last
    node finishes, then Durable Step (Start Job) and Durable Step1 (Gated HTTP Request) picked from
    the node search, so named as n8n names them, at the node's default version, with what a builder
    fills in only: the job id, the action, the URL and the body (dragged from the Webhook's output).
    `elsewhere`: Start Job's Running Elsewhere output wired to a No Operation node, so that the
    Webhook answers a duplicate that left there with its item (unwired, n8n answers 500 "No item to
    return was found": it answers with the last node's first output only)."""
    webhook = _node("Webhook", "n8n-nodes-base.webhook", 2, {"httpMethod": "POST", "path": wf,
                                                             "responseMode": "lastNode", "options": {}},
                    webhookId=str(uuid.uuid4()))
    start = {"operation": "startJob", "jobId": "={{ $json.body.order_id }}"}
    if start_options:
        start["startOptions"] = start_options
    gated = {"operation": "gatedRequest", "action": "create_order", "url": f"{remote_url}/orders",
             "jsonBody": "={{ { order_id: $('Webhook').item.json.body.order_id } }}"}
    nodes = [webhook, _durable("Durable Step", 1.5, start), _durable("Durable Step1", 1.5, gated)]
    connections = {"Webhook": _to(["Durable Step"]), "Durable Step": _to(["Durable Step1"])}
    if elsewhere:
        nodes.append(_node("Handled Elsewhere", "n8n-nodes-base.noOp", 1, {}))
        connections["Durable Step"] = _to(["Durable Step1"], ["Handled Elsewhere"])
    flow = _workflow(wf, f"Built in the editor {wf}", nodes, connections)
    if elsewhere:  # under Durable Step1, as a builder drags it from the second output
        flow["nodes"][-1]["position"] = [440, 480]
    return flow
