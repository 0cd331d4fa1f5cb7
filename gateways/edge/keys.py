"""Key-value store keys of the tenant rate limit (the one place their names are written).

The edge's `tenant-rate-limit` plugin reads the overrides and counts in the windows; the
control plane writes the overrides (`controlplane/rate_limits.py`, tenant provisioning),
reads the windows (usage figures) and removes both with a tenant (`tenants/owned.py`).

The spec's templates are the keys, braces kept (`rl:{acme}:r1:60`, `rl:config:{acme}`): the
braces make the tenant the hash tag, so one request's script (every override and window of
a tenant) runs on one cluster slot.
"""

from __future__ import annotations

from runtime.stores.renames import KeyRename

ALL_WINDOWS = "rl:*"  # glob over every window (it also matches the overrides: check the type)
OLD_OVERRIDES = "rl:config:"  # before issue 24: `rl:config:acme[:route]`, no hash tag


def rate_limit_override(tenant_id: str, route_id: str | None = None) -> str:
    """String: the tenant's override, or its route's (a limit, or JSON `{"limit", "window"}`)."""
    return f"rl:config:{{{tenant_id}}}" + (f":{route_id}" if route_id else "")


def rate_limit_window(tenant_id: str, route_id: str, window: int | str = "") -> str:
    """Sorted set: the requests counted in a window of `window` seconds (without the window:
    the prefix the plugin appends it to)."""
    return f"rl:{{{tenant_id}}}:{route_id}:{window}"


def rate_limit_windows(tenant_id: str) -> str:
    """Glob over the tenant's windows (`tenant_id` already glob-escaped where it must be)."""
    return f"rl:{{{tenant_id}}}:*"


def parse_window(key: str) -> tuple[str, str, int] | None:
    """(tenant, route, window seconds) of a window's key; None for any other key."""
    head, sep, rest = key.partition(":{")
    tenant, close, tail = rest.partition("}:")
    route, _, window = tail.rpartition(":")
    if head != "rl" or not (sep and close and tenant and route) or not window.isdigit():
        return None
    return tenant, route, int(window)


def _override_renamed(key: str) -> str | None:
    """`rl:config:acme` → `rl:config:{acme}`, `rl:config:acme:r1` → `rl:config:{acme}:r1`
    (tenant ids never contain `:`, `controlplane/tenants/records.py`)."""
    rest = key[len(OLD_OVERRIDES) :]
    if not key.startswith(OLD_OVERRIDES) or not rest or "{" in rest:
        return None
    tenant, _, route = rest.partition(":")
    return rate_limit_override(tenant, route or None)


# Overrides are durable (the windows are not: they restart, at worst one window's count).
RENAMES: tuple[KeyRename, ...] = (KeyRename(OLD_OVERRIDES + "*", _override_renamed),)
