"""`strata.agent.v1.ApprovalService`: the pending list and the one decision per approval.

Approvals are created by the tool-call pipeline (`admission.admit_hitl`). A decision on an
unknown approval, or on one of another tenant, is 404 `{error:'Approval not found'}` (an
approval is looked up in the caller's tenant; a platform administrator's in its own tenant's,
by the id → tenant index); a
second decision (or one after the approval expired) is 409 `approval_already_resolved` naming
the status it has. An unreachable store is 503: approvals fail closed.
"""

from __future__ import annotations

from google.protobuf import struct_pb2

from gateways.agent.approvals.store import (
    APPROVED,
    DENIED,
    AlreadyDecided,
    Approval,
    ApprovalQueue,
)
from gateways.agent.audit import AuditTrail
from gateways.agent.state_metrics import StateMetrics
from gateways.agent.tenancy import is_platform_admin, listing_tenant, may_see
from runtime.context import ServicerContext
from runtime.errors import AlreadyExists, NotFound
from runtime.fields import identifier, now_iso
from runtime.stores.kv_errors import store_errors
from strata.agent.v1 import approval_pb2, approval_pb2_grpc


def to_proto(approval: Approval) -> approval_pb2.Approval:
    arguments = struct_pb2.Struct()
    arguments.update(approval.arguments)
    return approval_pb2.Approval(
        id=approval.id,
        session_id=approval.session_id,
        tenant_id=approval.tenant_id,
        tool_name=approval.tool_name,
        arguments=arguments,
        status=approval.status,
        request_type=approval.request_type,
        created_at=approval.created_at,
        resolved_at=approval.resolved_at,
    )


class ApprovalServicer(approval_pb2_grpc.ApprovalServiceServicer):
    def __init__(self, queue: ApprovalQueue, audit: AuditTrail, metrics: StateMetrics) -> None:
        self.queue = queue
        self.audit = audit
        self.metrics = metrics

    @store_errors
    async def ListPendingApprovals(
        self, request: approval_pb2.ListPendingApprovalsRequest, context: ServicerContext
    ) -> approval_pb2.ListPendingApprovalsResponse:
        pending = [to_proto(a) for a in await self.queue.pending(listing_tenant())]
        return approval_pb2.ListPendingApprovalsResponse(pending=pending, total=len(pending))

    async def _find(self, approval_id: str) -> Approval | None:
        """The approval in the caller's tenant; for a platform administrator, in whichever
        tenant its id belongs to (the id → tenant index)."""
        tenant = listing_tenant()
        approval = await self.queue.get(tenant, approval_id)
        if approval is None and is_platform_admin():
            owner = await self.queue.tenant_of(approval_id)
            if owner is not None and owner != tenant:
                approval = await self.queue.get(owner, approval_id)
        return approval

    async def _decide(self, approval_id: str, status: str) -> Approval:
        identifier(approval_id, "approval_id")
        approval = await self._find(approval_id)
        if approval is None or not may_see(approval.tenant_id):
            raise NotFound("Approval not found")
        try:
            decided = await self.queue.decide(approval, status, now_iso())
        except AlreadyDecided as done:
            raise AlreadyExists(
                f"approval {approval_id} is already {done.status}",
                error="approval_already_resolved",
                status=done.status,
            ) from None
        self.audit.record(
            decided.tenant_id,
            f"hitl_{status}",
            status,
            session_id=decided.session_id,
            tool_name=decided.tool_name,
            inputs=decided.arguments,
        )
        counter = self.metrics.hitl_approved if status == APPROVED else self.metrics.hitl_denied
        counter.labels(decided.tenant_id).inc()
        return decided

    @store_errors
    async def GrantApproval(
        self, request: approval_pb2.GrantApprovalRequest, context: ServicerContext
    ) -> approval_pb2.GrantApprovalResponse:
        decided = await self._decide(request.approval_id, APPROVED)
        return approval_pb2.GrantApprovalResponse(
            id=decided.id, status=decided.status, resolved_at=decided.resolved_at
        )

    @store_errors
    async def DenyApproval(
        self, request: approval_pb2.DenyApprovalRequest, context: ServicerContext
    ) -> approval_pb2.DenyApprovalResponse:
        decided = await self._decide(request.approval_id, DENIED)
        return approval_pb2.DenyApprovalResponse(
            id=decided.id, status=decided.status, resolved_at=decided.resolved_at
        )
