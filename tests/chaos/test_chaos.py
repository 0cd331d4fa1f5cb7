"""Replicas under failure (issue 24): steady traffic through the edge (chats, tool calls,
session reads, routed requests) while one replica of each replicated service (and, in the
kill -9 test, one of the edge's data-plane workers) is taken down in turn and started again;
the survivors serve meanwhile.

- `kill -9`: only calls in flight on the killed process may fail (the edge sends a call whose
  connection failed, and an idempotent one, to the other replica); analytics and audit rows
  lost 0; rate-limit over-admissions 0; budget double debits 0; a held HITL approval, the
  sessions and the edge configuration still served.
- rolling restart (SIGTERM, drain, replace, one replica at a time, as Kubernetes does): 0
  failed calls.

Each test prints its table of counts (for the issue's note). The load lasts about a minute per
test (a few seconds per process taken down): well under the 3 minutes the CI run allows.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from reliability.kit import (
    Http,
    Reply,
    Tenant,
    all_statuses,
    create_tenant,
    eventually,
    export_rows,
    new_tenant,
    register_mcp,
    sidecar,
)
from shared_kit import free_port

from chaos.kit import (
    BUDGET_HOLD_SECS,
    REPLICATED,
    Call,
    ChaosStack,
    Event,
    Load,
    in_flight,
    table,
)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]

WARM_SECS = 2.0  # load before the first fault
STAGGER_SECS = 3.0  # between two faults of a round
SETTLE_SECS = 2.0  # load after the last replacement
BUDGET = 10_000_000
RATE_LIMIT, BURST = 10, 30
SERVES = {  # what a replica serves of the suite's calls through the edge
    "ai-gateway": ("chat",),
    "agent-gateway": ("tool", "session"),
    "controlplane": (),
}
CHAT = {"model": "echo-1", "messages": [{"role": "user", "content": "steady load"}]}


@dataclass
class World:
    tenant: Tenant
    server: str
    session: str
    hitl: Tenant
    approval: str
    limited: list[str]  # tenants with RATE_LIMIT requests a minute, one per fault


@pytest.fixture(scope="module")
async def mcp_url(stack: ChaosStack) -> AsyncIterator[str]:
    port = free_port()
    async with sidecar(stack, "sidecars.demo", "--port", str(port), port=port):
        yield f"http://127.0.0.1:{port}/mcp"


async def world(stack: ChaosStack, http: Http, mcp_url: str, faults: int) -> World:
    tenant = await new_tenant(http, stack, "chaos")
    server = await register_mcp(http, stack, tenant.id, tenant.token, mcp_url)
    put = await http.call("POST", f"{stack.ai}/v1/budget/{tenant.id}", token=stack.master,
                          json_body={"tokens": BUDGET})  # fmt: skip
    assert put.status == 200, put.text
    made = await http.call(
        "POST", f"{stack.edge}/v1/sessions", token=tenant.token,
        json_body={"tenant_id": tenant.id, "agent_id": "agent:chaos", "tool_allowlist": ["echo"],
                   "token_budget": 1_000_000},
    )  # fmt: skip
    assert made.status == 201, made.text
    hitl = await new_tenant(http, stack, "chaos-hitl")
    hitl_server = await register_mcp(http, stack, hitl.id, hitl.token, mcp_url)
    policy = await http.call(
        "PUT", f"{stack.edge}/v1/policies/{hitl.id}", token=hitl.token,
        json_body={"hitl_required_tools": ["echo"], "max_concurrent_sessions": 100,
                   "max_tool_calls_per_session": 1000, "allowed_network_hosts": []},
    )  # fmt: skip
    assert policy.status == 200, policy.text
    held = await http.call(
        "POST", f"{stack.edge}/v1/mcp/tools/call", token=hitl.token,
        json_body={"server_id": hitl_server, "tool_name": "echo", "tenant_id": hitl.id,
                   "arguments": {"text": "held across the faults"}},
    )  # fmt: skip
    assert held.status == 202, held.text
    limited = []
    for _ in range(faults):
        limited.append(await create_tenant(http, stack, "chaos-rl"))
        put = await http.call(
            "PUT", f"{stack.cp}/api/rate-limits/{limited[-1]}", token=stack.master,
            json_body={"limit": RATE_LIMIT, "window": "60s"},
        )  # fmt: skip
        assert put.status == 200, put.text
    return World(tenant, server, str(made.body["id"]), hitl, str(held.body["approval_id"]),
                 limited)  # fmt: skip


def start_load(stack: ChaosStack, w: World) -> Load:
    t = w.tenant
    tool = {"server_id": w.server, "tool_name": "echo", "tenant_id": t.id}
    load = Load()
    load.start("chat", lambda http, n, h: http.call(
        "POST", f"{stack.edge}/v1/chat/completions", token=t.token, json_body=CHAT,
        headers={"Cache-Control": "no-store", **h}), clients=2)  # fmt: skip
    load.start("tool", lambda http, n, h: http.call(
        "POST", f"{stack.edge}/v1/mcp/tools/call", token=t.token, headers=h,
        json_body={**tool, "arguments": {"text": f"call {n}"}}), clients=2)  # fmt: skip
    load.start("session", lambda http, n, h: http.call(
        "GET", f"{stack.edge}/v1/sessions/{w.session}/tools", token=t.token, headers=h),
        clients=1)  # fmt: skip
    load.start("routed", lambda http, n, h: http.call(
        "GET", f"{stack.edge}/api/rows/{n}", token=t.token, headers=h), clients=1)  # fmt: skip
    return load


async def survivors_serve(stack: ChaosStack, http: Http, w: World, limited: str) -> int:
    """While a replica is down: a held approval is listed, and a burst on a rate-limited
    tenant admits no more than its limit. The over-admissions."""
    pending = await http.call("GET", f"{stack.edge}/v1/hitl/pending", token=w.hitl.token)
    assert pending.status == 200, pending.text
    assert w.approval in str(pending.body), pending.text
    statuses = await all_statuses([
        http.call("GET", f"{stack.edge}/smoke/burst", headers={"X-Tenant-ID": limited})
        for _ in range(BURST)
    ])  # fmt: skip
    assert set(statuses) <= {200, 429}, statuses
    return max(0, statuses.count(200) - RATE_LIMIT)


async def edge_config_read(stack: ChaosStack, http: Http) -> Reply:
    return await http.call("GET", f"{stack.edge_admin}/apisix/admin/routes",
                           headers={"X-API-KEY": stack.secrets["ADMIN_API_KEY"]})  # fmt: skip


async def take_down(
    stack: ChaosStack,
    http: Http,
    w: World,
    name: str,
    limited: str,
    sig: signal.Signals,
    events: list[Event],
) -> int:
    """`sig` to one replica; while it is away the survivors serve; back once the launcher
    has replaced it. The over-admissions seen meanwhile."""
    service = next(s for s in REPLICATED if name.startswith(s))
    event = Event(name, time.monotonic(), SERVES[service])
    events.append(event)
    pid = await stack.kill(name, sig)
    event.gone = await stack.gone(pid)
    over = await survivors_serve(stack, http, w, limited)
    await stack.replaced(name, pid)
    return over


async def take_down_edge_worker(
    stack: ChaosStack, http: Http, w: World, limited: str, events: list[Event]
) -> int:
    """SIGKILL to one of the edge's data-plane workers: every kind of call goes through it, so
    any call in flight on the edge then may fail (those on its connections and in its
    listener's queue, which the kernel resets); the primary and its other worker serve
    meanwhile, and the primary starts another worker."""
    (pid, *_) = stack.edge_workers()
    event = Event("edge-proxy worker", time.monotonic(), ("chat", "tool", "session", "routed"))
    events.append(event)
    os.kill(pid, signal.SIGKILL)
    event.gone = await stack.gone(pid)
    over = await survivors_serve(stack, http, w, limited)
    await stack.worker_replaced(pid)
    return over


async def edge_config_served(stack: ChaosStack, http: Http) -> None:
    config = await eventually(partial(edge_config_read, stack, http), lambda r: r.status == 200)
    assert config.status == 200, config.text
    assert "ai-gateway" in config.text, config.text


async def trace_ids(http: Http, stack: ChaosStack, table: str, tenant: str) -> Counter[str]:
    return Counter(r["trace_id"] for r in await export_rows(http, stack, table, tenant))


async def tool_call_rows(http: Http, stack: ChaosStack, tenant: str) -> int:
    rows = await export_rows(http, stack, "agent_audit_log", tenant)
    return len([r for r in rows if r["action"] == "tool_call" and r["tool_name"] == "echo"])


async def rows_and_debits(
    stack: ChaosStack, http: Http, w: World, load: Load, events: list[Event]
) -> dict[str, Any]:
    """Per table: rows lost (a call that succeeded without its row) and rows written twice;
    budget debits beyond the chats that may have run (those that succeeded, and those in
    flight on a killed AI gateway, which may have run before it died). `request_log` and
    `ai_request_log` rows carry the trace id each call sent; the agent gateway's audit rows
    carry a trace of its own, so they are counted: lost = calls that succeeded - rows, twice =
    rows beyond the calls that may have run."""
    lost, twice = {}, {}
    buffered = 0
    for table_name, kind in {"request_log": "routed", "ai_request_log": "chat"}.items():
        wanted = {c.trace_id for c in load.of(kind) if c.ok}

        async def rows(table_name: str = table_name) -> Counter[str]:
            return await trace_ids(http, stack, table_name, w.tenant.id)

        def complete(found: Counter[str], wanted: set[str] = wanted) -> bool:
            return wanted <= set(found)

        found = await eventually(rows, complete)
        missing = wanted - set(found)
        if table_name == "request_log":  # see EDGE_LOG_BATCH_SECS
            kept = {c.trace_id for c in load.of(kind) if in_edge_buffer(c, events)}
            buffered = len(missing & kept)
            missing -= kept
        lost[table_name] = len(missing)
        twice[table_name] = sum(n - 1 for n in found.values() if n > 1)
    tools = load.of("tool")
    tools_ok = sum(c.ok for c in tools)
    tools_may = sum(not c.ok and in_flight(c, events) for c in tools)
    audited = await eventually(partial(tool_call_rows, http, stack, w.tenant.id),
                               lambda n: n >= tools_ok)  # fmt: skip
    lost["agent_audit_log"] = max(0, tools_ok - audited)
    twice["agent_audit_log"] = max(0, audited - tools_ok - tools_may)
    chats = load.of("chat")
    ok = sum(c.ok for c in chats)
    may = sum(not c.ok and in_flight(c, events) for c in chats)
    usage = await chat_usage(stack, http)

    async def debited() -> float:
        budget = await http.call("GET", f"{stack.ai}/v1/budget/{w.tenant.id}",
                                 token=w.tenant.token)  # fmt: skip
        assert budget.status == 200, budget.text
        return (BUDGET - int(budget.body["remaining_tokens"])) / usage

    # A reservation its process no longer holds (killed) is given back once its deadline
    # (BUDGET_HOLD_SECS) has passed: the read waits for that, not for anything else.
    debits = await eventually(debited, lambda d: d <= ok + may,
                              waits=int(4 * BUDGET_HOLD_SECS / 0.2))  # fmt: skip
    return {
        "rows lost": lost,
        "request_log rows in a killed edge worker's buffer": buffered,
        "rows written twice": twice,
        "chats ok": ok,
        "budget debits": debits,
        "double debits": max(0.0, debits - (ok + may)),
    }


# The edge writes its request_log rows after the answer, in batches (APISIX's batch processor:
# the analytics-logger's inactive_timeout, 5 s by default), so a killed edge worker loses the
# rows of calls it answered in its last batch window: a documented limit (README, "Status"),
# not the outbox's guarantee. Those are counted apart; any other lost row fails the test.
EDGE_LOG_BATCH_SECS = 5.0


def in_edge_buffer(call: Call, events: list[Event]) -> bool:
    return any(
        e.name == "edge-proxy worker" and e.at - EDGE_LOG_BATCH_SECS <= call.ended <= e.gone
        for e in events
    )


async def chat_usage(stack: ChaosStack, http: Http) -> int:
    """The tokens one of the load's chats costs (asked of a fresh tenant: the load's is kept)."""
    other = await new_tenant(http, stack, "chaos-usage")
    reply = await http.call("POST", f"{stack.edge}/v1/chat/completions", token=other.token,
                            json_body=CHAT, headers={"Cache-Control": "no-store"})  # fmt: skip
    assert reply.status == 200, reply.text
    return int(reply.body["usage"]["total_tokens"])


def report(title: str, load: Load, events: list[Event], counts: dict[str, Any]) -> str:
    rows = []
    for kind in ("chat", "tool", "session", "routed"):
        calls = load.of(kind)
        failed = [c for c in calls if not c.ok]
        flight = [c for c in failed if in_flight(c, events)]
        rows.append({"calls": kind, "sent": len(calls), "failed": len(failed),
                     "failed in flight on a downed replica": len(flight),
                     "failed otherwise": len(failed) - len(flight)})  # fmt: skip
    secs = load.calls[-1].ended - load.calls[0].started if load.calls else 0
    text = (f"\n{title}: {secs:.0f} s of load; taken down in turn: "
            f"{', '.join(e.name for e in events)}\n" + table(rows))  # fmt: skip
    text += "\n\n" + table([{k: _flat(v) for k, v in counts.items()}])
    print(text)
    return text


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return f"{value:g}" if isinstance(value, float) else str(value)


def described(c: Call, events: list[Event]) -> str:
    """A failed call, its trace id (to find it in the logs) and when it ran beside each fault
    (seconds from the signal to the call's start and end; the exit)."""
    return (f"{c.kind} {c.status} {c.detail} trace {c.trace_id} "
            + "; ".join(f"{e.name}: {c.started - e.at:+.3f} {c.ended - e.at:+.3f} "
                        f"exit {e.gone - e.at:+.3f}" for e in events))  # fmt: skip


def unexpected(load: Load, events: list[Event]) -> list[str]:
    """The failed calls that were not in flight on a downed replica (`described`)."""
    return [described(c, events) for c in load.calls if not c.ok and not in_flight(c, events)]


async def test_kill_9_one_replica_of_each_service_in_turn(stack: ChaosStack, mcp_url: str) -> None:
    """SIGKILL to the second AI gateway, the second agent gateway, the first control plane
    (the one owning the embedded chDB, which the others ship their rows to) and one of the
    edge's data-plane workers, a few seconds apart; the launcher starts each replica again,
    the edge's primary its worker."""
    order = ["ai-gateway-2", "agent-gateway-2", "controlplane"]
    async with Http() as http:
        w = await world(stack, http, mcp_url, len(order) + 1)
        load = start_load(stack, w)
        await asyncio.sleep(WARM_SECS)
        events: list[Event] = []
        downs = []
        for name, limited in zip(order, w.limited, strict=False):
            downs.append(asyncio.create_task(
                take_down(stack, http, w, name, limited, signal.SIGKILL, events)))  # fmt: skip
            await asyncio.sleep(STAGGER_SECS)
        downs.append(asyncio.create_task(
            take_down_edge_worker(stack, http, w, w.limited[-1], events)))  # fmt: skip
        over = sum(await asyncio.gather(*downs))
        await edge_config_served(stack, http)
        await asyncio.sleep(SETTLE_SECS)
        await load.stop()
        counts = await rows_and_debits(stack, http, w, load, events)
        approved = await http.call("POST", f"{stack.edge}/v1/hitl/{w.approval}/approve",
                                   token=w.hitl.token)  # fmt: skip
    report("kill -9 under load", load, events, {**counts, "rate-limit over-admissions": over})
    assert unexpected(load, events) == []
    assert over == 0
    assert counts["double debits"] == 0
    assert approved.status == 200, approved.text
    # Rows are in the store before the answer leaves (the analytics outbox, README).
    assert not any(counts["rows lost"].values()), counts["rows lost"]
    assert not any(counts["rows written twice"].values()), counts["rows written twice"]


async def test_rolling_restart_loses_no_call(stack: ChaosStack, mcp_url: str) -> None:
    """SIGTERM to each replica in turn, as Kubernetes rolls a Deployment: each drains, the
    launcher starts it again, then the next replica of that service goes (`-2` first). The
    control plane rolls first, then the two gateways at once (a gateway draining while the
    control plane owning chDB is away has no rows to hand over: they are in the outbox).
    No call fails, no row is lost or written twice, no budget is debited twice."""
    async with Http() as http:
        w = await world(stack, http, mcp_url, 2 * len(REPLICATED))
        load = start_load(stack, w)
        await asyncio.sleep(WARM_SECS)
        events: list[Event] = []
        limited = iter(w.limited)

        async def roll(service: str) -> int:
            over = 0
            for name in (f"{service}-2", service):
                over += await take_down(stack, http, w, name, next(limited), signal.SIGTERM,
                                        events)  # fmt: skip
            return over

        over = await roll("controlplane")
        over += sum(await asyncio.gather(roll("ai-gateway"), roll("agent-gateway")))
        await edge_config_served(stack, http)
        await asyncio.sleep(SETTLE_SECS)
        await load.stop()
        counts = await rows_and_debits(stack, http, w, load, events)
    report("rolling restart under load", load, events,
           {**counts, "rate-limit over-admissions": over})  # fmt: skip
    failed = [described(c, events) for c in load.calls if not c.ok]
    assert failed == []  # a drain answers every request it had begun (README)
    assert over == 0
    assert counts["double debits"] == 0
    # A draining replica keeps no rows of its own: they are in the outbox before each answer.
    assert not any(counts["rows lost"].values()), counts["rows lost"]
    assert not any(counts["rows written twice"].values()), counts["rows written twice"]
