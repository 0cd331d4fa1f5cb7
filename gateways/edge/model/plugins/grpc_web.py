"""The declaration of the `grpc-web` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/grpc_web.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration

DEFAULT_ALLOW_HEADERS = "content-type,x-grpc-web,x-user-agent"


class GrpcWeb(Declaration):
    name = "grpc-web"
    priority = 505
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "cors_allow_headers": {
                "type": "string",
                "default": DEFAULT_ALLOW_HEADERS,
                "description": "multiple header use ',' to split",
            },
            "max_req_body_size": {"type": "integer", "minimum": 1, "default": 64 << 20},
        },
    }
