"""Tool calls whose upstream fails them after a good handshake (a real MCP server behind a
faulty network hop, `FaultyPath`), answers too much, cannot be reached, or is slow while a
burst races for the session's budget: each a clear error, and the session's counters, budget
and approvals as the pipeline documents — a call that reached its upstream counts (its tool
may have run), one that never left gives its slot, tokens and approval back."""

from __future__ import annotations

import asyncio
import threading

import pytest
from agent_kit import call, execute, metrics_of, registered, sample, session
from mcp_servers import FaultyPath, wait_until
from shared_kit import running

from gateways.agent.admission import json_chars, tokens_for


async def counters(svc, alice, sid: str) -> tuple[int, int]:
    _, got = await call(svc, "GET", f"/v1/sessions/{sid}", alice)
    return got["tool_calls"], got["tokens_used"]


@pytest.mark.parametrize("fault", ["garbage", "not_jsonrpc", "hang", "cut"])
async def test_a_broken_answer_is_a_502_and_the_call_counts(
    gateway, alice, upstream, policy, fault
) -> None:
    up = upstream()
    hop = FaultyPath(up.url)
    arguments = {"text": "hello"}
    async with running(hop.app()) as url, gateway(AGENT_MCP_TIMEOUT_SECS="1") as svc:
        server = await registered(svc, alice, up, url=f"{url}/mcp", id=f"faulty-{fault}")
        sid = await session(svc, alice, ["echo"])
        assert (await execute(svc, alice, sid, server, "echo", arguments))[0] == 200
        before = await counters(svc, alice, sid)
        hop.fault = fault
        status, answer = await execute(svc, alice, sid, server, "echo", arguments)
        after = await counters(svc, alice, sid)
        hop.fault = None
        status_again, _ = await execute(svc, alice, sid, server, "echo", arguments)
        metrics = await metrics_of(svc)
    assert (status, answer["error"]) == (502, "upstream_error"), answer
    assert answer["message"].startswith(f"MCP server {server!r}")
    # It reached the upstream: one more call, charged its arguments (no result came).
    assert after == (before[0] + 1, before[1] + tokens_for(json_chars(arguments)))
    assert status_again == 200  # the next call finds the gateway unharmed
    assert hop.calls == 3
    where = {"tenant": "acme", "server": server, "tool": "echo"}
    assert sample(metrics, "agent_gateway_tool_calls_denied_total", **where,
                  reason="upstream_error") == 1  # fmt: skip


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_a_result_over_the_size_cap_is_a_502(gateway, alice, upstream, policy, json_response):
    up = upstream(huge_tool=True, json_response=json_response)
    async with gateway(AGENT_MCP_MAX_RESULT_BYTES="4096") as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["huge"])
        small, _ = await execute(svc, alice, sid, server, "huge", {"size": 100})
        status, answer = await execute(svc, alice, sid, server, "huge", {"size": 20_000})
        again, _ = await execute(svc, alice, sid, server, "huge", {"size": 100})
        calls, _ = await counters(svc, alice, sid)
    assert (small, again) == (200, 200)
    assert status == 502, answer
    assert answer["error"] == "upstream_result_too_large" and answer["limit_bytes"] == 4096
    assert "4096 bytes" in answer["message"]
    assert calls == 3  # the tool ran: the call counts


async def test_an_unreachable_upstream_gives_everything_back(
    gateway, alice, upstream, policy
) -> None:
    """Nothing left the gateway: no slot, no token, and the approval that released the call
    still releases it once the upstream is back — then once only."""
    await policy(hitl_required_tools=["add"])
    up = upstream(json_response=True)
    arguments = {"a": 1, "b": 2}
    async with gateway(AGENT_MCP_TIMEOUT_SECS="2") as svc:
        server = await registered(svc, alice, up, protocol="2026-07-28")
        sid = await session(svc, alice, ["add"])
        status, held = await execute(svc, alice, sid, server, "add", arguments)
        assert status == 202
        assert (await call(svc, "POST", f"/v1/hitl/{held['approval_id']}/approve", alice))[0] == 200
        up.stop()
        status, answer = await execute(svc, alice, sid, server, "add", arguments)
        assert (status, answer["error"]) == (502, "upstream_error"), answer
        assert "unreachable" in answer["message"]
        assert await counters(svc, alice, sid) == (0, 0)
        up.start()
        status, ran = await execute(svc, alice, sid, server, "add", arguments)
        assert status == 200 and ran["result"]["content"][0]["text"] == "3"
        assert (await execute(svc, alice, sid, server, "add", arguments))[0] == 202
        assert (await counters(svc, alice, sid))[0] == 1


async def test_an_approved_call_that_reached_its_upstream_used_its_approval(
    gateway, alice, upstream, policy
) -> None:
    await policy(hitl_required_tools=["echo"])
    up = upstream()
    hop = FaultyPath(up.url)
    arguments = {"text": "deploy"}
    async with running(hop.app()) as url, gateway() as svc:
        server = await registered(svc, alice, up, url=f"{url}/mcp")
        sid = await session(svc, alice, ["echo"])
        _, held = await execute(svc, alice, sid, server, "echo", arguments)
        await call(svc, "POST", f"/v1/hitl/{held['approval_id']}/approve", alice)
        hop.fault = "garbage"
        assert (await execute(svc, alice, sid, server, "echo", arguments))[0] == 502
        hop.fault = None
        status, again = await execute(svc, alice, sid, server, "echo", arguments)
    assert status == 202 and again["approval_id"] != held["approval_id"]
    assert hop.calls == 1  # the approval released one call, which went out


async def test_the_session_budget_holds_under_a_concurrent_burst(
    gateway, alice, upstream, policy
) -> None:
    """Twelve calls race for a budget of 100 tokens while the tool holds them: each reserves
    its arguments' 10 tokens and 10 for its result, so five are admitted (and reach the
    upstream) and seven are refused at once; once answered, each is charged what it used."""
    gate = threading.Event()
    up = upstream(gate=gate)
    arguments = {"text": "x" * 30}  # 41 characters of JSON: 10 tokens
    async with gateway(AGENT_TOOL_RESULT_RESERVE_TOKENS="10") as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["hold"], budget=100)
        tasks = [
            asyncio.create_task(execute(svc, alice, sid, server, "hold", arguments))
            for _ in range(12)
        ]
        try:
            await wait_until(lambda: sum(t.done() for t in tasks) == 7)
            during = await counters(svc, alice, sid)
        finally:
            gate.set()
        answers = await asyncio.gather(*tasks)
        after = await counters(svc, alice, sid)
    assert sorted(status for status, _ in answers) == [200] * 5 + [429] * 7
    assert {body["error"] for status, body in answers if status == 429} == {"budget_exceeded"}
    assert during == (5, 100)  # five calls in flight, holding every token
    ran = next(body for status, body in answers if status == 200)
    used = tokens_for(json_chars(arguments) + json_chars(ran["result"]))
    assert after == (5, 5 * used)
    assert up.count("tools/call") == 5


async def test_a_server_request_on_the_call_stream_is_refused_not_waited_for(
    gateway, alice, upstream, policy
) -> None:
    """A 2025-11-25 tool that asks the client something (elicitation) mid-call: the gateway
    relays no server requests, answers it with a JSON-RPC error at once, and the tool's own
    answer comes back (rather than the call hanging until the timeout)."""
    up = upstream(asking_tool=True)
    async with gateway(AGENT_MCP_TIMEOUT_SECS="5") as svc:
        server = await registered(svc, alice, up, protocol="2025-11-25")
        sid = await session(svc, alice, ["ask"])
        status, answer = await execute(svc, alice, sid, server, "ask", {"text": "hi"})
    assert status == 200, answer
    text = answer["result"]["content"][0]["text"]
    assert text == "not asked: the Strata gateway relays no server requests"
