"""The declaration of the `key-auth` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/key_auth.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration


class KeyAuth(Declaration):
    name = "key-auth"
    priority = 2500
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "header": {"type": "string", "default": "apikey"},
            "query": {"type": "string", "default": "apikey"},
            "hide_credentials": {"type": "boolean", "default": False},
            "realm": {"type": "string", "default": "key"},
            "anonymous_consumer": {"type": "string", "minLength": 1},
        },
    }
    consumer_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"key": {"type": "string", "minLength": 1}},
        "required": ["key"],
    }
    credential_field = "key"
    secret_fields: ClassVar[dict[str, str]] = {"key": "digest"}
