"""Identity-provider access tokens (JWT): the one verification every point that takes them runs —
the services' authenticator (control plane, AI and agent gateways, edge admin API, the STS's
subject and actor tokens) and the edge's `openid-connect` plugin.

In order, each failure an `InvalidToken` (401 wherever it is caught), never another exception:
1. the form: a compact JWS of at most MAX_TOKEN_CHARS, three unpadded base64url segments in
   their one canonical spelling (`==` appended, or other trailing bits, is another token);
   header and payload JSON objects (the JSON codec's depth limit);
2. the header: `alg` one of the rules' algorithms; `typ`, when present, a JWT or an RFC 9068
   access token (`at+jwt`); no `crit` (we understand no extension) and no `b64`;
3. the key: the one the key source holds for that `kid` *and* that algorithm — an ES256
   header naming the RSA key's kid (or RS256 naming the EC key's) is refused here, before the
   signature library sees a key of the wrong type;
4. signature, `exp`, `nbf`, `iss` (one of the rules' issuers), `aud` (one of the rules'
   audiences) — PyJWT; `sub`, `exp` and `iat` required;
5. the token's type: Keycloak's `typ` claim, when present, must be `Bearer` (an ID token says
   `ID`, a refresh token `Refresh`); `sub` a non-empty string; `iat` a number not in the
   future (beyond IAT_SKEW_SECS of clock skew).
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import jwt

from runtime import json_codec
from runtime.config import DEFAULT_AUDIENCES as DEFAULT_AUDIENCES  # defined with IDP_AUDIENCES

ALGORITHMS = ("RS256", "ES256")
MAX_TOKEN_CHARS = 16 * 1024
IAT_SKEW_SECS = 60
# RFC 7519 §5.1 and RFC 9068 §2.1 (media types compare case-insensitively).
HEADER_TYPES = frozenset({"jwt", "at+jwt", "application/at+jwt"})
ACCESS_TOKEN_CLAIM_TYPE = "Bearer"  # Keycloak's `typ` claim of an access token

_COMPACT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
# A segment of length 2 or 3 (mod 4) ends in a character with 4 or 2 unused bits, which the
# canonical encoding leaves at zero; a length of 1 (mod 4) is no encoding at all.
_CANONICAL_LAST = {0: None, 2: frozenset("AQgw"), 3: frozenset("AEIMQUYcgkosw048")}


class InvalidToken(ValueError):
    """The token does not verify; `reason` says why (for logs and challenges: never a secret,
    and never a value from the token, which anyone writes)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TokenRules:
    """What a verification point accepts: audiences (at least one must be in `aud`), issuers
    (None: any), signature algorithms."""

    audiences: tuple[str, ...] = DEFAULT_AUDIENCES
    issuers: tuple[str, ...] | None = None
    algorithms: frozenset[str] = frozenset(ALGORITHMS)


# (alg, kid) → the verification key for exactly that algorithm; raises InvalidToken.
KeyFor = Callable[[str, str | None], Awaitable[Any]]


def canonical_segment(segment: str) -> bool:
    """Whether an unpadded base64url segment (alphabet already checked) is the one canonical
    encoding of its bytes."""
    allowed = _CANONICAL_LAST.get(len(segment) % 4, frozenset())
    return allowed is None or segment[-1] in allowed


def compact_parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and payload of a strictly formed compact JWS, NOT verified."""
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidToken(f"token longer than {MAX_TOKEN_CHARS} characters")
    if not _COMPACT.fullmatch(token):
        raise InvalidToken("not a compact JWS of unpadded base64url segments")
    segments = token.split(".")
    if not all(canonical_segment(segment) for segment in segments):
        raise InvalidToken("not the canonical base64url encoding")
    header, payload = (_json_object(segment) for segment in segments[:2])
    return header, payload


def _json_object(segment: str) -> dict[str, Any]:
    try:
        value = json_codec.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error):
        raise InvalidToken("header or payload is not JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken("header and payload must be JSON objects")
    return value


def checked_header(header: dict[str, Any], algorithms: Iterable[str]) -> tuple[str, str | None]:
    """The header's (alg, kid), once it is one we verify."""
    alg, kid, typ = header.get("alg"), header.get("kid"), header.get("typ")
    if not isinstance(alg, str) or alg not in algorithms:
        raise InvalidToken("unsupported alg")
    if kid is not None and not isinstance(kid, str):
        raise InvalidToken("malformed kid")
    if typ is not None and (not isinstance(typ, str) or typ.lower() not in HEADER_TYPES):
        raise InvalidToken("not an access token (header typ)")
    if "crit" in header or "b64" in header:
        raise InvalidToken("unsupported JWS extension")
    return alg, kid


async def verify(token: str, rules: TokenRules, key_for: KeyFor) -> dict[str, Any]:
    """The claims of a valid access token; raises InvalidToken."""
    # The payload is parsed here under the JSON codec's depth limit, so that PyJWT's own
    # parsing below cannot recurse without end.
    header, _payload = compact_parts(token)
    alg, kid = checked_header(header, rules.algorithms)
    key = await key_for(alg, kid)
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[alg],
            audience=list(rules.audiences),
            issuer=list(rules.issuers) if rules.issuers is not None else None,
            options={"require": ["exp", "iat", "sub"], "verify_iat": False},
        )
    except jwt.ExpiredSignatureError:
        raise InvalidToken("token expired") from None
    except jwt.PyJWTError as exc:
        raise InvalidToken(str(exc)) from None
    except (TypeError, ValueError):  # a key the algorithm cannot use: never a 500
        raise InvalidToken("the key does not fit the algorithm") from None
    kind = claims.get("typ")
    if kind is not None and kind != ACCESS_TOKEN_CLAIM_TYPE:
        raise InvalidToken("not an access token (typ claim)")
    if not isinstance(claims["sub"], str) or not claims["sub"]:
        raise InvalidToken("sub must be a non-empty string")
    issued = claims["iat"]
    if isinstance(issued, bool) or not isinstance(issued, int | float):
        raise InvalidToken("iat must be a number")
    if issued > time.time() + IAT_SKEW_SECS:
        raise InvalidToken("issued in the future")
    return claims
