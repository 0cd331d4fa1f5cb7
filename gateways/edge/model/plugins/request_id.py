"""The declaration of the `request-id` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/request_id.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration


class RequestId(Declaration):
    name = "request-id"
    priority = 12015
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "header_name": {"type": "string", "default": "X-Request-Id"},
            "include_in_response": {"type": "boolean", "default": True},
            "algorithm": {
                "type": "string",
                "enum": ["uuid", "nanoid", "range_id"],
                "default": "uuid",
            },
            "range_id": {
                "type": "object",
                "properties": {
                    "char_set": {
                        "type": "string",
                        "minLength": 6,
                        "default": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                    },
                    "length": {"type": "integer", "minimum": 6, "default": 16},
                },
                "default": {},
            },
        },
        "additionalProperties": False,
    }
