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
   (same tool, same argument hash, same session or tenant) was granted: it releases the call,
   once; while one is pending, the same call is held on it (202, the same `approval_id`);
6. session token budget (429 `budget_exceeded`);
7. `arguments` against the tool's `inputSchema` (400 `validation_failed` with the failing
   `path`);
8. forward over MCP (`mcp/forwarder.py`); a tool's own error comes back as its result
   (`isError: true`, 200), a transport failure is 502;
9. an `agent_audit_log` row (arguments and result hashed) — refusals too, with the refusal
   as status;
10. counters (the session's tokens: about 4 JSON characters per token, arguments and result),
    settled when the call leaves its `CallTicket` (`call_ticket.py`);
11. metrics.

Store round trips (`admission.py`): the server record comes from a cache checked against the
registry's version (`mcp/server_cache.py`); steps 2, 3, 4 and 6 are one script over the
session's keys, sent in the same round trip as the one that reads what every call needs (the
policy, the server's auth, in the registry's slot; a tenant's first session call reads them
first: one round trip more); 10 is one more. A call outside
a session reuses what the script last read for its tenant and server while the change feed
says nothing changed (`admission_cache.py`, `changes.py`): no round trip at all. Steps 4 and 6
take a call slot and reserve tokens atomically (a call is admitted only while the budget, less
the reservations of calls in flight, lasts); 10 turns the reservation into the tokens used.
A call that reached its upstream counts, whatever came back (its tool may have run: a timeout,
a dropped connection, garbage, a result over the size cap — each a 502); a call stopped before
(held, refused, invalid, upstream unreachable) gives its slot and reservation back, and the
approval that released it stays usable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import jsonschema
from google.protobuf import json_format
from jsonschema.exceptions import SchemaError
from opentelemetry import trace
from prometheus_client import Counter, Histogram
from redis.asyncio import Redis

from gateways.agent import admission
from gateways.agent.admission import Admission, PendingApproval, ToolCall
from gateways.agent.admission_cache import AdmissionCache
from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.audit import AuditTrail
from gateways.agent.call_ticket import CallTicket
from gateways.agent.changes import ChangeWatch
from gateways.agent.hop_identity import Hop, HopVerifier
from gateways.agent.mcp.errors import ServerNotFound
from gateways.agent.mcp.forwarder import McpForwarder
from gateways.agent.mcp.server_cache import ServerCache
from gateways.agent.mcp.store import ServerStore
from gateways.agent.mcp.tool_sets import is_callable
from gateways.agent.sessions.store import SessionRecord
from gateways.agent.tenancy import acting_tenant
from runtime.access import IDENTIFIER, authorize, bind_caller, current_caller, rule_of
from runtime.context import ServicerContext, respond, text_metadata
from runtime.errors import InvalidRequest, NotFound
from runtime.protojson import merge_json, plain_json
from runtime.telemetry import Metrics
from strata.agent.v1 import tool_call_pb2, tool_call_pb2_grpc

PENDING = "pending_approval"
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
        result_reserve_tokens: int,
        watch: ChangeWatch,
        hops: HopVerifier | None = None,
    ) -> None:
        self.kv = kv
        self.store = store
        self.watch = watch
        self.servers = ServerCache(kv, watch)
        self.admissions = AdmissionCache(watch)
        self.recent_policies = admission.RecentPolicies()
        self.forwarder = forwarder
        self.approvals = approvals
        self.events = events
        self.audit = audit
        self.metrics = metrics
        self.timeout_secs = timeout_secs
        self.result_reserve_tokens = result_reserve_tokens
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
        if session_id is not None and not IDENTIFIER.fullmatch(session_id):
            raise InvalidRequest("session_id must match [A-Za-z0-9._:-]{1,128}", field="session_id")
        call = ToolCall(tenant, tool_name, arguments, session_id)
        # Tokens matter to a session's budget only (outside one, nothing counts them).
        argument_chars = admission.json_chars(arguments) if session_id is not None else 0
        want = admission.tokens_for(argument_chars) + self.result_reserve_tokens
        async with CallTicket(
            self.kv, self.approvals, call, argument_chars, self._refused
        ) as ticket:
            server, tool, entry = await self._admit(ticket, server_id, sts_token, want)  # 1-4, 6
            if entry.refusal is not None:
                raise entry.refusal
            ticket.holds(entry)
            held = await admission.admit_hitl(self.approvals, self.events, entry.policy, call)  # 5
            if isinstance(held, PendingApproval):
                self._refused(ticket, PENDING)
                return held
            ticket.grant = held
            if entry.hitl and entry.session is not None:
                await ticket.reserve(want)  # 6
            self.validators.check(server, tool, arguments)  # 7
            auth = await self.forwarder.tokens.headers_from(
                server_id, entry.auth_config, entry.auth_token
            )
            ticket.forwarding = True
            with TRACER.start_as_current_span("mcp.tools_call"):  # the upstream call, a child
                answer = await self.forwarder.call_tool(  # 8
                    server, tool_name, arguments, timeout=self.timeout_secs, auth=auth
                )
            ticket.ran(answer)
            outcome = "tool_error" if answer.is_error else "ok"
            hop = ticket.hop
            self.audit.record(  # 9
                tenant,
                "tool_call",
                outcome,
                session_id=session_id or "",
                agent_id=_agent(entry.session, hop),
                tool_name=tool_name,
                inputs=arguments,
                outputs=answer.result,
                act_chain=hop.act_chain if hop else None,
            )
        # 10: leaving the ticket settled the session's counters
        self.metrics.calls.labels(*ticket.labels, outcome).inc()  # 11
        self.metrics.latency.labels(*ticket.labels).observe(answer.latency_ms / 1000)
        return Ran(answer.result, answer.latency_ms, server_id, tool_name)

    async def _admit(
        self, ticket: CallTicket, server_id: str, sts_token: str | None, want: int
    ) -> tuple[dict[str, Any], dict[str, Any], Admission]:
        """Steps 1 to 4 (a call slot taken) and 6 unless HITL is due: the server, the tool and
        the admission (one round trip, none for a call outside a session while nothing
        changed since last read)."""
        call = ticket.call
        tenant, tool_name = call.tenant_id, call.tool_name
        generation = self.watch.generation  # what is read from here on may be kept
        while True:
            server, tool, version = await self._server_and_tool(tenant, server_id, tool_name)
            ticket.labels = (tenant, server_id, tool_name)
            if ticket.hop is None and self.hops is not None:  # the hop token, its acting agent
                ticket.hop = await self.hops.check(sts_token, tenant, tool=tool_name)
            if call.session_id is None:  # nothing changed since last read: no round trip
                entry = self.admissions.get(tenant, server_id)
                if entry is not None:
                    ticket.entry = entry
                    return server, tool, entry
            try:
                entry = await admission.admit(
                    self.kv,
                    call,
                    server_id=server_id,
                    version=version,
                    want=want,
                    recent=self.recent_policies,
                )
            except admission.Stale:  # the registry changed: read the server again
                self.servers.invalidate()
                continue
            ticket.entry = entry
            if call.session_id is None:
                self.admissions.put(tenant, server_id, entry, generation)
            return server, tool, entry

    async def _server_and_tool(
        self, tenant: str, server_id: str, tool_name: str
    ) -> tuple[dict[str, Any], dict[str, Any], str]:
        """The server and tool (step 1), and the registry version the record must still be
        at when the call is admitted ('' when read from the store just now)."""
        if not IDENTIFIER.fullmatch(server_id):
            raise InvalidRequest("server_id must match [A-Za-z0-9._:-]{1,128}", field="server_id")
        cached = await self.servers.get(server_id)
        if cached is None or cached.record["tenant_id"] != tenant:
            raise ServerNotFound.for_auth(server_id)
        is_callable(cached.record)
        tool = cached.tools.get(tool_name)
        if tool is None:
            raise NotFound(
                f"MCP server {server_id!r} offers no tool {tool_name[:128]!r}",
                error="tool_not_found",
            )
        return cached.record, tool, cached.version

    def _refused(self, ticket: CallTicket, reason: str) -> None:
        call, entry, hop = ticket.call, ticket.entry, ticket.hop
        session = entry.session if entry is not None else None
        self.metrics.denied.labels(*ticket.labels, reason).inc()
        self.audit.record(
            call.tenant_id,
            "tool_call",
            reason,
            session_id=call.session_id or "",
            agent_id=_agent(session, hop),
            tool_name=call.tool_name,
            inputs=call.arguments,
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
    the shape). `call_json` and `execute_json` are CallTool's and ExecuteSessionTool's faces
    for the front door (`json_method`): the same checks and pipeline on the JSON body as
    parsed, sparing the protobuf round trip of the arguments and the result (the hot path)."""

    def __init__(self, pipeline: ToolCallPipeline) -> None:
        self.pipeline = pipeline
        methods = tool_call_pb2.DESCRIPTOR.services_by_name["ToolCallService"].methods_by_name
        self.call_rule = rule_of(methods["CallTool"])
        self.execute_rule = rule_of(methods["ExecuteSessionTool"])

    async def call_json(self, body: Mapping[str, Any], context: ServicerContext) -> dict[str, Any]:
        """POST /v1/mcp/tools/call."""
        request = _parsed(tool_call_pb2.CallToolRequest(), self.call_rule, body, context)
        session = request.session_id if request.HasField("session_id") else None
        return await self._call_json(request, body, session, context)

    async def execute_json(
        self, body: Mapping[str, Any], context: ServicerContext
    ) -> dict[str, Any]:
        """POST /v1/sessions/{session_id}/execute (the path's `session_id` is in `body`)."""
        empty = tool_call_pb2.ExecuteSessionToolRequest()
        request = _parsed(empty, self.execute_rule, body, context)
        return await self._call_json(request, body, request.session_id, context)

    async def _call_json(
        self,
        request: Any,
        body: Mapping[str, Any],
        session_id: str | None,
        context: ServicerContext,
    ) -> dict[str, Any]:
        arguments = body.get("arguments")
        if "arguments" in body and not isinstance(arguments, dict):
            raise InvalidRequest("'arguments' must be an object", field="arguments")
        outcome = await self._call(request, arguments, session_id, context)
        if isinstance(outcome, PendingApproval):
            return {"status": PENDING, "approval_id": outcome.approval_id,
                    "message": outcome.message}  # fmt: skip
        return {"result": outcome.result, "latency_ms": outcome.latency_ms,
                "server_id": outcome.server_id, "tool_name": outcome.tool_name}  # fmt: skip

    async def CallTool(
        self, request: tool_call_pb2.CallToolRequest, context: ServicerContext
    ) -> tool_call_pb2.CallToolResponse:
        session = request.session_id if request.HasField("session_id") else None
        outcome = await self._call(request, _arguments(request), session, context)
        return _response(tool_call_pb2.CallToolResponse(), outcome)

    async def ExecuteSessionTool(
        self, request: tool_call_pb2.ExecuteSessionToolRequest, context: ServicerContext
    ) -> tool_call_pb2.ExecuteSessionToolResponse:
        outcome = await self._call(request, _arguments(request), request.session_id, context)
        return _response(tool_call_pb2.ExecuteSessionToolResponse(), outcome)

    async def _call(
        self,
        request: Any,
        arguments: dict[str, Any] | None,
        session_id: str | None,
        context: ServicerContext,
    ) -> Ran | PendingApproval:
        for field in ("server_id", "tool_name"):
            if not getattr(request, field):
                raise InvalidRequest(f"'{field}' is required", field=field)
        if arguments is None:
            raise InvalidRequest("'arguments' is required (an object)", field="arguments")
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


def _parsed(request: Any, rule: Any, body: Mapping[str, Any], context: ServicerContext) -> Any:
    """`request` with the body's fields but `arguments` (checked as the RPC's parser checks
    them: unknown fields, types), its tenant checked as the guard checks a request's."""
    merge_json(request, {k: v for k, v in body.items() if k != "arguments"})
    metadata = text_metadata(context)
    bind_caller(authorize(rule, current_caller().principal, metadata, request))
    return request


def _agent(session: SessionRecord | None, hop: Hop | None) -> str:
    """The audit row's agent: the session's, else the hop token's acting agent."""
    if session is not None:
        return session.agent_id
    return hop.acting_agent if hop is not None else ""


def _arguments(request: Any) -> dict[str, Any] | None:
    """The request's arguments as JSON (Struct numbers are doubles: whole ones as integers,
    as the caller wrote them), None when absent."""
    if not request.HasField("arguments"):
        return None
    arguments: dict[str, Any] = plain_json(request.arguments)
    return arguments


# Both tool-call responses carry the same outcome fields.
CallResponse = TypeVar(
    "CallResponse", tool_call_pb2.CallToolResponse, tool_call_pb2.ExecuteSessionToolResponse
)


def _response(message: CallResponse, outcome: Ran | PendingApproval) -> CallResponse:
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
