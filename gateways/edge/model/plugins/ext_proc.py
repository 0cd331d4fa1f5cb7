"""The configuration both external-processor plugins (ext-plugin-pre-req, ext-plugin-post-resp)
take."""

from __future__ import annotations

from typing import Any

DIFFERENCE = (
    "Strata reaches the external processor over gRPC with Envoy's external processing "
    "protocol (envoy.service.ext_proc.v3.ExternalProcessor/Process) at the node's "
    "EXT_PROC_ADDRESS, instead of APISIX's plugin runner over a unix socket with flatbuffers; "
    "`conf` reaches the processor as metadata_context.filter_metadata[<plugin name>].conf."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": DIFFERENCE,
    "properties": {
        "conf": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 128},
                    "value": {"type": "string"},
                },
                "required": ["name", "value"],
            },
            "minItems": 1,
        },
        "allow_degradation": {"type": "boolean", "default": False},
    },
}
