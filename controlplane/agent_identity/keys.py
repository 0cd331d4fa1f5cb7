"""The STS's signing keys: the current one signs, every key whose tokens may still be alive is
published at `/sts/jwks`.

Where the key comes from (first that applies):
1. `STS_ED25519_PRIVATE_DER_B64`: an Ed25519 private key, PKCS#8 DER, base64 (production;
   `strata up` generates one into the data directory's `secrets.json` and keeps it);
2. `SVC_ENV=local`: a key generated for this process (tests, a bare `python -m controlplane`);
3. otherwise `STS_SIGNING_KEY`: the legacy symmetric mode, HS256 (use it only with an agent
   gateway that has no `STS_JWKS_URL`); nothing is published.

Publication and rotation. Each process writes its public key to the hash `sts:keys`
(field = kid, the key's RFC 7638 thumbprint; value = `{jwk, until}`) and keeps `until` at
least two token lifetimes ahead while it signs (checked at each signature, rewritten once per
token lifetime). `/sts/jwks` answers every published key whose `until` has not passed. So when
a deployment changes `STS_ED25519_PRIVATE_DER_B64` (or a local process restarts), the new key
signs at once and the old one stays published until every token it signed has expired; the
replicas of one control plane publish side by side. A later-hop subject token is verified
against the same published keys, whichever replica signed it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_der_private_key,
)
from redis.asyncio import Redis
from redis.exceptions import RedisError

from runtime.hop_tokens import EDDSA, HS256, STS_KEYS_KEY, InvalidHopToken

log = logging.getLogger(__name__)

# Published keys stay at least this many token lifetimes ahead of the last signature.
AHEAD_LIFETIMES = 2
MAX_CACHED_KEYS = 64


def load_private_der_b64(text: str) -> Ed25519PrivateKey:
    """The key of STS_ED25519_PRIVATE_DER_B64; ValueError when it is not an Ed25519 PKCS#8
    DER key in base64 (also the config check)."""
    try:
        key = load_der_private_key(base64.b64decode(text.strip(), validate=True), password=None)
    except (ValueError, binascii.Error, TypeError) as exc:
        raise ValueError(f"not a base64 PKCS#8 DER private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("must be an Ed25519 private key")
    return key


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def public_jwk(public: Ed25519PublicKey) -> dict[str, str]:
    """The RFC 8037 JWK of an Ed25519 public key, `kid` its RFC 7638 thumbprint."""
    x = _b64url(public.public_bytes(Encoding.Raw, PublicFormat.Raw))
    canonical = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"))
    kid = _b64url(hashlib.sha256(canonical.encode()).digest())
    return {"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": EDDSA, "use": "sig"}


class StsKeys:
    """The signer of one control plane process and the verifier of hop tokens it is shown."""

    def __init__(
        self,
        kv: Redis,
        *,
        private_der_b64: str | None,
        local: bool,
        hs256_secret: str | None,
        ttl_secs: int,
    ) -> None:
        self.kv = kv
        self.ttl = ttl_secs
        private: Ed25519PrivateKey | None = None
        if private_der_b64:
            private = load_private_der_b64(private_der_b64)
        elif local:
            private = Ed25519PrivateKey.generate()
        self.private = private
        self.secret = None if private else hs256_secret
        self.jwk = public_jwk(private.public_key()) if private else None
        self.kid = self.jwk["kid"] if self.jwk else None
        self._known: dict[str, Ed25519PublicKey] = {}
        if private is not None and self.kid is not None:
            self._known[self.kid] = private.public_key()
        self._published_until = 0.0

    @property
    def algorithm(self) -> str | None:
        """EdDSA, HS256 (legacy), or None when this process cannot sign."""
        if self.private is not None:
            return EDDSA
        return HS256 if self.secret else None

    # --- signing ---------------------------------------------------------------------------

    async def ensure_published(self) -> None:
        """Keep this process's public key in `sts:keys` for the tokens it is about to sign.
        Raises RedisError when the store is unreachable (the caller fails closed)."""
        if self.jwk is None:
            return
        now = time.time()
        if self._published_until - now > AHEAD_LIFETIMES * self.ttl:
            return
        until = now + (AHEAD_LIFETIMES + 1) * self.ttl
        entry = json.dumps({"jwk": self.jwk, "until": int(until)})
        await self.kv.hset(STS_KEYS_KEY, str(self.kid), entry)
        self._published_until = until

    def sign(self, claims: dict[str, Any]) -> str:
        """A hop token; `ensure_published` must have run (its key is in the key set)."""
        if self.private is not None:
            return jwt.encode(claims, self.private, algorithm=EDDSA, headers={"kid": self.kid})
        if self.secret:
            return jwt.encode(claims, self.secret, algorithm=HS256)
        raise RuntimeError("the STS has no signing key")

    # --- the key set -----------------------------------------------------------------------

    async def published(self) -> list[dict[str, Any]]:
        """The JWKs of `/sts/jwks`: every published key still in use (expired entries are
        removed), this process's own key always; only the own key when the store is away."""
        keys: dict[str, dict[str, Any]] = {}
        try:
            raw = await self.kv.hgetall(STS_KEYS_KEY)
            now = time.time()
            expired = []
            for kid, text in raw.items():
                entry = _entry(text)
                if entry is None or entry["until"] < now:
                    expired.append(kid)
                else:
                    keys[str(kid)] = entry["jwk"]
            if expired:
                await self.kv.hdel(STS_KEYS_KEY, *expired)
        except (RedisError, OSError) as exc:
            log.warning("sts key set read failed", extra={"error": repr(exc)})
        if self.jwk is not None:
            keys[str(self.kid)] = self.jwk
        return [keys[kid] for kid in sorted(keys)]

    async def verification_key(self, kid: str | None) -> Any:
        """The key that verifies a hop token with this `kid`: this process's, or one another
        process (or an earlier key) published. Raises InvalidHopToken for an unknown kid."""
        if self.algorithm == HS256:
            return self.secret
        if kid is None:
            raise InvalidHopToken("kid missing")
        key = self._known.get(kid)
        if key is not None:
            return key
        text = await self.kv.hget(STS_KEYS_KEY, kid)
        entry = _entry(text) if text is not None else None
        if entry is None or entry["until"] < time.time():
            raise InvalidHopToken("unknown kid")
        try:
            found = jwt.PyJWK(entry["jwk"]).key
        except jwt.PyJWTError:
            raise InvalidHopToken("unknown kid") from None
        if not isinstance(found, Ed25519PublicKey) or public_jwk(found)["kid"] != kid:
            raise InvalidHopToken("unknown kid")  # a kid must be its own key's thumbprint
        if len(self._known) >= MAX_CACHED_KEYS:
            self._known = {k: v for k, v in self._known.items() if k == self.kid}
        self._known[kid] = found
        return found


def _entry(text: str | bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(text)
    except ValueError:
        return None
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("jwk"), dict)
        or not isinstance(entry.get("until"), int | float)
    ):
        return None
    return entry
