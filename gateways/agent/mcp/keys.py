"""Key-value store keys of the MCP registry (the one place their names are written).

Cluster layout (issue 24): the registry is configuration read through the replicas' caches and
guarded by the agent gateway's change feed, so all of it carries the owner tag `{mcp}` (one
slot): a write, its version token, the feed's counter and its PUBLISH stay one script or
transaction on a clustered store. The tenants' policies live under the same tag
(`gateways/agent/keys.py`).
"""

from __future__ import annotations

from runtime.stores.renames import KeyRename, exact, retag

TAG = "{mcp}"  # the hash tag of the registry and the agent gateway's change feed

SERVERS = f"{TAG}:servers"  # hash: server id → server record JSON
# string: a new random token on every write of `SERVERS` (the replicas' record caches)
SERVERS_VERSION = f"{TAG}:servers:version"
RELIST_LOCK = f"{TAG}:relist-lock"  # one replica re-lists tool sets per round


def tool_owners(tenant_id: str) -> str:
    """Hash: tool name → id of the server that serves it, per tenant (collision check)."""
    return f"{TAG}:tool-owner:{tenant_id}"


def auth_config(server_id: str) -> str:
    """String: the server's auth config JSON (`client_secret` encrypted)."""
    return f"{TAG}:auth:{server_id}"


def oauth_token(server_id: str) -> str:
    """String with a TTL: the access token last obtained for the server."""
    return f"{TAG}:oauth-token:{server_id}"


def endpoint_session(mcp_session_id: str) -> str:
    """String with a TTL: an MCP session of the gateway's own `/mcp` (`{tenant_id,
    session_id, protocol_version}`), kept while it is used (one key per command: no tag)."""
    return f"mcp:endpoint-session:{mcp_session_id}"


# Durable keys under their names before issue 24 (`controlplane/store_layout.py` moves them).
RENAMES: tuple[KeyRename, ...] = (
    exact("mcp:servers", SERVERS),
    exact("mcp:servers:version", SERVERS_VERSION),
    retag("mcp:tool-owner:", tool_owners),
    retag("mcp:auth:", auth_config),
    retag("mcp:oauth-token:", oauth_token),  # a cache, moved rather than fetched again
)
