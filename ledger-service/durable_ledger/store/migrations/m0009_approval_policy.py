"""Approval policies and who decided (issue 38).

``api_token.groups``: an approver's groups. ``operation.approval_policy``: N of M approvers,
allowed names and groups, whether the runner that asked may approve, fixed at the first begin.
``approval.approver_name`` / ``approver_groups`` / ``door`` and ``approval_denial.door``: the
decider as the policy saw them and the door they used (console, one-tap link, API). All
nullable: tokens without groups, operations without a policy (one approval by anyone) and
decisions made before keep meaning what they meant.
"""

from ..models import ApiToken, Approval, ApprovalDenial, Operation

VERSION = 9
NAME = "approval_policy"


def up(schema):
    schema.add_column("api_token", "groups", ApiToken.groups)
    schema.add_column("operation", "approval_policy", Operation.approval_policy)
    schema.add_column("approval", "approver_name", Approval.approver_name)
    schema.add_column("approval", "approver_groups", Approval.approver_groups)
    schema.add_column("approval", "door", Approval.door)
    schema.add_column("approval_denial", "door", ApprovalDenial.door)
