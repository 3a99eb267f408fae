"""Executions waiting for an approval decision (n8n Wait nodes), resumed once per decision.

Interface shared by the approvals console and the n8n resume path; the delivery itself is built
in this module. `decision_made` is called after an approver's decision has committed.
"""


def decision_made(tenant, operation_key, decision, reason=None):
    """Record that ``operation_key`` was approved or denied (``decision`` in {"approved", "denied"})
    so that every execution registered as waiting for it is resumed once. Placeholder until the
    waits table and deliverer exist: it does nothing yet."""
    return None
