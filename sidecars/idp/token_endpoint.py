"""`POST /realms/strata/protocol/openid-connect/token`: the password and client_credentials grants.

Client authentication follows RFC 6749 §2.3: HTTP Basic (`client_secret_basic`) or the secret in
the form (`client_secret_post`), never both; a public client sends only `client_id`. Failures
answer RFC 6749 §5.2 errors: 401 `invalid_client` for client authentication, 400 for the rest
(`invalid_request`, `invalid_grant`, `invalid_scope`, `unauthorized_client`,
`unsupported_grant_type`). Hashing runs in a worker thread so a login never stalls the loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from typing import Any
from urllib.parse import unquote_plus

from aiohttp import web
from multidict import MultiDictProxy

from sidecars.idp.context import DIRECTORY, MINTER, NO_STORE, error_response
from sidecars.idp.tokens import InvalidScope, grant_scopes

GRANT_TYPES = ("password", "client_credentials")
_FORM = "application/x-www-form-urlencoded"
_log = logging.getLogger("sidecars.idp.token")


class _OAuthError(Exception):
    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description

    def response(self) -> web.Response:
        headers = dict(NO_STORE)
        if self.status == 401:
            # RFC 6749 §5.2: a 401 must name the scheme the client may authenticate with.
            headers["WWW-Authenticate"] = 'Basic realm="strata"'
        return error_response(self.status, self.error, self.description, headers)


def _param(form: MultiDictProxy[Any], name: str) -> str | None:
    values = form.getall(name, [])
    if len(values) > 1:
        # RFC 6749 §3.2: request parameters must not be repeated.
        raise _OAuthError(400, "invalid_request", f"Parameter '{name}' is repeated")
    value = values[0] if values else None
    return value if isinstance(value, str) and value != "" else None


def _client_credentials(request: web.Request, form: MultiDictProxy[Any]) -> tuple[str, str | None]:
    """The (client_id, secret) the request authenticates with."""
    form_id, form_secret = _param(form, "client_id"), _param(form, "client_secret")
    header = request.headers.get("Authorization", "")
    if not header.lower().startswith("basic "):
        if form_id is None:
            raise _OAuthError(401, "invalid_client", "Client authentication is missing")
        return form_id, form_secret
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        raw_id, raw_secret = decoded.split(":", 1)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _OAuthError(401, "invalid_client", "Malformed Basic credentials") from None
    # RFC 6749 §2.3.1: both parts are form-urlencoded before base64.
    basic_id, basic_secret = unquote_plus(raw_id), unquote_plus(raw_secret)
    if form_secret is not None:
        raise _OAuthError(400, "invalid_request", "Use one client authentication method only")
    if form_id is not None and form_id != basic_id:
        raise _OAuthError(400, "invalid_request", "client_id differs from the Basic credentials")
    return basic_id, basic_secret


async def _issue(request: web.Request, form: MultiDictProxy[Any]) -> tuple[dict[str, Any], str]:
    """The token response and the authenticated client_id; raises `_OAuthError`."""
    grant_type = _param(form, "grant_type")
    if grant_type is None:
        raise _OAuthError(400, "invalid_request", "Missing form parameter: grant_type")
    if grant_type not in GRANT_TYPES:
        raise _OAuthError(400, "unsupported_grant_type", f"Unsupported grant_type {grant_type}")
    client_id, secret = _client_credentials(request, form)
    directory = request.app[DIRECTORY]
    client = await asyncio.to_thread(directory.authenticate_client, client_id, secret)
    if client is None:
        raise _OAuthError(401, "invalid_client", "Invalid client or Invalid client credentials")
    try:
        scopes = grant_scopes(_param(form, "scope"))
    except InvalidScope as exc:
        raise _OAuthError(400, "invalid_scope", str(exc)) from None
    minter = request.app[MINTER]
    if grant_type == "client_credentials":
        if not client.confidential:
            raise _OAuthError(
                400, "unauthorized_client", "Public client not allowed to use client_credentials"
            )
        return minter.for_service(client, scopes), client.client_id
    username, password = _param(form, "username"), _param(form, "password")
    if username is None or password is None:
        raise _OAuthError(400, "invalid_request", "Missing parameter: username or password")
    user = await asyncio.to_thread(directory.authenticate_user, username, password)
    if user is None:
        raise _OAuthError(400, "invalid_grant", "Invalid user credentials")
    return minter.for_user(user, client, scopes), client.client_id


async def token(request: web.Request) -> web.Response:
    """The token endpoint handler."""
    if request.content_type != _FORM:
        return _OAuthError(400, "invalid_request", f"Content-Type must be {_FORM}").response()
    form = await request.post()
    try:
        body, client_id = await _issue(request, form)
    except _OAuthError as exc:
        # Only non-secret request facts are logged: never the password, secret or header.
        _log.info(
            "token refused",
            extra={
                "grant_type": form.get("grant_type"),
                "error": exc.error,
                "client_id": form.get("client_id"),
            },
        )
        return exc.response()
    _log.info(
        "token issued",
        extra={
            "grant_type": form.get("grant_type"),
            "client_id": client_id,
            "scope": body["scope"],
        },
    )
    return web.json_response(body, headers=NO_STORE)
