"""Tenant isolation across every resource family and across the caches. Figure: 0 leaks.

Two tenants, `acme-…` and `globex-…` (fresh, so the figures count only this module's
resources), each with a person's token and an issued API key. For each resource family the
owner makes a resource; the intruder (the other tenant, with its token and then its key, in both
directions) lists, reads, writes and deletes it. A leak is an answer that lets it through (a
2xx to a read, write or delete of the other tenant's resource, or a list that shows it); a
refusal is a 4xx (401, 403, 404) and never a 5xx. The owner reads the resource back afterwards:
unchanged.

Caches: the AI gateway's exact and semantic tiers answer one tenant's prompt from that
tenant's entries only; the agent gateway's admission cache (what calls outside a session are
admitted with, per tenant and server) never admits one tenant's call with the other's policy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from shared_kit import free_port

from reliability.kit import (
    Http,
    Reply,
    Stack,
    eventually,
    issue_key,
    new_tenant,
    register_mcp,
    sidecar,
    unique,
)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


@dataclass
class Party:
    tenant: str
    token: str  # a person's access token
    key: str  # an issued API key
    key_id: str
    server: str  # the demo MCP server, registered by the tenant (its tools: echo, add, ...)

    def cred(self, kind: str) -> str:
        return self.token if kind == "token" else self.key


@dataclass
class World:
    stack: Stack
    mcp_url: str
    a2a_url: str
    parties: dict[str, Party] = field(default_factory=dict)


@pytest.fixture(scope="module")
async def world(stack: Stack) -> AsyncIterator[World]:
    port = free_port()
    async with Http() as http, sidecar(stack, "sidecars.demo", "--port", str(port), port=port):
        found = World(stack, f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}/a2a")
        for name in ("acme", "globex"):
            tenant = await new_tenant(http, stack, name)
            key_id, key = await issue_key(http, stack, tenant.id)
            server = await register_mcp(http, stack, tenant.id, tenant.token, found.mcp_url)
            found.parties[name] = Party(tenant.id, tenant.token, key, key_id, server)
        yield found


@dataclass
class Probe:
    """One request of the intruder. `hidden`: a list answer that must not show this text (2xx
    allowed); otherwise the request must be refused."""

    method: str
    url: str
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    hidden: str | None = None
    leak_status: int | None = None  # a status that is itself the leak (else: any 2xx)


@dataclass
class Family:
    probes: list[Probe]
    owner_view: str  # what the owner reads back, unchanged by the intruder (a URL)


Setup = Callable[[Http, World, Party], Awaitable[Family]]


async def ok(reply: Awaitable[Reply], *statuses: int) -> Any:
    done = await reply
    assert done.status in (statuses or (200, 201, 202)), done.text
    return done.body


# --- the resource families: what the owner makes, what the intruder tries ------------------


async def tenants(http: Http, w: World, o: Party) -> Family:
    base = f"{w.stack.cp}/api/tenants/{o.tenant}"
    return Family([
        Probe("GET", f"{w.stack.cp}/api/tenants", hidden=f'"{o.tenant}"'),
        Probe("GET", base),
        Probe("PATCH", base, {"plan": "free"}),
        Probe("DELETE", base),
    ], base)  # fmt: skip


async def ip_allowlists(http: Http, w: World, o: Party) -> Family:
    url = f"{w.stack.cp}/api/tenants/{o.tenant}/ip-allowlist"
    await ok(http.call("PUT", url, token=o.token, json_body={"cidrs": ["10.1.0.0/16"]}))
    return Family([Probe("GET", url), Probe("PUT", url, {"cidrs": ["0.0.0.0/0"]})], url)


async def prompt_configs(http: Http, w: World, o: Party) -> Family:
    url = f"{w.stack.cp}/api/tenants/{o.tenant}/prompt-config"
    await ok(http.call("PUT", url, token=o.token, json_body={"suffix": unique("owner")}))
    return Family([Probe("GET", url), Probe("PUT", url, {"suffix": "intruder"})], url)


async def branding(http: Http, w: World, o: Party) -> Family:
    url = f"{w.stack.cp}/api/tenants/{o.tenant}/branding"
    await ok(http.call("POST", url, token=o.token, json_body={"portal_title": unique("p")}))
    return Family([Probe("GET", url), Probe("POST", url, {"portal_title": "intruder"})], url)


async def api_keys(http: Http, w: World, o: Party) -> Family:
    cp = w.stack.cp
    filed = await ok(http.call(
        "POST", f"{cp}/api/keys/request", token=o.token,
        json_body={"name": unique("iso"), "tenant_id": o.tenant, "routes": ["v1"],
                   "reason": "isolation", "email": "o@example.org"},
    ))  # fmt: skip
    request = filed["id"]
    return Family([
        Probe("GET", f"{cp}/api/keys", hidden=o.key_id),
        Probe("DELETE", f"{cp}/api/keys/{o.key_id}"),
        Probe("GET", f"{cp}/api/keys/requests", hidden=request),
        Probe("POST", f"{cp}/api/keys/requests/{request}/approve"),
        Probe("POST", f"{cp}/api/keys/requests/{request}/deny"),
        Probe("POST", f"{cp}/api/keys/request",
              {"name": unique("iso"), "tenant_id": o.tenant, "routes": ["v1"],
               "reason": "intruder", "email": "i@example.org"}),
    ], f"{cp}/api/keys")  # fmt: skip


async def rate_limits(http: Http, w: World, o: Party) -> Family:
    url = f"{w.stack.cp}/api/rate-limits/{o.tenant}"
    return Family([
        Probe("GET", url),
        Probe("PUT", url, {"limit": 1, "window": "60s"}),
        Probe("PUT", f"{url}/routes/smoke", {"limit": 1, "window": "60s"}),
    ], url)  # fmt: skip


async def analytics(http: Http, w: World, o: Party) -> Family:
    cp, t = w.stack.cp, o.tenant
    return Family([
        *(Probe("GET", f"{cp}/api/analytics/{view}?tenant_id={t}")
          for view in ("traffic", "llm", "agents", "consumers")),
        Probe("GET", f"{cp}/api/agent-topology?tenant_id={t}"),
        Probe("GET", f"{cp}/api/audit?tenant_id={t}"),
        Probe("GET", f"{cp}/api/audit?tenant_id={t}&format=csv"),
        *(Probe("GET", f"{cp}/api/export/{table}?tenant_id={t}")
          for table in ("request_log", "ai_request_log", "agent_audit_log")),
        *(Probe("GET", f"{cp}/api/export/{table}", hidden=f",{t},")
          for table in ("request_log", "ai_request_log", "agent_audit_log")),
    ], f"{cp}/api/analytics/traffic")  # fmt: skip


async def notifications(http: Http, w: World, o: Party) -> Family:
    cp = w.stack.cp
    made = await ok(http.call(
        "POST", f"{cp}/api/notifications", token=w.stack.master,
        json_body={"tenant_id": o.tenant, "notification_type": "budget_warning",
                   "title": "isolation", "message": unique("owner")},
    ))  # fmt: skip
    prefs = f"{cp}/api/notifications/preferences"
    return Family([
        Probe("GET", f"{cp}/api/notifications", hidden=made["id"]),
        Probe("GET", f"{cp}/api/notifications?tenant_id={o.tenant}"),
        Probe("POST", f"{cp}/api/notifications/{made['id']}/read"),
        Probe("GET", f"{prefs}?tenant_id={o.tenant}"),
        Probe("PUT", prefs, {"tenant_id": o.tenant, "webhook_url": None, "slack_url": None,
                             "email": "intruder@example.org", "enabled_types": []}),
    ], f"{cp}/api/notifications")  # fmt: skip


async def webhooks(http: Http, w: World, o: Party) -> Family:
    cp = w.stack.cp
    made = await ok(http.call(
        "POST", f"{cp}/api/webhooks", token=o.token,
        json_body={"url": "http://127.0.0.1:9/hook", "event_types": ["key_approved"]},
    ))  # fmt: skip
    return Family([
        Probe("GET", f"{cp}/api/webhooks", hidden=made["id"]),
        Probe("GET", f"{cp}/api/webhooks?tenant_id={o.tenant}"),
        Probe("DELETE", f"{cp}/api/webhooks/{made['id']}"),
        Probe("POST", f"{cp}/api/webhooks", {"url": "http://127.0.0.1:9/x",
                                             "event_types": ["key_approved"],
                                             "tenant_id": o.tenant}),
    ], f"{cp}/api/webhooks")  # fmt: skip


async def budgets(http: Http, w: World, o: Party) -> Family:
    url = f"{w.stack.ai}/v1/budget/{o.tenant}"
    chat = {"model": "echo-1", "messages": [{"role": "user", "content": "hi"}]}
    return Family([
        Probe("GET", url),
        Probe("POST", url, {"tokens": 1}),
        Probe("DELETE", url),
        Probe("POST", f"{w.stack.ai}/v1/chat/completions", chat, {"x-tenant-id": o.tenant}),
        Probe("GET", f"{w.stack.edge}/api/isolation", headers={"X-Tenant-ID": o.tenant}),
    ], url)  # fmt: skip


async def mcp_servers(http: Http, w: World, o: Party) -> Family:
    ag = w.stack.agent
    made = await ok(http.call(
        "POST", f"{ag}/v1/mcp/servers", token=o.token,
        json_body={"name": unique("iso"), "url": w.mcp_url, "tenant_id": o.tenant,
                   "tools": [{"name": unique("tool"), "description": "isolation",
                              "inputSchema": {"type": "object"}}]},
    ))  # fmt: skip
    sid = made["id"]
    base = f"{ag}/v1/mcp/servers/{sid}"
    auth = {"mode": "optional", "client_secret": "intruder", "required_scopes": []}
    return Family([
        Probe("GET", f"{ag}/v1/mcp/servers", hidden=sid),
        Probe("GET", f"{ag}/v1/mcp/servers", headers={"x-tenant-id": o.tenant}),
        Probe("GET", base),
        Probe("GET", f"{base}/tools"),
        Probe("GET", f"{base}/auth"),
        Probe("PUT", f"{base}/auth", auth),
        Probe("DELETE", base),
        Probe("GET", f"{ag}/v1/mcp/tools", hidden=sid),
        Probe("POST", f"{ag}/v1/mcp/servers",
              {"name": unique("iso"), "url": w.mcp_url, "tenant_id": o.tenant}),
    ], base)  # fmt: skip


async def sessions(http: Http, w: World, o: Party) -> Family:
    ag = w.stack.agent
    body = {"tenant_id": o.tenant, "agent_id": "agent:iso", "tool_allowlist": ["echo"],
            "token_budget": 1000}  # fmt: skip
    made = await ok(http.call("POST", f"{ag}/v1/sessions", token=o.token, json_body=body))
    base = f"{ag}/v1/sessions/{made['id']}"
    elicit = await ok(http.call(
        "POST", f"{ag}/v1/elicit", token=o.token,
        json_body={"session_id": made["id"], "tenant_id": o.tenant, "tool_name": "echo",
                   "message": "ok?", "schema": {"type": "object"}},
    ))  # fmt: skip
    return Family([
        Probe("GET", f"{ag}/v1/sessions", hidden=made["id"]),
        Probe("GET", f"{ag}/v1/sessions", headers={"x-tenant-id": o.tenant}),
        Probe("GET", base),
        Probe("GET", f"{base}/tools"),
        Probe("POST", f"{base}/execute", {"server_id": o.server, "tool_name": "echo",
                                           "arguments": {"text": "i"}}),
        Probe("DELETE", base),
        Probe("POST", f"{ag}/v1/sessions", body),
        Probe("POST", f"{ag}/v1/elicit/{elicit['elicitation_id']}/respond", {"x": 1}),
        Probe("POST", f"{ag}/v1/elicit", {"session_id": made["id"], "tenant_id": o.tenant,
                                          "tool_name": "echo", "message": "i",
                                          "schema": {"type": "object"}}),
    ], base)  # fmt: skip


async def policies_and_approvals(http: Http, w: World, o: Party) -> Family:
    ag = w.stack.agent
    url = f"{ag}/v1/policies/{o.tenant}"
    policy = {"hitl_required_tools": ["word_count"], "max_concurrent_sessions": 100,
              "max_tool_calls_per_session": 1000, "allowed_network_hosts": []}  # fmt: skip
    await ok(http.call("PUT", url, token=o.token, json_body=policy))
    server = o.server
    held = await ok(http.call(
        "POST", f"{ag}/v1/mcp/tools/call", token=o.token,
        json_body={"server_id": server, "tool_name": "word_count", "tenant_id": o.tenant,
                   "arguments": {"text": unique("held")}},
    ), 202)  # fmt: skip
    approval = held["approval_id"]
    return Family([
        Probe("GET", url),
        Probe("PUT", url, {**policy, "hitl_required_tools": []}),
        Probe("GET", f"{ag}/v1/hitl/pending", hidden=approval),
        Probe("GET", f"{ag}/v1/hitl/pending", headers={"x-tenant-id": o.tenant}),
        Probe("POST", f"{ag}/v1/hitl/{approval}/approve"),
        Probe("POST", f"{ag}/v1/hitl/{approval}/deny"),
        Probe("POST", f"{ag}/v1/mcp/tools/call",
              {"server_id": server, "tool_name": "echo", "tenant_id": o.tenant,
               "arguments": {"text": "i"}}),
        # the owner's server in the intruder's own tenant: not found
        Probe("POST", f"{ag}/v1/mcp/tools/call",
              {"server_id": server, "tool_name": "echo", "arguments": {"text": "i"}}),
    ], f"{ag}/v1/hitl/pending")  # fmt: skip


async def a2a(http: Http, w: World, o: Party) -> Family:
    ag = w.stack.agent
    agent_id = unique("iso-agent")
    await ok(http.call(
        "POST", f"{ag}/v1/a2a/agents", token=o.token,
        json_body={"id": agent_id, "name": agent_id, "url": w.a2a_url, "tenant_id": o.tenant,
                   "capabilities": ["echo"], "description": "isolation"},
    ))  # fmt: skip
    sent = await ok(http.call(
        "POST", f"{ag}/v1/a2a/send", token=o.token,
        json_body={"from_agent": "agent:owner", "to_agent": agent_id, "tenant_id": o.tenant,
                   "message": {"text": "hi"}},
    ))  # fmt: skip
    return Family([
        Probe("GET", f"{ag}/v1/a2a/agents", hidden=agent_id),
        Probe("GET", f"{ag}/v1/a2a/tasks/{sent['task_id']}"),
        Probe("POST", f"{ag}/v1/a2a/agents",
              {"id": unique("iso-agent"), "name": "i", "url": w.a2a_url,
               "tenant_id": o.tenant, "capabilities": [], "description": "i"}),
        # another tenant's agent is no target: queued (202), never delivered (200)
        Probe("POST", f"{ag}/v1/a2a/send", {"from_agent": "agent:intruder", "to_agent": agent_id,
                                            "message": {"text": "i"}}, leak_status=200),
    ], f"{ag}/v1/a2a/agents")  # fmt: skip


FAMILIES: dict[str, Setup] = {
    "tenants": tenants, "ip-allowlists": ip_allowlists, "prompt-configs": prompt_configs,
    "branding": branding, "api-keys": api_keys, "rate-limits": rate_limits,
    "analytics-audit-export": analytics, "notifications": notifications,
    "webhooks": webhooks, "budgets-and-tenant-headers": budgets, "mcp-servers": mcp_servers,
    "sessions-and-elicitations": sessions, "policies-and-approvals": policies_and_approvals,
    "a2a": a2a,
}  # fmt: skip


def leaked(probe: Probe, reply: Reply) -> str | None:
    if reply.status >= 500:
        return f"{reply.status}"
    if probe.hidden is not None:
        if reply.status < 300 and probe.hidden in reply.text:
            return f"listed {probe.hidden}"
        return None
    if probe.leak_status is not None:
        return f"{reply.status}" if reply.status == probe.leak_status else None
    return f"{reply.status}" if reply.status < 400 else None


@pytest.mark.parametrize("credential", ["token", "key"])
@pytest.mark.parametrize("direction", ["acme->globex", "globex->acme"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_no_tenant_reaches_another_tenants_resources(
    world: World, http: Http, family: str, direction: str, credential: str
) -> None:
    intruder_name, owner_name = direction.split("->")
    owner, intruder = world.parties[owner_name], world.parties[intruder_name]
    made = await FAMILIES[family](http, world, owner)
    before = await http.call("GET", made.owner_view, token=owner.token)
    assert before.status == 200, before.text
    leaks = []
    for probe in made.probes:
        reply = await http.call(probe.method, probe.url, token=intruder.cred(credential),
                                json_body=probe.body, headers=probe.headers)  # fmt: skip
        found = leaked(probe, reply)
        if found:
            leaks.append(f"{probe.method} {probe.url}: {found} {reply.text[:200]}")
    after = await http.call("GET", made.owner_view, token=owner.token)
    assert leaks == [], f"{len(leaks)} of {len(made.probes)} requests leaked"
    assert after.status == 200 and _without_live_figures(after.body) == _without_live_figures(
        before.body
    ), "the intruder changed the owner's resource"


def _without_live_figures(body: Any) -> Any:
    """A resource as the owner sees it, without the counters that move with traffic."""
    if isinstance(body, dict):
        return {k: _without_live_figures(v) for k, v in body.items()
                if k not in ("rate_limit_usage", "request_count_24h", "current_traffic",
                             "data")}  # fmt: skip
    if isinstance(body, list):
        return [_without_live_figures(item) for item in body]
    return body


# --- the caches ----------------------------------------------------------------------------


async def _chat(http: Http, stack: Stack, cred: str, messages: list[dict[str, str]]) -> Reply:
    reply = await http.call("POST", f"{stack.ai}/v1/chat/completions", token=cred,
                            json_body={"model": "echo-1", "messages": messages})  # fmt: skip
    assert reply.status == 200, reply.text
    return reply


def rewordings(text: str) -> Iterator[str]:
    """`text` with other punctuation or case: other exact-cache keys, the same meaning (the
    embedding model is uncased; its similarity stays far above the threshold)."""
    for end in ("", "?", ".", "!", "??", "?!", "..", "!!", "?.", ".?", "...", "!?"):
        yield f"{text.rstrip('?.!')}{end}"
        yield f"{text.rstrip('?.!')}{end}".upper()


async def _cached_for_owner(
    http: Http, stack: Stack, owner: Party, asked: str, similar: str
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """In a conversation of its own, the owner's question `asked` is answered from both tiers
    of the cache (the answer is stored off the request path, so asked until it is). Returns
    that question and a rewording of `similar` nobody asked yet."""
    scope = {"role": "system", "content": unique("conversation")}

    def said(text: str) -> list[dict[str, str]]:
        return [scope, {"role": "user", "content": text}]

    assert (await _chat(http, stack, owner.token, said(asked))).headers["x-cache"] == "MISS"
    exact = await eventually(lambda: _chat(http, stack, owner.token, said(asked)),
                             lambda reply: reply.headers["x-cache"] == "HIT")  # fmt: skip
    assert exact.headers["x-cache"] == "HIT"
    unused = rewordings(similar)
    for text in unused:  # each rewording once: a miss stores it, a repeat would be a HIT
        reply = await _chat(http, stack, owner.token, said(text))
        if reply.headers["x-cache"] == "SEMANTIC_HIT":
            return said(asked), said(next(unused))
        await asyncio.sleep(0.2)
    raise AssertionError("the owner's question never came from the semantic cache")


@pytest.mark.parametrize("credential", ["token", "key"])
@pytest.mark.parametrize("direction", ["acme->globex", "globex->acme"])
async def test_the_ai_caches_answer_a_tenant_from_its_own_entries_only(
    world: World, http: Http, direction: str, credential: str
) -> None:
    """The intruder asks the owner's cached question, then (in another conversation, so that
    it cannot find an entry of its own) a rewording the owner's entries are similar to: both
    MISS, while the owner gets HIT and SEMANTIC_HIT for them."""
    intruder_name, owner_name = direction.split("->")
    owner, intruder = world.parties[owner_name], world.parties[intruder_name]
    stack, cred = world.stack, intruder.cred(credential)
    asked, _ = await _cached_for_owner(http, stack, owner, "How many days are in a leap year?",
                                       "How many days does a leap year have?")  # fmt: skip
    assert (await _chat(http, stack, cred, asked)).headers["x-cache"] == "MISS"
    _, similar = await _cached_for_owner(http, stack, owner, "How do I reset my password?",
                                         "How do I reset my password?")  # fmt: skip
    assert (await _chat(http, stack, cred, similar)).headers["x-cache"] == "MISS"


@pytest.mark.parametrize("credential", ["token", "key"])
async def test_the_tool_call_admission_cache_is_per_tenant(
    world: World, http: Http, credential: str
) -> None:
    """acme requires approval for `add`, globex does not: calls of both, interleaved on their
    own servers, are admitted each with its own tenant's policy, every time; and neither
    reaches the other's server."""
    ag = world.stack.agent
    acme, globex = world.parties["acme"], world.parties["globex"]
    servers = {"acme": acme.server, "globex": globex.server}
    for party, tools in ((acme, ["add"]), (globex, [])):
        policy = {"hitl_required_tools": tools, "max_concurrent_sessions": 100,
                  "max_tool_calls_per_session": 1000, "allowed_network_hosts": []}  # fmt: skip
        await ok(http.call("PUT", f"{ag}/v1/policies/{party.tenant}", token=party.token,
                           json_body=policy))  # fmt: skip
    url = f"{ag}/v1/mcp/tools/call"

    def add(server: str, party: Party, a: int) -> dict[str, Any]:
        return {"server_id": server, "tool_name": "add", "tenant_id": party.tenant,
                "arguments": {"a": a, "b": 1}}  # fmt: skip

    for a in range(5):
        held = await http.call("POST", url, token=acme.cred(credential),
                               json_body=add(servers["acme"], acme, a))  # fmt: skip
        served = await http.call("POST", url, token=globex.cred(credential),
                                 json_body=add(servers["globex"], globex, a))  # fmt: skip
        assert (held.status, served.status) == (202, 200), (held.text, served.text)
        for party, other in ((acme, "globex"), (globex, "acme")):
            crossed = await http.call("POST", url, token=party.cred(credential),
                                      json_body=add(servers[other], party, a))  # fmt: skip
            assert crossed.status == 404, crossed.text
