"""`GET /openapi.json` and `GET /docs` on a front door: the service's OpenAPI document and
Swagger UI reading it, every asset served by the service itself (no CDN: the docs work on a
machine without internet access).

Both are public, as describing an API normally is: they name paths and shapes, never data, and
every operation still asks for its credentials. Where the whole port is guarded (the edge
admin API's network allowlist) the guard covers them too.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from runtime import json_codec

# swagger-ui-py's copy of Swagger UI 5 (only its files are used, not its framework glue)
_PACKAGE = importlib.util.find_spec("swagger_ui")
assert _PACKAGE is not None and _PACKAGE.origin is not None, "swagger-ui-py is not installed"
ASSETS = Path(_PACKAGE.origin).parent / "static"
# The files the page loads (the package also ships Swagger Editor, which is not served).
_SERVED = {
    "swagger-ui.css": "text/css",
    "index.css": "text/css",
    "swagger-ui-bundle.js": "application/javascript",
    "swagger-ui-standalone-preset.js": "application/javascript",
    "favicon-32x32.png": "image/png",
    "favicon-16x16.png": "image/png",
}

PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{title} — API</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="stylesheet" href="/docs/index.css">
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/swagger-ui-standalone-preset.js"></script>
  <script>
    window.ui = SwaggerUIBundle({{
      url: "/openapi.json",
      dom_id: "#swagger-ui",
      deepLinking: true,
      validatorUrl: null,
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
      layout: "StandaloneLayout"
    }});
  </script>
</body>
</html>
"""


def add_docs_routes(app: web.Application, document: Callable[[], dict[str, Any]]) -> None:
    """Serve `document()` (built once, on the first request) and the docs page."""
    built: list[bytes] = []

    async def openapi_json(request: web.Request) -> web.Response:
        if not built:
            built.append(json_codec.dumps(document()))
        return web.Response(body=built[0], content_type="application/json")

    async def docs(request: web.Request) -> web.Response:
        if not built:
            built.append(json_codec.dumps(document()))
        title = json_codec.loads(built[0])["info"]["title"]
        return web.Response(text=PAGE.format(title=title), content_type="text/html")

    async def asset(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in _SERVED:
            raise web.HTTPNotFound()
        return web.FileResponse(
            ASSETS / name,
            headers={"Content-Type": _SERVED[name], "Cache-Control": "public, max-age=86400"},
        )

    app.router.add_get("/openapi.json", openapi_json)
    app.router.add_get("/docs", docs)
    app.router.add_get("/docs/{name}", asset)
