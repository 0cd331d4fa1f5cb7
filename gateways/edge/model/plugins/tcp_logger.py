"""The declaration of the `tcp-logger` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/tcp_logger.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.loggers import LOG_PROPERTIES, batch_properties


class TcpLogger(Declaration):
    name = "tcp-logger"
    priority = 405
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "host": {"type": "string"},
            "port": {"type": "integer", "minimum": 0},
            "tls": {"type": "boolean", "default": False},
            "tls_options": {"type": "string"},
            "timeout": {"type": "integer", "minimum": 1, "default": 1000},
            **LOG_PROPERTIES,
            **batch_properties("tcp logger"),
        },
        "required": ["host", "port"],
    }
