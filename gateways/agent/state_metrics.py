"""The spec's agent gateway metrics for sessions, HITL approvals and A2A hops (the tool-call
metrics live with the tool-call pipeline). Labelled by tenant only: tenants are bounded by the
platform, tool and agent names are not."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from runtime.telemetry import Metrics


class StateMetrics:
    def __init__(self, metrics: Metrics) -> None:
        registry = metrics.registry
        self.sessions_total = Counter(
            "agent_gateway_sessions_total", "Sessions created", ["tenant"], registry=registry
        )
        self.sessions_active = Gauge(
            "agent_gateway_sessions_active",
            "Active sessions of the tenant (the shared store's count, as last seen here)",
            ["tenant"],
            registry=registry,
        )
        self.a2a_hops = Counter(
            "agent_gateway_a2a_hops_total",
            "A2A messages sent, by outcome (completed, pending, failed)",
            ["tenant", "outcome"],
            registry=registry,
        )
        self.hitl_requests = Counter(
            "agent_gateway_hitl_requests_total",
            "HITL approvals requested",
            ["tenant"],
            registry=registry,
        )
        self.hitl_approved = Counter(
            "agent_gateway_hitl_approved", "HITL approvals granted", ["tenant"], registry=registry
        )
        self.hitl_denied = Counter(
            "agent_gateway_hitl_denied", "HITL approvals denied", ["tenant"], registry=registry
        )
