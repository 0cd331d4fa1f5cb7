"""`strata.agent.v1.McpRegistryService`: MCP servers, their tools and their auth configs.

- Register: `id` checked (`[A-Za-z0-9._:-]{1,128}`) or generated, `url` through the outbound
  guard, tools checked and fingerprinted (`fingerprint.py`); a server sent without tools has
  them listed from its upstream (`tools/list`). Record and tool owners are written in one
  atomic step (`store.py`): a tool name another server of the tenant serves → 409
  `tool_naming_collision`. Registering an existing id of the same tenant replaces it.
- Reads and deletes see the caller's tenant only (another tenant's server is not found);
  a platform administrator sees every tenant, or the one `x-tenant-id` names.
- Auth: `client_secret` sealed at rest, returned as `***REDACTED***`; a new config drops the
  cached upstream token.
- `GET .../tools?refresh=true` lists the upstream's tools now (rug-pull check, `tool_sets.py`);
  `POST .../approve-tools` (platform administrators) approves a quarantined server's new set.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from google.protobuf import json_format

from gateways.agent import changes
from gateways.agent.mcp import keys
from gateways.agent.mcp.auth_config import PlatformClient, redacted, stored_config
from gateways.agent.mcp.errors import ServerNotFound
from gateways.agent.mcp.fingerprint import Tool, fingerprint, normalize_tools
from gateways.agent.mcp.forwarder import McpForwarder
from gateways.agent.mcp.secrets import SecretBox
from gateways.agent.mcp.store import Record, ServerStore
from gateways.agent.mcp.tool_sets import ACTIVE, ToolSetWatch
from gateways.agent.mcp.upstream import PROTOCOLS, UpstreamPool
from gateways.agent.tenancy import acting_tenant, visible_tenant
from runtime.access import IDENTIFIER
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest
from runtime.outbound import check_configured_url
from runtime.stores.kv_errors import kv_unavailable
from strata.agent.v1 import registry_pb2 as pb
from strata.agent.v1 import registry_pb2_grpc

MAX_NAME = 256


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, error="invalid_request", field=field)


def server_message(record: Record) -> pb.McpServer:
    shown = {k: v for k, v in record.items() if k != "quarantine" or v is not None}
    message = pb.McpServer()
    json_format.ParseDict(shown, message, ignore_unknown_fields=True)
    return message


def _tool_messages(tools: list[Tool]) -> list[pb.Tool]:
    return [json_format.ParseDict(t, pb.Tool()) for t in tools]


class McpRegistryServicer(registry_pb2_grpc.McpRegistryServiceServicer):
    def __init__(
        self,
        store: ServerStore,
        forwarder: McpForwarder,
        pool: UpstreamPool,
        watch: ToolSetWatch,
        box: SecretBox,
        platform: PlatformClient,
        *,
        development: bool,
        now: Any,
    ) -> None:
        self.store = store
        self.forwarder = forwarder
        self.pool = pool
        self.watch = watch
        self.box = box
        self.platform = platform
        self.development = development
        self.now = now

    async def _visible(self, server_id: str, *, for_auth: bool = False) -> Record:
        if not IDENTIFIER.fullmatch(server_id):
            raise ServerNotFound.for_auth(server_id[:140]) if for_auth else ServerNotFound()
        record = await self.store.get(server_id)
        tenant = visible_tenant()
        if record is None or (tenant is not None and record["tenant_id"] != tenant):
            # A server of another tenant is not found (its id is not revealed).
            raise ServerNotFound.for_auth(server_id) if for_auth else ServerNotFound()
        return record

    async def _tenant_records(self) -> list[Record]:
        tenant = visible_tenant()
        return [r for r in await self.store.all() if tenant is None or r["tenant_id"] == tenant]

    async def ListServers(self, request: pb.ListServersRequest, context: ServicerContext) -> Any:
        records = await self._tenant_records()
        return pb.ListServersResponse(
            servers=[server_message(r) for r in records], total=len(records)
        )

    async def RegisterServer(
        self, request: pb.RegisterServerRequest, context: ServicerContext
    ) -> Any:
        server_id = request.id if request.HasField("id") else ""
        if request.HasField("id") and not IDENTIFIER.fullmatch(server_id):
            raise _invalid("id", "id must match [A-Za-z0-9._:-]{1,128}")
        server_id = server_id or f"mcp-{uuid.uuid4().hex[:16]}"
        name = request.name.strip()
        if not name or len(name) > MAX_NAME:
            raise _invalid("name", f"name is required (at most {MAX_NAME} characters)")
        protocol = request.protocol if request.HasField("protocol") else "auto"
        if protocol not in PROTOCOLS:
            raise _invalid("protocol", f"protocol must be one of {', '.join(PROTOCOLS)}")
        check_configured_url(request.url, development=self.development, field="url")
        record: Record = {
            "id": server_id,
            "name": name,
            "url": request.url,
            "tenant_id": acting_tenant(),
            "tools": [],
            "status": ACTIVE,
            "registered_at": self.now(),
            "fingerprint": "",
            "protocol": protocol,
            "quarantine": None,
        }
        if request.tools:
            raw = [
                json_format.MessageToDict(t, preserving_proto_field_name=True)
                for t in request.tools
            ]
            tools = normalize_tools(raw)
        else:  # discovered from the upstream (502 when it cannot be listed)
            tools = await self.forwarder.list_tools(record)
        record["tools"] = tools
        record["fingerprint"] = fingerprint(tools)
        if await self.store.put(record):
            await self.pool.forget_server(server_id)  # its URL or protocol may have changed
        return pb.RegisterServerResponse(id=server_id, tools_registered=len(tools))

    async def GetServer(self, request: pb.GetServerRequest, context: ServicerContext) -> Any:
        return pb.GetServerResponse(server=server_message(await self._visible(request.server_id)))

    async def DeleteServer(self, request: pb.DeleteServerRequest, context: ServicerContext) -> Any:
        record = await self._visible(request.server_id)
        if not await self.store.delete(record):
            raise ServerNotFound()
        await self.pool.forget_server(record["id"])
        return pb.DeleteServerResponse(removed=record["id"])

    async def GetServerAuth(
        self, request: pb.GetServerAuthRequest, context: ServicerContext
    ) -> Any:
        record = await self._visible(request.server_id, for_auth=True)
        with kv_unavailable():
            raw = await self.kv.get(keys.auth_config(record["id"]))
        view = redacted(json.loads(raw) if raw is not None else None)
        config = json_format.ParseDict(view, pb.AuthConfig())
        return pb.GetServerAuthResponse(server_id=record["id"], auth_config=config)

    async def PutServerAuth(
        self, request: pb.PutServerAuthRequest, context: ServicerContext
    ) -> Any:
        record = await self._visible(request.server_id, for_auth=True)
        server_id = record["id"]
        with kv_unavailable():
            raw = await self.kv.get(keys.auth_config(server_id))
        previous = json.loads(raw) if raw is not None else None
        stored = stored_config(
            request, previous, self.box, self.platform, development=self.development
        )
        stored["updated_at"] = self.now()
        with kv_unavailable():
            await changes.write(
                self.kv,
                "auth",
                put={keys.auth_config(server_id): json.dumps(stored)},
                delete=[keys.oauth_token(server_id)],
            )
        return pb.PutServerAuthResponse(status="ok", server_id=server_id, mode=stored["mode"])

    async def ListServerTools(
        self, request: pb.ListServerToolsRequest, context: ServicerContext
    ) -> Any:
        record = await self._visible(request.server_id)
        if request.refresh:
            record = await self.watch.refresh(record["id"])
        return pb.ListServerToolsResponse(tools=_tool_messages(record["tools"]))

    async def ListTools(self, request: pb.ListToolsRequest, context: ServicerContext) -> Any:
        entries = [
            pb.ServerTool(
                tool=json_format.ParseDict(tool, pb.Tool()),
                server_id=record["id"],
                server_name=record["name"],
            )
            for record in await self._tenant_records()
            for tool in record["tools"]
        ]
        return pb.ListToolsResponse(tools=entries, total=len(entries))

    async def ApproveServerTools(
        self, request: pb.ApproveServerToolsRequest, context: ServicerContext
    ) -> Any:
        server_id = request.server_id
        raw = await self.store.get_raw(server_id) if IDENTIFIER.fullmatch(server_id) else None
        if raw is None:
            raise ServerNotFound()
        seen = request.fingerprint if request.HasField("fingerprint") else None
        approved = await self.watch.approve(json.loads(raw), raw, seen)
        return pb.ApproveServerToolsResponse(
            id=server_id,
            status=approved["status"],
            fingerprint=approved["fingerprint"],
            tools_registered=len(approved["tools"]),
        )

    @property
    def kv(self) -> Any:
        return self.store.kv
