"""The declaration of the `cors` plugin: its configuration's schema and checks, read by the Admin
API (the plugin's phases: `gateways/edge/plugins/cors.py`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration

ORIGINS = r"^(\*|\*\*|null|\w+://[^,]+(,\w+://[^,]+)*)$"
CREDENTIALS = "you can not set '*' for other option when 'allow_credential' is true"
STARLESS = (
    "allow_origins", "allow_methods", "allow_headers", "expose_headers", "timing_allow_origins",
)  # fmt: skip
REGEXES: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 4096},
    "minItems": 1,
    "uniqueItems": True,
}


class Cors(Declaration):
    name = "cors"
    priority = 4000
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "allow_origins": {"type": "string", "pattern": ORIGINS, "default": "*"},
            "allow_methods": {"type": "string", "default": "*"},
            "allow_headers": {"type": "string", "default": "*"},
            "expose_headers": {"type": "string"},
            "max_age": {"type": "integer", "default": 5},
            "allow_credential": {"type": "boolean", "default": False},
            "allow_origins_by_regex": REGEXES,
            "allow_origins_by_metadata": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 4096},
                "minItems": 1,
                "uniqueItems": True,
            },
            "timing_allow_origins": {"type": "string", "pattern": ORIGINS},
            "timing_allow_origins_by_regex": REGEXES,
        },
    }

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        """APISIX's check_schema: no "*" with credentials; the regexes compile."""
        if conf.get("allow_credential") and any(conf.get(field) == "*" for field in STARLESS):
            return CREDENTIALS
        for field in ("allow_origins_by_regex", "timing_allow_origins_by_regex"):
            for regex in conf.get(field) or ():
                try:
                    re.compile(regex)
                except re.error as exc:
                    return f'{field}: regex "{regex}" validation failed: {exc}'
        return None
