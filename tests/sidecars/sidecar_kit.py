"""Helpers shared by the sidecar tests: IdP constants, token requests, joserfc verification.

A uniquely named module rather than `conftest` imports, so it cannot collide with another
suite's conftest on sys.path.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
from joserfc import jwt
from joserfc.jwk import KeySet
from yarl import URL

from sidecars import web
from sidecars.idp.app import build_app
from sidecars.idp.config import IdpConfig

IDP_ISSUER = "http://idp.test/realms/strata"
IDP_ADMIN_TOKEN = "test-admin-token"
ADMIN_HEADERS = {"Authorization": f"Bearer {IDP_ADMIN_TOKEN}"}
TOKEN_PATH = "/realms/strata/protocol/openid-connect/token"
CERTS_PATH = "/realms/strata/protocol/openid-connect/certs"
ADMIN = "/admin/realms/strata"


class Served:
    """A sidecar served in-process on 127.0.0.1 (tests/sidecars/conftest.py `running`)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def make_url(self, path: str) -> URL:
        return URL(f"http://127.0.0.1:{self.port}").join(URL(path))


def idp_app(data_dir: Path, **settings: Any) -> web.Application:
    """An IdP over the dev users file with the test issuer and admin token."""
    return build_app(
        IdpConfig(issuer=IDP_ISSUER, data_dir=data_dir, admin_token=IDP_ADMIN_TOKEN, **settings)
    )


def password_form(username: str, password: str, scope: str = "openid tenant") -> dict[str, str]:
    """A password-grant form through the public portal client."""
    return {
        "grant_type": "password",
        "client_id": "strata-portal",
        "username": username,
        "password": password,
        "scope": scope,
    }


async def get_token(
    http: aiohttp.ClientSession,
    idp: Served,
    form: dict[str, str],
    auth: aiohttp.BasicAuth | None = None,
) -> tuple[int, dict[str, Any], aiohttp.ClientResponse]:
    """POST the form to the token endpoint: (status, JSON body, response)."""
    async with http.post(idp.make_url(TOKEN_PATH), data=form, auth=auth) as resp:
        return resp.status, await resp.json(), resp


async def keyset(http: aiohttp.ClientSession, idp: Served) -> KeySet:
    """The served JWKS as a joserfc key set."""
    async with http.get(idp.make_url(CERTS_PATH)) as resp:
        assert resp.status == 200
        return KeySet.import_key_set(await resp.json())


def verify(token: str, keys: KeySet, alg: str, aud: str = "strata") -> jwt.Token:
    """Verify signature, alg, iss, aud and exp with joserfc (independent of the IdP's pyjwt)."""
    decoded = jwt.decode(token, keys, algorithms=[alg])
    assert decoded.header["alg"] == alg
    registry = jwt.JWTClaimsRegistry(
        iss={"essential": True, "value": IDP_ISSUER},
        aud={"essential": True, "value": aud},
        exp={"essential": True},
    )
    registry.validate(decoded.claims)
    return decoded


AUTH_PATH = "/realms/strata/protocol/openid-connect/auth"
REGISTRATION_PATH = "/realms/strata/clients-registrations/openid-connect"
REDIRECT_URI = "http://127.0.0.1:33418/callback"


def pkce_pair() -> tuple[str, str]:
    """A PKCE (code_verifier, S256 code_challenge), computed here as RFC 7636 §4.2 says."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class LoginForm(HTMLParser):
    """The first form of a page as a browser sees it: its action and input names."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.action: str | None = None
        self.inputs: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = values.get("action")
        elif tag == "input" and values.get("name"):
            self.inputs.append(str(values["name"]))


async def register_client(
    http: aiohttp.ClientSession, idp: Served, redirect_uris: list[str] | None = None
) -> str:
    """A public client registered through RFC 7591; returns its client_id."""
    body = {"redirect_uris": redirect_uris or [REDIRECT_URI], "client_name": "Test MCP client"}
    async with http.post(idp.make_url(REGISTRATION_PATH), json=body) as resp:
        assert resp.status == 201, await resp.text()
        return str((await resp.json())["client_id"])


def authorization_query(client_id: str, challenge: str, **extra: str) -> dict[str, str]:
    """The query of an authorization-code request with PKCE S256."""
    return {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "st-123",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "openid tenant",
        **extra,
    }


async def log_in(
    http: aiohttp.ClientSession,
    idp: Served,
    query: dict[str, str],
    username: str = "alice",
    password: str = "alice",
) -> aiohttp.ClientResponse:
    """What a browser does: open the authorization URL, fill in the login form, submit it.
    Returns the form's answer (not followed: a redirect to the client, or the page again)."""
    async with http.get(idp.make_url(AUTH_PATH), params=query) as page:
        assert page.status == 200, await page.text()
        form = LoginForm(await page.text())
    assert form.action is not None and form.inputs == ["username", "password"]
    credentials = {"username": username, "password": password}
    async with http.post(
        idp.make_url("/").join(URL(form.action)), data=credentials, allow_redirects=False
    ) as answer:
        await answer.read()
        return answer


def redirect_params(answer: aiohttp.ClientResponse) -> dict[str, str]:
    """The query the IdP sent the browser back to the client with."""
    location = URL(answer.headers["Location"])
    assert str(location.with_query(None)) == REDIRECT_URI
    return dict(location.query)
