"""`strata.agent.v1.ToolCallService`: the tool-call pipeline of `/v1/mcp/tools/call`,
`/v1/sessions/{id}/execute` and the gateway's own `/mcp`, in the issue's order:

1. server — registered, of the caller's tenant (404 `server_not_found`), not quarantined
   (409 `tool_set_quarantined`), offering the tool (404 `tool_not_found`); then, with the
   agent identity flag on, the hop token (`sts_token`) verified and its acting agent checked
   against its registered `allowed_tools` (`hop_identity.py`; 401 / 403);
2. session — when the call names one: it exists for this tenant and is active (404 / 403);
3. allowlist — the session's, deny by default (403 `tool_not_allowed`);
4. policy limits — one of the session's `max_tool_calls_per_session` taken atomically across
   replicas (429 `tool_call_limit_exceeded`); `max_concurrent_sessions` is at session create;
5. HITL — a tool of the tenant's `hitl_required_tools` creates a pending approval (202
   `pending_approval`, `hitl_pending` notification) unless an approval of exactly this call
   (same tool, same argument hash) was granted: it releases the call, once;
6. session token budget (429 `budget_exceeded`);
7. `arguments` against the tool's `inputSchema` (400 `validation_failed` with the failing
   `path`);
8. forward over MCP (`mcp/forwarder.py`); a tool's own error comes back as its result
   (`isError: true`, 200), a transport failure is 502;
9. an `agent_audit_log` row (arguments and result hashed) — refusals too, with the refusal
   as status;
10. counters (the session's tokens: about 4 JSON characters per token, arguments and result);
11. metrics.

A call stopped after step 4 gives its call slot back (`admission.release_call`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema
from google.protobuf import json_format
from jsonschema.exceptions import SchemaError
from opentelemetry import trace
from prometheus_client import Counter, Histogram
from redis.asyncio import Redis

from gateways.agent import admission
from gateways.agent.admission import PendingApproval, ToolCall
from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.audit import AuditTrail
from gateways.agent.hop_identity import Hop, HopVerifier
from gateways.agent.mcp.errors import ServerNotFound
from gateways.agent.mcp.forwarder import McpForwarder
from gateways.agent.mcp.store import ServerStore
from gateways.agent.mcp.tool_sets import is_callable
from gateways.agent.sessions.store import SessionRecord
from gateways.agent.tenancy import acting_tenant
from runtime.access import IDENTIFIER
from runtime.context import respond
from runtime.errors import InvalidRequest, NotFound, StrataError
from runtime.stores.kv_errors import kv_unavailable
from runtime.telemetry import Metrics
from strata.agent.v1 import tool_call_pb2, tool_call_pb2_grpc

PENDING = "pending_approval"
UNKNOWN = "unknown"  # the label of a server or tool not (yet) found in the registry
TRACER = trace.get_tracer("strata.agent")


@dataclass(frozen=True)
class Ran:
    """The tool ran: 200 `{result, latency_ms, server_id, tool_name}`."""

    result: dict[str, Any]
    latency_ms: int
    server_id: str
    tool_name: str


class ToolCallMetrics:
    """Labelled by tenant, server and tool. Cardinality stays bounded: a server and a tool are
    labels only once found in the registry (which administrators fill); a refusal before that
    is labelled `unknown`."""

    def __init__(self, metrics: Metrics) -> None:
        registry = metrics.registry
        self.calls = Counter(
            "agent_gateway_tool_calls_total",
            "Tool calls forwarded, by outcome (ok, tool_error)",
            ["tenant", "server", "tool", "outcome"],
            registry=registry,
        )
        self.denied = Counter(
            "agent_gateway_tool_calls_denied",
            "Tool calls refused or held, by the error identifier",
            ["tenant", "server", "tool", "reason"],
            registry=registry,
        )
        self.latency = Histogram(
            "agent_gateway_tool_latency_seconds",
            "Round trip of forwarded tool calls to their MCP server",
            ["tenant", "server", "tool"],
            registry=registry,
        )


class Validators:
    """One compiled JSON Schema validator per tool schema (keyed by the server's fingerprint,
    which changes when any schema does)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, str], Any] = {}

    def check(self, server: dict[str, Any], tool: dict[str, Any], arguments: Any) -> None:
        key = (server["id"], server.get("fingerprint", ""), tool["name"])
        validator = self._cache.get(key)
        if validator is None:
            schema = tool.get("inputSchema") or {"type": "object"}
            try:
                cls = jsonschema.validators.validator_for(schema)
                cls.check_schema(schema)
            except SchemaError as exc:
                raise InvalidRequest(
                    f"tool {tool['name']!r} has an invalid inputSchema: {exc.message}",
                    error="validation_failed",
                ) from None
            if len(self._cache) > 4096:
                self._cache.clear()
            validator = self._cache[key] = cls(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path)
            raise InvalidRequest(
                f"arguments{'/' + path if path else ''}: {error.message}",
                error="validation_failed",
                path="/" + path,
            )


class ToolCallPipeline:
    def __init__(
        self,
        kv: Redis,
        store: ServerStore,
        forwarder: McpForwarder,
        approvals: ApprovalQueue,
        events: ApprovalEvents,
        audit: AuditTrail,
        metrics: ToolCallMetrics,
        timeout_secs: float,
        hops: HopVerifier | None = None,
    ) -> None:
        self.kv = kv
        self.store = store
        self.forwarder = forwarder
        self.approvals = approvals
        self.events = events
        self.audit = audit
        self.metrics = metrics
        self.timeout_secs = timeout_secs
        self.validators = Validators()
        self.hops = hops

    async def call(
        self,
        tenant: str,
        server_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        session_id: str | None = None,
        sts_token: str | None = None,
    ) -> Ran | PendingApproval:
        with TRACER.start_as_current_span(
            "agent_gateway.tool_call",
            attributes={
                "tenant.id": tenant,
                "mcp.server.id": server_id,
                "mcp.tool.name": tool_name,
            },
        ):
            return await self._call(tenant, server_id, tool_name, arguments, session_id, sts_token)

    async def _call(
        self,
        tenant: str,
        server_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        session_id: str | None,
        sts_token: str | None = None,
    ) -> Ran | PendingApproval:
        session: SessionRecord | None = None
        hop: Hop | None = None
        slot_taken = forwarded = False
        labels = (tenant, UNKNOWN, UNKNOWN)
        try:
            server, tool = await self._server_and_tool(tenant, server_id, tool_name)  # 1
            labels = (tenant, server_id, tool_name)
            if self.hops is not None:  # the hop token and its acting agent (issue 12)
                hop = await self.hops.check(sts_token, tenant, tool=tool_name)
            if session_id is not None:
                session = await admission.admit_session(self.kv, session_id, tenant)  # 2
                admission.admit_allowlist(session, tool_name)  # 3
            policy = await admission.load_policy(self.kv, tenant)
            if session is not None:
                await admission.admit_call_limit(self.kv, session, policy)  # 4
                slot_taken = True
            call = ToolCall(tenant, tool_name, arguments, session_id)
            held = await admission.admit_hitl(self.approvals, self.events, policy, call)  # 5
            if isinstance(held, PendingApproval):
                self._refused(labels, session, arguments, PENDING, hop=hop)
                return held
            if session is not None:
                await admission.admit_token_budget(self.kv, session)  # 6
            self.validators.check(server, tool, arguments)  # 7
            with TRACER.start_as_current_span("mcp.tools_call"):  # the upstream call, a child
                answer = await self.forwarder.call_tool(  # 8
                    server, tool_name, arguments, timeout=self.timeout_secs
                )
            forwarded = True
        except StrataError as exc:
            self._refused(labels, session, arguments, exc.error or "error", tool_name, hop)
            raise
        finally:
            if slot_taken and not forwarded and session is not None:
                await admission.release_call(self.kv, session.id)
        outcome = "tool_error" if answer.is_error else "ok"
        self.audit.record(  # 9
            tenant,
            "tool_call",
            outcome,
            session_id=session_id or "",
            agent_id=_agent(session, hop),
            tool_name=tool_name,
            inputs=arguments,
            outputs=answer.result,
            act_chain=hop.act_chain if hop else None,
        )
        if session is not None:  # 10
            tokens = admission.estimate_tokens(arguments, answer.result)
            await admission.record_call(self.kv, session.id, tokens)
        self.metrics.calls.labels(*labels, outcome).inc()  # 11
        self.metrics.latency.labels(*labels).observe(answer.latency_ms / 1000)
        return Ran(answer.result, answer.latency_ms, server_id, tool_name)

    async def _server_and_tool(
        self, tenant: str, server_id: str, tool_name: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if not IDENTIFIER.fullmatch(server_id):
            raise InvalidRequest("server_id must match [A-Za-z0-9._:-]{1,128}", field="server_id")
        with kv_unavailable():
            server = await self.store.get(server_id)
        if server is None or server["tenant_id"] != tenant:
            raise ServerNotFound.for_auth(server_id)
        is_callable(server)
        for tool in server["tools"]:
            if tool["name"] == tool_name:
                return server, tool
        raise NotFound(
            f"MCP server {server_id!r} offers no tool {tool_name[:128]!r}", error="tool_not_found"
        )

    def _refused(
        self,
        labels: tuple[str, str, str],
        session: SessionRecord | None,
        arguments: Any,
        reason: str,
        tool_name: str = "",
        hop: Hop | None = None,
    ) -> None:
        self.metrics.denied.labels(*labels, reason).inc()
        self.audit.record(
            labels[0],
            "tool_call",
            reason,
            session_id=session.id if session else "",
            agent_id=_agent(session, hop),
            tool_name=tool_name or labels[2],
            inputs=arguments,
            act_chain=hop.act_chain if hop else None,
        )

    async def call_for_mcp(
        self,
        tenant: str,
        server_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        session_id: str | None,
    ) -> dict[str, Any]:
        """The gateway's own `/mcp` `tools/call`: the same pipeline, in the client's session
        when it is bound to one; a held call is a tool error naming the approval."""
        outcome = await self.call(tenant, server_id, tool_name, arguments, session_id)
        if isinstance(outcome, PendingApproval):
            text = f"{outcome.message} (approval_id {outcome.approval_id})"
            return {"content": [{"type": "text", "text": text}], "isError": True}
        return outcome.result


class ToolCallServicer(tool_call_pb2_grpc.ToolCallServiceServicer):
    """The RPCs over `ToolCallPipeline`; a held call sets HTTP 202 (`render_tool_call` picks
    the shape)."""

    def __init__(self, pipeline: ToolCallPipeline) -> None:
        self.pipeline = pipeline

    async def CallTool(
        self, request: tool_call_pb2.CallToolRequest, context: Any
    ) -> tool_call_pb2.CallToolResponse:
        session = request.session_id if request.HasField("session_id") else None
        outcome = await self._call(request, session, context)
        return _response(tool_call_pb2.CallToolResponse(), outcome)

    async def ExecuteSessionTool(
        self, request: tool_call_pb2.ExecuteSessionToolRequest, context: Any
    ) -> tool_call_pb2.ExecuteSessionToolResponse:
        outcome = await self._call(request, request.session_id, context)
        return _response(tool_call_pb2.ExecuteSessionToolResponse(), outcome)

    async def _call(
        self, request: Any, session_id: str | None, context: Any
    ) -> Ran | PendingApproval:
        for field in ("server_id", "tool_name"):
            if not getattr(request, field):
                raise InvalidRequest(f"'{field}' is required", field=field)
        if not request.HasField("arguments"):
            raise InvalidRequest("'arguments' is required (an object)", field="arguments")
        arguments = json_format.MessageToDict(request.arguments)
        # (`/v1/sessions/{id}/execute` takes no hop token: the spec's body has none)
        has_token = "sts_token" in request.DESCRIPTOR.fields_by_name and request.HasField(
            "sts_token"
        )
        sts_token = request.sts_token if has_token else None
        outcome = await self.pipeline.call(
            acting_tenant(), request.server_id, request.tool_name, arguments, session_id, sts_token
        )
        if isinstance(outcome, PendingApproval):
            respond(context, status=202)
        return outcome


def _agent(session: SessionRecord | None, hop: Hop | None) -> str:
    """The audit row's agent: the session's, else the hop token's acting agent."""
    if session is not None:
        return session.agent_id
    return hop.acting_agent if hop is not None else ""


def _response(message: Any, outcome: Ran | PendingApproval) -> Any:
    if isinstance(outcome, PendingApproval):
        message.status = PENDING
        message.approval_id = outcome.approval_id
        message.message = outcome.message
    else:
        message.result.struct_value.update(outcome.result)
        message.latency_ms = outcome.latency_ms
        message.server_id = outcome.server_id
        message.tool_name = outcome.tool_name
    return message


def render_tool_call(message: Any) -> dict[str, Any]:
    """The spec's two shapes: 202 `{status, approval_id, message}` or 200 `{result,
    latency_ms, server_id, tool_name}`."""
    if message.status:
        return {"status": message.status, "approval_id": message.approval_id,
                "message": message.message}  # fmt: skip
    return {
        "result": json_format.MessageToDict(message.result),
        "latency_ms": message.latency_ms,
        "server_id": message.server_id,
        "tool_name": message.tool_name,
    }
