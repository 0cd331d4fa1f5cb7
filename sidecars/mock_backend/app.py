"""Builds the mock backend's application (`sidecars.web`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sidecars import web
from sidecars.httpkit import error_middleware

SERVICE = "mock-backend"
MAX_DELAY_MS = 10_000
# Credentials the edge may forward; echoing them would copy secrets into test logs and bodies.
_HIDDEN_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
# Statuses whose responses must not carry a body (RFC 9110 §6.4.1).
_NO_BODY = frozenset({204, 304})


def _render_error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


def _multi(pairs: Any, hidden: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Flatten a multidict: one value stays a string, a repeated name becomes a list."""
    out: dict[str, Any] = {}
    for key in pairs:
        if key.lower() in hidden or key in out:
            continue
        values = pairs.getall(key)
        out[key] = values[0] if len(values) == 1 else values
    return out


async def describe(request: web.Request) -> dict[str, Any]:
    """What the request looked like to this upstream (the echo body)."""
    raw = await request.read()
    text = raw.decode("utf-8", errors="replace")
    body: Any = None
    if text:
        try:
            body = json.loads(text)
        except json.JSONDecodeError:
            body = text
    return {
        "service": SERVICE,
        "method": request.method,
        "path": request.path,
        "query": _multi(request.query),
        "headers": _multi(request.headers, _HIDDEN_HEADERS),
        "body": body,
        "tenant_id": request.headers.get("X-Tenant-ID"),
    }


async def echo(request: web.Request) -> web.Response:
    """Any method, any path: 200 with the request description."""
    return web.json_response(await describe(request))


async def health(_request: web.Request) -> web.Response:
    """`GET /health`."""
    return web.json_response({"status": "ok", "service": SERVICE})


async def status(request: web.Request) -> web.Response:
    """`GET /status/{code}`: answer with that status (200-599), to test error paths."""
    try:
        code = int(request.match_info["code"])
    except ValueError:
        code = 0
    if not 200 <= code <= 599:
        return _render_error(400, "bad_request", "status code must be an integer in 200-599")
    if code in _NO_BODY:
        return web.Response(status=code)
    return web.json_response({"service": SERVICE, "status": code}, status=code)


async def delay(request: web.Request) -> web.Response:
    """`GET /delay/{ms}`: sleep (capped at 10 s), then echo, to test upstream timeouts."""
    try:
        wanted = int(request.match_info["ms"])
    except ValueError:
        wanted = -1
    if wanted < 0:
        return _render_error(400, "bad_request", "delay must be a non-negative integer (ms)")
    slept = min(wanted, MAX_DELAY_MS)
    await asyncio.sleep(slept / 1000)
    return web.json_response({**await describe(request), "delay_ms": slept})


def build_app() -> web.Application:
    """The app; the fixed routes are GET only, every other method and path is echoed."""
    app = web.Application(middlewares=[error_middleware(_render_error)], errors=_render_error)
    app.router.add_get("/health", health, allow_head=False)
    app.router.add_get("/status/{code}", status, allow_head=False)
    app.router.add_get("/delay/{ms}", delay, allow_head=False)
    app.router.add_route("*", "/{tail:.*}", echo)
    return app
