"""The agent gateway service (L3): its servicers, routes and meta endpoints.

Every RPC of `strata.agent.v1` is declared; until a servicer implements one it answers
UNIMPLEMENTED (its route 501). Sessions, policies, approvals, elicitation and A2A are built;
the objects the tool-call pipeline needs for its admission steps (`admission.py`) are made
here once: the approval queue and its events, the audit trail.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from gateways.agent.a2a.forward import A2AForwarder
from gateways.agent.a2a.servicer import A2AServicer
from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.servicer import ApprovalServicer
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.audit import TABLE as AUDIT_TABLE
from gateways.agent.audit import AuditTrail
from gateways.agent.changes import ChangeWatch
from gateways.agent.config import AgentGatewayConfig
from gateways.agent.elicitation import ElicitationServicer
from gateways.agent.hop_identity import HopVerifier
from gateways.agent.http_rules import API_DOCS, HTTP_RULES
from gateways.agent.mcp import keys as mcp_keys
from gateways.agent.mcp.endpoint import McpEndpoint
from gateways.agent.mcp.side import McpSide
from gateways.agent.policies import PolicyServicer
from gateways.agent.sessions.servicer import SessionServicer
from gateways.agent.state_metrics import StateMetrics
from gateways.agent.tool_calls import ToolCallMetrics, ToolCallPipeline, ToolCallServicer
from runtime.auth import authenticator_for
from runtime.background import Background
from runtime.config import VERSION
from runtime.issued_keys import IssuedKeys
from runtime.peers import Peer
from runtime.service import ServiceDefinition, bind, unimplemented
from runtime.stores import Stores
from runtime.stores.kv import ready_kv
from runtime.stores.outbox import Outbox
from runtime.telemetry import Metrics
from runtime.tenant_realms import tenant_realms_for
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
MCP_SERVERS_KEY = mcp_keys.SERVERS


def build(config: AgentGatewayConfig, stores: Stores) -> ServiceDefinition:
    kv = stores.kv
    metrics = Metrics(SERVICE)
    state_metrics = StateMetrics(metrics)
    api_keys = IssuedKeys(kv)  # `Bearer sk-…`: keys issued by the control plane
    realms = tenant_realms_for(config, kv)  # tokens of tenants' own realms
    authenticator = authenticator_for(config, api_keys=api_keys, realms=realms)
    controlplane = Peer(config.controlplane_grpc, config.master_key, config.grpc_deadline_secs)
    background = Background(stores.sink, controlplane, AUDIT_TABLE, Outbox(kv))
    audit = AuditTrail(background)
    mcp = McpSide(config, stores, metrics, audit)
    approvals = ApprovalQueue(kv, config.hitl_ttl_secs)
    changes = ChangeWatch(kv)  # when in-memory copies of shared state may be used
    forwarder = A2AForwarder(development=config.development, timeout_secs=config.a2a_timeout_secs)
    hops = HopVerifier(config, kv)  # STS hop tokens (SVC_AGENT_IDENTITY); no-op when off
    tool_calls = ToolCallPipeline(
        kv,
        mcp.store,
        mcp.forwarder,
        approvals,
        ApprovalEvents(background, audit, state_metrics),
        audit,
        ToolCallMetrics(metrics),
        config.mcp_timeout_secs,
        config.tool_result_reserve_tokens,
        changes,
        hops,
    )
    # The gateway's own MCP endpoint: its tools/call runs the same pipeline.
    endpoint = McpEndpoint(
        authenticator,
        mcp.store,
        tool_calls.call_for_mcp,
        session_ttl_secs=config.mcp_session_ttl_secs,
        authorization_server=config.idp_issuer_url,
        public_url=config.public_url,
    )

    async def close() -> None:
        await api_keys.stop()
        await realms.stop()
        await changes.stop()
        await mcp.close()
        await forwarder.close()
        await background.close()
        await stores.close()

    async def health() -> dict[str, Any]:
        try:
            servers = int(await stores.kv.hlen(MCP_SERVERS_KEY))
        except (RedisError, OSError):
            servers = 0
        return {"status": "healthy", "service": SERVICE, "engine": ENGINE, "mcp_servers": servers}

    implemented = {
        b.name: b
        for b in (
            bind(registry_pb2_grpc, mcp.registry),
            bind(tool_call_pb2_grpc, ToolCallServicer(tool_calls)),
            bind(session_pb2_grpc, SessionServicer(kv, audit, state_metrics)),
            bind(policy_pb2_grpc, PolicyServicer(kv)),
            bind(approval_pb2_grpc, ApprovalServicer(approvals, audit, state_metrics)),
            bind(elicitation_pb2_grpc, ElicitationServicer(kv, config.elicitation_ttl_secs)),
            bind(a2a_pb2_grpc, A2AServicer(kv, forwarder, audit, state_metrics, hops)),
        )
    }
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
                "/.well-known/oauth-protected-resource/mcp": "how MCP clients log in (RFC 9728)",
                "/health": "service health",
                "/metrics": "Prometheus metrics",
            },
        },
        health=health,
        authenticator=authenticator,
        routes=endpoint.routes(),
        api=API_DOCS,
        metrics=metrics,
        on_startup=[
            lambda: ready_kv(kv),
            mcp.start,
            changes.start,
            api_keys.start,
            realms.start,
            stores.start_drain,  # where this process writes ClickHouse itself
        ],
        on_cleanup=[close],
        client_max_size=config.max_body_bytes,
    )
