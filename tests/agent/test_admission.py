"""The tool-call pipeline's admission steps (gateways/agent/admission.py), each run directly
against the session's Valkey: session, allowlist (deny by default), the per-session call limit
(exact under a concurrent burst from two store clients, as two replicas), HITL (held calls,
grants consumed exactly once), the session token budget, the counters, and 503 when the store
is down."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from redis.asyncio import Redis
from state_kit import kv, tenant
from support import MASTER_KEY, free_port

from gateways.agent.admission import (
    PendingApproval,
    Released,
    ToolCall,
    admit_allowlist,
    admit_call_limit,
    admit_hitl,
    admit_session,
    admit_token_budget,
    estimate_tokens,
    record_call,
    release_call,
)
from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.store import PENDING, ApprovalQueue
from gateways.agent.audit import TABLE, AuditTrail
from gateways.agent.policies import Policy
from gateways.agent.sessions.store import ACTIVE, SessionRecord, SessionStore
from gateways.agent.state_metrics import StateMetrics
from runtime.background import Background
from runtime.errors import NotFound, PermissionDenied, ResourceExhausted, Unavailable
from runtime.peers import Peer
from runtime.stores.analytics import Analytics, DirectSink
from runtime.stores.kv import connect_kv
from runtime.telemetry import Metrics

__all__ = ["kv"]  # fixtures


@pytest.fixture
async def events(analytics: Analytics) -> AsyncIterator[ApprovalEvents]:
    """The approval side effects as the gateway wires them (no control plane listening: the
    notification fails off the request path, as it may)."""
    peer = Peer(f"127.0.0.1:{free_port()}", MASTER_KEY, 0.2)
    background = Background(DirectSink(analytics), peer, TABLE)
    yield ApprovalEvents(background, AuditTrail(background), StateMetrics(Metrics("agent")))
    await background.close()


async def new_session(kv: Redis, t: str, **fields: object) -> SessionRecord:
    session = SessionRecord(
        id=str(uuid.uuid4()),
        tenant_id=t,
        agent_id="agent-1",
        tool_allowlist=["search", "send_email"],
        token_budget=100,
        status=ACTIVE,
        created_at="2026-01-01T00:00:00Z",
    )
    session = replace(session, **fields)  # type: ignore[arg-type]
    assert await SessionStore(kv).create(session, 1000)
    return session


async def test_session_step(kv) -> None:
    t = tenant()
    session = await new_session(kv, t)
    assert await admit_session(kv, session.id, t) == session
    with pytest.raises(NotFound) as unknown:
        await admit_session(kv, "no-such-session", t)
    assert unknown.value.body() == {"error": "Session not found"}
    with pytest.raises(NotFound):
        await admit_session(kv, session.id, tenant())  # another tenant's session
    await SessionStore(kv).terminate(session)
    with pytest.raises(PermissionDenied) as ended:
        await admit_session(kv, session.id, t)
    assert ended.value.error == "session_not_active"


async def test_allowlist_denies_by_default(kv) -> None:
    session = await new_session(kv, tenant())
    admit_allowlist(session, "search")
    for name in ("delete_all", "Search", ""):
        with pytest.raises(PermissionDenied) as denied:
            admit_allowlist(session, name)
        assert denied.value.error == "tool_not_allowed"


async def test_call_limit_counts_and_releases(kv) -> None:
    session = await new_session(kv, tenant())
    policy = Policy(session.tenant_id, max_tool_calls_per_session=2)
    assert await admit_call_limit(kv, session, policy) == 1
    assert await admit_call_limit(kv, session, policy) == 2
    with pytest.raises(ResourceExhausted) as refused:
        await admit_call_limit(kv, session, policy)
    assert refused.value.error == "tool_call_limit_exceeded"
    await release_call(kv, session.id)  # e.g. the call was held for approval
    assert await admit_call_limit(kv, session, policy) == 2
    assert (await SessionStore(kv).counters(session.id)).tool_calls == 2
    zero = Policy(session.tenant_id, max_tool_calls_per_session=0)
    with pytest.raises(ResourceExhausted):
        await admit_call_limit(kv, await new_session(kv, session.tenant_id), zero)


async def test_call_limit_is_exact_under_a_burst_from_two_replicas(kv, valkey_url) -> None:
    session = await new_session(kv, tenant())
    policy = Policy(session.tenant_id, max_tool_calls_per_session=10)
    replicas = [connect_kv(valkey_url), connect_kv(valkey_url)]

    async def attempt(store: Redis) -> bool:
        try:
            await admit_call_limit(store, session, policy)
        except ResourceExhausted:
            return False
        return True

    try:
        outcomes = await asyncio.gather(*(attempt(replicas[i % 2]) for i in range(60)))
    finally:
        for replica in replicas:
            await replica.aclose()
    assert outcomes.count(True) == 10
    assert (await SessionStore(kv).counters(session.id)).tool_calls == 10


async def test_hitl_holds_then_releases_exactly_that_call_once(kv, events) -> None:
    session = await new_session(kv, tenant())
    t = session.tenant_id
    policy = Policy(t, hitl_required_tools=["send_email"])
    queue = ApprovalQueue(kv, 60)
    call = ToolCall(t, "send_email", {"to": "a@example.com", "n": 2}, session.id)

    assert await admit_hitl(queue, events, policy, replace(call, tool_name="search")) is None
    held = await admit_hitl(queue, events, policy, call)
    assert isinstance(held, PendingApproval) and held.approval_id.startswith("hitl-")
    approval = await queue.get(held.approval_id)
    assert approval is not None and approval.status == PENDING
    assert approval.arguments == {"to": "a@example.com", "n": 2}
    assert [a.id for a in await queue.pending(t)] == [held.approval_id]

    await queue.decide(approval, "approved", "2026-01-01T00:00:01Z")
    # Another call (other arguments, other session) is not released by it.
    other_args = replace(call, arguments={"to": "b@example.com", "n": 2})
    assert isinstance(await admit_hitl(queue, events, policy, other_args), PendingApproval)
    other_session = replace(call, session_id=(await new_session(kv, t)).id)
    assert isinstance(await admit_hitl(queue, events, policy, other_session), PendingApproval)
    # The same call is: once, whatever number type the arguments came as (Struct doubles).
    same = replace(call, arguments={"n": 2.0, "to": "a@example.com"})
    assert await admit_hitl(queue, events, policy, same) == Released(held.approval_id)
    assert isinstance(await admit_hitl(queue, events, policy, call), PendingApproval)


async def test_a_grant_is_consumed_once_under_concurrency(kv, valkey_url, events) -> None:
    t = tenant()
    policy = Policy(t, hitl_required_tools=["deploy"])
    call = ToolCall(t, "deploy", {"env": "prod"})  # no session: the tenant's scope
    queue = ApprovalQueue(kv, 60)
    held = await admit_hitl(queue, events, policy, call)
    assert isinstance(held, PendingApproval)
    approval = await queue.get(held.approval_id)
    assert approval is not None
    await queue.decide(approval, "approved", "2026-01-01T00:00:01Z")
    replicas = [connect_kv(valkey_url), connect_kv(valkey_url)]
    try:
        outcomes = await asyncio.gather(
            *(
                admit_hitl(ApprovalQueue(replicas[i % 2], 60), events, policy, call)
                for i in range(20)
            )
        )
    finally:
        for replica in replicas:
            await replica.aclose()
    assert outcomes.count(Released(held.approval_id)) == 1
    assert sum(isinstance(o, PendingApproval) for o in outcomes) == 19


async def test_token_budget_and_counters(kv) -> None:
    session = await new_session(kv, tenant(), token_budget=10)
    assert await admit_token_budget(kv, session) == 10
    counters = await record_call(kv, session.id, 4)
    assert counters.tokens_used == 4
    assert await admit_token_budget(kv, session) == 6
    await admit_call_limit(kv, session, Policy(session.tenant_id))
    counters = await record_call(kv, session.id, 6)
    assert (counters.tool_calls, counters.tokens_used) == (1, 10)
    with pytest.raises(ResourceExhausted) as exhausted:
        await admit_token_budget(kv, session)
    assert exhausted.value.error == "budget_exceeded"
    assert estimate_tokens({"q": "x" * 40}, {"content": []}) >= 10


async def test_store_down_fails_closed(events) -> None:
    dead = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    t = tenant()
    session = SessionRecord("s", t, "a", ["x"], 10, ACTIVE, "2026-01-01T00:00:00Z")
    policy = Policy(t, hitl_required_tools=["x"])
    try:
        for step in (
            admit_session(dead, "s", t),
            admit_call_limit(dead, session, policy),
            release_call(dead, "s"),
            admit_hitl(ApprovalQueue(dead, 60), events, policy, ToolCall(t, "x", {}, "s")),
            admit_token_budget(dead, session),
            record_call(dead, "s", 1),
        ):
            with pytest.raises(Unavailable) as down:
                await step
            assert down.value.error == "store_unavailable"
    finally:
        await dead.aclose()
