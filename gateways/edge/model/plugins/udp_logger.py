"""The declaration of the `udp-logger` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/udp_logger.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.loggers import LOG_PROPERTIES, batch_properties


class UdpLogger(Declaration):
    name = "udp-logger"
    priority = 400
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "host": {"type": "string"},
            "port": {"type": "integer", "minimum": 0},
            "timeout": {"type": "integer", "minimum": 1, "default": 3},
            **LOG_PROPERTIES,
            **batch_properties("udp logger"),
        },
        "required": ["host", "port"],
    }
