"""Single use holds under concurrency: one hop token spent by many tool calls at once, one HITL
approval decided many times at once (and the call it releases retried at once), one key
request approved many times at once. Figure: exactly one success each time, the others
refused with the documented status (401 `token_replayed`, 409), nothing >= 500."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from shared_kit import free_port

from reliability.kit import (
    Agent,
    Http,
    Stack,
    Tenant,
    all_replies,
    all_statuses,
    exchange,
    new_agent,
    new_tenant,
    register_mcp,
    sidecar,
    unique,
)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

CONCURRENCY = 50
ROUNDS = 3


@dataclass
class Tools:
    stack: Stack
    tenant: Tenant
    caller: Agent
    callee: Agent
    server_id: str

    def call(self, **extra: object) -> dict[str, object]:
        return {"server_id": self.server_id, "tool_name": "echo", "tenant_id": self.tenant.id,
                "arguments": {"text": "once"}, **extra}  # fmt: skip


@pytest.fixture(scope="module")
async def tools(stack: Stack) -> AsyncIterator[Tools]:
    port = free_port()
    async with Http() as http, sidecar(stack, "sidecars.demo", "--port", str(port), port=port):
        tenant = await new_tenant(http, stack, "once")
        callee = await new_agent(http, stack, tenant.id)
        caller = await new_agent(http, stack, tenant.id, audiences=(callee.id,))
        server_id = await register_mcp(
            http, stack, tenant.id, tenant.token, f"http://127.0.0.1:{port}/mcp"
        )
        yield Tools(stack, tenant, caller, callee, server_id)


async def test_a_hop_token_is_spent_once(tools: Tools, http: Http) -> None:
    url = f"{tools.stack.agent}/v1/mcp/tools/call"
    for _ in range(ROUNDS):
        hop = await exchange(http, tools.stack, tools.tenant.token, tools.caller.token,
                             tools.callee.id)  # fmt: skip
        assert hop.status == 200, hop.text
        body = tools.call(sts_token=hop.body["access_token"])
        replies = [http.call("POST", url, token=tools.caller.token, json_body=body)
                   for _ in range(CONCURRENCY)]  # fmt: skip
        statuses = await all_statuses(replies)
        assert (statuses.count(200), statuses.count(401)) == (1, CONCURRENCY - 1), statuses


async def _pending_approval(tools: Tools, http: Http, text: str) -> tuple[dict[str, object], str]:
    body = tools.call(arguments={"text": text})
    held = await http.call("POST", f"{tools.stack.agent}/v1/mcp/tools/call",
                           token=tools.tenant.token, json_body=body)  # fmt: skip
    assert held.status == 202, held.text
    return body, str(held.body["approval_id"])


@pytest.fixture(scope="module")
async def hitl(tools: Tools) -> Tools:
    async with Http() as http:
        policy = await http.call(
            "PUT", f"{tools.stack.agent}/v1/policies/{tools.tenant.id}", token=tools.tenant.token,
            json_body={"hitl_required_tools": ["echo"], "max_concurrent_sessions": 100,
                       "max_tool_calls_per_session": 1000, "allowed_network_hosts": []},
        )  # fmt: skip
        assert policy.status == 200, policy.text
    return tools


async def test_an_approval_is_decided_once(hitl: Tools, http: Http) -> None:
    for round_ in range(ROUNDS):
        _, approval = await _pending_approval(hitl, http, unique(f"approve-{round_}"))
        base = f"{hitl.stack.agent}/v1/hitl/{approval}"
        # half approve, half deny, all at once: one decision wins
        decisions = [
            http.call("POST", f"{base}/{'approve' if i % 2 else 'deny'}", token=hitl.tenant.token)
            for i in range(CONCURRENCY)
        ]
        statuses = await all_statuses(decisions)
        assert (statuses.count(200), statuses.count(409)) == (1, CONCURRENCY - 1), statuses


async def test_an_approved_call_is_released_once(hitl: Tools, http: Http) -> None:
    url = f"{hitl.stack.agent}/v1/mcp/tools/call"
    for round_ in range(ROUNDS):
        body, approval = await _pending_approval(hitl, http, unique(f"release-{round_}"))
        approved = await http.call("POST", f"{hitl.stack.agent}/v1/hitl/{approval}/approve",
                                   token=hitl.tenant.token)  # fmt: skip
        assert approved.status == 200, approved.text
        retries = [http.call("POST", url, token=hitl.tenant.token, json_body=body)
                   for _ in range(CONCURRENCY)]  # fmt: skip
        statuses = await all_statuses(retries)
        # the rest wait for a new approval (202)
        assert (statuses.count(200), statuses.count(202)) == (1, CONCURRENCY - 1), statuses


async def test_a_key_request_is_approved_once(stack: Stack, http: Http) -> None:
    tenant = await new_tenant(http, stack, "keys")
    for round_ in range(ROUNDS):
        name = unique(f"race-{round_}")
        filed = await http.call(
            "POST", f"{stack.cp}/api/keys/request", token=stack.master,
            json_body={"name": name, "tenant_id": tenant.id, "routes": ["v1"],
                       "reason": "race", "email": "race@example.org"},
        )  # fmt: skip
        assert filed.status == 201, filed.text
        base = f"{stack.cp}/api/keys/requests/{filed.body['id']}"
        decisions = [
            http.call("POST", f"{base}/{'approve' if i % 5 else 'deny'}", token=stack.master)
            for i in range(CONCURRENCY)
        ]
        replies = await all_replies(decisions)
        statuses = [reply.status for reply in replies]
        assert (statuses.count(200), statuses.count(409)) == (1, CONCURRENCY - 1), statuses
        keys = await http.call("GET", f"{stack.cp}/api/keys", token=stack.master)
        issued = [key for key in keys.body if key["name"] == name]
        won = next(reply.body for reply in replies if reply.status == 200)
        # an approval issued exactly one key; a denial none
        assert len(issued) == (1 if won["status"] == "approved" else 0), issued
