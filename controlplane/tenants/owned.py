"""Everything a tenant owns in the key-value store, in one list: deleting a tenant removes each
entry of `OWNED` (after its edge consumer group and consumers, its AI gateway budget and its
identity provider organization, which their own layers remove; see `servicer.py`).

A part of the control plane that keeps per-tenant state adds its layout here, once:

- `Key("cp:branding:{tenant}")` — one key.
- `Pattern("rl:config:{tenant}:*", type="string")` — every key matching a glob (SCAN MATCH;
  `type` narrows it to one Redis type when another layout shares the prefix).
- `HashEntries("cp:api-keys")` — the fields of a hash whose JSON value names the tenant in
  `tenant_id` (or `field`).
- `TenantAgents()` — the tenant's agent registrations, each deregistered as one step.

`{tenant}` is the tenant id (glob characters escaped in patterns). Tenant ids never contain
`:` (records.TENANT_ID), so `rl:{tenant}:*` cannot reach another tenant's keys. The tenant's
metadata (`cp:tenants`) is removed last by the servicer itself, so a delete that fails part
way can be sent again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from controlplane.agent_identity.registry import TenantAgents
from gateways.ai.tenants.keys import prompt_config_key
from gateways.edge.keys import rate_limit_override, rate_limit_windows


@dataclass(frozen=True)
class Key:
    """One key."""

    template: str

    async def remove(self, kv: Redis, tenant_id: str) -> int:
        return int(await kv.delete(self.template.format(tenant=tenant_id)))

    async def find(self, kv: Redis, tenant_id: str) -> list[str]:
        key = self.template.format(tenant=tenant_id)
        return [key] if await kv.exists(key) else []


@dataclass(frozen=True)
class Pattern:
    """Every key matching a glob, optionally of one Redis type (`string`, `zset`, `hash`...)."""

    template: str
    type: str | None = None

    async def find(self, kv: Redis, tenant_id: str) -> list[str]:
        match = self.template.format(tenant=_glob_escape(tenant_id))
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

TENANT = "\0tenant\0"  # a stand-in tenant id, for a keys module's function to place


def _template(key: str) -> str:
    """A keys module's key for TENANT as a template of this module (the function's own
    braces, e.g. a hash tag `rl:config:{acme}`, kept literally)."""
    return key.replace("{", "{{").replace("}", "}}").replace(TENANT, "{tenant}")


OWNED: tuple[Owned, ...] = (
    # Tenants (this part): IP allowlist, prompt configuration.
    Key("cp:ip-allowlist:{tenant}"),
    Key(_template(prompt_config_key(TENANT))),
    # Rate limits: the tenant override, route overrides, the edge's sliding windows.
    Key(_template(rate_limit_override(TENANT))),
    Pattern(_template(rate_limit_override(TENANT, "*")), type="string"),
    Pattern(_template(rate_limit_windows(TENANT)), type="zset"),
    # API keys and key requests (JSON records carrying tenant_id).
    HashEntries("cp:api-keys"),
    HashEntries("cp:key-requests"),
    # Notifications, their read marks and delivery preferences (controlplane/notifications/
    # store.py; the id → tenant index entries go with them in delete_tenant_notifications).
    Key("cp:notifications:items:{tenant}"),
    Key("cp:notifications:order:{tenant}"),
    Key("cp:notifications:read:{tenant}"),
    Key("cp:notify-prefs:{tenant}"),
    # Branding.
    Key("cp:branding:{tenant}"),
    # Webhooks (JSON records carrying tenant_id).
    HashEntries("cp:webhooks"),
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
