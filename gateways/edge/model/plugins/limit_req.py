"""The declaration of the `limit-req` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/limit_req.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.limits import POLICY, REDIS_PROPERTIES, REDIS_REQUIRED


class LimitReq(Declaration):
    name = "limit-req"
    priority = 1001
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "rate": {"type": "number", "exclusiveMinimum": 0},
            "burst": {"type": "number", "minimum": 0},
            "key": {"type": "string"},
            "key_type": {"type": "string", "enum": ["var", "var_combination"], "default": "var"},
            "policy": POLICY,
            "rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 503},
            "rejected_msg": {"type": "string", "minLength": 1},
            "nodelay": {"type": "boolean", "default": False},
            "allow_degradation": {"type": "boolean", "default": False},
            **REDIS_PROPERTIES,
        },
        "required": ["rate", "burst", "key"],
        **REDIS_REQUIRED,
    }
