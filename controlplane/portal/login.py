"""Signing in and out: `GET /portal/login`, `GET /portal/callback`, `POST /portal/logout`, and
`GET /portal/api/session` (who is signed in, the CSRF token, the tenant's branding).

Login is OAuth 2.0's authorization code with PKCE (S256), `state` and `nonce`. The login in
progress is kept in the store under its `state` and bound to the browser by a short-lived
cookie (`strata_login`), so a code can only finish the login of the browser that started it
(no login CSRF). The callback redeems the code, verifies the access token as every service
does (`Authenticator.verify_jwt`) and the ID token's nonce, then creates the session.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from typing import Any

import aiohttp
from aiohttp import web

from controlplane.portal.context import PortalContext, not_logged_in
from controlplane.portal.oauth import IdpClient, TokenRefused, tokens_of
from controlplane.portal.security import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    Handler,
    clear_cookie,
    set_cookie,
)
from controlplane.portal.sessions import (
    LOGIN_TTL_SECS,
    PendingLogin,
    Session,
    digest,
    new_secret,
)
from runtime.errors import InvalidRequest, Unauthenticated, Unavailable, UpstreamError
from runtime.stores.kv_errors import kv_unavailable

log = logging.getLogger(__name__)

HOME = "/portal/"
CALLBACK_PATH = "/portal/callback"
# `next`: a path of the portal, nothing that could leave it (`//host`, `\`, a scheme).
_NEXT = re.compile(r"/portal/[A-Za-z0-9._~!$&'()*+,;=:@%/?#-]*")
BRANDING_FIELDS = ("portal_title", "logo_base64", "primary_color")


def _next_of(request: web.Request) -> str:
    target = request.query.get("next", HOME) or HOME
    if not _NEXT.fullmatch(target) or "//" in target or len(target) > 2000:
        raise InvalidRequest(
            "next must be a path under /portal/ (e.g. /portal/#/keys)", error="invalid_next"
        )
    return target


def _idp(ctx: PortalContext) -> IdpClient:
    if ctx.idp is None:
        raise Unavailable(
            "the portal has no identity provider configured (IDP_ISSUER)",
            error="portal_not_configured",
        )
    return ctx.idp


def login_handler(ctx: PortalContext) -> Handler:
    async def login(request: web.Request) -> web.StreamResponse:
        idp = _idp(ctx)
        target = _next_of(request)
        origin = ctx.origin(request)
        state, nonce, verifier, browser = new_secret(), new_secret(), new_secret(), new_secret()
        redirect_uri = origin + CALLBACK_PATH
        with kv_unavailable():
            await ctx.store.start_login(
                state, PendingLogin(verifier, nonce, target, redirect_uri, digest(browser))
            )
        location = idp.authorize_url(
            redirect_uri=redirect_uri, state=state, nonce=nonce, verifier=verifier
        )
        response = web.Response(status=302, headers={"Location": location})
        set_cookie(response, LOGIN_COOKIE, browser, max_age=LOGIN_TTL_SECS,
                   secure=ctx.secure(request))  # fmt: skip
        return response

    return login


def callback_handler(ctx: PortalContext) -> Handler:
    async def callback(request: web.Request) -> web.StreamResponse:
        idp = _idp(ctx)
        query = request.query
        state = query.get("state")
        if not state or len(state) > 200:
            raise InvalidRequest("the callback has no state", error="invalid_state")
        with kv_unavailable():
            pending = await ctx.store.take_login(state)
        if pending is None:
            raise InvalidRequest(
                "unknown or expired login state (sign in again)", error="invalid_state"
            )
        browser = request.cookies.get(LOGIN_COOKIE, "")
        if not hmac.compare_digest(digest(browser), pending.browser):
            raise InvalidRequest("this login was started in another browser", error="invalid_state")
        if "error" in query:
            raise InvalidRequest(
                f"the identity provider refused the login: {query['error']}"
                + (f" ({query['error_description']})" if query.get("error_description") else ""),
                error="idp_error",
                idp_error=query["error"],
            )
        if query.get("iss") not in (None, idp.issuer):  # RFC 9207: the IdP we asked
            raise InvalidRequest("the callback's iss is not our identity provider",
                                 error="invalid_issuer")  # fmt: skip
        code = query.get("code")
        if not code:
            raise InvalidRequest("the callback has no code", error="invalid_request")
        try:
            body = await idp.redeem_code(code, pending.redirect_uri, pending.verifier)
        except TokenRefused as exc:
            raise InvalidRequest(
                f"the identity provider refused the code: {exc.error} ({exc.description})",
                error="token_exchange_failed",
            ) from None
        if isinstance(body.get("id_token"), str):
            await idp.check_id_token(body["id_token"], pending.nonce)
        try:
            principal = await ctx.authenticator.verify_jwt(body["access_token"])
        except Unauthenticated:
            raise UpstreamError(
                "the identity provider's access token does not verify", error="idp_error"
            ) from None
        claims = principal.claims
        name = claims.get("name") or claims.get("preferred_username") or principal.subject
        user = {
            "sub": principal.subject,
            "name": str(name),
            "email": claims.get("email") if isinstance(claims.get("email"), str) else None,
            "tenant_id": principal.tenant_id,
            "platform_admin": principal.is_platform_admin,
        }
        tokens = tokens_of(body)
        with kv_unavailable():
            sid, session = await ctx.store.create(user, tokens)
        log.info("portal login", extra={"sub": session.sub, "tenant_id": session.tenant_id})
        response = web.Response(status=302, headers={"Location": pending.next})
        lifetime = max(1, session.expires_at - int(time.time()))
        set_cookie(response, SESSION_COOKIE, sid, max_age=lifetime, secure=ctx.secure(request))
        clear_cookie(response, LOGIN_COOKIE, secure=ctx.secure(request))
        return response

    return callback


def logout_handler(ctx: PortalContext) -> Handler:
    async def logout(request: web.Request) -> web.StreamResponse:
        session = await ctx.session(request)
        ctx.check_csrf(request, session)
        with kv_unavailable():
            await ctx.store.delete(session.key)
        response = web.json_response({"logged_out": True})
        clear_cookie(response, SESSION_COOKIE, secure=ctx.secure(request))
        return response

    return logout


def session_handler(ctx: PortalContext) -> Handler:
    async def session_info(request: web.Request) -> web.StreamResponse:
        session = await ctx.fresh(await ctx.session(request))
        return web.json_response(
            {
                "user": session.user(),
                "csrf_token": session.csrf_token,
                "branding": await _branding(ctx, request, session),
                "expires_at": session.expires_at,
            }
        )

    return session_info


async def _branding(
    ctx: PortalContext, request: web.Request, session: Session
) -> dict[str, Any] | None:
    """The user's tenant's branding, read through the control plane's public API as the user
    (null without a tenant, or when it cannot be read)."""
    if session.tenant_id is None:
        return None
    url = f"{ctx.base_url(request, 'cp')}/api/tenants/{session.tenant_id}/branding"
    headers = {"Authorization": f"Bearer {session.tokens.access_token}"}
    try:
        async with ctx.client().get(url, headers=headers) as resp:
            if resp.status != 200:
                return None
            body = await resp.json()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    return {name: body.get(name) for name in BRANDING_FIELDS}


__all__ = [
    "callback_handler",
    "login_handler",
    "logout_handler",
    "not_logged_in",
    "session_handler",
]
