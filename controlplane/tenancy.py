"""What the tenant-scoped control plane services share: whether a tenant exists (the hash
`cp:tenants`, field = tenant id), which tenant a caller may see, identifier checks, and the
key-value store's failures as 503."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from redis.asyncio import Redis

from controlplane.kv_errors import kv_unavailable
from runtime.access import IDENTIFIER, current_caller
from runtime.errors import InvalidRequest, NotFound, PermissionDenied

TENANTS = "cp:tenants"  # hash: tenant id → tenant JSON (the tenants service writes it)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def tenant_not_found() -> NotFound:
    return NotFound("Tenant not found")


async def require_tenant_exists(kv: Redis, tenant_id: str) -> None:
    if not await kv.hexists(TENANTS, tenant_id):
        raise tenant_not_found()


def invalid(field: str, message: str) -> InvalidRequest:
    """A 400 naming the field: `{error:'invalid_request', message, field}`."""
    return InvalidRequest(message, error="invalid_request", field=field)


def identifier(value: str, field: str) -> str:
    """`value` when it is a valid store identifier (`[A-Za-z0-9._:-]{1,128}`), else 400."""
    if not value:
        raise invalid(field, f"{field} is required")
    if not IDENTIFIER.fullmatch(value):
        raise invalid(field, f"{field} must match [A-Za-z0-9._:-]{{1,128}}")
    return value


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


def store_errors(fn: F) -> F:
    """The key-value store unreachable (or failing) → 503: state-changing controls fail
    closed, nothing is half-written (every write here is one atomic step)."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        with kv_unavailable():
            return await fn(*args, **kwargs)

    return cast(F, wrapper)


def now_iso() -> str:
    """The current time, ISO 8601 in UTC with seconds (`2025-01-31T12:00:00Z`)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
