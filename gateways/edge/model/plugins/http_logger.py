"""The declaration of the `http-logger` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/http_logger.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.loggers import LOG_PROPERTIES, batch_properties

# APISIX's core.schema.uri_def
URI_PATTERN = r"^[^\/]+:\/\/([\da-zA-Z.-]+|\[[\da-fA-F:]+\])(:\d+)?"


class HttpLogger(Declaration):
    name = "http-logger"
    priority = 410
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "uri": {"type": "string", "pattern": URI_PATTERN},
            "auth_header": {"type": "string"},
            "timeout": {"type": "integer", "minimum": 1, "default": 3},
            "concat_method": {"type": "string", "enum": ["json", "new_line"], "default": "json"},
            "ssl_verify": {"type": "boolean", "default": False},
            **LOG_PROPERTIES,
            **batch_properties("http logger"),
        },
        "required": ["uri"],
    }
