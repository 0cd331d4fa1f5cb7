"""The declaration of the `api-breaker` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/api_breaker.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration


def _statuses(minimum: int, maximum: int, default: int) -> dict[str, Any]:
    return {
        "type": "array",
        "minItems": 1,
        "items": {"type": "integer", "minimum": minimum, "maximum": maximum},
        "uniqueItems": True,
        "default": [default],
    }


class ApiBreaker(Declaration):
    name = "api-breaker"
    priority = 1005
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "break_response_code": {"type": "integer", "minimum": 200, "maximum": 599},
            "break_response_body": {"type": "string"},
            "break_response_headers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string", "minLength": 1},
                        "value": {"type": "string", "minLength": 1},
                    },
                    "required": ["key", "value"],
                },
            },
            "max_breaker_sec": {"type": "integer", "minimum": 3, "default": 300},
            "unhealthy": {
                "type": "object",
                "properties": {
                    "http_statuses": _statuses(500, 599, 500),
                    "failures": {"type": "integer", "minimum": 1, "default": 3},
                },
                "default": {"http_statuses": [500], "failures": 3},
            },
            "healthy": {
                "type": "object",
                "properties": {
                    "http_statuses": _statuses(200, 499, 200),
                    "successes": {"type": "integer", "minimum": 1, "default": 3},
                },
                "default": {"http_statuses": [200], "successes": 3},
            },
        },
        "required": ["break_response_code"],
    }
