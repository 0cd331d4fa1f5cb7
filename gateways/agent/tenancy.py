"""Which tenant's agent resources a caller sees. The guard has already resolved the caller's
tenant (`runtime.access`): the token's `tenant_id` claim wins, and `x-tenant-id` or a body
naming another tenant is refused unless the caller is a platform administrator."""

from __future__ import annotations

from runtime.access import current_caller
from runtime.errors import InvalidRequest

DEFAULT_TENANT = "default"  # the spec's tenant of the list endpoints when none is named


def is_platform_admin() -> bool:
    principal = current_caller().principal
    return principal is not None and principal.is_platform_admin


def visible_tenant() -> str | None:
    """The tenant a list filters by where the spec's filter is optional (`GET
    /v1/mcp/servers`, `/v1/mcp/tools`): None — every tenant — for a platform administrator
    naming none (as the control plane's `visible_tenant`); the caller's tenant, else
    `default`, for anyone else."""
    caller = current_caller()
    principal = caller.principal
    if principal is not None and principal.is_platform_admin:
        return caller.tenant_id if caller.tenant_id != principal.tenant_id else None
    return caller.tenant_id or DEFAULT_TENANT


def listing_tenant() -> str:
    """The tenant a list endpoint (`GET /v1/sessions`, `/v1/hitl/pending`) shows: the caller's,
    else the spec's default tenant value `default`."""
    return current_caller().tenant_id or DEFAULT_TENANT


def acting_tenant() -> str:
    """The tenant a create call acts for (400 when neither the token nor the body names one)."""
    tenant = current_caller().tenant_id
    if tenant is None:
        raise InvalidRequest("tenant_id is required", error="invalid_request", field="tenant_id")
    return tenant


def may_see(owner: str) -> bool:
    """Whether the caller may read or change a resource of tenant `owner`: its own tenant's,
    or any tenant's for a platform administrator. Callers answer 404 otherwise, so that ids of
    other tenants are not revealed."""
    caller = current_caller()
    if caller.principal is not None and caller.principal.is_platform_admin:
        return True
    return caller.tenant_id == owner
