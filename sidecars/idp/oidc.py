"""OIDC discovery and the JWKS endpoint, under Keycloak's realm paths.

Discovery lists only what this IdP implements: the token endpoint and its two grants. There is
no authorization endpoint (no browser login), so `authorization_endpoint` and
`response_types_supported` are left out rather than advertised and then missing.
"""

from __future__ import annotations

from aiohttp import web

from sidecars.idp.context import CONFIG, KEYS
from sidecars.idp.keys import SUPPORTED_ALGS
from sidecars.idp.token_endpoint import GRANT_TYPES
from sidecars.idp.tokens import KNOWN_SCOPES

CERTS_PATH = "protocol/openid-connect/certs"
TOKEN_PATH = "protocol/openid-connect/token"


async def discovery(request: web.Request) -> web.Response:
    """`GET /realms/strata/.well-known/openid-configuration`."""
    config = request.app[CONFIG]
    return web.json_response(
        {
            "issuer": config.issuer,
            "jwks_uri": config.endpoint(CERTS_PATH),
            "token_endpoint": config.endpoint(TOKEN_PATH),
            "grant_types_supported": list(GRANT_TYPES),
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "id_token_signing_alg_values_supported": list(SUPPORTED_ALGS),
            "subject_types_supported": ["public"],
            "scopes_supported": list(KNOWN_SCOPES),
            "claims_supported": [
                "iss",
                "sub",
                "aud",
                "azp",
                "exp",
                "iat",
                "jti",
                "scope",
                "typ",
                "preferred_username",
                "email",
                "tenant_id",
                "agent_id",
                "realm_access",
            ],
        }
    )


async def certs(request: web.Request) -> web.Response:
    """`GET /realms/strata/protocol/openid-connect/certs`: the public signing keys."""
    return web.json_response(request.app[KEYS].jwks())
