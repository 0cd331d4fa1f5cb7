"""The gateway's own MCP endpoint (`/mcp`, streamable HTTP, both protocol eras): a standard
MCP client sees the tools of its tenant's registered servers and calls them through the
gateway.

A small JSON-RPC handler rather than the SDK's server: the SDK serves ASGI (Starlette), and
the gateway's front door is aiohttp. Every answer is `application/json` (a client must accept
JSON or SSE). What little state there is lives in the key-value store, so any replica answers
any request:
- 2025-11-25: `initialize` negotiates (the client's version when it is a handshake-era one
  this endpoint knows, else 2025-11-25) and hands out an `Mcp-Session-Id`, kept in
  `mcp:endpoint-session:{id}` (its tenant and Strata session binding) for
  AGENT_MCP_SESSION_TTL_SECS after its last use. A request carrying an id that is unknown,
  expired, ended or another tenant's is 404 with a JSON-RPC error (the spec: the client must
  initialize again); `DELETE /mcp` with the id ends the session (204). Requests without an id
  are served too (stateless clients); `notifications/*` → 202.
- 2026-07-28: a request whose `MCP-Protocol-Version` is 2026-07-28 needs no handshake;
  `server/discover` answers; results carry `resultType` (and `ttlMs` / `cacheScope` on
  lists).
- `GET /mcp` is 405: the endpoint sends no server-initiated messages, and the spec lets a
  server that offers no SSE stream answer 405 (2025-11-25; 2026-07-28 has no GET stream).
Methods: `ping`, `tools/list`, `tools/call`; others → -32601. The caller authenticates as on
every agent gateway endpoint (bearer JWT or master key; tenant as `runtime.access` decides
for tenant-scoped RPCs); a 401 names the OAuth protected resource metadata, so an MCP client
can log its user in (`protected_resource.py`). A client bound to a Strata session (header
`X-Strata-Session-Id`, or `?session_id=` on the endpoint URL; given at `initialize`, the binding
holds for the MCP session) sees exactly the tools its session may call, and its calls run in
that session (allowlist, limits, HITL, budget, counters); without one it sees every tool of its
tenant.
`tools/call` runs the tool-call pipeline (`tool_calls.py`, `call_for_mcp`); a refused or
failed call is a tool error (`isError: true`) naming why — a call held for approval names the
approval — and an unknown tool is -32602.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateways.agent.admission import admit_session
from gateways.agent.mcp import keys
from gateways.agent.mcp.protected_resource import ProtectedResource
from gateways.agent.mcp.store import ServerStore
from gateways.agent.sessions.store import SessionRecord
from gateways.agent.tenancy import DEFAULT_TENANT
from runtime import json_codec
from runtime.access import IDENTIFIER, RpcRule, authorize
from runtime.auth import Authenticator
from runtime.config import VERSION
from runtime.errors import StrataError, Unauthenticated
from runtime.stores.kv_errors import kv_unavailable
from strata.access.v1.access_pb2 import Access

log = logging.getLogger(__name__)

PATH = "/mcp"
HANDSHAKE_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
SERVER_INFO = {"name": "strata-agent-gateway", "version": VERSION}
CAPABILITIES: dict[str, Any] = {"tools": {"listChanged": False}}
_RULE = RpcRule("mcp", Access.ACCESS_TENANT)

# (tenant, server id, tool name, arguments, session id) → the spec's `result` (CallToolResult)
CallFn = Callable[[str, str, str, dict[str, Any], str | None], Awaitable[dict[str, Any]]]
SESSION_HEADER = "x-strata-session-id"
MCP_SESSION_HEADER = "mcp-session-id"

# The endpoint in the agent gateway's OpenAPI document (runtime.openapi): JSON-RPC over HTTP,
# which OpenAPI describes as one body and one answer per request.
_JSON_RPC = {
    "type": "object",
    "required": ["jsonrpc"],
    "properties": {"jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer", "null"]},
                   "method": {"type": "string"}, "params": {"type": "object"}},
}  # fmt: skip
_MCP_SECURITY: list[dict[str, list[str]]] = [
    {"bearerJwt": []},
    {"masterKey": []},
    {"issuedKey": []},
]
_MCP_HEADERS = [
    {"name": "Mcp-Session-Id", "in": "header", "schema": {"type": "string"},
     "description": "the MCP session `initialize` handed out (2025-11-25)"},
    {"name": "MCP-Protocol-Version", "in": "header", "schema": {"type": "string"}},
    {"name": "X-Strata-Session-Id", "in": "header", "schema": {"type": "string"},
     "description": "bind the client to a Strata session (its tools and limits)"},
]  # fmt: skip


def _mcp_answer(description: str) -> dict[str, Any]:
    error = {"$ref": "#/components/schemas/Error"}  # the gateway's error body
    return {"description": description, "content": {"application/json": {"schema": error}}}


OPENAPI_PATHS: dict[str, dict[str, Any]] = {
    PATH: {
        "post": {
            "operationId": "mcp",
            "summary": "The MCP endpoint (streamable HTTP): the tenant's registered tools",
            "description": "One JSON-RPC 2.0 message per request: `initialize`, `ping`, "
            "`tools/list`, `tools/call` (`server/discover` in 2026-07-28); notifications are "
            "202. Errors of the protocol are JSON-RPC errors; a 401 carries a "
            "`WWW-Authenticate` challenge naming the protected resource metadata (RFC 9728)."
            "\n\nAccess: a verified identity acting for its tenant (`ACCESS_TENANT`).",
            "tags": ["mcp"],
            "x-strata-access": "ACCESS_TENANT",
            "security": _MCP_SECURITY,
            "parameters": _MCP_HEADERS,
            "requestBody": {"required": True,
                            "content": {"application/json": {"schema": _JSON_RPC}}},
            "responses": {
                "200": {"description": "the JSON-RPC answer",
                        "content": {"application/json": {"schema": _JSON_RPC}}},
                "202": {"description": "a notification, accepted"},
                "400": {"description": "not one JSON-RPC 2.0 message",
                        "content": {"application/json": {"schema": _JSON_RPC}}},
                "401": _mcp_answer("missing or invalid credentials (with a challenge)"),
                "403": _mcp_answer("another tenant named"),
                "404": {"description": "unknown or ended MCP session: initialize again",
                        "content": {"application/json": {"schema": _JSON_RPC}}},
            },
        },
        "get": {
            "operationId": "mcpStream",
            "summary": "No server-initiated stream: 405",
            "tags": ["mcp"],
            "x-strata-access": "ACCESS_PUBLIC",
            "security": [],
            "responses": {"405": {"description": "the endpoint offers no SSE stream"}},
        },
        "delete": {
            "operationId": "mcpEndSession",
            "summary": "End an MCP session",
            "tags": ["mcp"],
            "x-strata-access": "ACCESS_TENANT",
            "security": _MCP_SECURITY,
            "parameters": _MCP_HEADERS[:1],
            "responses": {
                "204": {"description": "ended"},
                "400": {"description": "no Mcp-Session-Id",
                        "content": {"application/json": {"schema": _JSON_RPC}}},
                "401": _mcp_answer("missing or invalid credentials (with a challenge)"),
                "404": {"description": "not a session of this tenant",
                        "content": {"application/json": {"schema": _JSON_RPC}}},
            },
        },
    },
    **{
        path: {"get": {
            "operationId": name,
            "summary": "How MCP clients log in: OAuth protected resource metadata (RFC 9728)",
            "tags": ["mcp"],
            "x-strata-access": "ACCESS_PUBLIC",
            "security": [],
            "responses": {"200": {"description": "the metadata", "content": {
                "application/json": {"schema": {
                    "type": "object",
                    "required": ["resource", "authorization_servers"],
                    "properties": {
                        "resource": {"type": "string"},
                        "authorization_servers": {"type": "array", "items": {"type": "string"}},
                        "scopes_supported": {"type": "array", "items": {"type": "string"}},
                        "bearer_methods_supported": {"type": "array",
                                                     "items": {"type": "string"}},
                        "resource_name": {"type": "string"},
                    },
                }}}}},
        }}
        for path, name in (
            ("/.well-known/oauth-protected-resource", "protectedResource"),
            (f"/.well-known/oauth-protected-resource{PATH}", "protectedResourceMcp"),
        )
    },
}  # fmt: skip


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RpcFailure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SessionGone(Exception):
    """The request's `Mcp-Session-Id` names no live session of the caller's tenant."""


class McpEndpoint:
    """`call` runs a `tools/call` (the tool-call pipeline's `call_for_mcp`); `session_ttl_secs`
    is how long an MCP session lives after its last request; `authorization_server` (the
    IdP's issuer) and `public_url` (None: each request's own origin) go into the OAuth
    protected resource metadata."""

    def __init__(
        self,
        authenticator: Authenticator,
        store: ServerStore,
        call: CallFn,
        *,
        session_ttl_secs: int,
        authorization_server: str,
        public_url: str | None,
    ) -> None:
        self.authenticator = authenticator
        self.store = store
        self.call = call
        self.session_ttl_secs = session_ttl_secs
        self.resource = ProtectedResource(PATH, authorization_server, public_url)

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", PATH, self.handle),
            ("GET", PATH, _no_stream),
            ("DELETE", PATH, self.end),
            *self.resource.routes(),
        ]

    async def _caller(self, request: web.Request) -> tuple[dict[str, str], str]:
        headers = {k.lower(): v for k, v in request.headers.items()}
        principal = await self.authenticator.authenticate(headers)
        caller = authorize(_RULE, principal, headers)
        return headers, caller.tenant_id or DEFAULT_TENANT

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            headers, tenant = await self._caller(request)
        except Unauthenticated as exc:
            return self.resource.challenge(request, exc)
        session_id = headers.get(SESSION_HEADER) or request.query.get("session_id")
        if "content-type" in headers and not json_codec.is_json_media_type(request.content_type):
            # MCP's Streamable HTTP transport posts JSON only (the official SDK's server: 415)
            message = f"unsupported Content-Type {request.content_type!r}: send application/json"
            return _rpc_error(None, -32600, message, status=415)
        try:  # the codec's limits: no deep nesting, no lone surrogates
            message = json_codec.loads(await request.read())
        except ValueError as exc:
            return _rpc_error(None, -32700, f"parse error: {exc}", status=400)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _rpc_error(None, -32600, "one JSON-RPC 2.0 message per request", status=400)
        mcp_session = headers.get(MCP_SESSION_HEADER)
        initialize = message.get("method") == "initialize"
        if mcp_session is not None and not initialize:
            try:
                bound = await self._mcp_session(mcp_session, tenant)
            except SessionGone:
                return _rpc_error(None, -32600, "Session not found", status=404)
            session_id = session_id or bound or None
        if "id" not in message:  # a notification (initialized, cancelled): nothing to answer
            return web.Response(status=202)
        modern = headers.get("mcp-protocol-version") == MODERN
        rpc_id = message["id"]
        try:
            session = await self._session(tenant, session_id)
            result = await self._dispatch(tenant, session, message, modern)
        except RpcFailure as exc:
            return _rpc_error(rpc_id, exc.code, exc.message)
        reply = web.json_response({"jsonrpc": "2.0", "id": rpc_id, "result": result})
        if initialize and not modern:
            reply.headers["Mcp-Session-Id"] = await self._open(tenant, session, result)
        return reply

    async def end(self, request: web.Request) -> web.StreamResponse:
        """`DELETE /mcp`: the client ends its MCP session (204; 404 when it is not one)."""
        try:
            headers, tenant = await self._caller(request)
        except Unauthenticated as exc:
            return self.resource.challenge(request, exc)
        mcp_session = headers.get(MCP_SESSION_HEADER)
        if mcp_session is None:
            return _rpc_error(None, -32600, "Mcp-Session-Id is required", status=400)
        try:
            await self._mcp_session(mcp_session, tenant)
        except SessionGone:
            return _rpc_error(None, -32600, "Session not found", status=404)
        with kv_unavailable():
            await self.store.kv.delete(keys.endpoint_session(mcp_session))
        return web.Response(status=204)

    async def _open(self, tenant: str, session: SessionRecord | None, result: Any) -> str:
        """A new MCP session: its id, kept with the tenant and the Strata session binding."""
        mcp_session = uuid.uuid4().hex
        record = {"tenant_id": tenant, "session_id": session.id if session else "",
                  "protocol_version": result["protocolVersion"]}  # fmt: skip
        with kv_unavailable():
            await self.store.kv.set(
                keys.endpoint_session(mcp_session), json.dumps(record), ex=self.session_ttl_secs
            )
        return mcp_session

    async def _mcp_session(self, mcp_session: str, tenant: str) -> str:
        """The Strata session an MCP session is bound to ('' for none), its life extended;
        SessionGone when the id is not a live session of this tenant."""
        if not IDENTIFIER.fullmatch(mcp_session):
            raise SessionGone
        with kv_unavailable():
            raw = await self.store.kv.getex(
                keys.endpoint_session(mcp_session), ex=self.session_ttl_secs
            )
        record = json.loads(raw) if raw is not None else None
        if record is None or record.get("tenant_id") != tenant:
            raise SessionGone
        return str(record.get("session_id") or "")

    async def _session(self, tenant: str, session_id: str | None) -> SessionRecord | None:
        """The session the client is bound to (of its tenant, active), or None."""
        if session_id is None:
            return None
        if not IDENTIFIER.fullmatch(session_id):
            raise RpcFailure(-32602, "the session id must match [A-Za-z0-9._:-]{1,128}")
        try:
            return await admit_session(self.store.kv, session_id, tenant)
        except StrataError as exc:
            raise RpcFailure(-32602, f"session {session_id}: {exc.message}") from None

    async def _dispatch(
        self, tenant: str, session: SessionRecord | None, message: dict[str, Any], modern: bool
    ) -> Any:
        method = message.get("method")
        params = message.get("params") or {}
        if not isinstance(params, dict):
            raise RpcFailure(-32602, "params must be an object")
        if method == "initialize" and not modern:
            asked = params.get("protocolVersion")
            version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
            return {"protocolVersion": version, "capabilities": CAPABILITIES,
                    "serverInfo": SERVER_INFO}  # fmt: skip
        if method == "server/discover":
            return _modern({"supportedVersions": [MODERN], "capabilities": CAPABILITIES,
                            "serverInfo": SERVER_INFO}, cacheable=True)  # fmt: skip
        if method == "ping":
            return _modern({}) if modern else {}
        if method == "tools/list":
            tools = await self._tools(tenant, session)
            return _modern({"tools": tools}, cacheable=True) if modern else {"tools": tools}
        if method == "tools/call":
            result = await self._call(tenant, session, params)
            return _modern(result) if modern else result
        raise RpcFailure(-32601, f"method {method!r} not found")

    async def _tools(self, tenant: str, session: SessionRecord | None) -> list[dict[str, Any]]:
        records = [r for r in await self.store.all() if r["tenant_id"] == tenant]
        allowed = None if session is None else set(session.tool_allowlist)
        return [
            t
            for r in records
            if r.get("status") != "quarantined"
            for t in r["tools"]
            if allowed is None or t["name"] in allowed
        ]

    async def _call(
        self, tenant: str, session: SessionRecord | None, params: dict[str, Any]
    ) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise RpcFailure(-32602, "tools/call needs a name and an arguments object")
        with kv_unavailable():
            owner = await self.store.kv.hget(keys.tool_owners(tenant), name)
        if owner is None:
            raise RpcFailure(-32602, f"unknown tool {name!r}")
        server_id = owner.decode() if isinstance(owner, bytes) else str(owner)
        try:
            return await self.call(
                tenant, server_id, name, arguments, session.id if session else None
            )
        except StrataError as exc:  # refused or failed: the model reads why, as a tool error
            return _tool_error(exc)


def _modern(result: dict[str, Any], *, cacheable: bool = False) -> dict[str, Any]:
    extra: dict[str, Any] = {"resultType": "complete"}
    if cacheable:
        extra |= {"ttlMs": 0, "cacheScope": "private"}
    return {**result, **extra}


def _tool_error(exc: StrataError) -> dict[str, Any]:
    text = json.dumps(exc.body(), ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _rpc_error(rpc_id: Any, code: int, message: str, *, status: int = 200) -> web.Response:
    body = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
    return web.json_response(body, status=status)


async def _no_stream(request: web.Request) -> web.StreamResponse:
    """No server-initiated messages: the GET stream is not offered (spec: 405)."""
    return web.Response(status=405, headers={"Allow": "POST, DELETE"})
