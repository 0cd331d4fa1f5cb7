"""The schema fields every logger plugin has (http-logger, tcp-logger, udp-logger): its batch
processor's and its log entry's, with APISIX's names and defaults."""

from __future__ import annotations

from typing import Any

EXPR = {"type": "array", "minItems": 1, "items": {"type": "array"}}

# The schema fields every logger has (APISIX's names and defaults).
LOG_PROPERTIES: dict[str, Any] = {
    "log_format": {"type": "object"},
    "log_format_extra": {"type": "object"},
    "include_req_body": {"type": "boolean", "default": False},
    "include_req_body_expr": EXPR,
    "max_req_body_bytes": {"type": "integer", "minimum": 1, "default": 512 * 1024},
    "include_resp_body": {"type": "boolean", "default": False},
    "include_resp_body_expr": EXPR,
    "max_resp_body_bytes": {"type": "integer", "minimum": 1, "default": 512 * 1024},
}


def batch_properties(name: str) -> dict[str, Any]:
    """The batch processor's fields of a plugin schema, APISIX's defaults (`name` is the
    plugin's default processor name, e.g. "http logger")."""
    return {
        "name": {"type": "string", "default": name},
        "batch_max_size": {"type": "integer", "minimum": 1, "default": 1000},
        "inactive_timeout": {"type": "integer", "minimum": 1, "default": 5},
        "buffer_duration": {"type": "integer", "minimum": 1, "default": 60},
        "max_retry_count": {"type": "integer", "minimum": 0, "default": 0},
        "retry_delay": {"type": "integer", "minimum": 0, "default": 1},
    }
