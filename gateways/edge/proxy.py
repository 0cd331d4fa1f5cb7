"""The edge data plane on :9080. Routing, plugins and upstream proxying plug in here; until
routes are configured, `/` answers the reference deployment's static health response and
every other path answers 404 JSON, as a gateway with no matching route does."""

from __future__ import annotations

from aiohttp import web

from runtime.config import VERSION


async def static_health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "service": "edge-proxy", "version": VERSION})


async def no_route(request: web.Request) -> web.Response:
    return web.json_response(
        {"error": "not_found", "message": f"no route matches {request.method} {request.path}"},
        status=404,
    )


def build_proxy_app(max_body_bytes: int) -> web.Application:
    app = web.Application(client_max_size=max_body_bytes)
    app.router.add_get("/", static_health)
    app.router.add_route("*", "/{tail:.*}", no_route)
    return app
