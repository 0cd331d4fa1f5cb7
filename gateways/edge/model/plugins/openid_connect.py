"""The declaration of the `openid-connect` plugin: its configuration's schema and checks, read by
the Admin API (the plugin's phases: `gateways/edge/plugins/openid_connect.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration


class OpenidConnect(Declaration):
    name = "openid-connect"
    priority = 2599
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "client_id": {"type": "string"},
            "client_secret": {"type": "string"},
            "discovery": {"type": "string"},
            "scope": {"type": "string", "default": "openid"},
            "ssl_verify": {"type": "boolean", "default": True},
            "timeout": {"type": "integer", "minimum": 1, "default": 3},
            "introspection_endpoint": {"type": "string"},
            "introspection_endpoint_auth_method": {
                "type": "string",
                "default": "client_secret_basic",
            },
            "token_endpoint_auth_method": {"type": "string"},
            "bearer_only": {"type": "boolean", "default": False},
            "session": {"type": "object"},
            "realm": {"type": "string", "default": "apisix"},
            "logout_path": {"type": "string", "default": "/logout"},
            "redirect_uri": {"type": "string"},
            "post_logout_redirect_uri": {"type": "string"},
            "unauth_action": {
                "type": "string",
                "enum": ["auth", "deny", "pass"],
                "default": "auth",
            },
            "public_key": {"type": "string"},
            "use_jwks": {"type": "boolean", "default": False},
            "use_pkce": {"type": "boolean", "default": False},
            "token_signing_alg_values_expected": {"type": "string"},
            "set_access_token_header": {"type": "boolean", "default": True},
            "access_token_in_authorization_header": {"type": "boolean", "default": False},
            "set_id_token_header": {"type": "boolean", "default": True},
            "set_userinfo_header": {"type": "boolean", "default": True},
            "set_refresh_token_header": {"type": "boolean", "default": False},
            "required_scopes": {"type": "array", "items": {"type": "string"}},
            "claim_validator": {
                "type": "object",
                "properties": {
                    "issuer": {
                        "type": "object",
                        "properties": {
                            "valid_issuers": {"type": "array", "items": {"type": "string"}}
                        },
                    },
                },
            },
            "claim_schema": {"type": "object"},
            "proxy_opts": {"type": "object"},
            "authorization_params": {"type": "object"},
            "renew_access_token_on_expiry": {"type": "boolean", "default": True},
            "access_token_expires_in": {"type": "integer", "minimum": 1},
            "access_token_expires_leeway": {"type": "integer", "minimum": 0, "default": 0},
            "force_reauthorize": {"type": "boolean", "default": False},
            "iat_slack": {"type": "integer", "minimum": 0, "default": 120},
            "accept_none_alg": {"type": "boolean", "default": False},
            "accept_unsupported_alg": {"type": "boolean", "default": True},
            "cache_segment": {"type": "string"},
        },
        "required": ["client_id", "discovery"],
    }
