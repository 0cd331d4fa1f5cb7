"""The tool-call pipeline (spec: "Tool call processing", the Errors table) through the front
door, against a real MCP server: the 200 and 202 shapes, server → session → allowlist →
limits → HITL → budget → schema → forward, each refusal leaving the upstream untouched and the
session's call slot free, counters, audit rows with hashed arguments, metrics, two gateways
sharing the limits, and the gateway's own `/mcp` running the same pipeline."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agent_kit import agent_processes, call, execute, metrics_of, registered, sample, session
from aiohttp import web
from shared_kit import running

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster


async def test_a_call_in_a_session_runs_and_counts(gateway, alice, upstream, policy) -> None:
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["echo"])
        status, body = await execute(svc, alice, sid, server, "echo", {"text": "hi"})
        assert status == 200, body
        assert body["result"]["content"] == [{"type": "text", "text": "hi"}]
        assert body["result"]["isError"] is False
        assert (body["server_id"], body["tool_name"]) == (server, "echo")
        assert isinstance(body["latency_ms"], int)
        _, got = await call(svc, "GET", f"/v1/sessions/{sid}", alice)
        assert got["tool_calls"] == 1 and got["tokens_used"] > 0
        metrics = await metrics_of(svc)
    assert up.count("tools/call") == 1
    where = {"tenant": "acme", "server": server, "tool": "echo"}
    assert sample(metrics, "agent_gateway_tool_calls_total", **where, outcome="ok") == 1
    assert sample(metrics, "agent_gateway_tool_latency_seconds_count", **where) == 1


async def test_a_call_without_a_session(gateway, alice, upstream, policy) -> None:
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        body = {"server_id": server, "tool_name": "add", "arguments": {"a": 2, "b": 3},
                "tenant_id": "acme"}  # fmt: skip
        status, answer = await call(svc, "POST", "/v1/mcp/tools/call", alice, body)
    assert status == 200, answer
    assert answer["result"]["content"][0]["text"] == "5"


async def test_refusals_in_order_never_reach_the_upstream(
    gateway, alice, bob, upstream, policy
) -> None:
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["add"])
        status, body = await execute(svc, alice, sid, "no-such-server", "add", {"a": 1, "b": 2})
        assert (status, body["error"]) == (404, "server_not_found")
        status, body = await execute(svc, alice, sid, server, "nope", {})
        assert (status, body["error"]) == (404, "tool_not_found")
        status, body = await execute(svc, alice, sid, server, "echo", {"text": "x"})
        assert (status, body["error"]) == (403, "tool_not_allowed")
        status, body = await execute(svc, alice, sid, server, "add", {"a": "one", "b": 2})
        assert (status, body["error"]) == (400, "validation_failed")
        assert body["path"] == "/a"
        status, body = await execute(svc, alice, sid, server, "add", {"a": 1})
        assert (status, body["error"]) == (400, "validation_failed")
        other = {"server_id": server, "tool_name": "add", "arguments": {"a": 1, "b": 2},
                 "tenant_id": "globex"}  # fmt: skip
        status, body = await call(svc, "POST", "/v1/mcp/tools/call", bob, other)
        assert (status, body["error"]) == (404, "server_not_found")  # another tenant's server
        _, got = await call(svc, "GET", f"/v1/sessions/{sid}", alice)
        metrics = await metrics_of(svc)
    assert up.count("tools/call") == 0
    assert got["tool_calls"] == 0  # every refused call gave its slot back
    denied = "agent_gateway_tool_calls_denied_total"
    where = {"tenant": "acme", "server": server, "tool": "add"}
    assert sample(metrics, denied, **where, reason="validation_failed") == 2
    unknown = {"tenant": "acme", "server": "unknown", "tool": "unknown"}
    assert sample(metrics, denied, **unknown, reason="server_not_found") == 1  # bounded labels
    assert sample(metrics, denied, **unknown, reason="tool_not_found") == 1


async def test_a_tool_error_is_the_tools_answer(gateway, alice, upstream, policy) -> None:
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["explode"])
        status, body = await execute(svc, alice, sid, server, "explode", {"reason": "test"})
    assert status == 200
    assert body["result"]["isError"] is True
    assert body["result"]["content"][0]["text"].startswith("Error executing tool explode")


async def test_hitl_holds_then_releases_exactly_that_call_once(
    gateway, alice, upstream, policy
) -> None:
    await policy(hitl_required_tools=["add"])
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["add"])
        status, held = await execute(svc, alice, sid, server, "add", {"a": 1, "b": 2})
        assert status == 202, held
        assert set(held) == {"status", "approval_id", "message"}
        assert held["status"] == "pending_approval" and held["approval_id"].startswith("hitl-")
        status, _ = await call(svc, "POST", f"/v1/hitl/{held['approval_id']}/approve", alice)
        assert status == 200
        status, _ = await execute(svc, alice, sid, server, "add", {"a": 1, "b": 3})
        assert status == 202  # other arguments: not the approved call
        status, ran = await execute(svc, alice, sid, server, "add", {"a": 1, "b": 2})
        assert status == 200 and ran["result"]["content"][0]["text"] == "3"
        status, _ = await execute(svc, alice, sid, server, "add", {"a": 1, "b": 2})
        assert status == 202  # the approval released one call
        _, got = await call(svc, "GET", f"/v1/sessions/{sid}", alice)
    assert up.count("tools/call") == 1
    assert got["tool_calls"] == 1  # held calls did not count


async def test_the_session_token_budget(gateway, alice, upstream, policy) -> None:
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["echo"], budget=5)
        status, _ = await execute(svc, alice, sid, server, "echo", {"text": "a long answer " * 4})
        assert status == 200
        status, body = await execute(svc, alice, sid, server, "echo", {"text": "again"})
    assert (status, body["error"]) == (429, "budget_exceeded")
    assert up.count("tools/call") == 1


async def test_max_calls_per_session_holds_across_two_gateways(
    gateway, alice, upstream, policy
) -> None:
    await policy(max_tool_calls_per_session=5)
    up = upstream()
    async with gateway() as one, gateway() as two:
        server = await registered(one, alice, up)
        sid = await session(one, alice, ["add"])
        answers = await asyncio.gather(
            *(
                execute((one, two)[i % 2], alice, sid, server, "add", {"a": i, "b": 1})
                for i in range(12)
            )
        )
        _, got = await call(two, "GET", f"/v1/sessions/{sid}", alice)
    statuses = sorted(status for status, _ in answers)
    assert statuses == [200] * 5 + [429] * 7
    assert {body["error"] for status, body in answers if status == 429} == {
        "tool_call_limit_exceeded"
    }
    assert got["tool_calls"] == 5 and up.count("tools/call") == 5


async def test_audit_rows_hash_the_arguments(gateway, alice, upstream, policy, analytics) -> None:
    up = upstream()
    secret = "card 4111 1111 1111 1111"
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["echo"])
        await execute(svc, alice, sid, server, "echo", {"text": secret})
        await execute(svc, alice, sid, server, "add", {"a": 1, "b": 1})  # not allowed
    rows = await analytics.query(
        "SELECT * FROM gateway.agent_audit_log WHERE session_id = {s:String} "
        "AND action = 'tool_call' ORDER BY timestamp",
        {"s": sid},
    )
    assert [(r["tool_name"], r["status"]) for r in rows] == [
        ("echo", "ok"),
        ("add", "tool_not_allowed"),
    ]
    assert rows[0]["agent_id"] == "agent:tester"
    assert rows[0]["input_hash"].startswith("sha256:") and rows[0]["output_hash"]
    assert secret not in json.dumps(rows, default=str)


async def test_two_gateway_processes_share_sessions_and_limits(
    upstream, kv, valkey_url, idp, alice, policy
) -> None:
    """Two OS processes of the agent gateway against one Valkey: a server registered and a
    session created through one serve calls through the other, and a concurrent burst split
    across both takes exactly the session's `max_tool_calls_per_session`."""
    await policy(max_tool_calls_per_session=5)
    up = upstream()
    async with agent_processes(2, valkey_url, idp) as (one, two):
        server = await registered(one, alice, up)
        sid = await session(one, alice, ["add"])
        status, ran = await execute(two, alice, sid, server, "add", {"a": 2, "b": 2})
        assert status == 200 and ran["result"]["content"][0]["text"] == "4"
        answers = await asyncio.gather(
            *(
                execute((one, two)[i % 2], alice, sid, server, "add", {"a": i, "b": 1})
                for i in range(12)
            )
        )
        _, got = await call(one, "GET", f"/v1/sessions/{sid}", alice)
    assert sorted(status for status, _ in answers) == [200] * 4 + [429] * 8
    assert got["tool_calls"] == 5 and up.count("tools/call") == 5


@pytest.mark.parametrize("misbehaviour", ["garbage", "hang", "disconnect"])
async def test_a_broken_upstream_is_a_clear_502_and_counts_nothing(
    gateway, alice, policy, misbehaviour
) -> None:
    """Not an MCP server at all, on purpose: one that answers HTML, never answers, or drops
    the connection. Each call is a 502 naming the upstream, and the session's counters and
    budget are as before."""

    async def broken(request: web.Request) -> web.StreamResponse:
        await request.read()
        if misbehaviour == "hang":
            await asyncio.sleep(30)
        if misbehaviour == "disconnect":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        return web.Response(text="<html>surprise</html>", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/mcp", broken)
    tool = {"name": "add", "description": "Add", "inputSchema": {"type": "object"}}
    async with running(app) as url, gateway(AGENT_MCP_TIMEOUT_SECS="1") as svc:
        body: dict[str, Any] = {"id": f"broken-{misbehaviour}", "name": "broken",
                                "url": f"{url}/mcp", "tenant_id": "acme",
                                "tools": [tool]}  # fmt: skip
        status, made = await call(svc, "POST", "/v1/mcp/servers", alice, body)
        assert status == 201, made
        sid = await session(svc, alice, ["add"])
        status, answer = await execute(svc, alice, sid, body["id"], "add", {"a": 1})
        _, got = await call(svc, "GET", f"/v1/sessions/{sid}", alice)
    assert status == 502, answer
    assert answer["error"] == "upstream_error"
    assert (got["tool_calls"], got["tokens_used"]) == (0, 0)


async def test_the_call_body_is_checked_before_anything_runs(
    gateway, alice, upstream, policy
) -> None:
    """`POST /v1/mcp/tools/call` (parsed as JSON, not through protobuf): unknown fields,
    wrong types and missing fields are 400 naming the field; a body naming another tenant is
    403; whole numbers reach the tool as integers."""
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        base = {"server_id": server, "tool_name": "add", "arguments": {"a": 2, "b": 3},
                "tenant_id": "acme"}  # fmt: skip
        cases = [
            ({**base, "extra": 1}, 400, "extra"),
            ({**base, "arguments": [1, 2]}, 400, "arguments"),
            ({k: v for k, v in base.items() if k != "arguments"}, 400, "arguments"),
            ({**base, "server_id": ""}, 400, "server_id"),
            ({**base, "tool_name": 7}, 400, "tool_name"),
            ({**base, "session_id": "a b"}, 400, "session_id"),
            ({**base, "tenant_id": "globex"}, 403, "globex"),
        ]
        for body, status, named in cases:
            got, answer = await call(svc, "POST", "/v1/mcp/tools/call", alice, body)
            assert got == status and named in json.dumps(answer), (body, answer)
        status, ran = await call(svc, "POST", "/v1/mcp/tools/call", alice, base)
    assert status == 200 and ran["result"]["structuredContent"] == {"result": 5}
    assert up.count("tools/call") == 1


async def test_the_execute_body_is_checked_and_the_path_names_the_session(
    gateway, alice, upstream, policy
) -> None:
    """`POST /v1/sessions/{id}/execute` (parsed as JSON, not through protobuf): the same
    checks as a call; the session is the path's, whatever the body says."""
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["add"])
        path = f"/v1/sessions/{sid}/execute"
        base = {
            "server_id": server,
            "tool_name": "add",
            "arguments": {"a": 2, "b": 3},
            "tenant_id": "acme",  # required by the spec's table, as for a call
        }
        cases = [
            (path, {**base, "extra": 1}, 400, "extra"),
            (path, {**base, "arguments": [1, 2]}, 400, "arguments"),
            (path, {k: v for k, v in base.items() if k != "arguments"}, 400, "arguments"),
            (path, {**base, "tool_name": 7}, 400, "tool_name"),
            ("/v1/sessions/nope/execute", base, 404, "Session not found"),
        ]
        for where, body, status, named in cases:
            got, answer = await call(svc, "POST", where, alice, body)
            assert got == status and named in json.dumps(answer), (body, answer)
        status, ran = await call(svc, "POST", path, alice, {**base, "session_id": "nope"})
        _, got = await call(svc, "GET", f"/v1/sessions/{sid}", alice)
    assert status == 200 and ran["result"]["structuredContent"] == {"result": 5}, ran
    assert got["tool_calls"] == 1


async def test_an_identical_call_while_pending_gets_the_same_approval(
    gateway, alice, upstream, policy
) -> None:
    """Repeated (and concurrent, on two gateways) identical calls to a HITL tool: one pending
    approval, 202 with its id each time; other arguments get their own; once it is decided,
    the same call opens a new one."""
    await policy(hitl_required_tools=["add"])
    up = upstream()
    async with gateway() as one, gateway() as two:
        server = await registered(one, alice, up)
        sid = await session(one, alice, ["add"])
        answers = await asyncio.gather(
            *(execute(svc, alice, sid, server, "add", {"a": 1, "b": 2})
              for svc in (one, two) for _ in range(5))
        )  # fmt: skip
        assert {status for status, _ in answers} == {202}
        ids = {held["approval_id"] for _, held in answers}
        assert len(ids) == 1
        approval_id = ids.pop()
        status, other = await execute(two, alice, sid, server, "add", {"a": 2, "b": 2})
        assert status == 202 and other["approval_id"] != approval_id
        _, listed = await call(one, "GET", "/v1/hitl/pending", alice)
        mine = sorted(a["id"] for a in listed["pending"] if a["session_id"] == sid)
        assert mine == sorted([approval_id, other["approval_id"]])
        assert (await call(one, "POST", f"/v1/hitl/{approval_id}/deny", alice))[0] == 200
        status, again = await execute(one, alice, sid, server, "add", {"a": 1, "b": 2})
        assert status == 202 and again["approval_id"] not in (approval_id, other["approval_id"])
    assert up.count("tools/call") == 0
