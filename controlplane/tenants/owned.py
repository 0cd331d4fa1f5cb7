"""Everything a tenant owns in the key-value store, in one list: deleting a tenant removes each
entry of `OWNED` (after its edge consumer group and consumers, its AI gateway budget and its
identity provider organization, which their own layers remove; see `servicer.py`).

A part of the control plane that keeps per-tenant state adds its layout here, once, naming
the function of its keys module that gives the tenant's key (never a template string: a key
name holds braces, its hash tag, which `str.format` would read):

- `Key(branding_key)` — one key.
- `Pattern(lambda t: rate_limit_override(t, "*"), type="string")` — every key matching a glob
  (SCAN MATCH; `type` narrows it to one Redis type when another layout shares the prefix).
- `HashEntries(api_keys.KEYS)` — the fields of a hash whose JSON value names the tenant in
  `tenant_id` (or `field`).
- `TenantAgents()` — the tenant's agent registrations, each deregistered as one step.

A pattern's function is given the tenant id with its glob characters escaped. Tenant ids
never contain `:` (records.TENANT_ID), so `rl:{acme}:*` cannot reach another tenant's keys.
The tenant's metadata (`cp:tenants`) is removed last by the servicer itself, so a delete that
fails part way can be sent again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from controlplane import api_keys as api_key_store
from controlplane.agent_identity.registry import TenantAgents
from controlplane.branding import branding_key
from controlplane.notifications import store as notifications
from controlplane.tenants.records import allowlist_key
from gateways.ai.tenants.keys import prompt_config_key
from gateways.edge.keys import rate_limit_override, rate_limit_windows


@dataclass(frozen=True)
class Key:
    """One key: `key(tenant_id)`."""

    key: Callable[[str], str]

    async def remove(self, kv: Redis, tenant_id: str) -> int:
        return int(await kv.delete(self.key(tenant_id)))

    async def find(self, kv: Redis, tenant_id: str) -> list[str]:
        key = self.key(tenant_id)
        return [key] if await kv.exists(key) else []


@dataclass(frozen=True)
class Pattern:
    """Every key matching the glob `pattern(escaped tenant id)`, optionally of one Redis type
    (`string`, `zset`, `hash`...)."""

    pattern: Callable[[str], str]
    type: str | None = None

    async def find(self, kv: Redis, tenant_id: str) -> list[str]:
        match = self.pattern(_glob_escape(tenant_id))
        return [key async for key in kv.scan_iter(match=match, count=1000, _type=self.type)]

    async def remove(self, kv: Redis, tenant_id: str) -> int:
        keys = await self.find(kv, tenant_id)
        removed = 0
        for start in range(0, len(keys), 500):
            removed += int(await kv.delete(*keys[start : start + 500]))
        return removed


@dataclass(frozen=True)
class HashEntries:
    """The fields of hash `key` whose JSON object value has `field` == the tenant id."""

    key: str
    field: str = "tenant_id"

    async def fields(self, kv: Redis, tenant_id: str) -> list[str]:
        """The tenant's fields (none when the key is absent or is not a hash)."""
        found = []
        try:
            async for name, value in kv.hscan_iter(self.key, count=1000):
                try:
                    record = json.loads(value)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get(self.field) == tenant_id:
                    found.append(name)
        except ResponseError:  # WRONGTYPE: another layout owns this key
            return []
        return found

    async def find(self, kv: Redis, tenant_id: str) -> list[str]:
        return [f"{self.key}[{name}]" for name in await self.fields(kv, tenant_id)]

    async def remove(self, kv: Redis, tenant_id: str) -> int:
        names = await self.fields(kv, tenant_id)
        return int(await kv.hdel(self.key, *names)) if names else 0


Owned = Key | Pattern | HashEntries | TenantAgents

OWNED: tuple[Owned, ...] = (
    # Tenants (this part): IP allowlist, prompt configuration.
    Key(allowlist_key),
    Key(prompt_config_key),
    # Rate limits: the tenant override, route overrides, the edge's sliding windows.
    Key(rate_limit_override),
    Pattern(lambda tenant: rate_limit_override(tenant, "*"), type="string"),
    Pattern(rate_limit_windows, type="zset"),
    # API keys and key requests (JSON records carrying tenant_id).
    HashEntries(api_key_store.KEYS),
    HashEntries(api_key_store.REQUESTS),
    # Notifications, their read marks and delivery preferences (controlplane/notifications/
    # store.py; the id → tenant index entries go with them in delete_tenant_notifications).
    Key(notifications.items_key),
    Key(notifications.order_key),
    Key(notifications.read_key),
    Key(notifications.prefs_key),
    # Branding.
    Key(branding_key),
    # Webhooks (JSON records carrying tenant_id).
    HashEntries(notifications.WEBHOOKS),
    # Registered agents: each with its delegation set and credential entry.
    TenantAgents(),
)


async def remove_owned(kv: Redis, tenant_id: str) -> int:
    """Remove every entry of `OWNED` for the tenant; returns how many keys or fields went."""
    removed = 0
    for owned in OWNED:
        removed += await owned.remove(kv, tenant_id)
    return removed


async def find_owned(kv: Redis, tenant_id: str) -> list[str]:
    """What of `OWNED` exists for the tenant now (keys; hash fields as `hash[field]`)."""
    found: list[str] = []
    for owned in OWNED:
        found += await owned.find(kv, tenant_id)
    return found


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)
