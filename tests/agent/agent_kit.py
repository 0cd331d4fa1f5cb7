"""What the agent gateway's tests share beyond fixtures: one HTTP call to a gateway, a
registration body, and a running gateway's registry servicer."""

from __future__ import annotations

from typing import Any

import aiohttp
from mcp_servers import UpstreamMcp

from gateways.agent.mcp.registry import McpRegistryServicer
from runtime.testing import Serving

REGISTRY = "strata.agent.v1.McpRegistryService"


def registry_of(svc: Serving) -> McpRegistryServicer:
    """The registry servicer of a running gateway (its forwarder, watch and pool)."""
    servicer: McpRegistryServicer = svc.running.definition.servicer(REGISTRY)
    return servicer


async def call(
    svc: Serving, method: str, path: str, headers: dict[str, str], body: Any = None
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
