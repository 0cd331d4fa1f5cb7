"""The portal as an OAuth 2.0 public client of the identity provider: the authorization request
(code + PKCE S256, state, nonce), the code exchange, the refresh grant, the ID token's check.

The IdP is the dev IdP locally and Keycloak in Kubernetes: both speak Keycloak's paths, so the
endpoints are derived from IDP_ISSUER unless configured.
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import jwt

from controlplane.portal.sessions import Tokens
from runtime import json_codec
from runtime.auth import JwksCache
from runtime.errors import InvalidRequest, Unavailable, UpstreamError

SCOPE = "openid tenant"  # `tenant`: the access token carries the user's tenant_id
TIMEOUT = aiohttp.ClientTimeout(total=10)


def challenge_of(verifier: str) -> str:
    """RFC 7636 S256."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class TokenRefused(Exception):
    """The IdP refused a grant (400/401): a code or refresh token that no longer works."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.error, self.description = error, description


@dataclass
class IdpClient:
    issuer: str
    client_id: str
    authorization_url: str
    token_url: str
    jwks: JwksCache
    http: aiohttp.ClientSession | None = None

    def authorize_url(self, *, redirect_uri: str, state: str, nonce: str, verifier: str) -> str:
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": redirect_uri,
            "scope": SCOPE,
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge_of(verifier),
            "code_challenge_method": "S256",
        }
        return f"{self.authorization_url}?{urlencode(query)}"

    async def redeem_code(self, code: str, redirect_uri: str, verifier: str) -> dict[str, Any]:
        return await self._grant(
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
            }
        )

    async def refresh(self, refresh_token: str) -> dict[str, Any]:
        return await self._grant({"grant_type": "refresh_token", "refresh_token": refresh_token})

    async def _grant(self, form: dict[str, str]) -> dict[str, Any]:
        if self.http is None:
            self.http = aiohttp.ClientSession(timeout=TIMEOUT)
        try:
            async with self.http.post(
                self.token_url, data={**form, "client_id": self.client_id}
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unavailable(
                f"the identity provider is unreachable: {type(exc).__name__}",
                error="idp_unavailable",
            ) from exc
        try:
            body = json_codec.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise UpstreamError(
                f"the identity provider answered {status} without a JSON object",
                error="idp_error",
            )
        if status in (400, 401):
            raise TokenRefused(
                str(body.get("error", "invalid_grant")), str(body.get("error_description", ""))
            )
        if status != 200 or not isinstance(body.get("access_token"), str):
            raise UpstreamError(f"the identity provider answered {status}", error="idp_error")
        return body

    async def check_id_token(self, id_token: str, nonce: str) -> None:
        """The ID token is the IdP's, for this client, and carries our nonce (no replay)."""
        try:
            header = jwt.get_unverified_header(id_token)
            key = await self.jwks.signing_key(str(header.get("alg")), header.get("kid"))
            claims = jwt.decode(
                id_token,
                key,
                algorithms=[str(header.get("alg"))],
                audience=self.client_id,
                issuer=self.issuer,
                options={"require": ["exp", "iat", "sub"]},
            )
        except (jwt.PyJWTError, ValueError) as exc:
            raise InvalidRequest(
                f"the identity provider's ID token does not verify: {exc}",
                error="invalid_id_token",
            ) from None
        if claims.get("nonce") != nonce:
            raise InvalidRequest(
                "the ID token's nonce is not this login's", error="invalid_id_token"
            )

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()


def tokens_of(body: dict[str, Any]) -> Tokens:
    """A token response's tokens with absolute expiries."""
    now = int(time.time())
    refresh = body.get("refresh_token")
    refresh_in = body.get("refresh_expires_in")
    return Tokens(
        access_token=body["access_token"],
        access_expires_at=now + int(body.get("expires_in") or 60),
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        # Keycloak says 0 for an offline token (no idle expiry): the session's maximum applies.
        refresh_expires_at=(
            now + int(refresh_in) if isinstance(refresh_in, int) and refresh_in > 0 else None
        )
        if isinstance(refresh, str) and refresh
        else None,
    )
