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
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import jwt

from runtime import json_codec
from runtime.config import ServiceConfig
from runtime.errors import Unauthenticated
from runtime.http1.client import ClientError, HttpClient
from runtime.idp_tokens import (
    ALGORITHMS,
    DEFAULT_AUDIENCES,
    InvalidToken,
    TokenRules,
    compact_parts,
    verify,
)

if TYPE_CHECKING:
    from runtime.tenant_realms import TenantRealms

log = logging.getLogger(__name__)

# An unknown `kid` refetches the key set at most this long (then 401), at most once per
# JWKS_MIN_REFRESH_SECS: a hung identity provider costs one short wait, not one per request.
JWKS_FETCH_TIMEOUT_SECS = 1.0
JWKS_MIN_REFRESH_SECS = 10.0
JWKS_MAX_BYTES = 1024**2  # a key set is a few kB; a longer answer is not one
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
    fetched lazily and refreshed when a token names a `kid` we have not seen (key rotation).

    A refresh is bounded and rare, so that an unknown `kid` — a rotation, or anyone's forgery —
    costs the caller at most one short wait even when the key set's server hangs: one fetch at
    a time (concurrent callers share it), at most `timeout` seconds, at most once per
    `min_refresh_secs` whatever its outcome (a failed fetch keeps the keys we had). Only keys
    of `algorithms` are kept, each with the one algorithm it verifies.

    `version` counts the fetches that took a key away (or changed one; a key added takes
    nothing back): whoever remembers what a key verified (the edge's openid-connect cache)
    forgets it when the version moves, so a key rotated away stops vouching for the tokens it
    signed."""

    def __init__(
        self,
        url: str,
        *,
        min_refresh_secs: float = JWKS_MIN_REFRESH_SECS,
        timeout: float = JWKS_FETCH_TIMEOUT_SECS,
        algorithms: tuple[str, ...] = ALGORITHMS,
    ) -> None:
        self.url = url
        self.algorithms = algorithms
        self.fetch_timeout = timeout
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._held: list[Any] = []  # the JWKs behind `_keys`, as fetched (to see a change)
        self.version = 0
        self._fetched_at = -math.inf
        self._min_refresh = min_refresh_secs
        self._budget = timeout  # the next fetch's bound (a subclass may share one over two)
        self._lock = asyncio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK:
        """The key of `kid`; raises Unauthenticated when the key set has none."""
        if kid in self._keys:
            return self._keys[kid]
        async with self._lock:  # callers of a fetch in flight wait for it, not for another
            if kid not in self._keys and time.monotonic() - self._fetched_at >= self._min_refresh:
                await self._refresh()
        if kid in self._keys:
            return self._keys[kid]
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        raise Unauthenticated(INVALID_TOKEN, error=UNAUTHORIZED)

    async def signing_key(self, alg: str, kid: str | None) -> Any:
        """The verification key of `kid` for exactly `alg` (runtime.idp_tokens.KeyFor): a
        token naming one key with another key type's algorithm is refused here."""
        try:
            found = await self.key(kid)
        except Unauthenticated:
            raise InvalidToken("unknown signing key") from None
        if found.algorithm_name != alg:
            raise InvalidToken("the key of that kid does not sign that alg")
        return found.key

    async def _refresh(self) -> None:
        self._fetched_at = time.monotonic()
        try:
            document = await fetch_json(self.url, self._budget)
            entries = document["keys"]
            if not isinstance(entries, list):
                raise ValueError("keys is not a list")
        except (ClientError, TimeoutError, ValueError, TypeError, KeyError) as exc:
            log.warning("jwks fetch failed", extra={"url": self.url, "error": repr(exc)})
            return
        keys: dict[str | None, jwt.PyJWK] = {}
        held = []
        for jwk in entries:
            if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(jwk)
            except (jwt.PyJWTError, TypeError, ValueError, KeyError):
                continue
            if key.algorithm_name in self.algorithms:
                keys[jwk.get("kid")] = key
                held.append(jwk)
        if any(jwk not in held for jwk in self._held):
            self.version += 1
        self._keys, self._held = keys, held


async def fetch_json(url: str, within_secs: float) -> Any:
    """The JSON document at `url` (a key set, a discovery document), within `within_secs`
    seconds all told; ClientError, or ValueError for an error status or a body that is not JSON.
    Through the platform's lean client (runtime/http1), not aiohttp's: an edge data-plane
    worker, which verifies tokens with a JwksCache, then never imports aiohttp (10 MB idle)."""
    client = HttpClient(pool_size=1, user_agent="strata")
    try:
        resp = await client.request(
            "GET",
            url,
            {"accept": "application/json"},
            idle_secs=within_secs,
            total_secs=within_secs,
        )
        try:
            if resp.status >= 400:
                raise ValueError(f"{url} answered {resp.status}")
            return json_codec.loads(await resp.read(JWKS_MAX_BYTES))
        finally:
            resp.close()
    finally:
        client.close()


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
        audiences: a JWT's `aud` must hold one of them (IDP_AUDIENCES).
        api_keys: where the service takes issued API keys (`Bearer sk-…`), their resolver;
            without one such a bearer is an invalid token.
        realms: where tenants may own realms of the identity provider
            (`runtime.tenant_realms`): a token from such a realm's issuer acts for its tenant.
    """

    def __init__(
        self,
        jwks: JwksCache,
        master_key: str,
        *,
        admin_api_key: str | None = None,
        issuer: str | None = None,
        audiences: tuple[str, ...] = DEFAULT_AUDIENCES,
        api_keys: ApiKeyResolver | None = None,
        realms: TenantRealms | None = None,
    ) -> None:
        self.jwks = jwks
        self.realms = realms
        self._master = master_key.encode()
        self._admin = admin_api_key.encode() if admin_api_key else None
        self.rules = TokenRules(
            audiences=audiences, issuers=(issuer,) if issuer is not None else None
        )
        self.api_keys = api_keys

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """Raises Unauthenticated when no accepted credential is present and valid."""
        api_key = headers.get("x-api-key")
        if api_key is not None and self._admin is not None:
            if hmac.compare_digest(_raw(api_key), self._admin):
                return Principal(kind="admin", subject="edge-admin")
            raise Unauthenticated("Invalid admin API key", error=UNAUTHORIZED)
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Missing bearer token", error=UNAUTHORIZED)
        token = token.strip()
        if hmac.compare_digest(_raw(token), self._master):
            return Principal(
                kind="master", subject="master-key", roles=frozenset({"platform-admin"})
            )
        if self.api_keys is not None and token.startswith(API_KEY_PREFIX):
            return await self.api_keys.principal(token)
        return await self.verify_jwt(token)

    async def verify_jwt(self, token: str) -> Principal:
        """An identity-provider access token's caller (runtime.idp_tokens); Unauthenticated
        with the spec's body for any token that does not verify."""
        try:
            realm = self._tenant_realm(token)
            if realm is None:
                claims = await verify(token, self.rules, self.jwks.signing_key)
                tenant = claims.get("tenant_id")
                roles = _realm_roles(claims)
            else:
                claims, tenant = await self._verify_in_realm(token, *realm)
                # a tenant's realm administers that tenant at most, never the platform
                roles = _realm_roles(claims) - {"platform-admin"}
        except InvalidToken as exc:
            log.debug("token refused", extra={"reason": exc.reason})
            raise Unauthenticated(INVALID_TOKEN, error=UNAUTHORIZED) from None
        if tenant is not None and not isinstance(tenant, str):
            raise Unauthenticated(INVALID_TOKEN, error=UNAUTHORIZED)
        is_service = "agent_id" in claims or str(claims.get("preferred_username", "")).startswith(
            "service-account-"
        )
        return Principal(
            kind="service" if is_service else "user",
            subject=claims["sub"],
            tenant_id=tenant,
            roles=roles,
            claims=claims,
        )

    def _tenant_realm(self, token: str) -> tuple[str, str] | None:
        """(issuer, realm) when the token's (unverified) `iss` is a tenant's realm of the
        identity provider; None for the platform's issuer and any other."""
        if self.realms is None:
            return None
        _header, payload = compact_parts(token)
        issuer = payload.get("iss")
        if not isinstance(issuer, str):
            return None
        realm = self.realms.realm(issuer)
        return None if realm is None else (issuer, realm)

    async def _verify_in_realm(
        self, token: str, issuer: str, realm: str
    ) -> tuple[dict[str, Any], str]:
        """The claims of a token from a tenant's realm, verified with that realm's keys and
        issuer, and the tenant it acts for (`runtime.tenant_realms`)."""
        assert self.realms is not None
        binding = await self.realms.binding(realm)  # Unavailable (503) passes through
        if binding is None:
            raise InvalidToken("an issuer no tenant owns")
        rules = TokenRules(audiences=self.rules.audiences, issuers=(issuer,))
        claims = await verify(token, rules, self.realms.keys(issuer, realm).signing_key)
        return claims, self.realms.tenant_of(claims, binding)


def _raw(header_value: str) -> bytes:
    """A header value's bytes (a value that was not UTF-8 arrives with surrogate escapes)."""
    return header_value.encode("utf-8", "surrogateescape")


def _realm_roles(claims: Mapping[str, Any]) -> frozenset[str]:
    """Keycloak's `realm_access.roles`; none when the claim is not of that shape."""
    access = claims.get("realm_access")
    roles = access.get("roles") if isinstance(access, dict) else None
    if not isinstance(roles, list):
        return frozenset()
    return frozenset(role for role in roles if isinstance(role, str))


def authenticator_for(
    config: ServiceConfig,
    *,
    admin_api_key: str | None = None,
    api_keys: ApiKeyResolver | None = None,
    realms: TenantRealms | None = None,
) -> Authenticator:
    """The authenticator a service builds from its config (IdP JWKS, issuer, audiences, master
    key), where it takes issued API keys, their resolver, and where it trusts tenants' own
    realms, their bindings."""
    return Authenticator(
        JwksCache(config.idp_jwks_url),
        config.master_key,
        admin_api_key=admin_api_key,
        issuer=config.idp_issuer,
        audiences=config.idp_audiences,
        api_keys=api_keys,
        realms=realms,
    )
