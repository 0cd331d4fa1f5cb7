"""`strata.agent.v1.SessionService`: create, list, read and terminate agent sessions, and list
the tools a session may call.

A session needs an explicit `tool_allowlist` (spec: every session needs one; whatever is not
on it is denied) and a positive `token_budget`. An empty allowlist is explicit too: the session
may call no tool. Whether the field was given at all only JSON can tell (proto3 has no
presence for a repeated field): the front door answers a body without it 400
(`HttpRule.required`); over gRPC an empty list is that explicit empty allowlist. Creating one
beyond the tenant policy's `max_concurrent_sessions` is 429 `session_limit_exceeded`; the
check holds across replicas (`store.CREATE`). Sessions of another tenant answer 404 like
unknown ones: a session is looked up in the caller's tenant (a platform administrator names
it with `x-tenant-id`), its store keys carrying the tenant's hash tag. Termination writes a
`session_terminate` audit row; terminating again answers the same body and writes nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

from redis.asyncio import Redis

from gateways.agent.audit import AuditTrail
from gateways.agent.policies import TOOL_NAME, load_policy
from gateways.agent.sessions.store import ACTIVE, Counters, SessionRecord, SessionStore
from gateways.agent.sessions.tools import session_tools
from gateways.agent.state_metrics import StateMetrics
from gateways.agent.tenancy import acting_tenant, listing_tenant, may_see
from runtime.context import ServicerContext
from runtime.errors import NotFound, ResourceExhausted
from runtime.fields import identifier, invalid, now_iso
from runtime.protojson import plain_json
from runtime.stores.kv_errors import store_errors
from strata.agent.v1 import session_pb2, session_pb2_grpc

MAX_BUDGET = 2**53 - 1
MAX_ALLOWLIST = 1000


def session_not_found() -> NotFound:
    return NotFound("Session not found")


def _allowlist(values: Any) -> list[str]:
    if len(values) > MAX_ALLOWLIST:
        raise invalid("tool_allowlist", f"tool_allowlist has more than {MAX_ALLOWLIST} entries")
    for name in values:
        if not TOOL_NAME.fullmatch(name):
            raise invalid("tool_allowlist", f"tool_allowlist: {name[:140]!r} is not a tool name")
    return list(dict.fromkeys(values))


def to_proto(session: SessionRecord, counters: Counters) -> session_pb2.Session:
    message = session_pb2.Session(
        id=session.id,
        tenant_id=session.tenant_id,
        agent_id=session.agent_id,
        tool_allowlist=session.tool_allowlist,
        token_budget=session.token_budget,
        tokens_used=counters.tokens_used,
        tool_calls=counters.tool_calls,
        status=session.status,
        created_at=session.created_at,
    )
    if session.metadata is not None:
        message.metadata.update(session.metadata)
    return message


class SessionServicer(session_pb2_grpc.SessionServiceServicer):
    def __init__(self, kv: Redis, audit: AuditTrail, metrics: StateMetrics) -> None:
        self.kv = kv
        self.store = SessionStore(kv)
        self.audit = audit
        self.metrics = metrics

    async def _visible(self, session_id: str) -> SessionRecord:
        """The session, when it exists and the caller may see it; else 404. Sessions are
        stored per tenant: the caller's (a platform administrator names it, `x-tenant-id`)."""
        identifier(session_id, "session_id")
        session = await self.store.get(listing_tenant(), session_id)
        if session is None or not may_see(session.tenant_id):
            raise session_not_found()
        return session

    @store_errors
    async def CreateSession(
        self, request: session_pb2.CreateSessionRequest, context: ServicerContext
    ) -> session_pb2.CreateSessionResponse:
        tenant = acting_tenant()
        agent_id = identifier(request.agent_id, "agent_id")
        allowlist = _allowlist(request.tool_allowlist)
        if not 0 < request.token_budget <= MAX_BUDGET:
            raise invalid("token_budget", "token_budget must be a positive integer")
        metadata = plain_json(request.metadata) if request.HasField("metadata") else None
        session = SessionRecord(
            id=str(uuid.uuid4()),
            tenant_id=tenant,
            agent_id=agent_id,
            tool_allowlist=allowlist,
            token_budget=request.token_budget,
            status=ACTIVE,
            created_at=now_iso(),
            metadata=metadata,
        )
        policy = await load_policy(self.kv, tenant)
        if not await self.store.create(session, policy.max_concurrent_sessions):
            raise ResourceExhausted(
                f"tenant {tenant} already has {policy.max_concurrent_sessions} active sessions "
                "(its policy's max_concurrent_sessions)",
                error="session_limit_exceeded",
            )
        self.metrics.sessions_total.labels(tenant).inc()
        self.metrics.sessions_active.labels(tenant).set(await self.store.active_count(tenant))
        return session_pb2.CreateSessionResponse(session=to_proto(session, Counters()))

    @store_errors
    async def ListSessions(
        self, request: session_pb2.ListSessionsRequest, context: ServicerContext
    ) -> session_pb2.ListSessionsResponse:
        sessions = await self.store.list(listing_tenant())
        summaries = [
            session_pb2.SessionSummary(
                id=s.id,
                tenant_id=s.tenant_id,
                agent_id=s.agent_id,
                tool_allowlist=s.tool_allowlist,
                status=s.status,
                created_at=s.created_at,
            )
            for s in sessions
        ]
        return session_pb2.ListSessionsResponse(sessions=summaries, total=len(summaries))

    @store_errors
    async def GetSession(
        self, request: session_pb2.GetSessionRequest, context: ServicerContext
    ) -> session_pb2.GetSessionResponse:
        session = await self._visible(request.session_id)
        counters = await self.store.counters(session)
        return session_pb2.GetSessionResponse(session=to_proto(session, counters))

    @store_errors
    async def DeleteSession(
        self, request: session_pb2.DeleteSessionRequest, context: ServicerContext
    ) -> session_pb2.DeleteSessionResponse:
        session = await self._visible(request.session_id)
        ended, changed = await self.store.terminate(session)
        if changed:
            self.audit.record(
                ended.tenant_id,
                "session_terminate",
                ended.status,
                session_id=ended.id,
                agent_id=ended.agent_id,
            )
            active = await self.store.active_count(ended.tenant_id)
            self.metrics.sessions_active.labels(ended.tenant_id).set(active)
        return session_pb2.DeleteSessionResponse(
            id=ended.id, status=ended.status, tenant_id=ended.tenant_id
        )

    @store_errors
    async def ListSessionTools(
        self, request: session_pb2.ListSessionToolsRequest, context: ServicerContext
    ) -> session_pb2.ListSessionToolsResponse:
        session = await self._visible(request.session_id)
        tools = await session_tools(self.kv, session)
        return session_pb2.ListSessionToolsResponse(tools=tools, total=len(tools))
