"""The declaration of the `limit-count` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/limit_count.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.limits import POLICY, REDIS_PROPERTIES, REDIS_REQUIRED


class LimitCount(Declaration):
    name = "limit-count"
    priority = 1002
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "exclusiveMinimum": 0},
            "time_window": {"type": "integer", "exclusiveMinimum": 0},
            "window_type": {"type": "string", "enum": ["fixed", "sliding"], "default": "fixed"},
            "group": {"type": "string"},
            "key": {"type": "string", "default": "remote_addr"},
            "key_type": {
                "type": "string",
                "enum": ["var", "var_combination", "constant"],
                "default": "var",
            },
            "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 503},
            "rejected_msg": {"type": "string", "minLength": 1},
            "policy": POLICY,
            "allow_degradation": {"type": "boolean", "default": False},
            "show_limit_quota_header": {"type": "boolean", "default": True},
            **REDIS_PROPERTIES,
            "sync_interval": {"type": "number", "default": -1},
        },
        "required": ["count", "time_window"],
        **REDIS_REQUIRED,
    }
