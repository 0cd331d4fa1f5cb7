"""The declaration of the `ip-restriction` plugin: its configuration's schema and checks, read by
the Admin API (the plugin's phases: `gateways/edge/plugins/ip_restriction.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.addresses import invalid_address

ADDRESSES: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "minItems": 1,
}


class IpRestriction(Declaration):
    name = "ip-restriction"
    priority = 3000
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "default": "Your IP address is not allowed",
            },
            "response_code": {"type": "integer", "minimum": 403, "maximum": 404, "default": 403},
            "whitelist": ADDRESSES,
            "blacklist": ADDRESSES,
        },
        "oneOf": [{"required": ["whitelist"]}, {"required": ["blacklist"]}],
    }

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        return invalid_address([*conf.get("whitelist", ()), *conf.get("blacklist", ())])
