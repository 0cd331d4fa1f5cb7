"""Portal sessions and pending logins, kept in the key-value store so that every control plane
process serves every session (the service is stateless).

Store layout (the cookie value itself is never stored, only its SHA-256):

    cp:portal:login:{state}          JSON of a login in progress (PKCE verifier sealed, nonce,
                                     `next`, redirect URI, SHA-256 of the browser's login
                                     cookie); TTL LOGIN_TTL_SECS; taken once (GETDEL)
    cp:portal:session:{<sha256(sid)>}  hash: the user (sub, name, email, tenant_id,
                                     platform_admin), csrf_token, the IdP's tokens sealed under
                                     the keyring (context: the key and field), their expiries,
                                     created_at, expires_at; the key expires at expires_at
    cp:portal:session:{<sha256(sid)>}:refreshing   a lock: one process refreshes the tokens

A session and its lock share the session's hash tag (one slot of a clustered store: a logout
removes both in one command). Sessions stored under the names before issue 24 (no braces) are
not renamed: they are not found, and their users log in again.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from runtime.keyring import Keyring
from runtime.stores.lock import StoreLock

LOGIN_TTL_SECS = 600  # the IdP's login page may stay open this long
LOGIN_PREFIX = "cp:portal:login:"
SESSION_PREFIX = "cp:portal:session:"
REFRESH_LOCK_MS = 10_000

# Replace a session's tokens only while the session exists: a logout racing a refresh wins.
_UPDATE_TOKENS = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1
"""


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def session_key(sid: str) -> str:
    """The store key of the session whose cookie value is `sid`."""
    return f"{SESSION_PREFIX}{{{digest(sid)}}}"


def new_secret() -> str:
    """256 random bits, URL-safe (session ids, CSRF tokens, state, PKCE verifiers)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class PendingLogin:
    verifier: str
    nonce: str
    next: str
    redirect_uri: str
    browser: str  # SHA-256 of the login cookie this browser holds


@dataclass(frozen=True)
class Tokens:
    """The IdP's answer, as a session keeps it (epoch seconds)."""

    access_token: str
    access_expires_at: int
    refresh_token: str | None
    refresh_expires_at: int | None


@dataclass(frozen=True)
class Session:
    key: str  # the store key
    sub: str
    name: str
    email: str | None
    tenant_id: str | None
    platform_admin: bool
    csrf_token: str
    tokens: Tokens
    created_at: int
    expires_at: int

    def user(self) -> dict[str, Any]:
        return {
            "sub": self.sub,
            "name": self.name,
            "email": self.email,
            "tenant_id": self.tenant_id,
            "platform_admin": self.platform_admin,
        }


class SessionStore:
    def __init__(self, kv: Redis, keyring: Keyring, max_secs: int) -> None:
        self.kv = kv
        self.keyring = keyring
        self.max_secs = max_secs
        self._update = kv.register_script(_UPDATE_TOKENS)
        self._refresh_lock = StoreLock(kv, REFRESH_LOCK_MS)

    # --- logins in progress ----------------------------------------------------------------

    async def start_login(self, state: str, login: PendingLogin) -> None:
        record = {
            "verifier": self.keyring.seal(login.verifier, LOGIN_PREFIX + state),
            "nonce": login.nonce,
            "next": login.next,
            "redirect_uri": login.redirect_uri,
            "browser": login.browser,
        }
        await self.kv.set(LOGIN_PREFIX + state, json.dumps(record), ex=LOGIN_TTL_SECS)

    async def take_login(self, state: str) -> PendingLogin | None:
        """The login `state` started, once: a second callback with it finds nothing."""
        raw = await self.kv.getdel(LOGIN_PREFIX + state)
        if raw is None:
            return None
        record = json.loads(raw)
        return PendingLogin(
            verifier=self.keyring.open(record["verifier"], LOGIN_PREFIX + state),
            nonce=record["nonce"],
            next=record["next"],
            redirect_uri=record["redirect_uri"],
            browser=record["browser"],
        )

    # --- sessions --------------------------------------------------------------------------

    def _expiry(self, created_at: int, tokens: Tokens) -> int:
        """A session lasts while the IdP lets it refresh (else while its access token
        lives), and never beyond PORTAL_SESSION_MAX_SECS."""
        longest = created_at + self.max_secs
        if tokens.refresh_token is None:
            return min(tokens.access_expires_at, longest)
        return min(tokens.refresh_expires_at or longest, longest)

    def _token_fields(self, key: str, tokens: Tokens) -> dict[str, str]:
        return {
            "access_token": self.keyring.seal(tokens.access_token, f"{key}:access_token"),
            "access_expires_at": str(tokens.access_expires_at),
            "refresh_token": (
                self.keyring.seal(tokens.refresh_token, f"{key}:refresh_token")
                if tokens.refresh_token
                else ""
            ),
            "refresh_expires_at": str(tokens.refresh_expires_at or ""),
        }

    async def create(self, user: dict[str, Any], tokens: Tokens) -> tuple[str, Session]:
        """A new session for `user` (the `Session.user()` fields): its cookie value, and it."""
        sid = new_secret()
        key = session_key(sid)
        created = int(time.time())
        expires = self._expiry(created, tokens)
        fields: dict[str, str] = {
            "sub": user["sub"],
            "name": user["name"],
            "email": user["email"] or "",
            "tenant_id": user["tenant_id"] or "",
            "platform_admin": "1" if user["platform_admin"] else "0",
            "csrf_token": new_secret(),
            "created_at": str(created),
            "expires_at": str(expires),
            **self._token_fields(key, tokens),
        }
        async with self.kv.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            pipe.expireat(key, expires)
            await pipe.execute()
        session = self._parse(key, fields)
        assert session is not None
        return sid, session

    async def load(self, sid: str) -> Session | None:
        key = session_key(sid)
        return self._parse(key, await self._hash(key))

    async def reload(self, key: str) -> Session | None:
        return self._parse(key, await self._hash(key))

    async def _hash(self, key: str) -> dict[str, str]:
        fields: dict[str, str] = await self.kv.hgetall(key)  # type: ignore[assignment]
        return fields

    def _parse(self, key: str, fields: dict[str, str]) -> Session | None:
        if not fields or int(fields["expires_at"]) <= time.time():
            return None
        refresh = fields["refresh_token"]
        return Session(
            key=key,
            sub=fields["sub"],
            name=fields["name"],
            email=fields["email"] or None,
            tenant_id=fields["tenant_id"] or None,
            platform_admin=fields["platform_admin"] == "1",
            csrf_token=fields["csrf_token"],
            tokens=Tokens(
                access_token=self.keyring.open(fields["access_token"], f"{key}:access_token"),
                access_expires_at=int(fields["access_expires_at"]),
                refresh_token=(
                    self.keyring.open(refresh, f"{key}:refresh_token") if refresh else None
                ),
                refresh_expires_at=int(fields["refresh_expires_at"] or 0) or None,
            ),
            created_at=int(fields["created_at"]),
            expires_at=int(fields["expires_at"]),
        )

    async def replace_tokens(self, session: Session, tokens: Tokens) -> bool:
        """Store refreshed tokens (and the expiry they give); False if the session ended."""
        expires = self._expiry(session.created_at, tokens)
        fields = {**self._token_fields(session.key, tokens), "expires_at": str(expires)}
        flat = [item for pair in fields.items() for item in pair]
        done = await self._update(keys=[session.key], args=[expires * 1000, *flat])
        return bool(done)

    async def delete(self, key: str) -> None:
        await self.kv.delete(key, key + ":refreshing")

    async def lock_refresh(self, session: Session) -> str | None:
        """The refresh lock's token if this caller got it, else None."""
        return await self._refresh_lock.acquire(session.key + ":refreshing")

    async def unlock_refresh(self, session: Session, token: str) -> None:
        await self._refresh_lock.release(session.key + ":refreshing", token)
