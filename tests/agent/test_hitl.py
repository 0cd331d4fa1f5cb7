"""Human-in-the-loop approvals (spec: HITL approval, States and transitions, the hitl
endpoints): the pending list by tenant, one decision per approval (a second one is 409, also
when two gateway instances race), `resolved_at`, expiry, a grant made on one instance released
on another, the `hitl_pending` notification reaching the control plane, audit rows, 404s, and
503 when the store is down."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from shared_kit import MASTER_KEY, free_port, user_token
from state_kit import api, audit_rows, dead_store_env, gateway, kv, tenant

from controlplane.app import build as build_cp
from controlplane.config import ControlPlaneConfig
from gateways.agent.admission import PendingApproval, Released, ToolCall, admit_hitl
from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.audit import TABLE, AuditTrail
from gateways.agent.keys import approval_key, pending_key
from gateways.agent.policies import Policy
from gateways.agent.state_metrics import StateMetrics
from runtime.background import Background
from runtime.peers import Peer
from runtime.stores.analytics import DirectSink
from runtime.telemetry import Metrics
from runtime.testing import serving
from strata.controlplane.v1 import notification_pb2, notification_pb2_grpc

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

__all__ = ["gateway", "kv"]  # fixtures

MASTER_METADATA = (("authorization", f"Bearer {MASTER_KEY}"),)


def events_to(
    analytics, controlplane_target: str, deadline: float = 5.0
) -> tuple[ApprovalEvents, Background]:
    """Approval side effects wired as the gateway wires them, notifying `controlplane_target`."""
    peer = Peer(controlplane_target, MASTER_KEY, deadline)
    background = Background(DirectSink(analytics), peer, TABLE)
    events = ApprovalEvents(background, AuditTrail(background), StateMetrics(Metrics("agent")))
    return events, background


@pytest.fixture
async def events(analytics) -> AsyncIterator[ApprovalEvents]:
    # Nobody listens there: notifications fail off the request path, as they may.
    made, background = events_to(analytics, f"127.0.0.1:{free_port()}", deadline=0.2)
    yield made
    await background.close()


async def hold(kv, events, t: str, tool: str = "send_email", **arguments) -> str:
    """A tool call held for approval, as the tool-call pipeline makes it; its approval id."""
    policy = Policy(t, hitl_required_tools=[tool])
    call = ToolCall(t, tool, arguments or {"to": "a@example.com"}, f"{t}-s1")
    held = await admit_hitl(ApprovalQueue(kv, 3600), events, policy, call)
    assert isinstance(held, PendingApproval)
    return held.approval_id


async def test_pending_list_then_approve_once(gateway, kv, events, analytics) -> None:
    t = tenant()
    first = await hold(kv, events, t, to="a@example.com")
    second = await hold(kv, events, t, to="b@example.com")
    async with gateway() as svc, api(svc, t) as client:
        status, listed = await client.get("/v1/hitl/pending")
        assert status == 200 and listed["total"] == 2
        assert [a["id"] for a in listed["pending"]] == [first, second]
        approval = listed["pending"][0]
        assert approval == {
            "id": first,
            "session_id": f"{t}-s1",
            "tenant_id": t,
            "tool_name": "send_email",
            "arguments": {"to": "a@example.com"},
            "status": "pending",
            "request_type": "tool_call",
            "created_at": approval["created_at"],
            "resolved_at": None,
        }

        status, decided = await client.post(f"/v1/hitl/{first}/approve")
        assert status == 200
        assert decided == {"id": first, "status": "approved", "resolved_at": decided["resolved_at"]}
        assert decided["resolved_at"].endswith("Z")
        for verb in ("approve", "deny"):
            status, error = await client.post(f"/v1/hitl/{first}/{verb}")
            assert status == 409 and error["error"] == "approval_already_resolved"
            assert error["status"] == "approved"

        status, denied = await client.post(f"/v1/hitl/{second}/deny")
        assert (status, denied["status"]) == (200, "denied")
        assert (await client.post(f"/v1/hitl/{second}/approve"))[0] == 409
        assert await client.get("/v1/hitl/pending") == (200, {"pending": [], "total": 0})
    rows = await audit_rows(analytics, "tenant_id = {t:String} AND action != 'hitl_request'", t=t)
    assert sorted((r["action"], r["status"]) for r in rows) == [
        ("hitl_approved", "approved"),
        ("hitl_denied", "denied"),
    ]
    assert all(r["input_hash"].startswith("sha256:") for r in rows)
    assert "a@example.com" not in json.dumps(rows, default=str)


async def test_a_denied_call_stays_held(kv, events) -> None:
    t = tenant()
    queue = ApprovalQueue(kv, 3600)
    approval_id = await hold(kv, events, t)
    approval = await queue.get(t, approval_id)
    assert approval is not None
    await queue.decide(approval, "denied", "2026-01-01T00:00:00Z")
    policy = Policy(t, hitl_required_tools=["send_email"])
    call = ToolCall(t, "send_email", {"to": "a@example.com"}, f"{t}-s1")
    assert isinstance(await admit_hitl(queue, events, policy, call), PendingApproval)


async def test_unknown_and_foreign_approvals_are_404(gateway, kv, events, idp) -> None:
    foreign = await hold(kv, events, "globex")
    alice = await user_token(idp, "alice", "alice")  # tenant acme
    async with gateway() as svc, api(svc, token=alice) as client:
        for path in ("/v1/hitl/hitl-nope/approve", "/v1/hitl/hitl-nope/deny",
                     f"/v1/hitl/{foreign}/approve", f"/v1/hitl/{foreign}/deny"):  # fmt: skip
            assert await client.post(path) == (404, {"error": "Approval not found"})
        _, listed = await client.get("/v1/hitl/pending")
        assert foreign not in [a["id"] for a in listed["pending"]]
    async with gateway() as svc, api(svc, "globex") as admin:  # still pending for its tenant
        assert foreign in [a["id"] for a in (await admin.get("/v1/hitl/pending"))[1]["pending"]]


async def test_a_platform_admin_decides_any_tenants_approval_by_id(gateway, kv, events) -> None:
    """Approvals are stored per tenant: an administrator naming no tenant (or another one)
    finds the approval's tenant by its id; a tenant's own caller finds it in its tenant."""
    t = tenant()
    approval_id = await hold(kv, events, t)
    other = await hold(kv, events, t, to="b@example.com")
    async with gateway() as svc, api(svc) as admin, api(svc, "globex") as elsewhere:
        status, decided = await admin.post(f"/v1/hitl/{approval_id}/approve")
        assert (status, decided["status"]) == (200, "approved")
        assert (await elsewhere.post(f"/v1/hitl/{other}/deny"))[1]["status"] == "denied"
    async with gateway() as svc, api(svc, t) as client:
        assert (await client.post(f"/v1/hitl/{approval_id}/deny"))[0] == 409


async def test_agent_service_tokens_cannot_decide(gateway, kv, events, idp) -> None:
    from shared_kit import service_token

    approval_id = await hold(kv, events, "acme")
    agent = await service_token(idp)  # agent-planner, tenant acme
    async with gateway() as svc, api(svc, token=agent) as client:
        assert (await client.post(f"/v1/hitl/{approval_id}/approve"))[0] == 403


async def test_an_expired_approval_cannot_be_decided(gateway, kv, events) -> None:
    t = tenant()
    approval_id = await hold(kv, events, t)
    # Expire it now, as the clock would (the record keeps `expires_at_ms`).
    record = json.loads(await kv.get(approval_key(t, approval_id)))
    await kv.set(approval_key(t, approval_id), json.dumps({**record, "expires_at_ms": 0}))
    await kv.zadd(pending_key(t), {approval_id: 0})
    async with gateway() as svc, api(svc, t) as client:
        assert await client.get("/v1/hitl/pending") == (200, {"pending": [], "total": 0})
        status, error = await client.post(f"/v1/hitl/{approval_id}/approve")
        assert (status, error["error"], error["status"]) == (
            409,
            "approval_already_resolved",
            "expired",
        )


async def test_two_instances_decide_once_and_release_once(gateway, kv, events) -> None:
    t = tenant()
    approval_id = await hold(kv, events, t, tool="deploy", env="prod")
    async with gateway() as one, gateway() as two, api(one, t) as a, api(two, t) as b:
        results = await asyncio.gather(
            *(client.post(f"/v1/hitl/{approval_id}/{verb}")
              for client in (a, b) for verb in ("approve", "approve", "deny"))
        )  # fmt: skip
        statuses = sorted(status for status, _ in results)
        assert statuses == [200, 409, 409, 409, 409, 409]
        winner = next(body for status, body in results if status == 200)
    # Whatever the winning decision, the held call is released at most once, by any replica.
    policy = Policy(t, hitl_required_tools=["deploy"])
    call = ToolCall(t, "deploy", {"env": "prod"}, f"{t}-s1")
    first = await admit_hitl(ApprovalQueue(kv, 3600), events, policy, call)
    again = await admit_hitl(ApprovalQueue(kv, 3600), events, policy, call)
    if winner["status"] == "approved":
        assert first == Released(approval_id)
    else:
        assert isinstance(first, PendingApproval)
    assert isinstance(again, PendingApproval)


async def test_granted_on_one_instance_released_on_the_other(gateway, events, valkey_url) -> None:
    from runtime.stores.kv import connect_kv, ready_kv

    t = tenant()
    replica_a, replica_b = connect_kv(valkey_url), connect_kv(valkey_url)
    for replica in (replica_a, replica_b):
        await ready_kv(replica)  # as a service does at start
    try:
        approval_id = await hold(replica_a, events, t, tool="deploy", env="staging")
        async with gateway() as one, api(one, t) as client:
            assert (await client.post(f"/v1/hitl/{approval_id}/approve"))[0] == 200
        policy = Policy(t, hitl_required_tools=["deploy"])
        call = ToolCall(t, "deploy", {"env": "staging"}, f"{t}-s1")
        released = await admit_hitl(ApprovalQueue(replica_b, 3600), events, policy, call)
        assert released == Released(approval_id)
        held = await admit_hitl(ApprovalQueue(replica_a, 3600), events, policy, call)
        assert isinstance(held, PendingApproval)
    finally:
        await replica_a.aclose()
        await replica_b.aclose()


async def test_hitl_pending_notification_reaches_the_control_plane(
    kv, analytics, config_for, stores_for
) -> None:
    t = tenant()
    cp_config = config_for(ControlPlaneConfig, NOTIFY_DELIVERY="off")
    async with serving(build_cp(cp_config, stores_for(cp_config))) as cp:
        events, background = events_to(analytics, cp.grpc_target)
        try:
            approval_id = await hold(kv, events, t, tool="wire_money", amount=10)
            stub = notification_pb2_grpc.NotificationServiceStub(cp.channel)
            listed = None
            for _ in range(100):
                listed = await stub.ListNotifications(
                    notification_pb2.ListNotificationsRequest(tenant_id=t),
                    metadata=MASTER_METADATA,
                    timeout=5,
                )
                if listed.notifications:
                    break
                await asyncio.sleep(0.05)
        finally:
            await background.close()
    assert listed is not None and len(listed.notifications) == 1
    note = listed.notifications[0]
    assert note.notification_type == "hitl_pending"
    assert approval_id in note.message and "wire_money" in note.title
    rows = await audit_rows(analytics, "tenant_id = {t:String}", t=t)
    assert [(r["action"], r["status"], r["tool_name"]) for r in rows] == [
        ("hitl_request", "pending", "wire_money")
    ]


async def test_store_down_is_503(gateway) -> None:
    async with gateway(**dead_store_env()) as svc, api(svc, tenant()) as client:
        status, error = await client.get("/v1/hitl/pending")
        assert (status, error["error"]) == (503, "store_unavailable")
        assert (await client.post("/v1/hitl/hitl-x/approve"))[0] == 503
        assert (await client.post("/v1/hitl/hitl-x/deny"))[0] == 503


async def test_an_identical_call_while_pending_is_held_on_the_same_approval(
    kv, events, analytics
) -> None:
    """Same tenant, session, tool and arguments: one approval however often the call comes;
    other arguments or another session: another approval; once it is decided (or expired),
    the next identical call opens a new one."""
    t = tenant()
    queue = ApprovalQueue(kv, 3600)
    first = await hold(kv, events, t, tool="deploy", env="prod", n=1)
    assert await hold(kv, events, t, tool="deploy", n=1.0, env="prod") == first  # same hash
    assert await hold(kv, events, t, tool="deploy", env="staging", n=1) != first
    policy = Policy(t, hitl_required_tools=["deploy"])
    other_session = ToolCall(t, "deploy", {"env": "prod", "n": 1}, f"{t}-s2")
    no_session = ToolCall(t, "deploy", {"env": "prod", "n": 1})
    held = [await admit_hitl(queue, events, policy, c) for c in (other_session, no_session)]
    ids = {h.approval_id for h in held if isinstance(h, PendingApproval)}
    assert len(ids) == 2 and first not in ids
    assert len(await queue.pending(t)) == 4
    rows = await audit_rows(analytics, "tenant_id = {t:String}", t=t)
    assert [r["action"] for r in rows] == ["hitl_request"] * 4  # one per approval

    approval = await queue.get(t, first)
    assert approval is not None
    await queue.decide(approval, "denied", "2026-01-01T00:00:00Z")
    after_denial = await hold(kv, events, t, tool="deploy", env="prod", n=1)
    assert after_denial != first
    # An approval past its expiry is not reused either (its open entry expires with it).
    brief = ApprovalQueue(kv, 1)
    call = ToolCall(t, "deploy", {"env": "dev"}, f"{t}-s1")
    expiring = await admit_hitl(brief, events, policy, call)
    assert isinstance(expiring, PendingApproval)
    assert await admit_hitl(brief, events, policy, call) == expiring
    await asyncio.sleep(1.1)
    renewed = await admit_hitl(brief, events, policy, call)
    assert isinstance(renewed, PendingApproval) and renewed != expiring


async def test_identical_calls_racing_on_two_replicas_make_one_approval(events, valkey_url) -> None:
    from runtime.stores.kv import connect_kv, ready_kv

    t = tenant()
    policy = Policy(t, hitl_required_tools=["wire_money"])
    call = ToolCall(t, "wire_money", {"amount": 10, "to": "x"}, f"{t}-s1")
    replicas = [connect_kv(valkey_url), connect_kv(valkey_url)]
    for replica in replicas:
        await ready_kv(replica)  # as a service does at start
    try:
        outcomes = await asyncio.gather(
            *(
                admit_hitl(ApprovalQueue(replicas[i % 2], 3600), events, policy, call)
                for i in range(20)
            )
        )
        pending = await ApprovalQueue(replicas[0], 3600).pending(t)
    finally:
        for replica in replicas:
            await replica.aclose()
    assert all(isinstance(o, PendingApproval) for o in outcomes)
    assert len({o.approval_id for o in outcomes if isinstance(o, PendingApproval)}) == 1
    assert [a.id for a in pending] == [outcomes[0].approval_id]  # type: ignore[union-attr]
