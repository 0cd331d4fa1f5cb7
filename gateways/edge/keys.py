"""Key-value store keys of the tenant rate limit (the one place their names are written).

The edge's `tenant-rate-limit` plugin reads the overrides and counts in the windows; the
control plane writes the overrides (`controlplane/rate_limits.py`, tenant provisioning),
reads the windows (usage figures) and removes both with a tenant (`tenants/owned.py`).
"""

from __future__ import annotations

ALL_WINDOWS = "rl:*"  # glob over every window (it also matches the overrides: check the type)


def rate_limit_override(tenant_id: str, route_id: str | None = None) -> str:
    """String: the tenant's override, or its route's (a limit, or JSON `{"limit", "window"}`)."""
    return f"rl:config:{tenant_id}" + (f":{route_id}" if route_id else "")


def rate_limit_window(tenant_id: str, route_id: str, window: int | str = "") -> str:
    """Sorted set: the requests counted in a window of `window` seconds (without the window:
    the prefix the plugin's script appends it to)."""
    return f"rl:{tenant_id}:{route_id}:{window}"


def rate_limit_windows(tenant_id: str) -> str:
    """Glob over the tenant's windows (`tenant_id` already glob-escaped where it must be)."""
    return f"rl:{tenant_id}:*"
