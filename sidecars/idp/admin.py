"""The run-time admin API the control plane uses to provision tenants, on Keycloak's paths.

`/admin/realms/strata/{organizations,users,clients}`: POST creates (201, 409 on a duplicate key,
400 naming the bad field), GET lists, DELETE `/{id}` removes (204, 404 when unknown). Users are
deleted by id, as in Keycloak, or by username; clients by client_id. Every change is written to
the state file before the answer, so a 201 means the record survives a restart.
All routes need `Authorization: Bearer <admin token>`, compared in constant time.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import uuid
from collections.abc import Callable
from typing import Any

from sidecars import web
from sidecars.httpkit import read_json
from sidecars.idp.context import CONFIG, DIRECTORY, error_response
from sidecars.idp.directory import Collection, Conflict, Directory
from sidecars.idp.records import parse_client, parse_organization, parse_user
from sidecars.web import Handler

_log = logging.getLogger("sidecars.idp.admin")

# kind -> (parser off the event loop, the record's key attribute)
_PARSERS: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "users": (lambda data: parse_user(data, lambda _name: str(uuid.uuid4())), "username"),
    "clients": (parse_client, "client_id"),
    "organizations": (parse_organization, "id"),
}


@web.middleware
async def require_admin(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Middleware: 401 unless the request carries the admin bearer token."""
    expected = request.config_dict[CONFIG].admin_token.encode()
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
        return error_response(
            401,
            "unauthorized",
            "admin bearer token required",
            headers={"WWW-Authenticate": 'Bearer realm="strata-admin"'},
        )
    return await handler(request)


def _collection(request: web.Request, kind: str) -> Collection[Any]:
    # A sub-app's own state is empty; config_dict reads through to the parent IdP app.
    directory: Directory = request.config_dict[DIRECTORY]
    collection: Collection[Any] = getattr(directory, kind)
    return collection


def _list(kind: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response([item.public() for item in _collection(request, kind)])

    return handler


def _create(kind: str) -> Handler:
    parse, key_attr = _PARSERS[kind]

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            data = await read_json(request)
        except ValueError as exc:
            return error_response(400, "invalid_request", f"body must be JSON ({exc})")
        if not isinstance(data, dict):
            return error_response(400, "invalid_request", "body must be a JSON object")
        try:
            record = await asyncio.to_thread(parse, data)
        except ValueError as exc:
            return error_response(400, "invalid_request", str(exc))
        key = getattr(record, key_attr)
        directory = request.config_dict[DIRECTORY]
        try:
            # Users are keyed by username, but their id is a token `sub`: keep it unique too.
            if kind == "users" and directory.find_user(record.id) is not None:
                raise Conflict(record.id)
            _collection(request, kind).add(key, record)
        except Conflict:
            return error_response(409, "conflict", f"{kind[:-1]} {key!r} already exists")
        directory.save()
        _log.info("created", extra={"kind": kind, "key": key})
        location = f"{request.path.rstrip('/')}/{getattr(record, 'id', key)}"
        return web.json_response(record.public(), status=201, headers={"Location": location})

    return handler


def _delete(kind: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        ref = request.match_info["id"]
        directory = request.config_dict[DIRECTORY]
        user = directory.find_user(ref) if kind == "users" else None
        key = user.username if user is not None else ref
        try:
            _collection(request, kind).remove(key)
        except KeyError:
            return error_response(404, "not_found", f"{kind[:-1]} {ref!r} not found")
        directory.save()
        _log.info("deleted", extra={"kind": kind, "key": key})
        return web.Response(status=204)

    return handler


def admin_app() -> web.Application:
    """The admin sub-app; mount it at `/admin/realms/strata` under the app holding the state."""
    app = web.Application(middlewares=[require_admin])
    for kind in _PARSERS:
        app.router.add_get(f"/{kind}", _list(kind))
        app.router.add_post(f"/{kind}", _create(kind))
        app.router.add_delete(f"/{kind}/{{id}}", _delete(kind))
    return app
