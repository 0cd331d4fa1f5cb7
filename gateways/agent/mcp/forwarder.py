"""`McpForwarder`: a tool call or a tool listing sent to a registered server's upstream, with
its per-server auth, over a shared client session (`upstream.py`).

    result = await forwarder.call_tool(server, "echo", {"text": "hi"}, timeout=30)
    result.result      # the MCP CallToolResult as JSON: {content, structuredContent?, isError}
    tools = await forwarder.list_tools(server)   # [{name, description, inputSchema}], by name

- An upstream tool error (`isError: true`) is a result, never an exception.
- The upstream forgetting the session (HTTP 404 on a known `Mcp-Session-Id`) reopens the
  session and sends the request once more (the upstream never ran it). An upstream 401 on a
  cached token drops the token and tries once more with a new one.
- Anything else that goes wrong upstream (unreachable, timeout, HTTP error, JSON-RPC error,
  garbage) raises McpUpstreamError (502); strict auth without a token UpstreamAuthFailed (502).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from gateways.agent.mcp import tools_call
from gateways.agent.mcp.errors import McpUpstreamError
from gateways.agent.mcp.fingerprint import Tool, normalize_tools
from gateways.agent.mcp.oauth import OAuthTokens
from gateways.agent.mcp.upstream import (
    CallState,
    Connection,
    UpstreamPool,
    bind_call,
    unbind_call,
)
from runtime.errors import InvalidRequest

if TYPE_CHECKING:  # the SDK is imported with the first session (`upstream.py`)
    from mcp.client.session import ClientSession
    from mcp.shared.exceptions import MCPError

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_LIST_PAGES = 100
_INVALID_REQUEST = -32600
_CONNECTION_CLOSED = -32000  # the SDK's code when the transport ended under a request


@dataclass(frozen=True)
class ToolResult:
    """An upstream tool's answer: `result` is the spec's `result` (the MCP CallToolResult as
    JSON), `is_error` its `isError` (a tool error, answered as a result), `latency_ms` the
    upstream time."""

    result: dict[str, Any]
    is_error: bool
    latency_ms: int


def _session_forgotten(exc: MCPError, state: CallState) -> bool:
    return exc.code == _INVALID_REQUEST and 404 in state.statuses


class McpForwarder:
    def __init__(self, pool: UpstreamPool, tokens: OAuthTokens, *, max_result_bytes: int) -> None:
        self.pool = pool
        self.tokens = tokens
        self.max_result_bytes = max_result_bytes  # a larger tool result is a 502

    async def call_tool(
        self,
        server: dict[str, Any],
        tool_name: str,
        arguments: dict[str, Any],
        *,
        headers: dict[str, str] | None = None,
        timeout: float,  # noqa: ASYNC109  (the whole exchange's)
        auth: Mapping[str, str] | None = None,
    ) -> ToolResult:
        """`auth`: the upstream's auth headers when the caller already has them
        (`OAuthTokens.headers_from`), else they are looked up here."""
        server_id = server["id"]
        if auth is None:
            auth = await self.tokens.headers_for(server_id)
        retried = False
        while True:
            conn = await self._connection(server, auth)
            started = time.perf_counter()
            try:
                result = await tools_call.call_tool(
                    conn,
                    tool_name,
                    arguments,
                    {**(headers or {}), **auth},
                    timeout=timeout,
                    max_bytes=self.max_result_bytes,
                    server_id=server_id,
                )
            except tools_call.SessionForgotten:
                if retried:
                    raise McpUpstreamError(
                        f"MCP server {server_id!r} forgot its session again"
                    ) from None
                log.info("MCP server %s forgot its session: reconnecting", server_id)
                await self.pool.discard(conn)
                retried = True
                continue
            except tools_call.Unauthorized:
                if retried or not auth:
                    raise McpUpstreamError(
                        f"MCP server {server_id!r} refused the gateway's credentials (401)"
                    ) from None
                await self.tokens.forget(server_id)
                auth = await self.tokens.headers_for(server_id)
                retried = True
                continue
            latency_ms = round((time.perf_counter() - started) * 1000)
            is_error = result.get("isError") is True
            shown: dict[str, Any] = {"content": result["content"]}
            if isinstance(result.get("structuredContent"), dict):
                shown["structuredContent"] = result["structuredContent"]
            shown["isError"] = is_error
            return ToolResult(result=shown, is_error=is_error, latency_ms=latency_ms)

    async def list_tools(
        self,
        server: dict[str, Any],
        *,
        timeout: float | None = None,  # noqa: ASYNC109  (as call_tool's)
    ) -> list[Tool]:
        """The upstream's tools (every page), checked and in canonical shape, by name. A
        listing that is not a valid tool set (bad names, schemas) is a 502."""
        limit = timeout if timeout is not None else self.pool.timeout

        import mcp_types as types  # loaded with the session already

        async def listing(session: ClientSession) -> list[dict[str, Any]]:
            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            for _ in range(MAX_LIST_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(t.model_dump(by_alias=True, mode="json") for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools
            raise McpUpstreamError(f"tools/list did not end after {MAX_LIST_PAGES} pages")

        raw = await self._send(server, listing, {}, limit)
        try:
            return normalize_tools(raw, field="upstream tools")
        except InvalidRequest as exc:
            message = f"upstream tools/list is not a valid tool set: {exc.message}"
            raise McpUpstreamError(message) from exc

    async def _send(
        self,
        server: Mapping[str, Any],
        operation: Callable[[ClientSession], Awaitable[T]],
        headers: Mapping[str, str],
        limit: float,
    ) -> T:
        server_id = server["id"]
        auth = await self.tokens.headers_for(server_id)
        retried = False
        while True:
            state = CallState(headers={**headers, **auth})
            conn = await self._connection(server, auth)
            MCPError, failed = _sdk_errors()
            assert conn.client is not None
            token = bind_call(state)
            try:
                async with asyncio.timeout(limit + 1):  # the SDK's own timeout comes first
                    return await operation(conn.client.session)
            except MCPError as exc:
                if not retried and _session_forgotten(exc, state):
                    log.info("MCP server %s forgot its session: reconnecting", server_id)
                    await self.pool.discard(conn)
                    retried = True
                    continue
                if not retried and auth and 401 in state.statuses:
                    await self.tokens.forget(server_id)
                    auth = await self.tokens.headers_for(server_id)
                    retried = True
                    continue
                if exc.code == _CONNECTION_CLOSED:
                    await self.pool.discard(conn)
                    raise McpUpstreamError(
                        f"MCP server {server_id!r} is unreachable (connection closed)"
                    ) from exc
                raise McpUpstreamError(
                    f"MCP server {server_id!r} answered error {exc.code}: {exc.message}",
                    upstream_code=exc.code,
                ) from exc
            except McpUpstreamError:
                raise
            except failed as exc:
                await self.pool.discard(conn)
                raise self._failure(server_id, "request failed", exc) from exc
            except Exception as exc:  # a dead session raises what its transport raised
                await self.pool.discard(conn)
                raise self._failure(server_id, "request failed", exc) from exc
            finally:
                unbind_call(token)

    async def _connection(self, server: Mapping[str, Any], auth: Mapping[str, str]) -> Connection:
        """The server's open session (handshake on first use); 502 when it cannot be opened,
        400 when the outbound guard now refuses its URL."""
        try:
            return await self.pool.get(server, auth)
        except _session_errors() as exc:  # evaluated only when something was raised
            raise self._failure(server["id"], "could not open an MCP session", exc) from exc
        except Exception as exc:  # the SDK's handshake raises several unrelated types
            if isinstance(exc, InvalidRequest):  # the outbound guard refused the URL
                raise
            raise self._failure(server["id"], "could not open an MCP session", exc) from exc

    @staticmethod
    def _failure(server_id: str, what: str, exc: BaseException) -> McpUpstreamError:
        reason = "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__
        MCPError, _ = _sdk_errors()
        from pydantic import ValidationError  # the SDK's models', loaded with it

        detail = f": {exc}" if isinstance(exc, MCPError | ValidationError) else ""
        return McpUpstreamError(f"MCP server {server_id!r}: {what} ({reason}){detail[:300]}")


def _sdk_errors() -> tuple[type[MCPError], tuple[type[BaseException], ...]]:
    """The SDK's error class, and what a failed request through a session raises besides it
    (imported here: the SDK is loaded with the first session, `upstream.py`)."""
    import httpx2
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    return MCPError, (TimeoutError, ValidationError, httpx2.HTTPError, OSError)


def _session_errors() -> tuple[type[BaseException], ...]:
    """What opening a session raises when the upstream fails it."""
    mcp_error, failed = _sdk_errors()
    return (mcp_error, *failed)
