"""The authorization endpoint: the authorization-code flow with PKCE, and its login page.

`GET /realms/strata/protocol/openid-connect/auth?response_type=code&client_id=..&redirect_uri=..
&code_challenge=..&code_challenge_method=S256[&state][&scope][&nonce][&resource]` shows the login
page; the page posts the username and password to `/realms/strata/login-actions/authenticate`
with the same query (Keycloak's paths). On success the browser is sent to the redirect URI with
`code`, `state` and `iss` (RFC 9207); the code is single-use, lives `code_ttl` seconds, and is
bound to the client, the redirect URI, the PKCE challenge and the `resource` (RFC 8707); the
token endpoint redeems it. A wrong password shows the page again with the error.

Any client with registered redirect URIs may use it: clients that registered themselves
(`registration.py`), and those of the users file or the admin API (`redirect_uris`). There is no
login session: each authorization asks for the password.

Errors (RFC 6749 §4.1.2.1): an unknown client or a redirect URI the client did not register is
explained on an error page (400), never redirected. Anything else goes back to the client as
`error` and `error_description` on its redirect URI: `unsupported_response_type`,
`invalid_request` (a missing or repeated parameter; PKCE is required and only S256 is
accepted), `invalid_scope`, `invalid_target` (a `resource` that is not an absolute URI).
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from multidict import MultiMapping

from sidecars import web
from sidecars.httpkit import read_form
from sidecars.idp.context import CONFIG, DIRECTORY, NO_STORE
from sidecars.idp.directory import Directory
from sidecars.idp.grants import CODE, Grant
from sidecars.idp.pages import error_page, login_page
from sidecars.idp.records import Client
from sidecars.idp.tokens import InvalidScope, grant_scopes

AUTH_PATH = "protocol/openid-connect/auth"
LOGIN_PATH = "login-actions/authenticate"
# RFC 7636 §4.2: S256 gives 43 characters of base64url; allow the spec's 43-128 unreserved.
_PKCE_VALUE = re.compile(r"[A-Za-z0-9._~-]{43,128}")
_FORM = "application/x-www-form-urlencoded"
_log = logging.getLogger("sidecars.idp.authorize")


class NotRedirectable(Exception):
    """The request cannot be answered at the client's redirect URI: shown to the person."""


class Refused(Exception):
    """An error the client learns about at its redirect URI (with the request's state)."""

    def __init__(self, error: str, description: str, redirect_uri: str, state: str | None) -> None:
        super().__init__(description)
        self.error, self.description = error, description
        self.redirect_uri, self.state = redirect_uri, state


@dataclass(frozen=True)
class AuthorizationRequest:
    """A checked authorization request."""

    client: Client
    redirect_uri: str
    state: str | None
    code_challenge: str
    scopes: tuple[str, ...]
    nonce: str | None
    resource: str | None


def _single(query: MultiMapping[str], name: str) -> str | None:
    values = query.getall(name, [])
    if len(values) > 1:  # RFC 6749 §3.1: parameters must not be repeated
        raise ValueError(f"Parameter '{name}' is repeated")
    return values[0] if values and values[0] != "" else None


def _client_and_redirect(query: MultiMapping[str], directory: Directory) -> tuple[Client, str]:
    try:
        client_id, redirect_uri = _single(query, "client_id"), _single(query, "redirect_uri")
    except ValueError as exc:
        raise NotRedirectable(str(exc)) from None
    if client_id is None:
        raise NotRedirectable("Missing parameter: client_id")
    client = directory.clients.get(client_id)
    if client is None:
        raise NotRedirectable(f"Client not found: {client_id[:128]}")
    if redirect_uri is None:
        # RFC 6749 §3.1.2.3: optional when the client registered exactly one.
        if len(client.redirect_uris) != 1:
            raise NotRedirectable("Missing parameter: redirect_uri")
        return client, client.redirect_uris[0]
    if not client.accepts_redirect(redirect_uri):
        raise NotRedirectable("Invalid parameter: redirect_uri (not registered for this client)")
    return client, redirect_uri


def _is_absolute_uri(value: str) -> bool:
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return bool(parts.scheme and parts.netloc) and "#" not in value


def read_request(query: MultiMapping[str], directory: Directory) -> AuthorizationRequest:
    """Check an authorization request; raises `NotRedirectable` or `Refused`."""
    client, redirect_uri = _client_and_redirect(query, directory)
    state = None

    def refuse(error: str, description: str) -> Refused:
        return Refused(error, description, redirect_uri, state)

    try:
        state = _single(query, "state")
        response_type = _single(query, "response_type")
        challenge = _single(query, "code_challenge")
        method = _single(query, "code_challenge_method")
        scope, nonce = _single(query, "scope"), _single(query, "nonce")
        resource = _single(query, "resource")
    except ValueError as exc:
        raise refuse("invalid_request", str(exc)) from None
    if response_type is None:
        raise refuse("invalid_request", "Missing parameter: response_type")
    if response_type != "code":
        raise refuse("unsupported_response_type", f"Unsupported response_type {response_type}")
    if challenge is None:
        raise refuse("invalid_request", "Missing parameter: code_challenge (PKCE is required)")
    if method != "S256":
        raise refuse("invalid_request", "Invalid parameter: code_challenge_method must be S256")
    if not _PKCE_VALUE.fullmatch(challenge):
        raise refuse("invalid_request", "Invalid parameter: code_challenge")
    try:
        scopes = grant_scopes(scope)
    except InvalidScope as exc:
        raise refuse("invalid_scope", str(exc)) from None
    if resource is not None and not _is_absolute_uri(resource):
        raise refuse("invalid_target", "Invalid parameter: resource must be an absolute URI")
    if nonce is not None and len(nonce) > 512:
        raise refuse("invalid_request", "Invalid parameter: nonce is too long")
    return AuthorizationRequest(client, redirect_uri, state, challenge, scopes, nonce, resource)


def _redirect(uri: str, params: dict[str, str | None]) -> web.Response:
    """302 to `uri` with `params` added to the query it already has (RFC 6749 §3.1.2)."""
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [(name, value) for name, value in params.items() if value is not None]
    location = urlunsplit(parts._replace(query=urlencode(query)))
    return web.Response(status=302, headers={"Location": location, **NO_STORE})


def _refusal(request: web.Request, exc: Refused) -> web.Response:
    _log.info("authorization refused", extra={"error": exc.error})
    return _redirect(
        exc.redirect_uri,
        {
            "error": exc.error,
            "error_description": exc.description,
            "state": exc.state,
            "iss": request.app[CONFIG].issuer,
        },
    )


def _login_action(request: web.Request) -> str:
    # Path-absolute, so the form works under whichever host the browser used.
    return f"{request.app[CONFIG].realm_path}/{LOGIN_PATH}?{request.query_string}"


async def authorize(request: web.Request) -> web.Response:
    """`GET .../auth`: check the request, then show the login page."""
    try:
        auth = read_request(request.query, request.app[DIRECTORY])
    except NotRedirectable as exc:
        return error_page(str(exc))
    except Refused as exc:
        return _refusal(request, exc)
    return login_page(_login_action(request), auth.client.name or auth.client.client_id)


async def authenticate(request: web.Request) -> web.Response:
    """`POST .../login-actions/authenticate`: the login form. The authorization request (the
    query) is checked again, then the password; success sends the code to the client."""
    directory = request.app[DIRECTORY]
    try:
        auth = read_request(request.query, directory)
    except NotRedirectable as exc:
        return error_page(str(exc))
    except Refused as exc:
        return _refusal(request, exc)
    if request.content_type != _FORM:
        return error_page(f"The login form must be sent as {_FORM}")
    try:
        form = await read_form(request)
    except ValueError as exc:
        return error_page(str(exc))
    username, password = form.get("username"), form.get("password")
    user = None
    if isinstance(username, str) and isinstance(password, str) and username and password:
        user = await asyncio.to_thread(directory.authenticate_user, username, password)
    client_label = auth.client.name or auth.client.client_id
    if user is None:
        _log.info("login failed", extra={"client_id": auth.client.client_id})
        shown = username if isinstance(username, str) else ""
        return login_page(
            _login_action(request), client_label, shown, "Invalid username or password."
        )
    config = request.app[CONFIG]
    grant = Grant(
        kind=CODE,
        client_id=auth.client.client_id,
        user_id=user.id,
        username=user.username,
        scopes=auth.scopes,
        redirect_uri=auth.redirect_uri,
        code_challenge=auth.code_challenge,
        nonce=auth.nonce,
        resource=auth.resource,
    )
    code = directory.grants.issue(grant, config.code_ttl)
    directory.save()
    _log.info("login", extra={"client_id": auth.client.client_id, "username": user.username})
    return _redirect(auth.redirect_uri, {"code": code, "state": auth.state, "iss": config.issuer})
