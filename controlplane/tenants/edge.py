"""A tenant at the edge: its consumer group (id = tenant id), written through the control
plane's EdgeConfigService (`EdgeConfigServicer.commit`: the Admin API's checks, one atomic
write each).

The group's plugins apply to every consumer in it (each API key of the tenant is a consumer
with `group_id` = tenant id), after the consumer authenticates:

- `tenant-rate-limit` (always): counts the consumer's requests for its tenant (the plugin takes
  the tenant from the consumer's group when no token names one) against `rl:config:{tenant}`,
  so the tenant's limit holds on every route a key opens, whether or not the route itself
  carries the plugin.
- `ip-restriction`, from the tenant's state:
  - `status: suspended` → `blacklist: [0.0.0.0/0, ::/0]`, 403 `{"message": "Tenant suspended"}`:
    every consumer of the tenant is refused while its configuration stays in place;
  - otherwise a non-empty IP allowlist → `whitelist: <cidrs>` (403 for any other address);
  - otherwise none.

Plugins other operators or parts put on the group are kept; only these two are managed here.
"""

from __future__ import annotations

import time
from typing import Any

from controlplane.edge_config.servicer import EdgeConfigServicer, check
from controlplane.edge_config.store import Entry, Op, State
from gateways.edge.model import CONSUMER_GROUPS, CONSUMERS

MANAGED = ("tenant-rate-limit", "ip-restriction")
EVERYONE = ["0.0.0.0/0", "::/0"]
SUSPENDED_MESSAGE = "Tenant suspended"
NOT_ALLOWED_MESSAGE = "Your IP address is not allowed for this tenant"


def managed_plugins(status: str, cidrs: list[str]) -> dict[str, Any]:
    plugins: dict[str, Any] = {"tenant-rate-limit": {"tenant_header": "X-Tenant-ID"}}
    if status == "suspended":
        plugins["ip-restriction"] = {
            "blacklist": EVERYONE,
            "message": SUSPENDED_MESSAGE,
            "response_code": 403,
        }
    elif cidrs:
        plugins["ip-restriction"] = {
            "whitelist": list(cidrs),
            "message": NOT_ALLOWED_MESSAGE,
            "response_code": 403,
        }
    return plugins


class TenantEdge:
    def __init__(self, edge: EdgeConfigServicer) -> None:
        self.edge = edge

    async def put_group(
        self, tenant_id: str, name: str, status: str, cidrs: list[str]
    ) -> dict[str, Any] | None:
        """Create or update the tenant's consumer group; returns the group as it was before
        (None: it did not exist), for an undo."""

        def change(state: State) -> tuple[list[Op], dict[str, Any] | None]:
            existing = state.of(CONSUMER_GROUPS).get(tenant_id)
            value = dict(existing.value) if existing else {}
            plugins = {k: v for k, v in (value.get("plugins") or {}).items() if k not in MANAGED}
            plugins.update(managed_plugins(status, cidrs))
            value.update(
                id=tenant_id,
                desc=f"tenant {name}"[:256],
                labels={**(value.get("labels") or {}), "tenant": tenant_id},
                plugins=plugins,
            )
            op = _put(state, tenant_id, value, existing)
            return [op], (dict(existing.value) if existing else None)

        return await self.edge.commit(change)

    async def restore_group(self, tenant_id: str, previous: dict[str, Any] | None) -> None:
        """Undo `put_group`: the group as it was (removed when it did not exist, with its
        consumers)."""
        if previous is None:
            await self.remove(tenant_id)
            return

        def change(state: State) -> tuple[list[Op], None]:
            existing = state.of(CONSUMER_GROUPS).get(tenant_id)
            return [_put(state, tenant_id, dict(previous), existing)], None

        await self.edge.commit(change)

    async def remove(self, tenant_id: str) -> list[str]:
        """Remove the tenant's consumer group and every consumer in it (the tenant's API
        keys) in one write; returns the usernames of the consumers removed."""

        def change(state: State) -> tuple[list[Op], list[str]]:
            ops: list[Op] = []
            members = sorted(
                name
                for name, entry in state.of(CONSUMERS).items()
                if str(entry.value.get("group_id", "")) == tenant_id
            )
            ops += [(CONSUMERS, name, None) for name in members]
            if tenant_id in state.of(CONSUMER_GROUPS):
                ops.append((CONSUMER_GROUPS, tenant_id, None))
            return ops, members

        return await self.edge.commit(change)

    async def owned(self, tenant_id: str) -> list[str]:
        """What the tenant still has in the edge configuration (`kind/id`)."""
        state = await self.edge.store.load()
        found = [
            f"{CONSUMERS}/{name}"
            for name, entry in state.of(CONSUMERS).items()
            if str(entry.value.get("group_id", "")) == tenant_id
        ]
        if tenant_id in state.of(CONSUMER_GROUPS):
            found.append(f"{CONSUMER_GROUPS}/{tenant_id}")
        return found


def _put(state: State, tenant_id: str, value: dict[str, Any], existing: Entry | None) -> Op:
    """The write of a consumer group, checked as the Admin API checks it."""
    now = int(time.time())
    value["create_time"] = existing.value.get("create_time", now) if existing else now
    value["update_time"] = now
    check(state, CONSUMER_GROUPS, tenant_id, value)
    revision = state.revision + 1
    entry = Entry(value, existing.created_index if existing else revision, revision)
    return (CONSUMER_GROUPS, tenant_id, entry)
