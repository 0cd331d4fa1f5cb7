"""Typed app state keys and the RFC 6749 error body shared by the IdP's handlers."""

from __future__ import annotations

from sidecars import web
from sidecars.idp.config import IdpConfig
from sidecars.idp.directory import Directory
from sidecars.idp.keys import SigningKeys
from sidecars.idp.tokens import TokenMinter

CONFIG = web.AppKey("config", IdpConfig)
KEYS = web.AppKey("keys", SigningKeys)
DIRECTORY = web.AppKey("directory", Directory)
MINTER = web.AppKey("minter", TokenMinter)

# RFC 6749 §5.1: token responses, and their errors, must not be cached.
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def error_response(
    status: int, error: str, description: str, headers: dict[str, str] | None = None
) -> web.Response:
    """`{error, error_description}` (RFC 6749 §5.2), the one error shape of every IdP endpoint."""
    return web.json_response(
        {"error": error, "error_description": description}, status=status, headers=headers
    )
