"""What the agent gateway's tests share beyond fixtures: one HTTP call to a gateway, a
registration body, a running gateway's registry servicer, and the tool-call tests' steps
(register, open a session, execute in it, read the metrics), and agent gateway OS processes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from mcp_servers import UpstreamMcp
from prometheus_client.parser import text_string_to_metric_families
from shared_kit import MASTER_KEY, free_port, service_process

from gateways.agent.mcp.registry import McpRegistryServicer
from runtime.testing import Serving

REGISTRY = "strata.agent.v1.McpRegistryService"


def registry_of(svc: Serving) -> McpRegistryServicer:
    """The registry servicer of a running gateway (its forwarder, watch and pool)."""
    servicer: McpRegistryServicer = svc.running.definition.servicer(REGISTRY)
    return servicer


async def call(
    svc: Serving | Endpoint, method: str, path: str, headers: dict[str, str], body: Any = None
) -> tuple[int, Any]:
    """One HTTP request to the gateway's front door: (status, JSON body)."""
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, svc.http_url + path, json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


def server_body(up: UpstreamMcp, **fields: Any) -> dict[str, Any]:
    """A registration body for `up` in tenant `acme`, tools discovered unless given."""
    return {"name": up.name, "url": up.url, "tenant_id": "acme", **fields}


@dataclass(frozen=True)
class Endpoint:
    """A gateway process by its URL, shaped as the in-process `Serving` the helpers take."""

    http_url: str


async def metrics_of(svc: Any) -> str:
    async with aiohttp.ClientSession() as http, http.get(svc.http_url + "/metrics") as resp:
        return await resp.text()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the sample `name` with exactly `labels` (0 when absent)."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return float(found.value)
    return 0.0


async def registered(svc: Any, alice: dict[str, str], up: UpstreamMcp, **fields: Any) -> str:
    """Register `up` for tenant acme; its server id."""
    status, body = await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, **fields))
    assert status == 201, body
    return str(body["id"])


async def session(svc: Any, alice: dict[str, str], allow: list[str], budget: int = 10_000) -> str:
    """A new session of tenant acme allowed `allow`; its id."""
    body = {"tenant_id": "acme", "agent_id": "agent:tester", "tool_allowlist": allow,
            "token_budget": budget}  # fmt: skip
    status, made = await call(svc, "POST", "/v1/sessions", alice, body)
    assert status == 201, made
    return str(made["id"])


async def execute(
    svc: Any, alice: dict[str, str], sid: str, server: str, tool: str, arguments: Any
) -> tuple[int, Any]:
    """`POST /v1/sessions/{sid}/execute`: (status, body)."""
    body = {"server_id": server, "tool_name": tool, "arguments": arguments, "tenant_id": "acme"}
    return await call(svc, "POST", f"/v1/sessions/{sid}/execute", alice, body)


@asynccontextmanager
async def agent_processes(
    count: int, valkey_url: str, idp: str, **env: str
) -> AsyncIterator[list[Endpoint]]:
    """`count` agent gateway OS processes on one Valkey (`env` added), stopped after. No
    control plane listens on CONTROLPLANE_GRPC: their audit rows are dropped."""
    procs: list[asyncio.subprocess.Process] = []
    endpoints = []
    try:
        for _ in range(count):
            port = free_port()
            base = {
                **os.environ,
                "MASTER_KEY": MASTER_KEY,
                "REDIS_URL": valkey_url,
                "IDP_JWKS_URL": f"{idp}/protocol/openid-connect/certs",
                "IDP_ISSUER": idp,
                "HTTP_PORT": str(port),
                "GRPC_PORT": str(free_port()),
                "CONTROLPLANE_GRPC": f"127.0.0.1:{free_port()}",
                "AGENT_MCP_RELIST_SECS": "0",
                "ENVIRONMENT": "development",
                "LOG_LEVEL": "error",
            }
            procs.append(await service_process("gateways.agent", {**base, **env}, port))
            endpoints.append(Endpoint(f"http://127.0.0.1:{port}"))
        yield endpoints
    finally:
        for proc in procs:
            proc.terminate()
            await proc.wait()
