"""Who may approve a step, and how many of them: the step's approval policy.

A begin may carry ``approval_policy``: ``approvals_needed`` (N distinct approvers, 1..10),
``approvers`` (token names) and ``groups`` (token groups) that may decide (both empty: any
approver of the tenant), and ``requester_may_approve`` (whether an approver whose name is the
name of the runner that began the step may decide). The first begin stores it on the operation
with that runner's name (``requested_by``); it never changes afterwards:

    begin K (2 of legal) ... alice approves ... begin K (1 of anyone)   -> 409 approval_policy_changed

A runner able to lower the bar after the request went out could make one approval enough, so a
later begin naming another policy is refused (and recorded); a begin naming none keeps the
stored one, as a begin naming no target keeps the stored target.

The gate counts the live approvals bound to the version, digest and target (approvals/rules.py)
whose approver the policy allows, one per approver name: two clicks by alice are one approval.
An approver the policy does not allow is refused when deciding (403 approver_not_allowed), so
no approval it would not count is ever recorded for the operation; the gate's filter still
applies to approvals granted by digest before the step existed (POST /v1/approvals).
"""

from ..kernel.errors import LedgerError

MAX_NEEDED = 10
DEFAULT = {"approvals_needed": 1, "approvers": [], "groups": [], "requester_may_approve": True}
RULE_KEYS = tuple(DEFAULT)


class ApproverNotAllowed(LedgerError):
    """The step's approval policy does not let this approver decide."""

    code, http_status = "approver_not_allowed", 403


class ApprovalPolicyChanged(LedgerError):
    """A begin named another approval policy than the one its operation was first begun with."""

    code, http_status = "approval_policy_changed", 409


def normalize(body):
    """The policy as stored and compared: defaults filled, names and groups sorted, no repeats."""
    if body is None:
        return None
    return {"approvals_needed": int(body.get("approvals_needed") or 1),
            "approvers": sorted({n.strip() for n in body.get("approvers") or () if n.strip()}),
            "groups": sorted({g.strip() for g in body.get("groups") or () if g.strip()}),
            "requester_may_approve": bool(body.get("requester_may_approve", True))}


def stored(rule, requester):
    """What the first begin writes on the operation: the rule and the runner that asked."""
    return None if rule is None else {**rule, "requested_by": requester}


def rule_of(policy):
    """The rule alone (no requester) of a stored policy; the default for an operation without one."""
    return {k: (policy or DEFAULT).get(k, DEFAULT[k]) for k in RULE_KEYS}


def check_unchanged(op, given):
    """Raise ApprovalPolicyChanged when a begin names another rule than the stored one."""
    if given is not None and rule_of(op.approval_policy) != given:
        raise ApprovalPolicyChanged(
            "this operation was begun with another approval policy; who may approve cannot change once it "
            "has asked (use a new operation key for another policy)",
            {"operation_key": op.operation_key, "stored": rule_of(op.approval_policy), "given": given})


def groups_of(text):
    return frozenset(g.strip() for g in (text or "").replace("|", ",").split(",") if g.strip())


def approver_of(approval):
    """(name, groups) of an approval's approver: as recorded, or approved_by's name on older rows."""
    name = approval.approver_name or (approval.approved_by or "").split(":", 1)[-1]
    return name, groups_of(approval.approver_groups)


def refusal(policy, name, groups):
    """None when the policy lets ``name`` (with ``groups``) decide, else (reason, message)."""
    if policy is None:
        return None
    rule = rule_of(policy)
    if not rule["requester_may_approve"] and name == policy.get("requested_by"):
        return "requester", f"'{name}' began this step, and its policy says the runner that asked may not approve"
    if rule["approvers"] or rule["groups"]:
        if name not in rule["approvers"] and not (set(rule["groups"]) & set(groups)):
            allowed = ", ".join([*rule["approvers"], *(f"group {g}" for g in rule["groups"])])
            return "not_listed", f"'{name}' may not decide on this step; its policy allows {allowed}"
    return None


def check_allowed(policy, principal, key):
    """Raise ApproverNotAllowed unless the policy lets the principal decide on operation ``key``."""
    why = refusal(policy, principal.name, principal.groups)
    if why is not None:
        raise ApproverNotAllowed(why[1], {"operation_key": key, "reason": why[0], "approver": principal.name,
                                          "policy": public(policy)})


def counted(policy, approvals):
    """The approvals the policy counts: allowed approvers, the first (oldest) one per name."""
    seen, out = set(), []
    for a in sorted(approvals, key=lambda a: a.id):
        name, groups = approver_of(a)
        if name in seen or refusal(policy, name, groups) is not None:
            continue
        seen.add(name)
        out.append(a)
    return out


def needed(policy):
    return rule_of(policy)["approvals_needed"]


def public(policy):
    """The policy as answers show it (the rule; who asked is shown beside it)."""
    return rule_of(policy)
