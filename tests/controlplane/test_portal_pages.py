"""The portal's pages and every portal answer: served from the static directory only, with a
strict Content-Security-Policy (no inline script, nothing from elsewhere, no framing), nosniff,
and caching by kind (vendor/ for a year, the rest revalidated; API answers never stored)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from controlplane_kit import Start, start_fixture  # noqa: F401
from yarl import URL

from controlplane.portal.security import CSP
from runtime.testing import Serving

PAGE = "<!doctype html><title>Strata</title><script type=module src=static/app.js></script>"


@pytest.fixture
async def cp(start: Start, tmp_path: Path) -> AsyncIterator[Serving]:
    static = tmp_path / "static"
    (static / "vendor").mkdir(parents=True)
    (static / "index.html").write_text(PAGE)
    (static / "app.js").write_text("export const ok = true;\n")
    (static / "app.css").write_text("body { margin: 0 }\n")
    (static / "vendor" / "lib.js").write_text("export default 1;\n")
    (static / ".secret").write_text("HIDDEN-CONTENT")
    (tmp_path / "outside.txt").write_text("OUTSIDE-CONTENT")
    async with start(PORTAL_STATIC_DIR=str(static), HEALTH_PROBE_INTERVAL_SECS="0") as svc:
        yield svc


async def get(cp: Serving, path: str) -> tuple[aiohttp.ClientResponse, str]:
    async with (
        aiohttp.ClientSession() as http,
        # encoded: the path is sent as written (`..` included), not normalized by the client
        http.get(URL(cp.http_url + path, encoded=True), allow_redirects=False) as resp,
    ):
        return resp, await resp.text()


def assert_strict(resp: aiohttp.ClientResponse) -> None:
    assert resp.headers["Content-Security-Policy"] == CSP
    assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    assert "default-src 'self'" in CSP and "frame-ancestors 'none'" in CSP
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["X-Frame-Options"] == "DENY"
    assert resp.headers["Referrer-Policy"] == "no-referrer"


@pytest.mark.parametrize("path", ["/portal/", "/portal/index.html"])
async def test_the_page_is_served_with_strict_headers(cp: Serving, path: str) -> None:
    resp, text = await get(cp, path)
    assert resp.status == 200 and text == PAGE
    assert resp.content_type == "text/html"
    assert resp.headers["Cache-Control"] == "no-cache"
    assert_strict(resp)


async def test_bare_portal_path_redirects_to_the_page(cp: Serving) -> None:
    resp, _ = await get(cp, "/portal")
    assert (resp.status, resp.headers["Location"]) == (302, "/portal/")


@pytest.mark.parametrize(
    ("path", "content_type", "cache"),
    [
        ("/portal/static/app.js", "text/javascript", "no-cache"),
        ("/portal/static/app.css", "text/css", "no-cache"),
        ("/portal/static/vendor/lib.js", "text/javascript", "public, max-age=31536000, immutable"),
    ],
)
async def test_assets_have_their_type_and_cache(
    cp: Serving, path: str, content_type: str, cache: str
) -> None:
    resp, _ = await get(cp, path)
    assert resp.status == 200
    assert resp.content_type == content_type
    assert resp.headers["Cache-Control"] == cache
    assert_strict(resp)


@pytest.mark.parametrize(
    "path",
    [
        "/portal/static/.secret",
        "/portal/static/../outside.txt",
        "/portal/static/%2e%2e/outside.txt",
        "/portal/static/vendor/%2e%2e/%2e%2e/outside.txt",
        "/portal/static/missing.js",
        "/portal/static/vendor",
    ],
)
async def test_nothing_outside_the_static_files_is_served(cp: Serving, path: str) -> None:
    resp, text = await get(cp, path)
    assert resp.status == 404, text
    assert "OUTSIDE-CONTENT" not in text and "HIDDEN-CONTENT" not in text


async def test_errors_and_api_answers_carry_the_headers_and_are_never_stored(
    cp: Serving,
) -> None:
    for path in ("/portal/static/missing.js", "/portal/api/session", "/portal/login?next=//x"):
        resp, _ = await get(cp, path)
        assert resp.status in (400, 401, 404)
        assert_strict(resp)
    resp, _ = await get(cp, "/portal/api/session")
    assert resp.headers["Cache-Control"] == "no-store"
    resp, _ = await get(cp, "/portal/login")
    assert resp.status == 302 and resp.headers["Cache-Control"] == "no-store"
    assert_strict(resp)
