"""What the SDK agent and the graph agent share: their ledger, and the refunds API's write and
lookup (the side effect the gated tool guards)."""

import requests

from durable_ledger.client import HttpLedger, LocalLedger
from durable_ledger.integrations.tools import ABSENT, Found, current_operation_key


def open_ledger(cfg, name, token_key="token"):
    if cfg["ledger"].startswith("http"):
        return HttpLedger(cfg["ledger"], token=cfg[token_key])
    role = "approver" if token_key == "approver_token" else "runner"
    return LocalLedger(cfg["ledger"], tenant="acme", actor=f"{name}-{role}", role=role)


def refunds_api(remote):
    """(create_refund, find_refund) against the refunds API at ``remote``."""

    def create_refund(order_id, amount_cents):
        r = requests.post(f"{remote}/refunds", json={"order_id": order_id, "amount_cents": amount_cents,
                                                     "key": current_operation_key()}, timeout=60)
        r.raise_for_status()
        return {"remote_id": r.json()["id"], "order_id": order_id, "amount_cents": amount_cents}

    def find_refund(operation_key, order_id, amount_cents):
        # Found only for a refund stamped with this key; the API filters by it, so none is absence.
        r = requests.get(f"{remote}/refunds", params={"key": operation_key}, timeout=10)
        r.raise_for_status()
        hits = [h for h in r.json() if h.get("key") == operation_key]
        return Found(hits[0]["id"], {"order_id": order_id, "found_by": "lookup"}) if hits else ABSENT

    return create_refund, find_refund
