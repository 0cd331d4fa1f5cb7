"""How `/mcp` tells an MCP client where to log in (the MCP authorization specification,
2025-06-18 and 2025-11-25).

- Its OAuth 2.0 protected resource metadata (RFC 9728) is served at
  `/.well-known/oauth-protected-resource/mcp` and, for clients that look at the host root, at
  `/.well-known/oauth-protected-resource`: the resource (`<public URL>/mcp`), the identity
  provider as its authorization server, the scopes to ask for (`tenant` puts the `tenant_id`
  claim in the token), bearer tokens in the `Authorization` header only.
- Every 401 of `/mcp` carries `WWW-Authenticate: Bearer resource_metadata="…", scope="…"`
  (RFC 9728 §5.1), plus `error="invalid_token"` when a token was presented but refused
  (RFC 6750 §3.1: a request without credentials gets no error code).

From there the client discovers the IdP (RFC 8414 / OpenID Connect discovery), registers
(RFC 7591) and logs the user in with the authorization-code flow and PKCE; what it gets is an
ordinary IdP token, which the gateway verifies like any other.

The public URL is AGENT_PUBLIC_URL when set (behind the edge, an ingress, TLS termination);
unset, it is the scheme and host the request came to, so a client that reaches the gateway as
`localhost` and one that uses `127.0.0.1` each see their own address (MCP clients refuse
metadata whose resource is not the URL they called).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from runtime.errors import Unauthenticated
from runtime.frontdoor import DEFINITION, error_response

WELL_KNOWN = "/.well-known/oauth-protected-resource"
# `tenant`: the token carries the caller's tenant_id, which /mcp serves the tools of.
SCOPES = ("openid", "tenant")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ProtectedResource:
    """The metadata and challenges of the endpoint at `path`.

    Args:
        path: the endpoint's path (`/mcp`).
        authorization_server: the IdP's issuer.
        public_url: the gateway's public origin; None: each request's own.
    """

    def __init__(self, path: str, authorization_server: str, public_url: str | None) -> None:
        self.path = path
        self.authorization_server = authorization_server
        self.public_url = public_url.rstrip("/") if public_url else None

    def _origin(self, request: web.Request) -> str:
        return self.public_url or f"{request.scheme}://{request.host}"

    def metadata_url(self, request: web.Request) -> str:
        """Where the metadata of the resource lives (RFC 9728 §3.1: the well-known prefix
        goes between the host and the resource's path)."""
        return f"{self._origin(request)}{WELL_KNOWN}{self.path}"

    def document(self, request: web.Request) -> dict[str, Any]:
        """The RFC 9728 metadata document."""
        return {
            "resource": f"{self._origin(request)}{self.path}",
            "authorization_servers": [self.authorization_server],
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
            "resource_name": "Strata agent gateway (MCP)",
        }

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """`GET /.well-known/oauth-protected-resource[/mcp]`: public, readable from any page
        (browser-based MCP clients fetch it themselves)."""
        return web.json_response(
            self.document(request), headers={"Access-Control-Allow-Origin": "*"}
        )

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [("GET", WELL_KNOWN, self.serve), ("GET", f"{WELL_KNOWN}{self.path}", self.serve)]

    def challenge(self, request: web.Request, exc: Unauthenticated) -> web.Response:
        """The 401 of the endpoint: the front door's error body, with the challenge."""
        params = {"resource_metadata": self.metadata_url(request), "scope": " ".join(SCOPES)}
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            params |= {"error": "invalid_token", "error_description": exc.message}
        response = error_response(request.app[DEFINITION].envelope, exc)
        response.headers["WWW-Authenticate"] = "Bearer " + ", ".join(
            f'{name}="{_quoted(value)}"' for name, value in params.items()
        )
        return response


def _quoted(value: str) -> str:
    """A quoted-string's content (RFC 9110 §5.6.4)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')
