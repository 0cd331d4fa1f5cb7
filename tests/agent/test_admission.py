"""The tool-call pipeline's admission steps (gateways/agent/admission.py), each run directly
against the session's Valkey: session, allowlist (deny by default), the per-session call limit
and the token budget taken in one script (exact under a concurrent burst from two store
clients, as two replicas), a settled call's slot and tokens, a registry changed under a cached
server record, HITL (held calls, grants consumed exactly once, a grant put back), and 503 when
the store is down."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from shared_kit import MASTER_KEY, free_port
from state_kit import kv, tenant

from gateways.agent.admission import (
    Admission,
    PendingApproval,
    RecentPolicies,
    Released,
    Stale,
    ToolCall,
    admit,
    admit_hitl,
    admit_session,
    estimate_tokens,
    reserve_budget,
    settle,
)
from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.store import PENDING, ApprovalQueue
from gateways.agent.audit import TABLE, AuditTrail
from gateways.agent.keys import policy_key
from gateways.agent.mcp.keys import SERVERS_VERSION
from gateways.agent.policies import Policy
from gateways.agent.sessions.store import ACTIVE, SessionRecord, SessionStore
from gateways.agent.state_metrics import StateMetrics
from runtime.background import Background
from runtime.errors import NotFound, PermissionDenied, ResourceExhausted, Unavailable
from runtime.peers import Peer
from runtime.stores.analytics import Analytics, DirectSink
from runtime.stores.kv import connect_kv, ready_kv
from runtime.stores.kv_pipeline import PipelinedCalls
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


async def admitted(
    kv: Redis, session: SessionRecord, tool: str = "search", want: int = 1
) -> Admission:
    """`admit` for a call in `session`, raising the refusal it reports."""
    call = ToolCall(session.tenant_id, tool, {}, session.id)
    entry = await admit(kv, call, server_id="srv", version="", want=want)
    if entry.refusal is not None:
        raise entry.refusal
    return entry


async def set_policy(kv: Redis, policy: Policy) -> None:
    await kv.set(policy_key(policy.tenant_id), json.dumps(asdict(policy)))


async def test_allowlist_denies_by_default(kv) -> None:
    session = await new_session(kv, tenant())
    await admitted(kv, session, "search")
    for name in ("delete_all", "Search", ""):
        with pytest.raises(PermissionDenied) as denied:
            await admitted(kv, session, name)
        assert denied.value.error == "tool_not_allowed"
    assert (await SessionStore(kv).counters(session)).tool_calls == 1


async def test_an_unknown_or_ended_session_is_refused(kv) -> None:
    t = tenant()
    session = await new_session(kv, t)
    with pytest.raises(NotFound) as unknown:
        await admitted(kv, replace(session, id="no-such-session"))
    assert unknown.value.body() == {"error": "Session not found"}
    with pytest.raises(NotFound):
        await admitted(kv, replace(session, tenant_id=tenant()))  # another tenant's session
    await SessionStore(kv).terminate(session)
    with pytest.raises(PermissionDenied) as ended:
        await admitted(kv, session)
    assert ended.value.error == "session_not_active"


async def test_call_limit_counts_and_releases(kv) -> None:
    session = await new_session(kv, tenant())
    await set_policy(kv, Policy(session.tenant_id, max_tool_calls_per_session=2))
    await admitted(kv, session)
    entry = await admitted(kv, session)
    with pytest.raises(ResourceExhausted) as refused:
        await admitted(kv, session)
    assert refused.value.error == "tool_call_limit_exceeded"
    # A call stopped before its upstream (held, invalid) gives its slot back.
    await settle(kv, session, reserved=entry.reserved, used=0, keep_slot=False)
    await admitted(kv, session)
    assert (await SessionStore(kv).counters(session)).tool_calls == 2
    await set_policy(kv, Policy(session.tenant_id, max_tool_calls_per_session=0))
    with pytest.raises(ResourceExhausted):
        await admitted(kv, await new_session(kv, session.tenant_id))


async def test_call_limit_is_exact_under_a_burst_from_two_replicas(kv, valkey_url) -> None:
    session = await new_session(kv, tenant())
    await set_policy(kv, Policy(session.tenant_id, max_tool_calls_per_session=10))
    replicas = [connect_kv(valkey_url), connect_kv(valkey_url)]
    for replica in replicas:
        await ready_kv(replica)  # as a service does at start

    async def attempt(store: Redis) -> bool:
        try:
            await admitted(store, session)
        except ResourceExhausted:
            return False
        return True

    try:
        outcomes = await asyncio.gather(*(attempt(replicas[i % 2]) for i in range(60)))
    finally:
        for replica in replicas:
            await replica.aclose()
    assert outcomes.count(True) == 10
    assert (await SessionStore(kv).counters(session)).tool_calls == 10


async def test_the_budget_is_reserved_exactly_under_a_burst(kv, valkey_url) -> None:
    """Calls in flight hold reservations: with 100 tokens and 30 wanted per call, four calls
    are admitted (30, 30, 30, then the 10 left), however many race from two replicas."""
    session = await new_session(kv, tenant(), token_budget=100)
    replicas = [connect_kv(valkey_url), connect_kv(valkey_url)]
    for replica in replicas:
        await ready_kv(replica)  # as a service does at start

    async def attempt(store: Redis) -> int | None:
        try:
            return (await admitted(store, session, want=30)).reserved
        except ResourceExhausted as exc:
            assert exc.error == "budget_exceeded"
            return None

    try:
        outcomes = await asyncio.gather(*(attempt(replicas[i % 2]) for i in range(40)))
    finally:
        for replica in replicas:
            await replica.aclose()
    assert sorted(o for o in outcomes if o is not None) == [10, 30, 30, 30]
    counters = await SessionStore(kv).counters(session)
    assert (counters.tool_calls, counters.tokens_used) == (4, 100)
    # Settled: each call used 12 tokens; what was reserved and not used is free again.
    for reserved in (10, 30, 30, 30):
        await settle(kv, session, reserved=reserved, used=12, keep_slot=True)
    counters = await SessionStore(kv).counters(session)
    assert (counters.tool_calls, counters.tokens_used) == (4, 48)
    assert (await admitted(kv, session, want=100)).reserved == 52


async def test_a_changed_registry_makes_a_cached_record_stale(kv) -> None:
    t = tenant()
    await kv.set(SERVERS_VERSION, "v1")
    call = ToolCall(t, "search", {})
    assert (await admit(kv, call, server_id="srv", version="v1", want=1)).session is None
    await kv.set(SERVERS_VERSION, "v2")
    with pytest.raises(Stale):
        await admit(kv, call, server_id="srv", version="v1", want=1)
    await kv.delete(SERVERS_VERSION)


async def test_a_changed_registry_gives_back_what_a_session_call_took(kv) -> None:
    """A call in a session is decided in the same round trip as the registry check: when the
    check finds the cached record stale, the slot and tokens the decision took are given back
    (the caller reads the server again and is admitted anew)."""
    session = await new_session(kv, tenant())
    recent = RecentPolicies()
    call = ToolCall(session.tenant_id, "search", {}, session.id)
    await kv.set(SERVERS_VERSION, "v1")
    try:
        assert (
            await admit(kv, call, server_id="srv", version="v1", want=5, recent=recent)
        ).reserved == 5
        await kv.set(SERVERS_VERSION, "v2")
        with pytest.raises(Stale):
            await admit(kv, call, server_id="srv", version="v1", want=5, recent=recent)
    finally:
        await kv.delete(SERVERS_VERSION)
    counters = await SessionStore(kv).counters(session)
    assert (counters.tool_calls, counters.tokens_used) == (1, 5)  # the stale call kept nothing


async def test_a_session_call_is_admitted_in_one_round_trip(kv, monkeypatch) -> None:
    """The configuration read (the registry's slot) and the session's decision (the tenant's
    slot) go out in one write of the batcher: one round trip, as one script was before the
    split, once the tenant's policy is known (its first call reads the policy first)."""
    if isinstance(kv, RedisCluster):  # (`STRATA_TEST_KV=cluster`: one write per node)
        pytest.skip("counts the writes of the single-node batcher")
    writes: list[int] = []
    write = PipelinedCalls._write

    def counted(self: PipelinedCalls, channel: Any, batch: list[Any]) -> None:
        writes.append(len(batch))
        write(self, channel, batch)

    monkeypatch.setattr(PipelinedCalls, "_write", counted)
    session = await new_session(kv, tenant())
    recent = RecentPolicies()
    call = ToolCall(session.tenant_id, "search", {}, session.id)
    await admit(kv, call, server_id="srv", version="", want=1, recent=recent)
    before = len(writes)
    entry = await admit(kv, call, server_id="srv", version="", want=1, recent=recent)
    assert entry.reserved == 1
    assert writes[before:] == [2]  # CONFIG and DECIDE, one write


async def test_a_session_call_is_decided_again_under_a_changed_policy(kv) -> None:
    """The decision goes out with the policy the tenant's previous call was admitted under; a
    policy changed since makes the call decided again under the new one, and what the first
    decision took is given back."""
    session = await new_session(kv, tenant(), token_budget=100)
    recent = RecentPolicies()
    call = ToolCall(session.tenant_id, "search", {}, session.id)
    entry = await admit(kv, call, server_id="srv", version="", want=10, recent=recent)
    assert (entry.reserved, entry.hitl) == (10, False)
    await set_policy(kv, Policy(session.tenant_id, hitl_required_tools=["search"]))
    entry = await admit(kv, call, server_id="srv", version="", want=10, recent=recent)
    assert (entry.reserved, entry.hitl) == (0, True)  # step 5 due under the new policy
    counters = await SessionStore(kv).counters(session)
    assert (counters.tool_calls, counters.tokens_used) == (2, 10)
    await set_policy(kv, Policy(session.tenant_id, max_tool_calls_per_session=2))
    entry = await admit(kv, call, server_id="srv", version="", want=10, recent=recent)
    assert entry.refusal is not None and entry.refusal.error == "tool_call_limit_exceeded"
    counters = await SessionStore(kv).counters(session)
    assert (counters.tool_calls, counters.tokens_used) == (2, 10)  # nothing taken


async def test_hitl_holds_then_releases_exactly_that_call_once(kv, events) -> None:
    session = await new_session(kv, tenant())
    t = session.tenant_id
    policy = Policy(t, hitl_required_tools=["send_email"])
    queue = ApprovalQueue(kv, 60)
    call = ToolCall(t, "send_email", {"to": "a@example.com", "n": 2}, session.id)

    assert await admit_hitl(queue, events, policy, replace(call, tool_name="search")) is None
    held = await admit_hitl(queue, events, policy, call)
    assert isinstance(held, PendingApproval) and held.approval_id.startswith("hitl-")
    approval = await queue.get(t, held.approval_id)
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
    # A released call stopped before its upstream puts the grant back: released once more.
    await queue.restore_grant(held.approval_id, t, session.id, "send_email", same.arguments)
    assert await admit_hitl(queue, events, policy, call) == Released(held.approval_id)
    assert isinstance(await admit_hitl(queue, events, policy, call), PendingApproval)


async def test_a_grant_is_consumed_once_under_concurrency(kv, valkey_url, events) -> None:
    t = tenant()
    policy = Policy(t, hitl_required_tools=["deploy"])
    call = ToolCall(t, "deploy", {"env": "prod"})  # no session: the tenant's scope
    queue = ApprovalQueue(kv, 60)
    held = await admit_hitl(queue, events, policy, call)
    assert isinstance(held, PendingApproval)
    approval = await queue.get(t, held.approval_id)
    assert approval is not None
    await queue.decide(approval, "approved", "2026-01-01T00:00:01Z")
    replicas = [connect_kv(valkey_url), connect_kv(valkey_url)]
    for replica in replicas:
        await ready_kv(replica)  # as a service does at start
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
    entry = await admitted(kv, session, want=4)
    assert entry.reserved == 4
    await settle(kv, session, reserved=entry.reserved, used=4, keep_slot=True)
    entry = await admitted(kv, session, want=100)
    assert entry.reserved == 6  # at most what is left
    await settle(kv, session, reserved=entry.reserved, used=9, keep_slot=True)
    counters = await SessionStore(kv).counters(session)
    assert (counters.tool_calls, counters.tokens_used) == (2, 13)
    with pytest.raises(ResourceExhausted) as exhausted:
        await admitted(kv, session)
    assert exhausted.value.error == "budget_exceeded"
    assert (await SessionStore(kv).counters(session)).tool_calls == 2  # nothing taken
    assert estimate_tokens({"q": "x" * 40}, {"content": []}) >= 10


async def test_a_budget_reserved_after_approval_gives_the_slot_back(kv) -> None:
    session = await new_session(kv, tenant(), token_budget=5)
    await set_policy(kv, Policy(session.tenant_id, hitl_required_tools=["send_email"]))
    entry = await admitted(kv, session, "send_email")
    assert entry.hitl and entry.reserved == 0  # step 5 is due; nothing reserved yet
    assert await reserve_budget(kv, session, 3) == 3
    await settle(kv, session, reserved=3, used=8, keep_slot=True)
    await admitted(kv, session, "send_email")
    with pytest.raises(ResourceExhausted):
        await reserve_budget(kv, session, 3)
    assert (await SessionStore(kv).counters(session)).tool_calls == 1


async def test_store_down_fails_closed(events) -> None:
    dead = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    t = tenant()
    session = SessionRecord("s", t, "a", ["x"], 10, ACTIVE, "2026-01-01T00:00:00Z")
    policy = Policy(t, hitl_required_tools=["x"])
    try:
        for step in (
            admit_session(dead, "s", t),
            admit(dead, ToolCall(t, "x", {}, "s"), server_id="srv", version="", want=1),
            reserve_budget(dead, session, 1),
            settle(dead, session, reserved=1, used=1, keep_slot=False),
            admit_hitl(ApprovalQueue(dead, 60), events, policy, ToolCall(t, "x", {}, "s")),
        ):
            with pytest.raises(Unavailable) as down:
                await step
            assert down.value.error == "store_unavailable"
    finally:
        await dead.aclose()
