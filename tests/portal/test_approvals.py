"""The approver's queue in the browser: an agent's tool call held by the tenant's policy
appears without a reload (the page polls every 2 s) with its agent, tool, session and
arguments; approved in the portal, the agent's call then completes. A call decided elsewhere
leaves the queue by itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp_servers import UpstreamMcp
from playwright.async_api import expect

from portal.kit import log_in, mcp_server, open_page, person, shot, unique

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


@pytest.fixture
def upstream() -> Iterator[UpstreamMcp]:
    server = UpstreamMcp(name=unique("portal-tools")).start()
    yield server
    server.stop()


async def test_a_held_call_is_approved_in_the_portal_and_completes(stack, browser, upstream):
    async with mcp_server(stack, upstream, "hitl-srv") as server_id:
        await held_call_flow(stack, browser, server_id)


async def held_call_flow(stack, browser, server_id: str) -> None:
    token = await stack.token("alice")
    agent = stack.urls["AGENT_URL"]
    status, policy = await stack.api("GET", f"{agent}/v1/policies/acme", token=token)
    assert status == 200, policy
    held = sorted({*policy["hitl_required_tools"], "add"})
    status, body = await stack.api(
        "PUT", f"{agent}/v1/policies/acme", token=token,
        body={"hitl_required_tools": held,
              "max_concurrent_sessions": policy["max_concurrent_sessions"],
              "max_tool_calls_per_session": policy["max_tool_calls_per_session"],
              "allowed_network_hosts": policy["allowed_network_hosts"]},
    )  # fmt: skip
    assert status == 200, body
    status, session = await stack.api(
        "POST", f"{agent}/v1/sessions", token=token,
        body={"tenant_id": "acme", "agent_id": "agent:planner", "tool_allowlist": ["add"],
              "token_budget": 100000},
    )  # fmt: skip
    assert status == 201, session
    execute = f"{agent}/v1/sessions/{session['id']}/execute"

    def add(a: int, b: int) -> dict:
        return {"server_id": server_id, "tool_name": "add", "arguments": {"a": a, "b": b},
                "tenant_id": "acme"}  # fmt: skip

    context = await person(browser)
    page = await log_in(context, stack, "alice")
    await open_page(page, "approvals")

    # The agent's call is held; the queue shows it without a reload.
    status, pending = await stack.api("POST", execute, token=token, body=add(20, 22))
    assert status == 202, pending
    item = page.locator(f"li[data-approval='{pending['approval_id']}']")
    await expect(item).to_be_visible()
    await expect(item.locator(".agent")).to_have_text("agent:planner")
    await expect(item).to_contain_text("add")
    await expect(item).to_contain_text(session["id"])
    await expect(item.locator("pre.arguments")).to_contain_text('"a": 20')
    await shot(page, "approvals-desktop")

    await item.get_by_role("button", name="Approve").click()
    await expect(item).to_have_count(0)
    status, done = await stack.api("POST", execute, token=token, body=add(20, 22))
    assert status == 200, done  # the approved call runs now
    assert "42" in str(done["result"])

    # Decided elsewhere (another approver, through the API): the item leaves by itself.
    status, second = await stack.api("POST", execute, token=token, body=add(1, 2))
    assert status == 202, second
    other = page.locator(f"li[data-approval='{second['approval_id']}']")
    await expect(other).to_be_visible()
    status, body = await stack.api(
        "POST", f"{agent}/v1/hitl/{second['approval_id']}/deny", token=token
    )
    assert status == 200, body
    await expect(other).to_have_count(0)
    status, body = await stack.api("POST", execute, token=token, body=add(1, 2))
    assert status == 202  # denied: the same call is held again as a new request
    await context.close()
