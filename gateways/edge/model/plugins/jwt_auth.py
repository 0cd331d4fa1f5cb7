"""The declaration of the `jwt-auth` plugin: its configuration's schema and checks, read by the
Admin API (the plugin's phases: `gateways/edge/plugins/jwt_auth.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration

ALGORITHMS = [
    "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512",
    "PS256", "PS384", "PS512", "EdDSA",
]  # fmt: skip


class JwtAuth(Declaration):
    name = "jwt-auth"
    priority = 2510
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "header": {"type": "string", "default": "authorization"},
            "query": {"type": "string", "default": "jwt"},
            "cookie": {"type": "string", "default": "jwt"},
            "hide_credentials": {"type": "boolean", "default": False},
            "key_claim_name": {"type": "string", "default": "key", "minLength": 1},
            "store_in_ctx": {"type": "boolean", "default": False},
            "realm": {"type": "string", "default": "jwt"},
            "anonymous_consumer": {"type": "string", "minLength": 1},
            "claims_to_verify": {
                "type": "array",
                "items": {"type": "string", "enum": ["exp", "nbf"]},
                "uniqueItems": True,
                "default": ["exp", "nbf"],
            },
        },
    }
    consumer_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "key": {"type": "string", "minLength": 1},
            "secret": {"type": "string", "minLength": 1},
            "algorithm": {"type": "string", "enum": ALGORITHMS, "default": "HS256"},
            "public_key": {"type": "string"},
            "exp": {"type": "integer", "minimum": 1, "default": 86400},
            "base64_secret": {"type": "boolean", "default": False},
            "lifetime_grace_period": {"type": "integer", "minimum": 0, "default": 0},
        },
        "required": ["key"],
        "if": {"properties": {"algorithm": {"pattern": "^HS"}}},
        "then": {"required": ["secret"]},
        "else": {"required": ["public_key"]},
    }
    credential_field = "key"
    secret_fields: ClassVar[dict[str, str]] = {"secret": "sealed", "private_key": "sealed"}
