"""One order workflow in three variants, each started by a production webhook whose body names
the business id (`order_id`, also the ledger's job id):

    plain   Webhook -> Create Order (HTTP Request)
    begin   Webhook -> Start Job -> Begin Step -> Create Order (HTTP Request, error output)
                                                   -> Record Outcome          (node 1.5 defaults)
    gated   Webhook -> Start Job -> Create Order (Durable Step 1.5, Gated HTTP Request with its
                                                  built-in Look Up on the remote's by-key route;
                                                  Done Before Items on their own output, so the
                                                  table tells Done from Done Before by output)

and, for a remote that dedupes by the Idempotency-Key header (remote.py, dedupe=True):

    gated-bare    the same gated workflow without Look Up (an unknown outcome goes to review)
    gated-dedupe  the same with Remote Dedupes by Key on (an unknown outcome is
                  settled by sending the request again with the same key), no Look Up

`Create Order` is the side effect in every variant: Retry On Fail is set on it when asked.
"""
from __future__ import annotations

import uuid

from pipeline_stack import CRED_LEDGER

VARIANTS = ("plain", "begin", "gated")
DEDUPE_VARIANTS = ("gated-bare", "gated-dedupe")
DURABLE = "n8n-nodes-durable.durableStep"
NODE_VERSION = 1.5  # the newest: liveness (1.4), the defaults of a workflow built in the editor (1.5)
TIMEOUT_MS = 5000  # the side effect's client timeout; the remote's "slow" answer comes after 7 s (a kill
# scenario holds six answers at once: every one must still be waiting when n8n is killed)
ORDER_ID = "$('Webhook').item.json.body.order_id"


def _durable(name: str, parameters: dict, version: float = NODE_VERSION) -> dict:
    return {"name": name, "type": DURABLE, "typeVersion": version, "parameters": parameters,
            "credentials": {"durableLedgerApi": CRED_LEDGER}}


def _http(remote_url: str, idempotency_key: str | None, error_output: bool) -> dict:
    node = {"name": "Create Order", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2,
            "parameters": {"method": "POST", "url": f"{remote_url}/orders", "sendBody": True, "specifyBody": "json",
                           "jsonBody": f"={{{{ JSON.stringify({{ order_id: {ORDER_ID} }}) }}}}",
                           "options": {"timeout": TIMEOUT_MS}}}
    if idempotency_key:
        node["parameters"].update(sendHeaders=True, headerParameters={"parameters": [
            {"name": "Idempotency-Key", "value": idempotency_key}]})
    if error_output:
        node["onError"] = "continueErrorOutput"
    return node


def _gated(remote_url: str, settle: str = "lookUp") -> dict:
    """settle: "lookUp" (the remote's by-key route), "dedupe" (resend with the same key) or "none"."""
    parameters = {
        "operation": "gatedRequest", "action": "create_order", "method": "POST", "url": f"{remote_url}/orders",
        "bodyType": "json", "jsonBody": f"={{{{ {{ order_id: {ORDER_ID} }} }}}}",
        "gateOptions": {"timeout": TIMEOUT_MS}, "doneBefore": "separate"}
    if settle == "lookUp":
        parameters.update(lookUp=True, lookUpUrl=f"{remote_url}/orders/by-key/{{operation_key}}",
                          lookUpMatchField="idempotency_key", lookUpEmptyIsAbsent=True)
    elif settle == "dedupe":
        parameters.update(remoteDedupes=True)
    return _durable("Create Order", parameters)


def workflow(variant: str, wf_id: str, path: str, remote_url: str, *, retry_on_fail: bool = False,
             save_progress: bool = False) -> dict:
    webhook = {"name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2, "webhookId": str(uuid.uuid4()),
               "parameters": {"httpMethod": "POST", "path": path, "responseMode": "onReceived", "options": {}}}
    start = _durable("Start Job", {"operation": "startJob", "jobId": "={{ $json.body.order_id }}"})
    if variant == "plain":
        nodes, chain = [webhook, _http(remote_url, None, False)], ["Webhook", "Create Order"]
    elif variant == "begin":
        nodes = [webhook, start, _durable("Begin Step", {"operation": "beginStep", "action": "create_order"}),
                 _http(remote_url, "={{ $json.durable.operation_key }}", True),
                 _durable("Record Outcome", {"operation": "recordOutcome"})]
        chain = ["Webhook", "Start Job", "Begin Step", "Create Order", "Record Outcome"]
    elif variant in ("gated", "gated-bare", "gated-dedupe"):
        settle = {"gated": "lookUp", "gated-bare": "none", "gated-dedupe": "dedupe"}[variant]
        nodes, chain = [webhook, start, _gated(remote_url, settle)], ["Webhook", "Start Job", "Create Order"]
    else:
        raise ValueError(variant)
    side_effect = next(n for n in nodes if n["name"] == "Create Order")
    if retry_on_fail:
        side_effect.update(retryOnFail=True, maxTries=3, waitBetweenTries=200)
    for i, n in enumerate(nodes):
        n.update(id=str(uuid.uuid4()), position=[220 * i, 300])

    def to(*names):
        return {"main": [[{"node": n, "type": "main", "index": 0}] for n in names]}

    connections = {a: to(b) for a, b in zip(chain, chain[1:])}
    if variant == "begin":  # both outputs of the side effect (success, error) to Record Outcome
        connections["Create Order"] = to("Record Outcome", "Record Outcome")
    return {"id": wf_id, "name": f"Orders ({variant}) {wf_id}", "nodes": nodes, "connections": connections,
            "active": False, "settings": {"executionOrder": "v1", "saveExecutionProgress": save_progress,
                                          "saveManualExecutions": True, "saveDataErrorExecution": "all",
                                          "saveDataSuccessExecution": "all"}}
