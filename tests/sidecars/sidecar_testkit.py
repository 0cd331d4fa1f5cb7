"""Helpers shared by the sidecar tests: IdP constants, token requests, joserfc verification.

A uniquely named module rather than `conftest` imports, so it cannot collide with another
suite's conftest on sys.path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from joserfc import jwt
from joserfc.jwk import KeySet

from sidecars.idp.app import build_app
from sidecars.idp.config import IdpConfig

IDP_ISSUER = "http://idp.test/realms/strata"
IDP_ADMIN_TOKEN = "test-admin-token"
ADMIN_HEADERS = {"Authorization": f"Bearer {IDP_ADMIN_TOKEN}"}
TOKEN_PATH = "/realms/strata/protocol/openid-connect/token"
CERTS_PATH = "/realms/strata/protocol/openid-connect/certs"
ADMIN = "/admin/realms/strata"


def idp_app(data_dir: Path) -> web.Application:
    """An IdP over the dev users file with the test issuer and admin token."""
    return build_app(IdpConfig(issuer=IDP_ISSUER, data_dir=data_dir, admin_token=IDP_ADMIN_TOKEN))


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
    idp: TestServer,
    form: dict[str, str],
    auth: aiohttp.BasicAuth | None = None,
) -> tuple[int, dict[str, Any], aiohttp.ClientResponse]:
    """POST the form to the token endpoint: (status, JSON body, response)."""
    async with http.post(idp.make_url(TOKEN_PATH), data=form, auth=auth) as resp:
        return resp.status, await resp.json(), resp


async def keyset(http: aiohttp.ClientSession, idp: TestServer) -> KeySet:
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
