"""The portal's pages: `GET /portal/` and `/portal/index.html` (the single page) and
`/portal/static/{path}` (its modules, styles, images, vendored libraries), from the static
directory only (no path leaves it; no hidden files). Everything is local: no CDN, no font
service. `vendor/` (pinned third-party files) may be cached for a year; the rest is
revalidated on every load (`no-cache`, with the ETag/Last-Modified aiohttp's file answer
carries), so a new release shows at once.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from aiohttp import web

from controlplane.portal.security import SECURITY_HEADERS, Handler
from runtime.errors import NotFound

DEFAULT_DIR = Path(__file__).with_name("static")
LONG_CACHE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
# Types the browser must get right for ES modules and styles (nosniff is on).
mimetypes.add_type("text/javascript", ".js")
mimetypes.add_type("text/javascript", ".mjs")
mimetypes.add_type("text/css", ".css")
mimetypes.add_type("image/svg+xml", ".svg")
mimetypes.add_type("font/woff2", ".woff2")


def _file(root: Path, relative: str) -> Path:
    parts = relative.split("/")
    if not relative or any(p in ("", ".", "..") or p.startswith(".") or "\\" in p for p in parts):
        raise NotFound(f"no portal file {relative[:200]!r}", error="not_found")
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_file():
        raise NotFound(f"no portal file {relative[:200]!r}", error="not_found")
    return path


def _answer(path: Path, cache: str) -> web.FileResponse:
    response = web.FileResponse(path, headers={**SECURITY_HEADERS, "Cache-Control": cache})
    kind, _ = mimetypes.guess_type(path.name)
    if kind is not None:
        response.content_type = kind
    return response


def page_handler(root: Path) -> Handler:
    async def page(request: web.Request) -> web.StreamResponse:
        return _answer(_file(root, "index.html"), REVALIDATE)

    return page


def asset_handler(root: Path) -> Handler:
    async def asset(request: web.Request) -> web.StreamResponse:
        relative = request.match_info["path"]
        cache = LONG_CACHE if relative.startswith("vendor/") else REVALIDATE
        return _answer(_file(root, relative), cache)

    return asset


async def to_index(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/portal/")
