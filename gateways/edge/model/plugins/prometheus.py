"""The declaration of the `prometheus` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/prometheus.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration


class Prometheus(Declaration):
    name = "prometheus"
    priority = 500
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"prefer_name": {"type": "boolean", "default": False}},
    }
