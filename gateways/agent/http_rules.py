"""JSON rule table of the agent gateway (L3): the spec's `/v1/...` endpoints bound to RPCs.

Header-borne inputs (`x-tenant-id` on the list routes, `authorization`) are not bound here; the
servicers read them from invocation metadata.

Two routes answer two success shapes from one response message (the servicer sets 202 with
`runtime.context.respond`; a custom renderer drops the other shape's field):
- tool call and session execute: 200 `{result, latency_ms, server_id, tool_name}`, or 202
  `{status:'pending_approval', approval_id, message}` when the response's `status` is set
  (`render_tool_call`);
- A2A send: 200 `{..., result}` when `status` is `completed`, 202 `{..., note}` when `pending`
  (`render_send`).

`/`, `/health` and `/metrics` are served by the front door itself, not by RPCs.
"""

from __future__ import annotations

from gateways.agent.a2a.servicer import render_send
from gateways.agent.mcp.endpoint import OPENAPI_PATHS as MCP_PATHS
from gateways.agent.tool_calls import render_tool_call
from runtime.http_rules import HttpRule
from runtime.openapi import ApiDocs, json_response, ref
from runtime.service import spec_error

PKG = "strata.agent.v1"

_REGISTRY = f"{PKG}.McpRegistryService"
_TOOLS = f"{PKG}.ToolCallService"
_A2A = f"{PKG}.A2AService"
_SESSIONS = f"{PKG}.SessionService"
_POLICIES = f"{PKG}.PolicyService"
_APPROVALS = f"{PKG}.ApprovalService"
_ELICIT = f"{PKG}.ElicitationService"

# The two answers of a tool call (`render_tool_call`).
TOOL_CALL = {
    200: json_response(
        "the tool ran: its MCP `tools/call` result",
        {
            "type": "object",
            "required": ["result", "latency_ms", "server_id", "tool_name"],
            "properties": {
                "result": {"description": "the MCP `tools/call` result (any JSON)"},
                "latency_ms": {"type": "integer"},
                "server_id": {"type": "string"},
                "tool_name": {"type": "string"},
            },
            "additionalProperties": False,
        },
    ),
    202: json_response(
        "the call waits for a human's approval (HITL)",
        {
            "type": "object",
            "required": ["status", "approval_id", "message"],
            "properties": {
                "status": {"const": "pending_approval"},
                "approval_id": {"type": "string"},
                "message": {"type": "string"},
            },
            "additionalProperties": False,
        },
    ),
}
# The two answers of an A2A send (`render_send`).
SEND = {
    200: json_response(
        "delivered: `status` is `completed`, with the target's `result`",
        ref(f"{PKG}.SendMessageResponse"),
    ),
    202: json_response(
        "queued: `status` is `pending` (the target is not registered), with a `note`",
        ref(f"{PKG}.SendMessageResponse"),
    ),
}

HTTP_RULES: tuple[HttpRule, ...] = (
    # MCP registry
    HttpRule("GET", "/v1/mcp/servers", f"{_REGISTRY}/ListServers", body=None),
    HttpRule(
        "POST",
        "/v1/mcp/servers",
        f"{_REGISTRY}/RegisterServer",
        status=201,
        required=("name", "url", "tenant_id"),  # (beyond the spec) no `tools`: discovered
    ),
    HttpRule(
        "GET",
        "/v1/mcp/servers/{server_id}",
        f"{_REGISTRY}/GetServer",
        body=None,
        response_body="server",
    ),
    HttpRule("DELETE", "/v1/mcp/servers/{server_id}", f"{_REGISTRY}/DeleteServer", body=None),
    HttpRule("GET", "/v1/mcp/servers/{server_id}/auth", f"{_REGISTRY}/GetServerAuth", body=None),
    HttpRule(
        "PUT",
        "/v1/mcp/servers/{server_id}/auth",
        f"{_REGISTRY}/PutServerAuth",
        required=("mode", "client_secret", "required_scopes"),
    ),
    HttpRule("GET", "/v1/mcp/servers/{server_id}/tools", f"{_REGISTRY}/ListServerTools", body=None),
    HttpRule("GET", "/v1/mcp/tools", f"{_REGISTRY}/ListTools", body=None),
    # (beyond the spec) re-approve a quarantined server's changed tool set
    HttpRule(
        "POST", "/v1/mcp/servers/{server_id}/approve-tools", f"{_REGISTRY}/ApproveServerTools"
    ),
    # Tool execution (200, or 202 `pending_approval`)
    HttpRule(
        "POST",
        "/v1/mcp/tools/call",
        f"{_TOOLS}/CallTool",
        render=render_tool_call,
        responses=TOOL_CALL,
        required=("server_id", "tool_name", "arguments", "tenant_id"),
        json_method="call_json",  # the hot path: no protobuf round trip of arguments, result
    ),
    HttpRule(
        "POST",
        "/v1/sessions/{session_id}/execute",
        f"{_TOOLS}/ExecuteSessionTool",
        render=render_tool_call,
        responses=TOOL_CALL,
        required=("server_id", "tool_name", "arguments", "tenant_id"),
        json_method="execute_json",
    ),
    # A2A (send: 200 `completed` or 202 `pending`)
    HttpRule("GET", "/v1/a2a/agents", f"{_A2A}/ListAgents", body=None),
    HttpRule(
        "POST",
        "/v1/a2a/agents",
        f"{_A2A}/RegisterAgent",
        status=201,
        required=("id", "name", "url", "tenant_id", "capabilities", "description"),
    ),
    HttpRule(
        "POST",
        "/v1/a2a/send",
        f"{_A2A}/SendMessage",
        render=render_send,
        responses=SEND,
        required=("from_agent", "to_agent", "message", "tenant_id"),
    ),
    HttpRule("GET", "/v1/a2a/tasks/{task_id}", f"{_A2A}/GetTask", body=None),
    # Sessions
    HttpRule("GET", "/v1/sessions", f"{_SESSIONS}/ListSessions", body=None),
    HttpRule(
        "POST",
        "/v1/sessions",
        f"{_SESSIONS}/CreateSession",
        status=201,
        response_body="session",
        required=("tenant_id", "agent_id", "tool_allowlist", "token_budget"),
    ),
    HttpRule(
        "GET",
        "/v1/sessions/{session_id}",
        f"{_SESSIONS}/GetSession",
        body=None,
        response_body="session",
    ),
    HttpRule("DELETE", "/v1/sessions/{session_id}", f"{_SESSIONS}/DeleteSession", body=None),
    HttpRule("GET", "/v1/sessions/{session_id}/tools", f"{_SESSIONS}/ListSessionTools", body=None),
    # Security policies
    HttpRule(
        "GET",
        "/v1/policies/{tenant_id}",
        f"{_POLICIES}/GetPolicy",
        body=None,
        response_body="policy",
    ),
    HttpRule("PUT", "/v1/policies/{tenant_id}", f"{_POLICIES}/PutPolicy", response_body="policy"),
    # HITL approvals
    HttpRule("GET", "/v1/hitl/pending", f"{_APPROVALS}/ListPendingApprovals", body=None),
    HttpRule("POST", "/v1/hitl/{approval_id}/approve", f"{_APPROVALS}/GrantApproval", body=None),
    HttpRule("POST", "/v1/hitl/{approval_id}/deny", f"{_APPROVALS}/DenyApproval", body=None),
    # Elicitation
    HttpRule(
        "POST",
        "/v1/elicit",
        f"{_ELICIT}/CreateElicitation",
        status=202,
        required=("session_id", "tenant_id", "tool_name", "message", "schema"),
    ),
    HttpRule(
        "POST",
        "/v1/elicit/{elicit_id}/respond",
        f"{_ELICIT}/RespondElicitation",
        body="response",
    ),
)

API_DOCS = ApiDocs(
    title="Strata agent gateway",
    description="The agent gateway (L3): the MCP server registry and tool calls, the MCP "
    "endpoint, A2A messaging between agents, sessions, security policies, human approvals "
    "(HITL) and elicitation.",
    rules=HTTP_RULES,
    envelope=spec_error,
    file_name="agent-gateway.json",
    issued_keys=True,
    paths=MCP_PATHS,
)
