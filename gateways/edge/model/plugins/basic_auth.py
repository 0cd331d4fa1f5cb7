"""The declaration of the `basic-auth` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/basic_auth.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration


class BasicAuth(Declaration):
    name = "basic-auth"
    priority = 2520
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "hide_credentials": {"type": "boolean", "default": False},
            "realm": {"type": "string", "default": "basic"},
            "anonymous_consumer": {"type": "string", "minLength": 1},
        },
    }
    consumer_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"username": {"type": "string"}, "password": {"type": "string"}},
        "required": ["username", "password"],
    }
    credential_field = "username"
    secret_fields: ClassVar[dict[str, str]] = {"password": "hashed"}
