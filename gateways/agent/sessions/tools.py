"""The tools a session may call, as `GET /v1/sessions/:id/tools` lists them: every tool of the
session tenant's MCP servers (the registry hash `{mcp}:servers`, owned by the registry) whose
name is in the session's allowlist. A server that is not `active` (quarantined after its tool
set changed) offers nothing until it is approved again."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from redis.asyncio import Redis

from gateways.agent.mcp import keys as mcp_keys
from gateways.agent.sessions.store import SessionRecord
from strata.agent.v1 import registry_pb2


def allowed_tools(session: SessionRecord, servers: dict[Any, Any]) -> list[registry_pb2.ServerTool]:
    """The session's tools among `servers` (raw registry hash values), ordered by server id
    then tool name."""
    allowlist = set(session.tool_allowlist)
    found = []
    for raw in servers.values():
        server = json.loads(raw)
        if server.get("tenant_id") != session.tenant_id:
            continue
        if server.get("status", "active") != "active":
            continue
        for tool in server.get("tools") or []:
            if tool.get("name") in allowlist:
                entry = {k: tool[k] for k in ("name", "description", "inputSchema") if k in tool}
                message = json_format.ParseDict(entry, registry_pb2.Tool())
                found.append(
                    registry_pb2.ServerTool(
                        tool=message, server_id=server["id"], server_name=server.get("name", "")
                    )
                )
    found.sort(key=lambda t: (t.server_id, t.tool.name))
    return found


async def session_tools(kv: Redis, session: SessionRecord) -> list[registry_pb2.ServerTool]:
    return allowed_tools(session, await kv.hgetall(mcp_keys.SERVERS))
