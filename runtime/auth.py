"""Who is calling: bearer JWTs verified against the identity provider's JWKS, the platform
master key for service-to-service calls, the edge admin key, and — at the gateways that take
them — issued API keys (`Bearer sk-…`, resolved by `runtime.issued_keys`).

The same `Authenticator` serves both transports: the guard (`runtime.guard`) calls
`authenticate(headers)` with lower-cased header names for every RPC that is not public, and
`runtime.access` decides what the verified `Principal` may do.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import jwt

from runtime.config import ServiceConfig
from runtime.errors import Unauthenticated

log = logging.getLogger(__name__)

ALGORITHMS = ("RS256", "ES256")
INVALID_TOKEN = "Invalid or expired token"  # the spec's message text for token failures
UNAUTHORIZED = "unauthorized"  # the spec's identifier for a caller without valid credentials
API_KEY_PREFIX = "sk-"  # an issued API key (a JWT starts with `eyJ`)


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. `kind` is `user`, `service` (an IdP service user), `master`
    (a platform service or operator holding the master key), `admin` (edge admin key) or
    `api_key` (an issued API key: `subject` is the key id, `tenant_id` the key's tenant)."""

    kind: str
    subject: str
    tenant_id: str | None = None
    roles: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_platform_admin(self) -> bool:
        """The master key, or a JWT with the `platform-admin` realm role. The edge admin key
        is not: it opens the edge's admin API and nothing else."""
        return self.kind == "master" or "platform-admin" in self.roles


class JwksCache:
    """A key set's signing keys (the identity provider's; the STS's at the agent gateway),
    fetched lazily and refreshed when a token names a `kid` we have not seen (key rotation),
    at most once per `min_refresh_secs`. Only keys of `algorithms` are kept."""

    def __init__(
        self,
        url: str,
        *,
        min_refresh_secs: float = 10.0,
        timeout: float = 5.0,
        algorithms: tuple[str, ...] = ALGORITHMS,
    ) -> None:
        self.url = url
        self.algorithms = algorithms
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = 0.0
        self._min_refresh = min_refresh_secs
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._lock = asyncio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK:
        if kid in self._keys:
            return self._keys[kid]
        async with self._lock:
            if kid not in self._keys and time.monotonic() - self._fetched_at >= self._min_refresh:
                await self._refresh()
        if kid in self._keys:
            return self._keys[kid]
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        raise Unauthenticated(INVALID_TOKEN, error=UNAUTHORIZED)

    async def _refresh(self) -> None:
        self._fetched_at = time.monotonic()
        try:
            async with (
                aiohttp.ClientSession(timeout=self._timeout) as session,
                session.get(self.url) as resp,
            ):
                resp.raise_for_status()
                document = await resp.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning("jwks fetch failed", extra={"url": self.url, "error": repr(exc)})
            return
        keys = {}
        for jwk in document.get("keys", []):
            alg = jwk.get("alg", self.algorithms[0])
            if jwk.get("use", "sig") != "sig" or alg not in self.algorithms:
                continue
            try:
                keys[jwk.get("kid")] = jwt.PyJWK(jwk)
            except jwt.PyJWTError:
                continue
        self._keys = keys


class ApiKeyResolver(Protocol):
    """Who holds an issued API key (`runtime.issued_keys.IssuedKeys`)."""

    async def principal(self, full_key: str) -> Principal: ...


class Authenticator:
    """Verifies the credentials one service accepts.

    Args:
        jwks: the identity provider's key cache (bearer JWTs).
        master_key: the platform master key (bearer), accepted by every service.
        admin_api_key: the edge admin key (`x-api-key`), where the service has one.
        issuer: when set, a JWT's `iss` must equal it.
        api_keys: where the service takes issued API keys (`Bearer sk-…`), their resolver;
            without one such a bearer is an invalid token.
    """

    def __init__(
        self,
        jwks: JwksCache,
        master_key: str,
        *,
        admin_api_key: str | None = None,
        issuer: str | None = None,
        api_keys: ApiKeyResolver | None = None,
    ) -> None:
        self.jwks = jwks
        self._master = master_key.encode()
        self._admin = admin_api_key.encode() if admin_api_key else None
        self._issuer = issuer
        self.api_keys = api_keys

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """Raises Unauthenticated when no accepted credential is present and valid."""
        api_key = headers.get("x-api-key")
        if api_key is not None and self._admin is not None:
            if hmac.compare_digest(api_key.encode(), self._admin):
                return Principal(kind="admin", subject="edge-admin")
            raise Unauthenticated("Invalid admin API key", error=UNAUTHORIZED)
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Missing bearer token", error=UNAUTHORIZED)
        token = token.strip()
        if hmac.compare_digest(token.encode(), self._master):
            return Principal(
                kind="master", subject="master-key", roles=frozenset({"platform-admin"})
            )
        if self.api_keys is not None and token.startswith(API_KEY_PREFIX):
            return await self.api_keys.principal(token)
        return await self.verify_jwt(token)

    async def verify_jwt(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthenticated(INVALID_TOKEN, error=UNAUTHORIZED) from exc
        if header.get("alg") not in ALGORITHMS:
            raise Unauthenticated(INVALID_TOKEN, error=UNAUTHORIZED)
        key = await self.jwks.key(header.get("kid"))
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[header["alg"]],
                issuer=self._issuer,
                options={"verify_aud": False, "require": ["exp", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated(INVALID_TOKEN, error=UNAUTHORIZED) from exc
        roles = frozenset(claims.get("realm_access", {}).get("roles", []))
        is_service = "agent_id" in claims or str(claims.get("preferred_username", "")).startswith(
            "service-account-"
        )
        return Principal(
            kind="service" if is_service else "user",
            subject=str(claims["sub"]),
            tenant_id=claims.get("tenant_id"),
            roles=roles,
            claims=claims,
        )


def authenticator_for(
    config: ServiceConfig,
    *,
    admin_api_key: str | None = None,
    api_keys: ApiKeyResolver | None = None,
) -> Authenticator:
    """The authenticator a service builds from its config (IdP JWKS, issuer, master key), and
    where it takes issued API keys, their resolver."""
    return Authenticator(
        JwksCache(config.idp_jwks_url),
        config.master_key,
        admin_api_key=admin_api_key,
        issuer=config.idp_issuer,
        api_keys=api_keys,
    )
