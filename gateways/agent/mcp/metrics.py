"""The MCP side's metrics, with the spec's names exactly.

`agent_gateway_tool_poisoning_detected` counts tool-set changes that quarantined a server. It
is a Gauge only ever increased: prometheus_client exposes a Counter as `<name>_total`, and the
spec names this metric without that suffix. Labelled by tenant (bounded by tenants).
"""

from __future__ import annotations

from prometheus_client import Gauge

from runtime.telemetry import Metrics


class McpMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.poisoning_detected = Gauge(
            "agent_gateway_tool_poisoning_detected",
            "Tool-set changes (rug pulls) detected on MCP servers; each quarantined the server",
            ["tenant_id"],
            registry=metrics.registry,
        )
