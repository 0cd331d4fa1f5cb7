"""Builds the IdP's application (`sidecars.web`) from an `IdpConfig`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from sidecars import web
from sidecars.httpkit import error_middleware
from sidecars.idp import oidc
from sidecars.idp.admin import admin_app
from sidecars.idp.authorize import AUTH_PATH, LOGIN_PATH, authenticate, authorize
from sidecars.idp.config import ADMIN_PREFIX, REALM, REALM_PREFIX, IdpConfig
from sidecars.idp.context import CONFIG, DIRECTORY, KEYS, MINTER, error_response
from sidecars.idp.directory import Directory
from sidecars.idp.keys import SigningKeys
from sidecars.idp.registration import REGISTRATION_PATH, register
from sidecars.idp.token_endpoint import token
from sidecars.idp.tokens import TokenMinter

REALM_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
CLAIM_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*")


def _render_error(status: int, code: str, message: str) -> web.Response:
    return error_response(status, code, message)


def build_app(config: IdpConfig, realms: Mapping[str, Path] | None = None) -> web.Application:
    """Load keys and directory from disk (creating keys on first start) and wire the routes.

    `realms` adds realms beside the main one (realm-per-tenant: a tenant created with that
    `realm_name` owns it): name → its users file, which may say at which claim path its tokens
    carry the tenant (`"tenant_claim": "org.tenant"`, default `tenant_id`). Each is served
    under `/realms/<name>` with its own issuer, signing keys, OIDC discovery document, users
    and clients; the admin API serves the main realm.

    Raises `ValueError` on a malformed users or state file and `OSError` on unreadable files,
    before anything listens, so a bad config fails the start instead of the first login.
    """
    app = web.Application(middlewares=[error_middleware(_render_error)], errors=_render_error)
    _serve_realm(app, config, REALM_PREFIX)
    app.router.add_get(oidc.OAUTH_METADATA, oidc.discovery)
    app.add_subapp(ADMIN_PREFIX, admin_app())
    for name, users_file in (realms or {}).items():
        if name == REALM or not REALM_NAME.fullmatch(name):
            raise ValueError(f"realm {name!r}: a name of [A-Za-z0-9._-], not {REALM!r}")
        realm = web.Application()
        _serve_realm(realm, config.realm(name, users_file, _tenant_claim(users_file)), "")
        app.add_subapp(f"/realms/{name}", realm)
    return app


def _serve_realm(app: web.Application, config: IdpConfig, prefix: str) -> None:
    """One realm's state and routes on `app`, its paths under `prefix`."""
    keys = SigningKeys.load_or_create(config.data_dir)
    app[CONFIG] = config
    app[KEYS] = keys
    app[DIRECTORY] = Directory.load(config.users_file, config.state_file)
    app[MINTER] = TokenMinter(config, keys)
    app.router.add_get(f"{prefix}/{oidc.DISCOVERY_PATH}", oidc.discovery)
    app.router.add_get(f"{prefix}/{oidc.CERTS_PATH}", oidc.certs)
    app.router.add_get(f"{prefix}/{AUTH_PATH}", authorize)
    app.router.add_post(f"{prefix}/{LOGIN_PATH}", authenticate)
    app.router.add_post(f"{prefix}/{oidc.TOKEN_PATH}", token)
    app.router.add_post(f"{prefix}/{REGISTRATION_PATH}", register)


def _tenant_claim(users_file: Path) -> str:
    claim = json.loads(users_file.read_text(encoding="utf-8")).get("tenant_claim", "tenant_id")
    if not isinstance(claim, str) or not CLAIM_PATH.fullmatch(claim):
        raise ValueError(f"{users_file}: 'tenant_claim' must be a dotted claim path")
    return claim
