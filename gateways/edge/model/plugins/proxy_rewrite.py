"""The declaration of the `proxy-rewrite` plugin: its configuration's schema and checks, read by
the Admin API (the plugin's phases: `gateways/edge/plugins/proxy_rewrite.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.substitutions import regex_uri_problem

METHODS = [
    "GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "MKCOL", "COPY", "MOVE", "PROPFIND",
    "LOCK", "UNLOCK", "PATCH", "TRACE",
]  # fmt: skip
HEADER_NAME = r"^[!-9;-~]+$"  # visible ASCII but ":"
SCALAR: dict[str, Any] = {
    "oneOf": [{"type": "string", "pattern": r"^[^\x00-\x08\x0a-\x1f\x7f]*$"}, {"type": "number"}]
}
VALUE: dict[str, Any] = {"oneOf": [SCALAR, {"type": "array", "items": SCALAR, "minItems": 1}]}
HEADER_MAP: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "propertyNames": {"pattern": HEADER_NAME},
    "additionalProperties": VALUE,
}


class ProxyRewrite(Declaration):
    name = "proxy-rewrite"
    priority = 1008
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "uri": {"type": "string", "minLength": 1, "maxLength": 4096, "pattern": r"^\/.*"},
            "method": {"type": "string", "enum": METHODS},
            "regex_uri": {
                "type": "array",
                "minItems": 2,
                "items": {"type": "string"},
            },
            "host": {"type": "string", "pattern": r"^[0-9a-zA-Z-.]+(:\d{1,5})?$"},
            "headers": {
                "oneOf": [
                    {
                        "type": "object",
                        "minProperties": 1,
                        "additionalProperties": False,
                        "properties": {
                            "add": HEADER_MAP,
                            "set": HEADER_MAP,
                            "remove": {
                                "type": "array",
                                "minItems": 1,
                                "items": {"type": "string", "pattern": HEADER_NAME},
                            },
                        },
                    },
                    {**HEADER_MAP, "additionalProperties": SCALAR},  # legacy: headers to set
                ]
            },
            "use_real_request_uri_unsafe": {"type": "boolean", "default": False},
        },
        "minProperties": 1,
    }

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        """APISIX's check_schema: `regex_uri` is pairs, each regex and template valid."""
        return regex_uri_problem(conf.get("regex_uri") or [])
