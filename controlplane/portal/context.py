"""What the portal's handlers share: its configuration, the session store, the IdP client, and
the one way a request finds its session (with an access token fresh enough to forward)."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

from controlplane.portal.oauth import IdpClient, TokenRefused, tokens_of
from controlplane.portal.security import SESSION_COOKIE
from controlplane.portal.sessions import Session, SessionStore
from runtime.auth import Authenticator
from runtime.errors import PermissionDenied, Unauthenticated, Unavailable
from runtime.keyring import SealError
from runtime.stores.kv_errors import kv_unavailable

log = logging.getLogger(__name__)

LOGIN_URL = "/portal/login"
# An access token this close to its expiry is refreshed before it is forwarded.
REFRESH_MARGIN_SECS = 30
# How long a request waits for another process's refresh of the same session.
REFRESH_WAIT_SECS = 10.0
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def not_logged_in() -> Unauthenticated:
    return Unauthenticated("no portal session", error="not_logged_in", login_url=LOGIN_URL)


@dataclass
class PortalContext:
    """Attributes:
    public_url: the portal's origin (PORTAL_PUBLIC_URL), or None: each request's own.
    services: the public base URL of each forwarded service (`cp` is None: this process,
        reached at the address the request arrived at).
    """

    store: SessionStore
    idp: IdpClient | None  # None: no IdP configured, login answers 503
    authenticator: Authenticator
    public_url: str | None
    services: dict[str, str | None]
    admin_api_key: str | None
    static_dir: Path
    http: aiohttp.ClientSession | None = None

    def client(self) -> aiohttp.ClientSession:
        """The forwarding client (made in the serving loop, on first use)."""
        if self.http is None:
            self.http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=120, sock_connect=5),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self.http

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()
        if self.idp is not None:
            await self.idp.close()

    def origin(self, request: web.Request) -> str:
        if self.public_url is not None:
            return self.public_url.rstrip("/")
        return f"{request.scheme}://{request.host}"

    def base_url(self, request: web.Request, service: str) -> str:
        """Where `service`'s public API is: configured, or for `cp` this very process at the
        address the request arrived at (its front door, whatever port it was given)."""
        configured = self.services[service]
        if configured is not None:
            return configured.rstrip("/")
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if not sockname:
            raise Unavailable("the control plane's own address is unknown", error="internal")
        host = str(sockname[0])
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{sockname[1]}"

    def secure(self, request: web.Request) -> bool:
        """Cookies are Secure when the portal is reached over https."""
        return request.secure or self.origin(request).startswith("https://")

    async def session(self, request: web.Request) -> Session:
        """The request's session, or 401 `not_logged_in`; the store unreachable is 503."""
        sid = request.cookies.get(SESSION_COOKIE)
        if not sid:
            raise not_logged_in()
        with kv_unavailable():
            try:
                session = await self.store.load(sid)
            except SealError:  # the keyring that sealed it is gone: as good as no session
                session = None
        if session is None:
            raise not_logged_in()
        return session

    @staticmethod
    def check_csrf(request: web.Request, session: Session) -> None:
        given = request.headers.get("X-CSRF-Token", "")
        if not hmac.compare_digest(given.encode(), session.csrf_token.encode()):
            raise PermissionDenied(
                "missing or wrong X-CSRF-Token header", error="csrf_token_invalid"
            )

    async def fresh(self, session: Session) -> Session:
        """`session` with an access token that outlives REFRESH_MARGIN_SECS: refreshed through
        the IdP when needed, by one process at a time (the IdP rotates refresh tokens: a second
        refresh with the old one would fail); the others wait for its result. A refresh the
        IdP refuses ends the session (401)."""
        deadline = time.monotonic() + REFRESH_WAIT_SECS
        current = session
        while not _lasts(current):
            if current.tokens.refresh_token is None or self.idp is None:
                raise not_logged_in()
            with kv_unavailable():
                lock = await self.store.lock_refresh(current)
            if lock is not None:
                try:
                    # Another process may have refreshed between our read and our lock.
                    latest = await self._reload(current)
                    return latest if _lasts(latest) else await self._refresh(latest)
                finally:
                    with kv_unavailable():
                        await self.store.unlock_refresh(current, lock)
            if time.monotonic() > deadline:
                raise Unavailable(
                    "the session's token refresh did not finish in time", error="refresh_timeout"
                )
            await asyncio.sleep(0.05)
            current = await self._reload(current)
        return current

    async def _reload(self, session: Session) -> Session:
        with kv_unavailable():
            latest = await self.store.reload(session.key)
        if latest is None:
            raise not_logged_in()
        return latest

    async def _refresh(self, session: Session) -> Session:
        assert self.idp is not None and session.tokens.refresh_token is not None
        try:
            body = await self.idp.refresh(session.tokens.refresh_token)
        except TokenRefused as exc:
            log.info("portal session refresh refused", extra={"error": exc.error})
            with kv_unavailable():
                await self.store.delete(session.key)
            raise not_logged_in() from None
        with kv_unavailable():
            if not await self.store.replace_tokens(session, tokens_of(body)):
                raise not_logged_in()  # logged out meanwhile
        return await self._reload(session)


def _lasts(session: Session) -> bool:
    return session.tokens.access_expires_at - time.time() > REFRESH_MARGIN_SECS
