"""The backend-for-frontend: `/portal/api/{service}/{path}` forwards a browser's call to a
service's public HTTP API with the session's credentials, and hands the answer back unchanged.

The portal holds no private path into the stores: every page's data comes from the public APIs
as the signed-in user (`Authorization: Bearer <access token>`), so tenant isolation holds in the
portal exactly as in the API. The edge Admin API takes no user tokens; it is forwarded with the
admin key, for platform administrators only.

Per service, only its public API's paths are forwarded:

| service | base (config) | paths |
|---|---|---|
| `cp` | this control plane | `api/…` |
| `ai` | AI_GATEWAY_URL | `v1/…` |
| `agent` | AGENT_GATEWAY_URL | `v1/…` |
| `edge` | EDGE_ADMIN_URL | `apisix/admin…` (platform administrators only) |
"""

from __future__ import annotations

import logging
from urllib.parse import unquote

import aiohttp
from aiohttp import web
from yarl import URL

from controlplane.portal.context import UNSAFE_METHODS, PortalContext
from controlplane.portal.security import NO_STORE, SECURITY_HEADERS, Handler
from runtime.errors import NotFound, PermissionDenied, Unavailable

log = logging.getLogger(__name__)

PREFIX = "/portal/api/"
ALLOWED_PATHS = {"cp": ("api/",), "ai": ("v1/",), "agent": ("v1/",), "edge": ("apisix/admin",)}
SERVICE_NAMES = {"cp": "control plane", "ai": "AI gateway", "agent": "agent gateway",
                 "edge": "edge Admin API"}  # fmt: skip
# Request headers the browser may pass on (credentials are the portal's to add).
PASSED_REQUEST_HEADERS = ("Accept", "Content-Type", "X-Tenant-ID", "Idempotency-Key")
# Answer headers handed back; anything else (cookies, server details) stays behind.
PASSED_RESPONSE_HEADERS = frozenset({
    "content-type", "content-disposition", "cache-control", "pragma", "retry-after",
    "deprecation", "location", "etag", "last-modified", "content-encoding",
})  # fmt: skip
PASSED_RESPONSE_PREFIXES = ("x-ratelimit-",)


def _target(request: web.Request) -> tuple[str, str]:
    """The service and the path under its base, as the browser encoded it (an encoded `/`
    stays encoded: the service decodes its own path)."""
    raw = request.rel_url.raw_path
    service, _, path = raw[len(PREFIX):].partition("/")  # fmt: skip
    if service not in ALLOWED_PATHS:
        raise NotFound(
            f"unknown portal service {unquote(service)[:64]!r} (one of cp, ai, agent, edge)",
            error="unknown_service",
        )
    segments = unquote(path).split("/")
    if ".." in segments or "." in segments or not path.startswith(ALLOWED_PATHS[service]):
        allowed = " or ".join(f"{p}…" for p in ALLOWED_PATHS[service])
        raise NotFound(
            f"the portal forwards only {allowed} to the {SERVICE_NAMES[service]}",
            error="not_forwarded",
        )
    return service, path


def forward_handler(ctx: PortalContext) -> Handler:
    async def forward(request: web.Request) -> web.StreamResponse:
        service, path = _target(request)
        session = await ctx.session(request)
        if request.method in UNSAFE_METHODS:
            ctx.check_csrf(request, session)
        if service == "edge" and not session.platform_admin:
            raise PermissionDenied(
                "the edge Admin API is for platform administrators", error="forbidden"
            )
        session = await ctx.fresh(session)
        headers = {h: request.headers[h] for h in PASSED_REQUEST_HEADERS if h in request.headers}
        if service == "edge":
            headers["X-API-KEY"] = ctx.admin_api_key or ""
        else:
            headers["Authorization"] = f"Bearer {session.tokens.access_token}"
        if "x-request-id" in request.headers:
            headers["X-Request-Id"] = request.headers["x-request-id"]
        body = await request.read() if request.can_read_body else None
        url = f"{ctx.base_url(request, service)}/{path}"
        if request.rel_url.raw_query_string:
            url += "?" + request.rel_url.raw_query_string
        try:
            upstream = await ctx.client().request(
                request.method, URL(url, encoded=True), headers=headers,
                data=body, allow_redirects=False,
            )  # fmt: skip
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("portal forward failed", extra={"service": service, "error": repr(exc)})
            raise Unavailable(
                f"the {SERVICE_NAMES[service]} is unreachable", error="service_unavailable",
                service=service,
            ) from None  # fmt: skip
        async with upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                lower = name.lower()
                if lower in PASSED_RESPONSE_HEADERS or lower.startswith(PASSED_RESPONSE_PREFIXES):
                    response.headers.add(name, value)
            response.headers.update(SECURITY_HEADERS)
            for name, value in NO_STORE.items():
                response.headers.setdefault(name, value)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        return response

    return forward
