"""What happens beside the queue when a tool call is held for approval: a `hitl_pending`
notification to the control plane (gRPC, off the request path), an audit row and the
`agent_gateway_hitl_requests_total` metric."""

from __future__ import annotations

from gateways.agent.approvals.store import Approval
from gateways.agent.audit import AuditTrail
from gateways.agent.state_metrics import StateMetrics
from runtime.background import Background


class ApprovalEvents:
    def __init__(self, background: Background, audit: AuditTrail, metrics: StateMetrics) -> None:
        self.background = background
        self.audit = audit
        self.metrics = metrics

    def pending(self, approval: Approval) -> None:
        """Announce a new pending approval; never blocks, never fails the call."""
        session = f" in session {approval.session_id}" if approval.session_id else ""
        self.background.notify(
            approval.tenant_id,
            "hitl_pending",
            f"Approval needed: {approval.tool_name}",
            f"A call of tool {approval.tool_name}{session} waits for a human decision "
            f"(approval {approval.id}): POST /v1/hitl/{approval.id}/approve or /deny.",
        )
        self.audit.record(
            approval.tenant_id,
            "hitl_request",
            approval.status,
            session_id=approval.session_id,
            tool_name=approval.tool_name,
            inputs=approval.arguments,
        )
        self.metrics.hitl_requests.labels(approval.tenant_id).inc()
