"""`basic-auth` (APISIX priority 2520, rewrite): `Authorization: Basic base64(user:password)`
against the consumers' `basic-auth` `username` and `password`.

Failures are APISIX's, 401 with `WWW-Authenticate: Basic realm="<realm>"`: no header →
`Missing authorization in request`; not Basic, not base64 or no ":" → `Invalid authorization
in request`; unknown user or wrong password → `Invalid user authorization`. With
`anonymous_consumer`, a request that fails proceeds as that consumer (401 `Invalid user
authorization` when it does not exist). `hide_credentials` keeps the header from the upstream.

Passwords are stored hashed: the Admin API stores a salted scrypt hash (runtime/hashing.py)
in place of the password (`secret_fields`, gateways/edge/model/credentials.py) and answers it as
`***REDACTED***`; GET-then-PUT keeps it (an existing hash is not hashed again). A plaintext
password (a standalone configuration file) still works, compared in constant time. Checking
a hash costs tens of milliseconds, so it runs in a worker thread and a success is remembered
(a bounded cache keyed by the SHA-256 of username, password and the stored hash: a new
password, or a new hash of it, is checked anew).

Differences from APISIX: the decoded credentials are split at the first ":" (RFC 7617: a
password may contain ":"; APISIX keeps what is between the first and second one) and kept
as sent (APISIX strips whitespace from both); the scheme name is case-insensitive (RFC 9110).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import basic_auth as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._auth import attach_consumer
from runtime.hashing import is_hash, verify_secret

MISSING = "Missing authorization in request"
INVALID = "Invalid authorization in request"
INVALID_USER = "Invalid user authorization"
BASIC = re.compile(r"\s*basic\s+(\S+)\s*", re.IGNORECASE)
VERIFIED_MAX = 4096
# SHA-256(username, password, stored hash) of the successful checks → None (insertion order:
# the oldest goes first when full).
_verified: dict[bytes, None] = {}


def credentials(header: str) -> tuple[str, str] | None:
    """(username, password) of a Basic `Authorization` header, None when malformed."""
    found = BASIC.fullmatch(header)
    if found is None:
        return None
    try:
        decoded = base64.b64decode(found.group(1), validate=True).decode()
    except ValueError:  # binascii.Error, a character that is not ASCII, UnicodeDecodeError
        return None
    username, colon, password = decoded.partition(":")
    return (username, password) if colon else None


async def password_matches(username: str, password: str, stored: str) -> bool:
    if not is_hash(stored):
        return hmac.compare_digest(password.encode(), stored.encode())
    key = hashlib.sha256("\0".join((username, password, stored)).encode()).digest()
    if key in _verified:
        return True
    if not await asyncio.to_thread(verify_secret, password, stored):
        return False
    if len(_verified) >= VERIFIED_MAX:
        del _verified[next(iter(_verified))]
    _verified[key] = None
    return True


@dataclass(frozen=True, slots=True)
class BasicAuthConf:
    hide_credentials: bool
    realm: str
    anonymous_consumer: str | None = None


class BasicAuth(declared.BasicAuth, Plugin):
    """Authenticates HTTP Basic credentials against the consumers' usernames and (hashed)
    passwords."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(BasicAuthConf, self.schema, conf)
        self.hide = settings.hide_credentials
        self.anonymous = settings.anonymous_consumer
        self.challenge = {"WWW-Authenticate": f'Basic realm="{settings.realm}"'}

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        header = ctx.headers.get("authorization")
        if header is None:
            return self._reject(ctx, MISSING)
        sent = credentials(header)
        if sent is None:
            return self._reject(ctx, INVALID)
        username, password = sent
        consumer_name = self.env.credentials.get(self.name, {}).get(username)
        consumer = self.env.consumers.get(consumer_name or "")
        stored = ((consumer or {}).get("plugins") or {}).get(self.name, {}).get("password")
        if consumer_name is None or not isinstance(stored, str):
            return self._reject(ctx, INVALID_USER)
        if not await password_matches(username, password, stored):
            return self._reject(ctx, INVALID_USER)
        attach_consumer(ctx, consumer_name, consumer or {})
        if self.hide:
            ctx.upstream_headers["authorization"] = None
        return None

    def _reject(self, ctx: RequestContext, message: str) -> Reply | None:
        if not self.anonymous:
            return Reply(401, {"message": message}, dict(self.challenge))
        consumer = self.env.consumers.get(self.anonymous)
        if consumer is None:
            return Reply(401, {"message": INVALID_USER})
        attach_consumer(ctx, self.anonymous, consumer)
        return None
