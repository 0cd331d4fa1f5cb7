"""Which tenant's servers a caller sees (as the control plane's `visible_tenant`): a platform
administrator sees every tenant, or the one `x-tenant-id` names; anyone else sees the tenant
of their token (the guard refused a header naming another), or the header's when the token
carries none, else `default`."""

from __future__ import annotations

from typing import Any

from gateways.agent.mcp.errors import ServerNotFound
from runtime.access import current_caller

DEFAULT_TENANT = "default"


def is_platform_admin() -> bool:
    principal = current_caller().principal
    return principal is not None and principal.is_platform_admin


def visible_tenant() -> str | None:
    """The tenant to filter by; None: every tenant (a platform administrator naming none)."""
    caller = current_caller()
    principal = caller.principal
    if principal is not None and principal.is_platform_admin:
        named = caller.tenant_id if caller.tenant_id != principal.tenant_id else None
        return named
    return caller.tenant_id or DEFAULT_TENANT


def acting_tenant(named: str = "") -> str:
    """The tenant a write acts for: the request's (the guard checked it), else the caller's."""
    return named or current_caller().tenant_id or DEFAULT_TENANT


def check_visible(
    record: dict[str, Any] | None, server_id: str, *, for_auth: bool = False
) -> dict[str, Any]:
    """`record` when the caller may see it; a server of another tenant is not found."""
    tenant = visible_tenant()
    if record is None or (tenant is not None and record["tenant_id"] != tenant):
        raise ServerNotFound.for_auth(server_id) if for_auth else ServerNotFound()
    return record
