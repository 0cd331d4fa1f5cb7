"""The declaration of the `opentelemetry` plugin: its configuration's schema and checks, read by
the Admin API (the plugin's phases: `gateways/edge/plugins/opentelemetry.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration

_SAMPLER_NAMES = ["always_on", "always_off", "trace_id_ratio", "parent_base"]
_FRACTION = {"type": "number", "default": 0}


class OpenTelemetry(Declaration):
    name = "opentelemetry"
    priority = 12009
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "sampler": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": _SAMPLER_NAMES, "default": "always_off"},
                    "options": {
                        "type": "object",
                        "properties": {
                            "fraction": _FRACTION,
                            "root": {
                                "type": "object",
                                "properties": {
                                    "name": {
                                        "type": "string",
                                        "enum": _SAMPLER_NAMES[:3],
                                        "default": "always_off",
                                    },
                                    "options": {
                                        "type": "object",
                                        "properties": {"fraction": _FRACTION},
                                        "default": {"fraction": 0},
                                    },
                                },
                                "default": {"name": "always_off", "options": {"fraction": 0}},
                            },
                        },
                        "default": {"fraction": 0, "root": {"name": "always_off"}},
                    },
                },
                "default": {
                    "name": "always_off",
                    "options": {"fraction": 0, "root": {"name": "always_off"}},
                },
            },
            "additional_attributes": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
            },
            "additional_header_prefix_attributes": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
            },
        },
    }
