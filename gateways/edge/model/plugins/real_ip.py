"""The declaration of the `real-ip` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/real_ip.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.addresses import invalid_address


class RealIp(Declaration):
    name = "real-ip"
    priority = 23000
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "source": {"type": "string", "minLength": 1},
            "trusted_addresses": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
            },
            "recursive": {"type": "boolean", "default": False},
        },
        "required": ["source"],
    }

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        return invalid_address(conf.get("trusted_addresses") or ())
