"""`POST /realms/strata/protocol/openid-connect/token`: the password, client_credentials,
authorization_code and refresh_token grants.

Client authentication follows RFC 6749 §2.3: HTTP Basic (`client_secret_basic`) or the secret in
the form (`client_secret_post`), never both; a public client sends only `client_id`. Failures
answer RFC 6749 §5.2 errors: 401 `invalid_client` for client authentication, 400 for the rest
(`invalid_request`, `invalid_grant`, `invalid_scope`, `unauthorized_client`,
`unsupported_grant_type`, and RFC 8707's `invalid_target`). Hashing runs in a worker thread so
a login never stalls the loop.

`authorization_code` redeems a code of the authorization endpoint (`authorize.py`): the code
works once (any attempt uses it up), before it expires, for the client it was issued to, with
the same `redirect_uri` and the `code_verifier` whose S256 is the request's `code_challenge`
(RFC 7636); otherwise `invalid_grant`. A `resource` other than the authorization request's is
`invalid_target`. The answer is the password grant's (same claims, the `nonce` in the ID token)
plus a `refresh_token`; `refresh_token` redeems that for a new pair (rotation: the old one is
spent), for the same client, scopes (or fewer) and user.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import hmac
import logging
from typing import Any
from urllib.parse import unquote_plus

from multidict import MultiDictProxy

from sidecars import web
from sidecars.httpkit import read_form
from sidecars.idp.context import CONFIG, DIRECTORY, MINTER, NO_STORE, error_response
from sidecars.idp.grants import CODE, REFRESH, Grant
from sidecars.idp.records import Client
from sidecars.idp.tokens import InvalidScope, grant_scopes

GRANT_TYPES = ("password", "client_credentials", "authorization_code", "refresh_token")
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
    if grant_type == "authorization_code":
        return _redeem_code(request, form, client), client.client_id
    if grant_type == "refresh_token":
        return _refresh(request, form, client), client.client_id
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


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _check_resource(form: MultiDictProxy[Any], grant: Grant) -> None:
    resource = _param(form, "resource")
    if resource is not None and resource != grant.resource:
        raise _OAuthError(400, "invalid_target", "resource differs from the authorization's")


def _tokens_for(request: web.Request, grant: Grant, client: Client) -> dict[str, Any]:
    """The token response of a redeemed grant, with a fresh refresh token."""
    directory = request.app[DIRECTORY]
    user = directory.users.get(grant.username)
    if user is None or user.id != grant.user_id:
        raise _OAuthError(400, "invalid_grant", "User not found")
    body = request.app[MINTER].for_user(user, client, grant.scopes, grant.nonce)
    config = request.app[CONFIG]
    refresh = Grant(
        kind=REFRESH,
        client_id=client.client_id,
        user_id=user.id,
        username=user.username,
        scopes=grant.scopes,
        resource=grant.resource,
    )
    body["refresh_token"] = directory.grants.issue(refresh, config.refresh_ttl)
    body["refresh_expires_in"] = config.refresh_ttl
    return body


def _redeem_code(request: web.Request, form: MultiDictProxy[Any], client: Client) -> dict[str, Any]:
    code = _param(form, "code")
    if code is None:
        raise _OAuthError(400, "invalid_request", "Missing parameter: code")
    directory = request.app[DIRECTORY]
    grant = directory.grants.redeem(CODE, code)
    try:
        if grant is None:
            raise _OAuthError(400, "invalid_grant", "Code not valid (unknown, used or expired)")
        if grant.client_id != client.client_id:
            raise _OAuthError(400, "invalid_grant", "Code was issued to another client")
        if _param(form, "redirect_uri") != grant.redirect_uri:
            raise _OAuthError(400, "invalid_grant", "Incorrect redirect_uri")
        verifier = _param(form, "code_verifier")
        if verifier is None:
            raise _OAuthError(400, "invalid_grant", "PKCE code verifier not specified")
        if not verifier.isascii() or not hmac.compare_digest(
            _s256(verifier), grant.code_challenge or ""
        ):
            raise _OAuthError(400, "invalid_grant", "PKCE verification failed: code_verifier")
        _check_resource(form, grant)
        return _tokens_for(request, grant, client)
    finally:
        directory.save()  # the code is spent, whatever the outcome


def _refresh(request: web.Request, form: MultiDictProxy[Any], client: Client) -> dict[str, Any]:
    secret = _param(form, "refresh_token")
    if secret is None:
        raise _OAuthError(400, "invalid_request", "Missing parameter: refresh_token")
    directory = request.app[DIRECTORY]
    grant = directory.grants.redeem(REFRESH, secret)
    try:
        if grant is None:
            raise _OAuthError(
                400, "invalid_grant", "Invalid refresh token (unknown, used or expired)"
            )
        if grant.client_id != client.client_id:
            raise _OAuthError(400, "invalid_grant", "Refresh token was issued to another client")
        asked = _param(form, "scope")
        if asked is not None:
            try:
                narrowed = grant_scopes(asked)
            except InvalidScope as exc:
                raise _OAuthError(400, "invalid_scope", str(exc)) from None
            if not set(narrowed) <= set(grant.scopes):
                raise _OAuthError(400, "invalid_scope", "Scope exceeds the original grant's")
            grant = dataclasses.replace(grant, scopes=narrowed)
        _check_resource(form, grant)
        return _tokens_for(request, grant, client)
    finally:
        directory.save()  # rotation: this refresh token is spent, whatever the outcome


async def token(request: web.Request) -> web.Response:
    """The token endpoint handler."""
    if request.content_type != _FORM:
        return _OAuthError(400, "invalid_request", f"Content-Type must be {_FORM}").response()
    try:
        form = await read_form(request)
    except ValueError as exc:
        return _OAuthError(400, "invalid_request", str(exc)).response()
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
