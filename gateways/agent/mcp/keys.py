"""Key-value store keys of the MCP registry (the one place their names are written)."""

from __future__ import annotations

SERVERS = "mcp:servers"  # hash: server id → server record JSON
# string: a new random token on every write of `mcp:servers` (the replicas' record caches)
SERVERS_VERSION = "mcp:servers:version"
RELIST_LOCK = "mcp:relist-lock"  # one replica re-lists tool sets per round


def tool_owners(tenant_id: str) -> str:
    """Hash: tool name → id of the server that serves it, per tenant (collision check)."""
    return f"mcp:tool-owner:{tenant_id}"


def auth_config(server_id: str) -> str:
    """String: the server's auth config JSON (`client_secret` encrypted)."""
    return f"mcp:auth:{server_id}"


def oauth_token(server_id: str) -> str:
    """String with a TTL: the access token last obtained for the server."""
    return f"mcp:oauth-token:{server_id}"


def endpoint_session(mcp_session_id: str) -> str:
    """String with a TTL: an MCP session of the gateway's own `/mcp` (`{tenant_id,
    session_id, protocol_version}`), kept while it is used."""
    return f"mcp:endpoint-session:{mcp_session_id}"
