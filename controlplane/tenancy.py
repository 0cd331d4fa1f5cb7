"""What the tenant-scoped control plane services share: whether a tenant exists (the hash
`cp:tenants`, field = tenant id, and the tenant's marker), which tenant a caller may see,
identifier checks, and the key-value store's failures as 503.

The tenant marker `cp:tenant:{<tenant>}` (a string) exists while the tenant does: the tenants
service sets it when a tenant is finalized (created, or found at start: `mark_tenants`) and
removes it first when the tenant is deleted. It lives in the tenant's own slot of a clustered
store (its hash tag is the tenant), so a script writing a tenant's state (branding, rate-limit
overrides) checks it in the same step: a write racing the deletion either finds the marker
gone (refused) or landed before it went (and the deletion's sweep, which runs after, removes
it).
"""

from __future__ import annotations

import json

from redis.asyncio import Redis

from runtime.access import current_caller
from runtime.errors import NotFound, PermissionDenied
from runtime.fields import identifier, invalid, now_iso
from runtime.stores.kv_errors import store_errors

TENANTS = "cp:tenants"  # hash: tenant id → tenant JSON (the tenants service writes it)
MARKER_VALUE = "1"

__all__ = [
    "identifier",
    "invalid",
    "is_platform_admin",
    "mark_tenants",
    "now_iso",
    "require_tenant_exists",
    "store_errors",
    "tenant_exists",
    "tenant_marker",
    "tenant_not_found",
    "visible_tenant",
]


def tenant_not_found() -> NotFound:
    return NotFound("Tenant not found")


def tenant_marker(tenant_id: str) -> str:
    """The tenant's marker: present while the tenant exists (finalized, not being deleted)."""
    return f"cp:tenant:{{{tenant_id}}}"


async def tenant_exists(kv: Redis, tenant_id: str) -> bool:
    """Whether the tenant's marker is set (a finalized tenant not being deleted)."""
    return bool(await kv.exists(tenant_marker(tenant_id)))


async def mark_tenants(kv: Redis) -> int:
    """Set the marker of every finalized tenant that has none (tenants created before markers
    existed); returns how many were set. Idempotent; run when a control plane starts. A
    deletion running meanwhile removes the marker again after its last step, and a marker set
    here for a tenant whose record went meanwhile is removed here."""
    marked = 0
    async for tenant, raw in kv.hscan_iter(TENANTS, count=1000):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict) or "provisioning" in record:
            continue  # a create still running sets the marker when it finalizes
        marker = tenant_marker(str(tenant))
        if await kv.set(marker, MARKER_VALUE, nx=True):
            if await kv.hexists(TENANTS, tenant):
                marked += 1
            else:
                await kv.delete(marker)
    return marked


async def require_tenant_exists(kv: Redis, tenant_id: str) -> None:
    if not await kv.hexists(TENANTS, tenant_id):
        raise tenant_not_found()


def visible_tenant(named: str | None = None) -> str | None:
    """The tenant whose resources the caller may see: None for a platform administrator who
    names none (every tenant), the one an administrator names (argument, else the
    `x-tenant-id` header), and the
    token's own tenant for anyone else (the guard already refused a request naming another).
    A non-administrator whose token carries no `tenant_id` sees nothing here (403): naming a
    tenant is not enough to act for it."""
    caller = current_caller()
    principal = caller.principal
    if principal is None:  # not reachable through the guard: every RPC here authenticates
        raise PermissionDenied("authentication required", error="forbidden")
    if principal.is_platform_admin:
        # An `x-tenant-id` header names one too (the guard made it the caller's tenant).
        header = caller.tenant_id if caller.tenant_id != principal.tenant_id else None
        return named or header
    if principal.tenant_id is None:
        raise PermissionDenied(
            "this token carries no tenant_id: ask for a token with the tenant scope",
            error="forbidden",
        )
    return principal.tenant_id


def is_platform_admin() -> bool:
    principal = current_caller().principal
    return principal is not None and principal.is_platform_admin
