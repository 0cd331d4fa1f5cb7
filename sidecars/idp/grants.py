"""One-time grants the IdP hands out and later redeems: authorization codes and refresh tokens.

A grant is a random secret given to the client. The IdP keeps only the secret's SHA-256 (the
secret is 256 random bits, so there is nothing to brute-force and a slow hash would buy
nothing) beside what the grant stands for: the user, the client, the scopes, and for a code
the redirect URI and PKCE challenge it is bound to. Redeeming removes the grant whatever
happens next, so a secret works once: a code that is tried twice, or with the wrong verifier,
is gone (RFC 6749 §4.1.2), and a refresh token is replaced by a new one on each use.

Grants are kept with the directory's other run-time state (the state file), so a login in
progress or a refresh token survives an IdP restart. Expired grants are dropped whenever the
state is written. Mutations run on the event loop only, like the directory's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CODE = "code"
REFRESH = "refresh"


@dataclass(frozen=True)
class Grant:
    """What a code or refresh token stands for. `expires_at` is set when it is issued."""

    kind: str
    client_id: str
    user_id: str
    username: str
    scopes: tuple[str, ...]
    expires_at: float = 0.0
    redirect_uri: str | None = None
    code_challenge: str | None = None
    nonce: str | None = None
    resource: str | None = None


def _key(kind: str, secret: str) -> str:
    return f"{kind}:{hashlib.sha256(secret.encode()).hexdigest()}"


class Grants:
    """The outstanding grants, by kind and hash of their secret."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._items: dict[str, Grant] = {}
        self._clock = clock

    def issue(self, grant: Grant, ttl: int) -> str:
        """Keep `grant` for `ttl` seconds; returns the secret to hand to the client."""
        secret = secrets.token_urlsafe(32)
        expires = self._clock() + ttl
        self._items[_key(grant.kind, secret)] = dataclasses.replace(grant, expires_at=expires)
        return secret

    def redeem(self, kind: str, secret: str) -> Grant | None:
        """Remove and return the live grant of `kind` behind `secret`; None when there is none
        (never issued, already redeemed, or expired)."""
        grant = self._items.pop(_key(kind, secret), None)
        if grant is None or grant.expires_at <= self._clock():
            return None
        return grant

    def state(self) -> list[dict[str, Any]]:
        """The live grants as written to the state file (hashes, never secrets)."""
        now = self._clock()
        self._items = {k: g for k, g in self._items.items() if g.expires_at > now}
        return [
            {"key": key, **dataclasses.asdict(grant), "scopes": list(grant.scopes)}
            for key, grant in self._items.items()
        ]

    def restore(self, entries: list[dict[str, Any]]) -> None:
        """Load grants written by `state`; raises `TypeError` or `ValueError` on bad entries."""
        items = {}
        for entry in entries:
            fields = {k: v for k, v in entry.items() if k != "key"}
            key = entry.get("key")
            if not isinstance(key, str):
                raise ValueError("a grant without its key")
            items[key] = Grant(**{**fields, "scopes": tuple(fields.get("scopes", ()))})
        self._items = items
