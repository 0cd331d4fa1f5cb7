"""What the tenant-scoped control plane services share: whether a tenant exists (the hash
`cp:tenants`, field = tenant id), which tenant a caller may see, identifier checks, and the
key-value store's failures as 503."""

from __future__ import annotations

from redis.asyncio import Redis

from runtime.access import current_caller
from runtime.errors import NotFound, PermissionDenied
from runtime.fields import identifier, invalid, now_iso
from runtime.stores.kv_errors import store_errors

TENANTS = "cp:tenants"  # hash: tenant id → tenant JSON (the tenants service writes it)

__all__ = [
    "identifier",
    "invalid",
    "is_platform_admin",
    "now_iso",
    "require_tenant_exists",
    "store_errors",
    "tenant_not_found",
    "visible_tenant",
]


def tenant_not_found() -> NotFound:
    return NotFound("Tenant not found")


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
