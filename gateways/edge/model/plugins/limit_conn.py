"""The declaration of the `limit-conn` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/limit_conn.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.limits import POLICY, REDIS_PROPERTIES, REDIS_REQUIRED


class LimitConn(Declaration):
    name = "limit-conn"
    priority = 1003
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "conn": {"type": "integer", "exclusiveMinimum": 0},
            "burst": {"type": "integer", "minimum": 0},
            "default_conn_delay": {"type": "number", "exclusiveMinimum": 0},
            "only_use_default_delay": {"type": "boolean", "default": False},
            "key": {"type": "string"},
            "key_type": {"type": "string", "enum": ["var", "var_combination"], "default": "var"},
            "key_ttl": {"type": "integer", "minimum": 1, "default": 3600},
            "policy": POLICY,
            "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 503},
            "rejected_msg": {"type": "string", "minLength": 1},
            "allow_degradation": {"type": "boolean", "default": False},
            **REDIS_PROPERTIES,
        },
        "required": ["conn", "burst", "default_conn_delay", "key"],
        **REDIS_REQUIRED,
    }
