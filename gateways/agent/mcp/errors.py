"""The MCP side's errors, in the spec's shapes (Errors table), and the store's failures as 503.

ServerNotFound          404  {error:'Server not found'}            get, delete, tools
ServerNotFound.for_auth 404  {error:'server_not_found', message}   auth GET/PUT, tool calls
ToolNamingCollision     409  {error:'tool_naming_collision', collisions:[names], message,
                              servers:{tool: owning server id}}
ToolSetQuarantined      409  {error:'tool_set_quarantined', message, server_id, fingerprint,
                              pending_fingerprint}   the tool set changed: awaiting approval
UpstreamAuthFailed      502  {error:'upstream_auth_failed', message}   strict mode only
McpUpstreamError        502  {error:'upstream_error', message}   transport or protocol failure
store_unavailable       503  the key-value store is unreachable (fail closed)
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc

from runtime.errors import AlreadyExists, NotFound, StrataError, UpstreamError


class ServerNotFound(NotFound):
    def __init__(self, server_id: str = "", *, error: str | None = None) -> None:
        if error is None:
            super().__init__("Server not found")
        else:
            super().__init__(f"MCP server {server_id!r} is not registered", error=error)

    @classmethod
    def for_auth(cls, server_id: str) -> ServerNotFound:
        """The auth endpoints' and tool calls' shape: `{error:'server_not_found', message}`."""
        return cls(server_id, error="server_not_found")


class ToolNamingCollision(AlreadyExists):
    def __init__(self, server_id: str, owners: Mapping[str, str]) -> None:
        names = sorted(owners)
        described = ", ".join(f"{n!r} (served by server {owners[n]!r})" for n in names)
        super().__init__(
            f"server {server_id!r} cannot register tools already served by another server of "
            f"the tenant: {described}",
            error="tool_naming_collision",
            collisions=names,
            servers=dict(owners),
            server_id=server_id,
        )


class ToolSetQuarantined(StrataError):
    """Calls to a server whose tool set changed are refused until an administrator approves
    the new set (`POST /v1/mcp/servers/:id/approve-tools`)."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    http_status = 409


class RegistryConflict(StrataError):
    """A state precondition of the registry failed (nothing quarantined, stale fingerprint)."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    http_status = 409


class McpUpstreamError(UpstreamError):
    """The upstream MCP server failed (transport, timeout, protocol error): 502. `sent`: the
    request may have reached the upstream (its tool may have run), as opposed to a connection
    that never opened or an answer that says the request was not run."""

    sent = False

    def __init__(self, message: str, *, error: str = "upstream_error", **extra: object) -> None:
        super().__init__(message, error=error, **extra)


class UpstreamAuthFailed(McpUpstreamError):
    def __init__(self, message: str) -> None:
        super().__init__(message, error="upstream_auth_failed")
