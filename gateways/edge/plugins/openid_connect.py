"""`openid-connect` (APISIX priority 2599, rewrite), in bearer-only mode: the identity
provider's JWT in `Authorization: Bearer`, verified against its key set. This is how the
reference deployment's `/api/*` and `/v1/*` routes authenticate.

The schema accepts APISIX's fields; what runs is bearer-only JWKS (or `public_key`)
verification, the platform's one verification of access tokens (runtime.idp_tokens: strict
form, the key bound to its algorithm, `aud`, token type, `sub`/`exp`/`iat` required). The key
set is the worker's `env.jwks` (runtime.auth.JwksCache of IDP_JWKS_URL, refreshed on an
unknown `kid`); the issuer must be one of `claim_validator.issuer.valid_issuers`, or else the
issuer `discovery` names (the OIDC discovery URL is `<issuer>/.well-known/openid-configuration`);
the audience one of the edge's IDP_AUDIENCES (`env.audiences`).

Verified tokens are remembered, so a repeated token costs a digest and a dict lookup instead
of a signature check (and its claims and `X-Userinfo` are not built again):
- keyed by the SHA-256 digest of the whole token, not of its signature alone: a hit must
  prove the same header and payload were verified;
- until the token's `exp` (checked on every hit against the clock, as verification checks
  it: a token is refused from its `exp` second on); `nbf` and `iat` were checked when it was
  verified, and only pass with time;
- at most CACHE_SIZE tokens, the least recently used dropped first;
- forgotten when the key set changes (`JwksCache.version`): a token whose key was rotated
  away is verified again, and refused.
What is remembered is a success only: a refused token is checked again each time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.algorithms import get_default_algorithms

from gateways.edge.model.plugins import openid_connect as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from runtime.idp_tokens import ALGORITHMS, InvalidToken, TokenRules, verify

DISCOVERY_SUFFIX = "/.well-known/openid-configuration"
CACHE_SIZE = 10_000
_IMPLS = get_default_algorithms()


@dataclass(frozen=True, slots=True)
class OpenidConnectConf:
    realm: str
    unauth_action: str
    set_userinfo_header: bool
    set_access_token_header: bool
    access_token_in_authorization_header: bool
    discovery: str = ""
    required_scopes: list[str] | None = None
    claim_validator: Mapping[str, Any] | None = None
    token_signing_alg_values_expected: str | None = None
    public_key: str | None = None


class OpenidConnect(declared.OpenidConnect, Plugin):
    """Validates bearer tokens of an OIDC provider (JWKS or a static key); the tenant from
    `tenant_id`."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(OpenidConnectConf, self.schema, conf)
        self.challenge = f'Bearer realm="{settings.realm}"'
        self.passthrough = settings.unauth_action == "pass"
        self.userinfo = settings.set_userinfo_header
        self.access_token = settings.set_access_token_header
        self.in_authorization = settings.access_token_in_authorization_header
        self.required_scopes = frozenset(settings.required_scopes or ())
        issuers = (settings.claim_validator or {}).get("issuer", {}).get("valid_issuers")
        discovery = settings.discovery
        if not issuers and discovery.endswith(DISCOVERY_SUFFIX):
            issuers = [discovery.removesuffix(DISCOVERY_SUFFIX)]
        expected = settings.token_signing_alg_values_expected
        self.rules = TokenRules(
            audiences=tuple(env.audiences),
            issuers=tuple(issuers) if issuers else None,
            algorithms=frozenset([expected] if expected else ALGORITHMS),
        )
        self.static_keys = self._static_keys(settings.public_key)
        # SHA-256 of the token → (exp, claims, X-Userinfo value), of the key set's version
        self._cache: OrderedDict[bytes, tuple[float, Mapping[str, Any], str]] = OrderedDict()
        self._keys_version = self._key_set_version()

    def _key_set_version(self) -> int:
        jwks = self.env.jwks
        return -1 if self.static_keys is not None or jwks is None else int(jwks.version)

    def _static_keys(self, pem: str | None) -> dict[str, Any] | None:
        """`public_key` prepared for each algorithm it can verify (an RSA key: RS256, an EC
        P-256 key: ES256); None without one."""
        if not pem:
            return None
        keys = {}
        for alg in ALGORITHMS:
            try:
                keys[alg] = _IMPLS[alg].prepare_key(pem)
            except (ValueError, TypeError, jwt.PyJWTError):
                continue
        return keys

    async def _key_for(self, alg: str, kid: str | None) -> Any:
        if self.static_keys is not None:
            if alg not in self.static_keys:
                raise InvalidToken(f"public_key does not sign {alg}")
            return self.static_keys[alg]
        if self.env.jwks is None:
            raise InvalidToken("no key set")
        return await self.env.jwks.signing_key(alg, kid)

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        scheme, _, token = ctx.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            if self.passthrough:
                return None
            return Reply(
                401, {"message": "Missing bearer token"}, {"WWW-Authenticate": self.challenge}
            )
        digest = hashlib.sha256(token.encode()).digest()
        version = self._key_set_version()
        if version != self._keys_version:  # keys came or went: verify everything again
            self._cache.clear()
            self._keys_version = version
        entry = self._cache.get(digest)
        if entry is not None and entry[0] > time.time():
            self._cache.move_to_end(digest)
        else:
            try:
                entry = await self._verify(token, digest)
            except _Invalid as exc:
                return self._invalid(str(exc))
        _, claims, userinfo = entry
        if self.required_scopes and not self.required_scopes <= set(
            str(claims.get("scope", "")).split()
        ):
            return Reply(403, {"message": "required scopes are missing"})
        ctx.jwt_claims = claims
        tenant = claims.get("tenant_id")
        if tenant:
            ctx.tenant_id = str(tenant)
        if self.access_token and not self.in_authorization:
            ctx.upstream_headers["x-access-token"] = token
        if self.userinfo:
            ctx.upstream_headers["x-userinfo"] = userinfo
        return None

    async def _verify(self, token: str, digest: bytes) -> tuple[float, Mapping[str, Any], str]:
        version = self._key_set_version()
        try:
            claims = await verify(token, self.rules, self._key_for)
        except InvalidToken as exc:
            raise _Invalid(exc.reason) from None
        userinfo = base64.b64encode(json.dumps(claims, separators=(",", ":")).encode()).decode()
        entry = (float(claims["exp"]), claims, userinfo)
        # Remembered only when the key set did not change during the verification (a refresh
        # it waited for): the key that verified it is then the current set's.
        if version == self._key_set_version() == self._keys_version:
            self._cache[digest] = entry
            self._cache.move_to_end(digest)
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return entry

    def _invalid(self, description: str) -> Reply:
        challenge = (
            f'{self.challenge}, error="invalid_token", error_description="{_quote(description)}"'
        )
        return Reply(401, {"message": "Invalid access token"}, {"WWW-Authenticate": challenge})


class _Invalid(Exception):
    pass


def _quote(text: str) -> str:
    return text.replace("\\", "").replace('"', "'")
