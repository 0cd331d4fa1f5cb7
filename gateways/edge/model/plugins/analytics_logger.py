"""The declaration of the `analytics-logger` plugin: its configuration's schema and checks, read by
the Admin API (the plugin's phases: `gateways/edge/plugins/analytics_logger.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration


class AnalyticsLogger(Declaration):
    name = "analytics-logger"
    priority = 399
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "clickhouse_url": {"type": "string", "default": "http://clickhouse:8123"},
            "database": {"type": "string", "default": "gateway"},
            "table": {"type": "string", "default": "request_log"},
            "timeout": {"type": "integer", "minimum": 1, "default": 5000},
            "batch_max_size": {"type": "integer", "minimum": 1, "default": 100},
            "inactive_timeout": {"type": "integer", "minimum": 1, "default": 5},
            "buffer_duration": {"type": "integer", "minimum": 1, "default": 60},
            "max_retry_count": {"type": "integer", "minimum": 0, "default": 3},
            "retry_delay": {"type": "integer", "minimum": 0, "default": 1},
            "tenant_header": {"type": "string", "minLength": 1, "default": "X-Tenant-ID"},
        },
    }
