"""`strata config` end to end: a stack configured through the public APIs with at least one
resource of every kind, exported, applied to a fresh second stack, exported again — the two
files identical — and traffic behaving the same on both (a routed request through the edge, a
chat through the AI gateway, a tool call through the agent gateway); applying again changes
nothing; --prune removes a resource the file does not name.

The two stacks run one after the other at the same port offset (their URLs are then the
same, as a file's upstream nodes and discovery URLs name them), each from its own data
directory; the demo agent (MCP tools, an A2A agent) runs for both.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from shared_kit import STRATA, free_port, launch_stack, stop_stack

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]

OFFSET = 4800  # no other stack test's, nor one at a colliding distance from theirs
SECRETS = {  # the references the export writes, and their values on the second stack
    "STRATA_SETTINGS_PAGERDUTY_KEY": "pd-round-trip-0123456789",
    "STRATA_PROVIDER_RT_MANUAL_KEY": "rt-manual-provider-key-0001",
    "STRATA_EDGE_CONSUMER_RTUSER_KEY_AUTH_KEY": "rt-consumer-key-0001",
    "STRATA_MCP_DEMO_RT_CLIENT_SECRET": "rt-mcp-client-secret",
}
CONSUMER_KEY = SECRETS["STRATA_EDGE_CONSUMER_RTUSER_KEY_AUTH_KEY"]


class Api:
    """The stack's public APIs, as an operator calls them (master key, edge admin key)."""

    def __init__(self, http: aiohttp.ClientSession, urls: dict[str, str], secrets: dict[str, str]):
        self.http, self.urls, self.secrets = http, urls, secrets

    async def call(self, method: str, url: str, body: Any = None, admin: bool = False) -> Any:
        headers = (
            {"X-API-KEY": self.secrets["ADMIN_API_KEY"]}
            if admin
            else {"Authorization": f"Bearer {self.secrets['MASTER_KEY']}"}
        )
        async with self.http.request(method, url, json=body, headers=headers) as resp:
            answer = await resp.json(content_type=None)
            assert resp.status < 300, (method, url, resp.status, answer)
            return answer

    async def cp(self, method: str, path: str, body: Any = None) -> Any:
        return await self.call(method, self.urls["CP_URL"] + path, body)

    async def agent(self, method: str, path: str, body: Any = None) -> Any:
        return await self.call(method, self.urls["AGENT_URL"] + path, body)

    async def edge(self, method: str, path: str, body: Any = None) -> Any:
        return await self.call(method, f"{self.urls['ADMIN_URL']}/apisix/admin{path}", body, True)


async def configure(api: Api, demo_url: str, mock_url: str) -> None:
    """One resource of every kind the document holds, made call by call."""
    await api.cp("PUT", "/api/settings", {
        "platform_name": "Round Trip",
        "default_rate_limit": 250,
        "notification_config": {"pagerduty_key": SECRETS["STRATA_SETTINGS_PAGERDUTY_KEY"]},
    })  # fmt: skip
    saved = await api.cp("POST", "/api/providers", {
        "id": "rt-manual", "type": "openai_compatible", "display_name": "Round trip",
        "base_url": "http://127.0.0.1:9/v1", "model_patterns": ["rt-*"],
        "key_source": {"type": "manual", "value": SECRETS["STRATA_PROVIDER_RT_MANUAL_KEY"]},
        "enabled": False,
    })  # fmt: skip
    assert saved["status"] == "saved", saved
    await api.cp("POST", "/api/tenants", {"id": "initech", "name": "Initech", "plan": "free"})
    await api.cp("PATCH", "/api/tenants/initech", {"token_budget": 123456})
    await api.cp("PUT", "/api/rate-limits/initech", {"limit": 42, "window": "30s"})
    await api.cp("PUT", "/api/tenants/initech/ip-allowlist", {"cidrs": ["127.0.0.0/8"]})
    await api.cp("PUT", "/api/tenants/initech/prompt-config", {"system_prompt": "Be brief."})
    await api.cp("POST", "/api/tenants/initech/branding",
                 {"portal_title": "Initech Portal", "primary_color": "#AABBCC"})  # fmt: skip
    await api.agent("PUT", "/v1/policies/initech", {
        "max_concurrent_sessions": 5, "max_tool_calls_per_session": 50,
        "hitl_required_tools": ["word_count"], "allowed_network_hosts": ["example.com"],
    })  # fmt: skip
    await api.cp("PUT", "/api/notifications/preferences", {
        "tenant_id": "initech", "email": "ops@initech.example",
        "enabled_types": ["key_approved", "budget_warning"],
    })  # fmt: skip
    # the edge: a route through a service, a plugin config and an upstream, a consumer in a
    # group, a global rule, a proto
    await api.edge("PUT", "/protos/rt-proto", {
        "content": 'syntax = "proto3"; package rt; message Ping { string text = 1; }',
    })  # fmt: skip
    await api.edge("PUT", "/upstreams/rt-upstream", {
        "name": "round trip", "type": "roundrobin", "nodes": {mock_url: 1},
    })  # fmt: skip
    await api.edge("PUT", "/services/rt-service", {"name": "rt", "upstream_id": "rt-upstream"})
    await api.edge("PUT", "/plugin_configs/rt-headers", {
        "plugins": {"response-rewrite": {"headers": {"set": {"X-Round-Trip": "yes"}}}},
    })  # fmt: skip
    await api.edge("PUT", "/consumer_groups/rt-group", {
        "plugins": {"limit-count": {"count": 1000, "time_window": 60}},
    })  # fmt: skip
    await api.edge("PUT", "/consumers", {
        "username": "rtuser", "group_id": "rt-group",
        "plugins": {"key-auth": {"key": CONSUMER_KEY}},
    })  # fmt: skip
    await api.edge("PUT", "/routes/rt-route", {
        "uri": "/rt/*", "service_id": "rt-service", "plugin_config_id": "rt-headers",
        "plugins": {"key-auth": {}, "proxy-rewrite": {"regex_uri": ["^/rt/(.*)", "/$1"]}},
    })  # fmt: skip
    await api.edge(
        "PUT", "/global_rules/rt-rule", {"plugins": {"real-ip": {"source": "X-Real-IP"}}}
    )
    await api.cp("PUT", "/api/rate-limits/initech/routes/rt-route", {"limit": 7, "window": "10s"})
    # the agent gateway: the demo agent's MCP server (with its auth) and its A2A card
    await api.agent("POST", "/v1/mcp/servers", {
        "id": "demo-rt", "name": "demo", "url": f"{demo_url}/mcp", "tenant_id": "acme",
    })  # fmt: skip
    await api.agent("PUT", "/v1/mcp/servers/demo-rt/auth", {
        "mode": "permissive", "client_id": "rt-client",
        "token_endpoint": "http://127.0.0.1:9/token",
        "client_secret": SECRETS["STRATA_MCP_DEMO_RT_CLIENT_SECRET"], "required_scopes": ["tools"],
    })  # fmt: skip
    await api.agent("POST", "/v1/a2a/agents", {
        "id": "rt-echo", "name": "echo", "url": f"{demo_url}/a2a", "tenant_id": "acme",
        "capabilities": ["echo"], "description": "the demo agent's A2A echo",
    })  # fmt: skip
    await api.cp("POST", "/api/agents", {
        "agent_id": "agent:rt-planner", "tenant_id": "acme", "allowed_audiences": ["agent:rt-echo"],
        "allowed_tools": ["add"], "credential_ref": "rt-planner-client", "description": "rt",
    })  # fmt: skip


def strata(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STRATA, *args], capture_output=True, text=True, timeout=120, env=env or dict(os.environ)
    )


def stack_files(data: Path) -> tuple[dict[str, str], dict[str, str]]:
    urls = json.loads((data / "stack.json").read_text())["urls"]
    return urls, json.loads((data / "secrets.json").read_text())


async def until_routed(http: aiohttp.ClientSession, url: str) -> tuple[Any, ...]:
    """The route's answer once the edge's workers have its configuration (pushed to them
    over xDS a moment after the Admin API stored it): status, header, the path it reached."""
    for _ in range(300):
        async with http.get(url, headers={"apikey": CONSUMER_KEY}) as r:
            body = await r.json(content_type=None)
            if r.status != 404:
                return r.status, r.headers.get("X-Round-Trip"), body.get("path")
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} is not routed: {r.status} {body}")


async def traffic(http: aiohttp.ClientSession, data: Path) -> dict[str, Any]:
    """What a routed request, a chat and a tool call answer on the stack of `data`."""
    urls, secrets = stack_files(data)
    routed = await until_routed(http, f"{urls['PROXY_URL']}/rt/hello")
    async with http.get(f"{urls['PROXY_URL']}/rt/hello") as r:
        anonymous = r.status
    client = openai.AsyncOpenAI(base_url=f"{urls['AI_URL']}/v1", api_key=secrets["DEV_API_KEY"])
    chat = await client.chat.completions.create(
        model="echo-1", messages=[{"role": "user", "content": "round trip"}]
    )
    await client.close()
    call = {"server_id": "demo-rt", "tool_name": "add", "arguments": {"a": 2, "b": 3},
            "tenant_id": "acme"}  # fmt: skip
    headers = {"Authorization": f"Bearer {secrets['DEV_API_KEY']}"}
    async with http.post(f"{urls['AGENT_URL']}/v1/mcp/tools/call", json=call, headers=headers) as r:
        tool = (r.status, (await r.json()).get("result", {}).get("structuredContent"))
    return {
        "routed": routed,
        "anonymous": anonymous,
        "chat": "round trip" in (chat.choices[0].message.content or ""),
        "tool": tool,
    }


@pytest.fixture(scope="module")
def demo_url() -> Any:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidecars.demo", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


async def until_answers(http: aiohttp.ClientSession, url: str) -> None:
    for _ in range(1200):  # the demo agent imports the MCP SDK first: seconds on a busy machine
        try:
            async with http.get(url) as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} does not answer")


async def test_round_trip(tmp_path: Path, demo_url: str, http: aiohttp.ClientSession) -> None:
    env = {**os.environ, "SVC_AGENT_IDENTITY": "on"}
    await until_answers(http, f"{demo_url}/health")
    first, second = tmp_path / "first", tmp_path / "second"
    exported, again = tmp_path / "platform.yaml", tmp_path / "again.yaml"

    # the first stack, configured call by call, then exported
    proc, output = await launch_stack(first, OFFSET, env=env)
    try:
        urls, secrets = stack_files(first)
        mock = next(
            line.split()[-1].removeprefix("http://")
            for line in output.splitlines()
            if line.startswith("mock-backend") and "ready" in line
        )
        await configure(Api(http, urls, secrets), demo_url, mock)
        before = await traffic(http, first)
        done = strata("config", "export", "--data-dir", str(first), "-o", str(exported))
        assert done.returncode == 0, done.stderr
    finally:
        assert await stop_stack(proc) == 0
    assert before == {
        "routed": (200, "yes", "/hello"),
        "anonymous": 401,
        "chat": True,
        "tool": (200, {"result": 5}),
    }
    text = exported.read_text()
    for name, value in SECRETS.items():  # references, never the secrets themselves
        assert "${env:" + name + "}" in text and value not in text
    checked = strata("config", "validate", str(exported))
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # a fresh stack started with the file (`strata up --config`), its secrets from the env
    env |= SECRETS
    proc, output = await launch_stack(second, OFFSET, "--config", str(exported), env=env)
    try:
        assert "changes applied from" in output, output
        done = strata("config", "export", "--data-dir", str(second), "-o", str(again))
        assert done.returncode == 0, done.stderr
        assert again.read_text() == text  # byte for byte
        assert await traffic(http, second) == before

        # applying again changes nothing; diff says so with exit code 0
        repeat = strata("config", "apply", "--data-dir", str(second), str(exported), env=env)
        assert repeat.returncode == 0 and "0 changes applied" in repeat.stdout, repeat
        same = strata("config", "diff", "--data-dir", str(second), str(exported), env=env)
        assert same.returncode == 0, same.stdout + same.stderr

        # an extra resource: shown by diff (exit 2), removed by apply --prune
        _, secrets = stack_files(second)
        api = Api(http, stack_files(second)[0], secrets)
        await api.edge("PUT", "/upstreams/extra", {"type": "roundrobin", "nodes": {mock: 1}})
        prune = ("--data-dir", str(second), str(exported), "--prune")
        shown = strata("config", "diff", *prune, env=env)
        assert shown.returncode == 1, shown.stdout + shown.stderr
        assert "- delete edge.upstreams[id=extra]" in shown.stdout
        assert "1 change: 0 to create, 0 to update, 1 to delete" in shown.stdout
        pruned = strata("config", "apply", *prune, env=env)
        assert pruned.returncode == 0 and "- deleted edge.upstreams[id=extra]" in pruned.stdout
        url = f"{stack_files(second)[0]['ADMIN_URL']}/apisix/admin/upstreams/extra"
        async with http.get(url, headers={"X-API-KEY": secrets["ADMIN_API_KEY"]}) as resp:
            assert resp.status == 404

        # a reference that cannot be resolved: named, and nothing is changed
        missing = {k: v for k, v in env.items() if k != "STRATA_PROVIDER_RT_MANUAL_KEY"}
        unresolved = strata("config", "apply", "--data-dir", str(second), str(exported),
                            env=missing)  # fmt: skip
        assert unresolved.returncode == 1
        assert (
            "providers[10].key_source.value: environment variable STRATA_PROVIDER_RT_MANUAL_KEY "
            "is not set" in unresolved.stderr
        ), unresolved.stderr
        # a refusal stops apply at the resource, with the API's answer (the MCP server's URL
        # is a cloud metadata address: only the agent gateway refuses it); what came before it
        # is applied
        refused = tmp_path / "refused.yaml"
        refused.write_text(
            "apiVersion: strata/v1\nkind: Platform\n"
            "tenants: [{id: later, name: Later, plan: free}]\n"
            "edge:\n"
            "  upstreams: [{id: nowhere, nodes: {127.0.0.1:1: 1}, type: roundrobin}]\n"
            "  routes: [{id: later, uri: /later, upstream_id: nowhere}]\n"
            "mcp_servers: [{id: unlisted, tenant_id: later, name: x,"
            " url: 'http://169.254.169.254/mcp'}]\n"
        )
        stopped = strata("config", "apply", "--data-dir", str(second), str(refused), env=env)
        assert stopped.returncode == 1, stopped
        assert stopped.stderr.startswith(
            "apply stopped at create mcp_servers[id=unlisted]: POST /v1/mcp/servers: HTTP 400"
        ), stopped.stderr
        assert "(3 changes applied before it)" in stopped.stderr, stopped.stderr
        assert "+ created edge.routes[id=later]" in stopped.stdout
    finally:
        assert await stop_stack(proc) == 0
