"""Scope handling and the claims of the access and ID tokens the IdP mints.

Claim names follow Keycloak (`azp`, `typ`, `preferred_username`, `realm_access.roles`,
`service-account-<client_id>`), so verifiers written against this IdP keep working when Keycloak
replaces it. `tenant_id` is the platform's own claim: for human users it is added only when the
`tenant` scope is asked for (the spec's test users ask for `openid tenant`); service users always
carry it, since an agent token without a tenant is useless to the gateways.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections.abc import Callable
from typing import Any

from sidecars.idp.config import IdpConfig
from sidecars.idp.keys import SigningKeys
from sidecars.idp.records import Client, User

# Canonical order of the scopes this IdP knows; granted scopes are listed in this order.
KNOWN_SCOPES = ("openid", "profile", "email", "tenant", "roles")
# Keycloak grants its default client scopes whether or not they are asked for.
DEFAULT_SCOPES = frozenset({"profile", "email"})


class InvalidScope(ValueError):
    """The request asked for a scope this IdP does not know."""


def grant_scopes(requested: str | None) -> tuple[str, ...]:
    """The scopes granted for a request's `scope` parameter (space-separated, RFC 6749 §3.3)."""
    asked = set((requested or "").split())
    unknown = sorted(asked.difference(KNOWN_SCOPES))
    if unknown:
        raise InvalidScope(f"Invalid scopes: {' '.join(unknown)}")
    wanted = asked | DEFAULT_SCOPES
    return tuple(scope for scope in KNOWN_SCOPES if scope in wanted)


def _at_hash(access_token: str) -> str:
    # OIDC Core §3.1.3.6: left half of the SHA-256 of the access token (both RS256 and ES256
    # use SHA-256), base64url without padding.
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest[:16]).rstrip(b"=").decode()


def _put(claims: dict[str, Any], path: str, value: Any) -> None:
    """Set a claim at a dotted path (`org.tenant`), as Keycloak's mappers nest a claim name."""
    *parents, leaf = path.split(".")
    for name in parents:
        claims = claims.setdefault(name, {})
    claims[leaf] = value


class TokenMinter:
    """Builds and signs token responses; holds no mutable state."""

    def __init__(
        self, config: IdpConfig, keys: SigningKeys, clock: Callable[[], float] = time.time
    ) -> None:
        self._config = config
        self._keys = keys
        self._clock = clock

    def _base(self, sub: str, client: Client, scopes: tuple[str, ...]) -> dict[str, Any]:
        now = int(self._clock())
        return {
            "iss": self._config.issuer,
            "sub": sub,
            "aud": self._config.audience,
            "azp": client.client_id,
            "iat": now,
            "exp": now + self._config.token_ttl,
            "jti": str(uuid.uuid4()),
            "typ": "Bearer",
            "scope": " ".join(scopes),
        }

    def _response(self, access_token: str, scopes: tuple[str, ...]) -> dict[str, Any]:
        return {
            "access_token": access_token,
            "token_type": "Bearer",
            "expires_in": self._config.token_ttl,
            "scope": " ".join(scopes),
        }

    def for_user(
        self, user: User, client: Client, scopes: tuple[str, ...], nonce: str | None = None
    ) -> dict[str, Any]:
        """Token response for a person (the password and authorization-code grants, and their
        refreshes); adds an `id_token` when `openid` is granted, carrying the `nonce` of the
        authorization request when there was one (OIDC Core §3.1.3.6).

        The signing algorithm is the user's `alg`, else the client's, else RS256.
        """
        alg = user.alg or client.alg or "RS256"
        identity: dict[str, Any] = {"preferred_username": user.username}
        if user.email:
            identity["email"] = user.email
        if "tenant" in scopes:
            _put(identity, self._config.tenant_claim, user.tenant_id)
        claims = self._base(user.id, client, scopes)
        claims.update(identity, realm_access={"roles": list(user.roles)})
        access_token = self._keys.sign(claims, alg)
        response = self._response(access_token, scopes)
        if "openid" in scopes:
            id_claims = {key: claims[key] for key in ("iss", "sub", "azp", "iat", "exp", "jti")}
            # The ID token is addressed to the client (OIDC Core §2), the access token to
            # the platform.
            id_claims.update(
                identity,
                aud=client.client_id,
                auth_time=claims["iat"],
                typ="ID",
                at_hash=_at_hash(access_token),
                jti=str(uuid.uuid4()),
            )
            if nonce is not None:
                id_claims["nonce"] = nonce
            response["id_token"] = self._keys.sign(id_claims, alg)
        return response

    def for_service(self, client: Client, scopes: tuple[str, ...]) -> dict[str, Any]:
        """Token response for the client_credentials grant (a service user, e.g. an agent)."""
        claims = self._base(client.service_account_id, client, scopes)
        claims.update(
            preferred_username=f"service-account-{client.client_id}",
            client_id=client.client_id,
            realm_access={"roles": list(client.roles)},
        )
        _put(claims, self._config.tenant_claim, client.tenant_id)
        if client.agent_id:
            claims["agent_id"] = client.agent_id
        return self._response(self._keys.sign(claims, client.alg or "RS256"), scopes)
