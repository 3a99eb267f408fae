"""Approval denials (an approver's no, with the reason) and n8n executions waiting for an
approval decision with their resume deliveries: three new tables, no change to existing ones."""

from ..models import ApprovalDenial
from ..wait_models import ApprovalDelivery, ApprovalWait

VERSION = 2
NAME = "approval_denials_and_waits"


def up(schema):
    schema.create_tables([ApprovalDenial, ApprovalWait, ApprovalDelivery])
