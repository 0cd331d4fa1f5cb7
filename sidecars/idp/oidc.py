"""OIDC discovery and the JWKS endpoint, under Keycloak's realm paths.

Discovery lists only what this IdP implements: the authorization endpoint (code flow, PKCE S256
only, `iss` in the answer per RFC 9207), the token endpoint and its grants, the registration
endpoint (RFC 7591, public clients). The same document is served as OpenID Connect discovery
under the realm and as RFC 8414 authorization server metadata at the host root
(`/.well-known/oauth-authorization-server/realms/strata`, the first place an MCP client looks).
"""

from __future__ import annotations

from sidecars import web
from sidecars.idp.authorize import AUTH_PATH
from sidecars.idp.config import REALM_PREFIX
from sidecars.idp.context import CONFIG, KEYS
from sidecars.idp.keys import SUPPORTED_ALGS
from sidecars.idp.registration import REGISTRATION_PATH
from sidecars.idp.token_endpoint import GRANT_TYPES
from sidecars.idp.tokens import KNOWN_SCOPES

CERTS_PATH = "protocol/openid-connect/certs"
TOKEN_PATH = "protocol/openid-connect/token"
DISCOVERY_PATH = ".well-known/openid-configuration"
OIDC_DISCOVERY = f"{REALM_PREFIX}/{DISCOVERY_PATH}"
OAUTH_METADATA = f"/.well-known/oauth-authorization-server{REALM_PREFIX}"


async def discovery(request: web.Request) -> web.Response:
    """`GET /realms/strata/.well-known/openid-configuration` and, the same document,
    `GET /.well-known/oauth-authorization-server/realms/strata`."""
    config = request.app[CONFIG]
    return web.json_response(
        {
            "issuer": config.issuer,
            "authorization_endpoint": config.endpoint(AUTH_PATH),
            "token_endpoint": config.endpoint(TOKEN_PATH),
            "registration_endpoint": config.endpoint(REGISTRATION_PATH),
            "jwks_uri": config.endpoint(CERTS_PATH),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
            "grant_types_supported": list(GRANT_TYPES),
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "none",
            ],
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
                "nonce",
            ],
        }
    )


async def certs(request: web.Request) -> web.Response:
    """`GET /realms/strata/protocol/openid-connect/certs`: the public signing keys."""
    return web.json_response(request.app[KEYS].jwks())
