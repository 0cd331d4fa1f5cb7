"""Builds the IdP's aiohttp application from an `IdpConfig`."""

from __future__ import annotations

from aiohttp import web

from sidecars.httpkit import error_middleware
from sidecars.idp import oidc
from sidecars.idp.admin import admin_app
from sidecars.idp.authorize import AUTH_PATH, LOGIN_PATH, authenticate, authorize
from sidecars.idp.config import ADMIN_PREFIX, REALM_PREFIX, IdpConfig
from sidecars.idp.context import CONFIG, DIRECTORY, KEYS, MINTER, error_response
from sidecars.idp.directory import Directory
from sidecars.idp.keys import SigningKeys
from sidecars.idp.registration import REGISTRATION_PATH, register
from sidecars.idp.token_endpoint import token
from sidecars.idp.tokens import TokenMinter


def _render_error(status: int, code: str, message: str) -> web.Response:
    return error_response(status, code, message)


def build_app(config: IdpConfig) -> web.Application:
    """Load keys and directory from disk (creating keys on first start) and wire the routes.

    Raises `ValueError` on a malformed users or state file and `OSError` on unreadable files,
    before anything listens, so a bad config fails the start instead of the first login.
    """
    keys = SigningKeys.load_or_create(config.data_dir)
    directory = Directory.load(config.users_file, config.state_file)
    app = web.Application(middlewares=[error_middleware(_render_error)])
    app[CONFIG] = config
    app[KEYS] = keys
    app[DIRECTORY] = directory
    app[MINTER] = TokenMinter(config, keys)
    app.router.add_get(oidc.OIDC_DISCOVERY, oidc.discovery)
    app.router.add_get(oidc.OAUTH_METADATA, oidc.discovery)
    app.router.add_get(f"{REALM_PREFIX}/{oidc.CERTS_PATH}", oidc.certs)
    app.router.add_get(f"{REALM_PREFIX}/{AUTH_PATH}", authorize)
    app.router.add_post(f"{REALM_PREFIX}/{LOGIN_PATH}", authenticate)
    app.router.add_post(f"{REALM_PREFIX}/{oidc.TOKEN_PATH}", token)
    app.router.add_post(f"{REALM_PREFIX}/{REGISTRATION_PATH}", register)
    app.add_subapp(ADMIN_PREFIX, admin_app())
    return app
