"""RFC 7591 dynamic client registration, for public clients: how an MCP client that has no
client id gets one (the MCP SDK's OAuth client registers when it holds no client information).

`POST /realms/strata/clients-registrations/openid-connect` (Keycloak's path) with
`{redirect_uris, client_name?, grant_types?, response_types?, token_endpoint_auth_method?}`
answers 201 with the client's information. Registration is open, as in a development IdP it
should be; every client registered this way is public (`token_endpoint_auth_method: "none"`,
no secret: RFC 7591 §3.2.1 lets the server replace what was asked for) and may only use the
authorization-code flow with PKCE and refresh tokens. The client is stored with the IdP's other
run-time state, so it survives a restart; the admin API lists and deletes it like any client.

Errors (RFC 7591 §3.2.2): 400 `invalid_redirect_uri` (missing, not a list, not an absolute
URI, a fragment) or `invalid_client_metadata` (not JSON, a grant or response type this IdP
does not offer, a bad client name).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from sidecars import web
from sidecars.httpkit import read_json
from sidecars.idp.context import DIRECTORY, NO_STORE, error_response
from sidecars.idp.records import Client, parse_redirect_uris

REGISTRATION_PATH = "clients-registrations/openid-connect"
GRANT_TYPES = ("authorization_code", "refresh_token")
_log = logging.getLogger("sidecars.idp.registration")


class _BadMetadata(Exception):
    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error, self.description = error, description


def _names(
    metadata: dict[str, Any], field: str, allowed: tuple[str, ...], default: str
) -> list[str]:
    value = metadata.get(field, [default])
    if not isinstance(value, list) or not value or not set(value) <= set(allowed):
        raise _BadMetadata(
            "invalid_client_metadata", f"'{field}' must be a list of {', '.join(allowed)}"
        )
    return [name for name in allowed if name in value]


def _client(metadata: dict[str, Any]) -> tuple[Client, list[str]]:
    """The client to register and the grant types it gets; raises `_BadMetadata`."""
    if "redirect_uris" not in metadata:
        raise _BadMetadata("invalid_redirect_uri", "'redirect_uris' is required")
    try:
        redirect_uris = parse_redirect_uris(metadata["redirect_uris"])
    except ValueError as exc:
        raise _BadMetadata("invalid_redirect_uri", str(exc)) from None
    if not redirect_uris:
        raise _BadMetadata("invalid_redirect_uri", "'redirect_uris' must name at least one URI")
    grant_types = _names(metadata, "grant_types", GRANT_TYPES, "authorization_code")
    _names(metadata, "response_types", ("code",), "code")
    name = metadata.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > 200):
        raise _BadMetadata(
            "invalid_client_metadata", "'client_name' must be a string of at most 200 characters"
        )
    client = Client(
        client_id=str(uuid.uuid4()),
        secret_hash=None,
        tenant_id=None,
        agent_id=None,
        redirect_uris=redirect_uris,
        name=name or None,
    )
    return client, grant_types


async def register(request: web.Request) -> web.Response:
    """The registration endpoint handler."""
    try:
        metadata = await read_json(request)
    except ValueError:
        metadata = None
    try:
        if not isinstance(metadata, dict):
            raise _BadMetadata("invalid_client_metadata", "the body must be a JSON object")
        client, grant_types = _client(metadata)
    except _BadMetadata as exc:
        _log.info("registration refused", extra={"error": exc.error})
        return error_response(400, exc.error, exc.description, dict(NO_STORE))
    directory = request.app[DIRECTORY]
    directory.clients.add(client.client_id, client)  # a fresh UUID: no conflict
    directory.save()
    _log.info("client registered", extra={"client_id": client.client_id})
    body: dict[str, Any] = {
        "client_id": client.client_id,
        "client_id_issued_at": int(time.time()),
        "redirect_uris": list(client.redirect_uris),
        "grant_types": grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    if client.name:
        body["client_name"] = client.name
    return web.json_response(body, status=201, headers=NO_STORE)
