"""What every portal answer carries: strict security headers, errors as JSON (or a short HTML
page for a person's browser), and the session cookie's attributes."""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from runtime.errors import StrataError

log = logging.getLogger(__name__)

SESSION_COOKIE = "strata_session"
LOGIN_COOKIE = "strata_login"  # binds a login in progress to the browser that started it
COOKIE_PATH = "/portal"

# Everything from this origin only, no inline script or style, no framing, no plugins.
# `img-src data:`: a tenant's logo arrives as base64 (branding.logo_base64).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
}
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def wants_html(request: web.Request) -> bool:
    """A browser navigating (login, callback) rather than a script asking for JSON."""
    accept = request.headers.get("Accept", "")
    return "text/html" in accept and "application/json" not in accept


def error_page(err: StrataError) -> web.Response:
    text = html.escape(err.message)
    body = (
        "<!doctype html><html lang=en><meta charset=utf-8><title>Strata portal: error</title>"
        f"<h1>Sign-in failed</h1><p>{text}</p><p>({html.escape(err.error or '')})</p>"
        '<p><a href="/portal/login">Sign in again</a></p></html>'
    )
    return web.Response(
        status=err.http_status, text=body, content_type="text/html", headers=NO_STORE
    )


def secured(handler: Handler, *, no_store: bool = True) -> Handler:
    """`handler` with the security headers on every answer, its StrataErrors rendered here
    (as the spec's JSON body, or an HTML page for a browser's navigation)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            response = await handler(request)
        except StrataError as err:
            if wants_html(request):
                response = error_page(err)
            else:
                response = web.json_response(err.body(), status=err.http_status)
                if no_store:
                    response.headers.update(NO_STORE)
        if not response.prepared:
            response.headers.update(SECURITY_HEADERS)
            if no_store:
                for name, value in NO_STORE.items():
                    response.headers.setdefault(name, value)
        return response

    return handle


def set_cookie(
    response: web.StreamResponse, name: str, value: str, *, max_age: int, secure: bool
) -> None:
    response.set_cookie(
        name, value, max_age=max_age, path=COOKIE_PATH, httponly=True, samesite="Lax",
        secure=secure,
    )  # fmt: skip


def clear_cookie(response: web.StreamResponse, name: str, *, secure: bool) -> None:
    response.del_cookie(name, path=COOKIE_PATH, httponly=True, samesite="Lax", secure=secure)
