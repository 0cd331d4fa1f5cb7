"""The agent gateway service (L3): its servicers, routes and meta endpoints.

Every RPC of `strata.agent.v1` is declared; until a servicer implements one it answers
UNIMPLEMENTED (its route 501).
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from gateways.agent.config import AgentGatewayConfig
from gateways.agent.http_rules import HTTP_RULES
from gateways.agent.mcp.side import McpSide
from runtime.auth import authenticator_for
from runtime.config import VERSION
from runtime.service import ServiceDefinition, bind, unimplemented
from runtime.stores import Stores
from runtime.telemetry import Metrics
from strata.agent.v1 import (
    a2a_pb2_grpc,
    approval_pb2_grpc,
    elicitation_pb2_grpc,
    policy_pb2_grpc,
    registry_pb2_grpc,
    session_pb2_grpc,
    tool_call_pb2_grpc,
)

SERVICE = "agent-gateway"
ENGINE = "strata"
# The MCP server registry hash (field = server id); owned by the registry servicer.
MCP_SERVERS_KEY = "mcp:servers"


def build(config: AgentGatewayConfig, stores: Stores) -> ServiceDefinition:
    metrics = Metrics(SERVICE)
    authenticator = authenticator_for(config)
    mcp = McpSide(config, stores, metrics, authenticator)

    async def close() -> None:
        await mcp.close()
        await stores.close()

    async def health() -> dict[str, Any]:
        try:
            servers = int(await stores.kv.hlen(MCP_SERVERS_KEY))
        except (RedisError, OSError):
            servers = 0
        return {"status": "healthy", "service": SERVICE, "engine": ENGINE, "mcp_servers": servers}

    implemented = {b.name: b for b in (bind(registry_pb2_grpc, mcp.registry),)}
    declared = unimplemented(
        registry_pb2_grpc,
        tool_call_pb2_grpc,
        a2a_pb2_grpc,
        session_pb2_grpc,
        policy_pb2_grpc,
        approval_pb2_grpc,
        elicitation_pb2_grpc,
    )
    return ServiceDefinition(
        name=SERVICE,
        bindings=[implemented.get(b.name, b) for b in declared],
        http_rules=HTTP_RULES,
        info={
            "service": SERVICE,
            "engine": ENGINE,
            "version": VERSION,
            "protocols": ["mcp", "a2a"],
            "endpoints": {
                "/v1/mcp/servers": "MCP server registry",
                "/v1/mcp/tools": "all tools",
                "/v1/mcp/tools/call": "call a tool",
                "/v1/a2a/agents": "A2A agent cards",
                "/v1/a2a/send": "send an A2A message",
                "/v1/sessions": "agent sessions",
                "/v1/policies/{tenant_id}": "tenant security policy",
                "/v1/hitl/pending": "human approvals",
                "/v1/elicit": "elicitation",
                "/mcp": "MCP endpoint (streamable HTTP): the tenant's registered tools",
                "/health": "service health",
                "/metrics": "Prometheus metrics",
            },
        },
        health=health,
        authenticator=authenticator,
        routes=mcp.endpoint.routes(),
        metrics=metrics,
        on_startup=[mcp.start],
        on_cleanup=[close],
        client_max_size=config.max_body_bytes,
    )
