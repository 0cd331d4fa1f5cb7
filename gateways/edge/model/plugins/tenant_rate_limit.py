"""The declaration of the `tenant-rate-limit` plugin: its configuration's schema and checks, read
by the Admin API (the plugin's phases: `gateways/edge/plugins/tenant_rate_limit.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration


class TenantRateLimit(Declaration):
    name = "tenant-rate-limit"
    priority = 1001
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "redis_host": {"type": "string", "default": "gw-redis"},
            "redis_port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 6379},
            "redis_timeout": {"type": "integer", "minimum": 1, "default": 1000},
            "redis_pool_size": {"type": "integer", "minimum": 1, "default": 100},
            "default_count": {"type": "integer", "minimum": 0, "default": 100},
            "time_window": {"type": "integer", "exclusiveMinimum": 0, "default": 60},
            "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 429},
            "rejected_msg": {
                "type": "string",
                "minLength": 1,
                "default": "Rate limit exceeded for tenant",
            },
            "tenant_header": {"type": "string", "minLength": 1, "default": "X-Tenant-ID"},
            "allow_missing_tenant": {"type": "boolean", "default": False},
            "missing_tenant_code": {
                "type": "integer",
                "minimum": 200,
                "maximum": 599,
                "default": 401,
            },
            "show_limit_header": {"type": "boolean", "default": True},
        },
        "additionalProperties": False,
    }
