"""`jwt-auth` (APISIX priority 2510, rewrite): a JWT signed with a consumer's own secret or
key pair. The token's `key_claim_name` claim (default `key`) names the consumer's
`jwt-auth.key`; the data plane indexes them as `env.credentials["jwt-auth"]` (key → consumer
username) and the plugin verifies with that consumer's `jwt-auth` configuration.

An HS `secret` (and a `private_key`, should a consumer carry one) is stored sealed with the
platform keyring and answered `***REDACTED***` (gateways/edge/model/credentials.py); each worker
opens it once per configuration version, in memory.

Token from the header (a leading `Bearer ` stripped), then the query, then the cookie, as
APISIX. `exp` and `nbf` are checked when present (`claims_to_verify`), with
`lifetime_grace_period` seconds of leeway. Identity-provider tokens use `openid-connect`.
"""

from __future__ import annotations

import base64
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.algorithms import get_default_algorithms

from gateways.edge.model.plugins import jwt_auth as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._auth import attach_consumer, cookie, drop_query_arg, query_arg

_IMPLS = get_default_algorithms()
VERIFIED_CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class JwtAuthConf:
    header: str
    query: str
    cookie: str
    hide_credentials: bool
    key_claim_name: str
    realm: str
    claims_to_verify: list[str]
    anonymous_consumer: str | None = None


class JwtAuth(declared.JwtAuth, Plugin):
    """Authenticates a JWT (header, query or cookie) against the consumers' key and secret or
    public key."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(JwtAuthConf, self.schema, conf)
        self.header = settings.header.lower()
        self.query = settings.query
        self.cookie = settings.cookie
        self.hide = settings.hide_credentials
        self.claim = settings.key_claim_name
        self.anonymous = settings.anonymous_consumer
        verify = set(settings.claims_to_verify)
        self.options = {"verify_exp": "exp" in verify, "verify_nbf": "nbf" in verify,
                        "verify_aud": False, "verify_iat": False}  # fmt: skip
        self.challenge = {"WWW-Authenticate": f'Bearer realm="{settings.realm}"'}
        # Prepared keys per consumer (and the configuration they came from): PEM parsing is
        # far dearer than verifying.
        self._keys: dict[str, tuple[Mapping[str, Any], Any]] = {}
        # Verified tokens (bounded LRU): token → (the consumer's jwt-auth conf it was verified
        # against, username, claims, expiry). Verifying costs tens of microseconds; a client
        # sends the same token many times. A hit holds while that conf object is the
        # consumer's current one (a new configuration version re-verifies) and until expiry.
        self._verified: OrderedDict[str, tuple[Mapping[str, Any], str, Any, float]] = OrderedDict()

    def _token(self, ctx: RequestContext) -> tuple[str | None, str]:
        value = ctx.headers.get(self.header)
        if value:
            if value[:7].lower() == "bearer ":
                value = value[7:].strip()
            return value, "header"
        value = query_arg(ctx, self.query)
        if value:
            return value, "query"
        return cookie(ctx, self.cookie), "cookie"

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        token, source = self._token(ctx)
        if not token:
            return self._reject(ctx, "Missing JWT token in request")
        hit = self._verified.get(token)
        if hit is not None:
            verified_with, holder, verified_claims, until = hit
            current = self.env.consumers.get(holder)
            if _conf_of(current) is verified_with and time.time() < until:
                self._verified.move_to_end(token)
                self._accept(ctx, holder, current, verified_claims, source)
                return None
            del self._verified[token]
        try:
            unverified = jwt.decode_complete(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return self._reject(ctx, "JWT token invalid")
        header, payload = unverified["header"], unverified["payload"]
        key = payload.get(self.claim) if isinstance(payload, dict) else None
        if not key:
            return self._reject(ctx, "missing user key in JWT token")
        username = self.env.credentials.get("jwt-auth", {}).get(str(key))
        consumer = self.env.consumers.get(username or "")
        auth = _conf_of(consumer)
        if username is None or auth is None:
            return self._reject(ctx, "Invalid user key in JWT token")
        algorithm = auth.get("algorithm", "HS256")
        if header.get("alg") != algorithm:
            return self._reject(ctx, "failed to verify jwt")
        try:
            claims = jwt.decode(
                token,
                self._key(username, auth),
                algorithms=[algorithm],
                options=self.options,  # type: ignore[arg-type]
                leeway=auth.get("lifetime_grace_period", 0),
            )
        except (jwt.PyJWTError, ValueError):
            return self._reject(ctx, "failed to verify jwt")
        until = math.inf
        if self.options["verify_exp"] and isinstance(claims.get("exp"), int | float):
            until = claims["exp"] + auth.get("lifetime_grace_period", 0)
        self._verified[token] = (auth, username, claims, until)
        if len(self._verified) > VERIFIED_CACHE_SIZE:
            self._verified.popitem(last=False)
        self._accept(ctx, username, consumer, claims, source)
        return None

    def _accept(
        self,
        ctx: RequestContext,
        username: str,
        consumer: Mapping[str, Any] | None,
        claims: Any,
        source: str,
    ) -> None:
        attach_consumer(ctx, username, consumer or {})
        ctx.jwt_claims = claims
        if self.hide:
            if source == "header":
                ctx.upstream_headers[self.header] = None
            elif source == "query":
                drop_query_arg(ctx, self.query)
            else:
                _drop_cookie(ctx, self.cookie)

    def _key(self, username: str, auth: Mapping[str, Any]) -> Any:
        cached = self._keys.get(username)
        if cached is not None and cached[0] is auth:
            return cached[1]
        algorithm = auth.get("algorithm", "HS256")
        key: Any
        if algorithm.startswith("HS"):
            secret = auth.get("secret")
            if not isinstance(secret, str):
                raise ValueError("no usable secret (it did not open)")
            key = base64.b64decode(secret) if auth.get("base64_secret") else secret.encode()
        else:
            key = _IMPLS[algorithm].prepare_key(auth["public_key"])
        self._keys[username] = (auth, key)
        return key

    def _reject(self, ctx: RequestContext, message: str) -> Reply | None:
        if self.anonymous and self.anonymous in self.env.consumers:
            attach_consumer(ctx, self.anonymous, self.env.consumers[self.anonymous])
            return None
        return Reply(401, {"message": message}, dict(self.challenge))


def _conf_of(consumer: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if not consumer:
        return None
    conf = (consumer.get("plugins") or {}).get("jwt-auth")
    return conf if isinstance(conf, Mapping) else None


def _drop_cookie(ctx: RequestContext, name: str) -> None:
    kept = [p for p in ctx.headers.get("cookie", "").split(";") if p.split("=")[0].strip() != name]
    ctx.upstream_headers["cookie"] = ";".join(kept).strip() or None
