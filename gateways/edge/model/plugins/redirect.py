"""The declaration of the `redirect` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/redirect.py`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.substitutions import Substitution


class Redirect(Declaration):
    name = "redirect"
    priority = 900
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "ret_code": {"type": "integer", "minimum": 200, "default": 302},
            "uri": {"type": "string", "minLength": 2},
            "regex_uri": {
                "type": "array",
                "minItems": 2,
                "maxItems": 2,
                "items": {"type": "string"},
            },
            "http_to_https": {"type": "boolean"},
            "encode_uri": {"type": "boolean", "default": False},
            "append_query_string": {"type": "boolean", "default": False},
        },
        "oneOf": [
            {"required": ["uri"]},
            {"required": ["regex_uri"]},
            {"required": ["http_to_https"]},
        ],
    }

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        """APISIX's check_schema: `regex_uri` compiles; not both http_to_https and
        append_query_string."""
        regex_uri = conf.get("regex_uri")
        if regex_uri:
            try:
                Substitution(regex_uri[0], regex_uri[1])
            except (re.error, ValueError) as exc:
                return f"invalid regex_uri ({regex_uri[0]}, {regex_uri[1]}), err:{exc}"
        if conf.get("http_to_https") and conf.get("append_query_string"):
            return "only one of `http_to_https` and `append_query_string` can be configured."
        return None
