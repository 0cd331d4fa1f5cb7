"""Key-value store keys of the agent gateway (the one place their names are written; the MCP
registry's are in `mcp/keys.py`).

Cluster layout (issue 24): the keys a script or transaction touches together share a hash tag.
- Per-tenant state carries the tenant as its tag (`{acme}`): a session's record and counters,
  the tenant's session sets, its approvals, their pending set, open markers and grants. So a
  lookup by session or approval id needs the tenant (the caller's; for a platform
  administrator deciding an approval by id alone, the id → tenant index `approval_tenant`).
- The agent gateway's change feed (counter and channel) and what it guards (the MCP registry,
  servers' auth configs and tokens, the tenants' policies) carry the owner tag `{mcp}`: every
  write, its INCR and its PUBLISH stay one step.
- Elicitations (`agent:elicit:<id>`), A2A cards (`a2a:agents`) and tasks (`a2a:task:<id>`) are
  one key per command: their names are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from redis.asyncio import Redis

from gateways.agent.mcp import keys as mcp_keys
from runtime.stores.renames import KeyRename, exact, retag

# The change feed (`changes.py`): its channel and counter, in the registry's slot.
CHANGES_CHANNEL = f"{mcp_keys.TAG}:changed"
CHANGES_COUNTER = f"{mcp_keys.TAG}:changes"


def policy_key(tenant_id: str) -> str:
    """String: the tenant's security policy JSON (guarded by the change feed)."""
    return f"{mcp_keys.TAG}:policy:{tenant_id}"


# Sessions (`sessions/store.py`)
def session_key(tenant_id: str, session_id: str) -> str:
    """String: the session record JSON."""
    return f"agent:session:{{{tenant_id}}}:{session_id}"


def calls_key(tenant_id: str, session_id: str) -> str:
    """String: the session's `tool_calls` counter."""
    return f"agent:session-calls:{{{tenant_id}}}:{session_id}"


def tokens_key(tenant_id: str, session_id: str) -> str:
    """String: the session's `tokens_used` counter (reservations of calls in flight included)."""
    return f"agent:session-tokens:{{{tenant_id}}}:{session_id}"


def sessions_key(tenant_id: str) -> str:
    """Zset: the tenant's session ids by creation time (ms)."""
    return f"agent:sessions:{{{tenant_id}}}"


def active_key(tenant_id: str) -> str:
    """Set: the tenant's active session ids (`max_concurrent_sessions`)."""
    return f"agent:active-sessions:{{{tenant_id}}}"


# HITL approvals (`approvals/store.py`)
def approval_key(tenant_id: str, approval_id: str) -> str:
    """String: the approval record JSON."""
    return f"agent:hitl:{{{tenant_id}}}:{approval_id}"


def approval_tenant(approval_id: str) -> str:
    """String: the tenant of an approval (a decision by id alone, a platform administrator's),
    written before the approval and expiring with it."""
    return f"agent:hitl-tenant:{{{approval_id}}}"


def pending_key(tenant_id: str) -> str:
    """Zset: the tenant's pending approval ids, scored by expiry (ms)."""
    return f"agent:hitl-pending:{{{tenant_id}}}"


def grant_key(tenant_id: str, scope: str, tool_name: str, arguments_sha256: str) -> str:
    """List: ids of granted approvals of exactly that call, one release each."""
    return f"agent:hitl-grant:{{{tenant_id}}}:{scope}:{tool_name}:{arguments_sha256}"


def open_key(tenant_id: str, scope: str, tool_name: str, arguments_sha256: str) -> str:
    """String: the id of the pending approval of exactly that call."""
    return f"agent:hitl-open:{{{tenant_id}}}:{scope}:{tool_name}:{arguments_sha256}"


# Durable keys under their names before issue 24 (`controlplane/store_layout.py` moves them;
# approvals live within their ttl and switch without moving).
_OLD_SESSION = "agent:session:"


async def _session_tenant(kv: Redis, session_id: str) -> str | None:
    """The tenant of a session still under its old record key (None: no such record)."""
    raw = await kv.get(_OLD_SESSION + session_id)
    return None if raw is None else str(json.loads(raw)["tenant_id"])


def _session_part(old_prefix: str, tagged: Callable[[str, str], str]) -> KeyRename:
    """A session's key named by its id alone → tagged with the tenant its old record names."""

    async def read_new_name(kv: Redis, key: str) -> str | None:
        session_id = key[len(old_prefix) :]
        if not key.startswith(old_prefix) or not session_id or "{" in key:
            return None
        tenant = await _session_tenant(kv, session_id)
        return None if tenant is None else tagged(tenant, session_id)

    return KeyRename(old_prefix + "*", lambda key: None, read_new_name)


RENAMES: tuple[KeyRename, ...] = (
    *mcp_keys.RENAMES,
    exact("agent:changes", CHANGES_COUNTER),
    retag("agent:policy:", policy_key),
    retag("agent:sessions:", sessions_key),
    retag("agent:active-sessions:", active_key),
    # The counters first: they find their tenant in the session's record, moved last.
    _session_part("agent:session-calls:", calls_key),
    _session_part("agent:session-tokens:", tokens_key),
    _session_part(_OLD_SESSION, session_key),
)
