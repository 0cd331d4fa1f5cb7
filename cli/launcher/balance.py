"""The local edge in front of the gateways' replicas (`strata up --replicas N`).

Once the stack is up, the launcher writes, through the edge's Admin API as an operator would:
- the upstream `ai-gateway` (the reference `/v1/*` route's) with one node per AI gateway
  replica, and an upstream `agent-gateway` with one node per agent gateway replica; both
  round robin, passive health checks (a refused connection leaves a node out at once, as do
  repeated timeouts or 500s), and `retries` = nodes - 1, so a request whose connection failed,
  or an idempotent one whose node died under it, goes to another replica;
- the route `agent` (the agent gateway's own paths, longer than `/v1/*` so they win) to
  the agent gateway.

Every start writes them again (the replicas' ports follow `--port-offset` and `--replicas`);
with one replica, upstreams the launcher balanced before (label `managed-by: strata-up`)
are put back to their single node, and an operator's own upstream is left alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from cli.launcher.http import Http, HttpError

LABEL = {"managed-by": "strata-up"}
PASSIVE = {
    "unhealthy": {"http_statuses": [500], "http_failures": 3, "tcp_failures": 1, "timeouts": 3},
    "healthy": {"http_statuses": [200, 201, 202, 204], "successes": 3},
}
# The agent gateway's paths (gateways/agent http rules and /mcp): longer prefixes than `/v1/*`.
AGENT_URIS = [
    "/v1/sessions",
    "/v1/sessions/*",
    "/v1/mcp/*",
    "/v1/hitl/*",
    "/v1/a2a/*",
    "/v1/policies/*",
    "/v1/elicitation/*",
    "/mcp",
    "/mcp/*",
]
TIMEOUT_SECS = 30.0
Say = Callable[[str], None]


def nodes(urls: list[str]) -> dict[str, int]:
    """APISIX's `nodes` map: `host:port` → weight 1."""
    return {f"{urlsplit(u).hostname}:{urlsplit(u).port}": 1 for u in urls}


def upstream(name: str, urls: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "type": "roundrobin",
        "nodes": nodes(urls),
        "retries": len(urls) - 1,
        "checks": {"passive": PASSIVE},
        "labels": LABEL,
    }


def resources(ai: list[str], agent: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """What the edge gets for these replicas: (Admin API path, body)."""
    return [
        ("upstreams/ai-gateway", upstream("AI gateway", ai)),
        ("upstreams/agent-gateway", upstream("agent gateway", agent)),
        (
            "routes/agent",
            {
                "name": "agent gateway",
                "uris": AGENT_URIS,
                "upstream_id": "agent-gateway",
                "labels": LABEL,
            },
        ),
    ]


async def balance(
    admin_url: str, admin_key: str, ai: list[str], agent: list[str], say: Say
) -> bool:
    """Point the edge at every replica; False (after saying why) when the Admin API refused."""
    headers = {"X-API-KEY": admin_key}
    async with Http(TIMEOUT_SECS, headers) as http:
        if len(ai) == 1 and not await _balanced_before(http, admin_url):
            return True  # one replica, nothing of ours to undo: the reference route stands
        for path, body in resources(ai, agent):
            try:
                status, text = await http.request("PUT", f"{admin_url}/apisix/admin/{path}", body)
            except HttpError as exc:
                say(f"{'edge':<14} {path}: {exc or type(exc).__name__}")
                return False
            if status not in (200, 201):
                say(f"{'edge':<14} {path} refused ({status}): {text}")
                return False
    say(
        f"{'edge':<14} balances {len(ai)} AI gateway and {len(agent)} agent gateway "
        "replicas (upstreams ai-gateway, agent-gateway; route agent)"
    )
    return True


async def _balanced_before(http: Http, admin_url: str) -> bool:
    try:
        status, text = await http.request("GET", f"{admin_url}/apisix/admin/upstreams/ai-gateway")
        if status != 200:
            return False
        body = json.loads(text)
    except (*HttpError, ValueError):
        return False  # nothing to undo that can be seen: the reference route stands
    value = body.get("value", {}) if isinstance(body, dict) else {}
    return bool(value.get("labels") == LABEL)
