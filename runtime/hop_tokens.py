"""STS hop tokens: what the STS (control plane) mints and the agent gateway verifies — the store
keys both read, the claims, and the one verification both run.

Claims (spec "STS hop token claims"): `iss`, `sub` (the acting agent), `aud` (the one next-hop
agent), `exp`, `iat`, `jti` (UUID), `tenant_id`, `purpose` (optional), `act_chain`
(`[{id, type: 'human'|'agent', ts}]`: the human first, then one agent per hop, the last one
being `sub`). Asymmetric tokens carry `kid` in their header.

Verification pins the algorithm to the key source (EdDSA for the STS's key set, HS256 for the
legacy shared secret), so `alg: none` and an HS256 token "signed" with a public key are refused
before any key is used; `exp` is checked without leeway, so a token is never accepted after
the replay guard (`sts:jti:{jti}`, TTL = remaining lifetime) has forgotten it.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import jwt

from runtime.access import IDENTIFIER
from runtime.auth import INVALID_TOKEN
from runtime.errors import Unauthenticated
from runtime.stores.renames import exact, retag

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
EDDSA = "EdDSA"
HS256 = "HS256"
# An act_chain holds at most this many actors (the human included): the STS refuses to mint
# a longer one, the gateway refuses to accept one.
MAX_CHAIN = 5

# Key-value store layout (spec "Other stored structures"), shared by the control plane, which
# writes the registry, and the agent gateway, which reads it per call.
# The spec's registry keeps its name; its companions carry it as their hash tag, so that they
# share its slot of a clustered store. Each delegation set is tagged by its agent (the spec's
# `svc:deleg:{agent_id}` read literally): it is read and written in steps of its own.
REGISTRY_KEY = "svc:agent-registry"  # hash: agent_id → registration JSON
CREDENTIALS_KEY = "{svc:agent-registry}:credentials"  # hash: credential_ref → agent_id
STS_KEYS_KEY = "sts:keys"  # hash: kid → {jwk, until}: the STS's published public keys


def parse_registration(text: str | bytes | None) -> dict[str, Any] | None:
    """A registration as stored in `REGISTRY_KEY`, or None (absent or unreadable)."""
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def deleg_key(agent_id: str) -> str:
    """The set of audiences `agent_id` may delegate to (`svc:deleg:{agent:planner}`)."""
    return f"svc:deleg:{{{agent_id}}}"


# The names before issue 24, renamed by the control plane at start (its store_layout.py).
RENAMES = (
    exact("svc:agent-credentials", CREDENTIALS_KEY),
    retag("svc:deleg:", deleg_key),
)


def jti_key(jti: str) -> str:
    """The replay guard of one hop token (the spec's `sts:jti:{jti}` read literally: the jti is
    the hash tag; a guard lives at most a token's lifetime, so the name changed without a move)."""
    return f"sts:jti:{{{jti}}}"


def is_agent_id(value: str) -> bool:
    """`agent:<name>`, and a valid store identifier as a whole."""
    return value.startswith("agent:") and len(value) > 6 and IDENTIFIER.fullmatch(value) is not None


class InvalidHopToken(Unauthenticated):
    """401: a hop token that does not verify (signature, algorithm, key, expiry, issuer,
    claims). The message is the spec's `Invalid or expired token`; `reason` says which."""

    def __init__(self, reason: str, *, error: str = "invalid_token") -> None:
        super().__init__(INVALID_TOKEN, error=error, reason=reason)
        self.reason = reason


@dataclass(frozen=True)
class HopClaims:
    """A verified hop token's claims."""

    token: str
    issuer: str
    subject: str  # the acting agent
    audience: str  # the next-hop agent
    tenant_id: str
    jti: str
    expires: int  # Unix seconds
    act_chain: list[dict[str, Any]]
    purpose: str | None

    @property
    def human(self) -> str:
        """The originating human (`act_chain[0].id`)."""
        return str(self.act_chain[0]["id"])


# kid → the verification key (a cryptography public key, or the HS256 secret); raises
# InvalidHopToken for a kid it does not know.
KeyLookup = Callable[[str | None], Awaitable[Any]]

_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
# PyJWT's signature algorithms (over `cryptography`), one per key source.
_ALGORITHMS = {EDDSA: jwt.get_algorithm_by_name(EDDSA), HS256: jwt.get_algorithm_by_name(HS256)}


def _segment_bytes(segment: str) -> bytes:
    """One base64url segment, strictly: the URL-safe alphabet without padding, and the one
    canonical encoding of its bytes (no second spelling of the same token)."""
    if not _SEGMENT.fullmatch(segment):
        raise ValueError("not a base64url segment")
    raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    if base64.urlsafe_b64encode(raw).rstrip(b"=") != segment.encode():
        raise ValueError("not the canonical base64url encoding")
    return raw


def unverified_parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A compact JWS's header and payload, NOT verified: only to choose how to verify it (the
    key set, the `kid`). ValueError (or RecursionError) when the token is not a three-part
    JWT of JSON objects."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a compact JWS")
    header, payload = json.loads(_segment_bytes(parts[0])), json.loads(_segment_bytes(parts[1]))
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise ValueError("header and payload must be JSON objects")
    return header, payload


def peek_issuer(token: str) -> str | None:
    """The `iss` of a JWT before it is verified (which key set verifies it); None when the
    token is not a JWT at all."""
    try:
        issuer = unverified_parts(token)[1].get("iss")
    except (ValueError, RecursionError):
        return None
    return issuer if isinstance(issuer, str) else None


async def verify_hop_token(
    token: str, *, algorithm: str, key_for: KeyLookup, issuer: str
) -> HopClaims:
    """Signature (pinned `algorithm`, key by `kid`), `exp`, `nbf`, `iss`, and the claim
    shapes. Raises InvalidHopToken.

    The compact JWS is taken apart here and its signature checked with PyJWT's algorithm
    objects (`cryptography` underneath): `jwt.decode` would do the same, but it checks the
    base64 alphabet one character at a time in Python, about a third of this check's time
    budget at the gateway for a hop token."""
    try:
        header, claims = unverified_parts(token)
        signing_input, _, signature_segment = token.rpartition(".")
        signature = _segment_bytes(signature_segment)
    except (ValueError, RecursionError):
        raise InvalidHopToken("not a JWT") from None
    if header.get("alg") != algorithm:
        raise InvalidHopToken(f"algorithm must be {algorithm}")
    if "crit" in header:
        raise InvalidHopToken("unsupported crit header")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise InvalidHopToken("malformed kid")
    key = await key_for(kid)
    try:
        verifier = _ALGORITHMS[algorithm]
        valid = verifier.verify(signing_input.encode(), verifier.prepare_key(key), signature)
    except (jwt.PyJWTError, TypeError, ValueError):
        valid = False
    if not valid:
        raise InvalidHopToken("bad signature")
    now = time.time()
    expires = claims.get("exp")
    if isinstance(expires, bool) or not isinstance(expires, int):
        raise InvalidHopToken("claim exp missing or not an integer")
    if expires <= now:
        raise InvalidHopToken("expired")
    not_before = claims.get("nbf")
    if not_before is not None and (
        isinstance(not_before, bool) or not isinstance(not_before, int) or not_before > now
    ):
        raise InvalidHopToken("not yet valid")
    if claims.get("iss") != issuer:
        raise InvalidHopToken("wrong issuer")
    return parse_claims(token, claims)


def parse_claims(token: str, claims: dict[str, Any]) -> HopClaims:
    """The claims of a signed hop token, checked for shape: the chain starts with the human,
    has only agents after it, ends with `sub`, and is at most MAX_CHAIN long."""
    strings = {}
    for name in ("iss", "sub", "aud", "jti", "tenant_id"):
        value = claims.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidHopToken(f"claim {name} missing or not a string")
        strings[name] = value
    chain = claims.get("act_chain")
    if not isinstance(chain, list) or not 2 <= len(chain) <= MAX_CHAIN:
        raise InvalidHopToken("act_chain malformed")
    for index, entry in enumerate(chain):
        kind = "human" if index == 0 else "agent"
        if (
            not isinstance(entry, dict)
            or entry.get("type") != kind
            or not isinstance(entry.get("id"), str)
            or not isinstance(entry.get("ts"), int)
        ):
            raise InvalidHopToken("act_chain malformed")
    if chain[-1]["id"] != strings["sub"]:
        raise InvalidHopToken("act_chain does not end with sub")
    purpose = claims.get("purpose")
    return HopClaims(
        token=token,
        issuer=strings["iss"],
        subject=strings["sub"],
        audience=strings["aud"],
        tenant_id=strings["tenant_id"],
        jti=strings["jti"],
        expires=int(claims["exp"]),
        act_chain=chain,
        purpose=purpose if isinstance(purpose, str) else None,
    )
