"""BrandingService: each tenant's portal branding, in the hash `cp:branding:{<tenant_id>}`
(the tenant is the hash tag: the branding shares its slot with the tenant's marker,
`controlplane/tenancy.py`).

Only the fields a POST names change; the tenant check (its marker) and the write are one
script, so a tenant deleted meanwhile gets no branding left behind, and two POSTs changing
different fields both land.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime

from redis.asyncio import Redis

from controlplane.kv_errors import kv_unavailable
from controlplane.tenancy import tenant_marker, visible_tenant
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest, NotFound
from runtime.stores.renames import retag
from strata.controlplane.v1 import branding_pb2 as pb
from strata.controlplane.v1 import branding_pb2_grpc

DEFAULT_PORTAL_TITLE = "Developer Portal"
LOGO_LIMIT = 100 * 1024  # characters of base64 text: the logo must be under it
TITLE_LIMIT = 200
HEX_COLOR = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})")
FIELDS = ("logo_base64", "portal_title", "primary_color")

# KEYS: the tenant's marker, branding hash. ARGV: updated_at, then (field, value) pairs, an
# empty value deleting. Returns the branding hash, or false for an unknown tenant.
_UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
for i = 2, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[2], ARGV[i])
  else
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
redis.call('HSET', KEYS[2], 'updated_at', ARGV[1])
return redis.call('HGETALL', KEYS[2])
"""


def branding_key(tenant_id: str) -> str:
    return f"cp:branding:{{{tenant_id}}}"


# The name before issue 24 (renamed when a control plane starts).
RENAMES = (retag("cp:branding:", branding_key),)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def tenant_not_found() -> NotFound:
    return NotFound("Tenant not found")


def invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, error="invalid_request")


def check_logo(logo: str) -> None:
    if len(logo) >= LOGO_LIMIT:
        raise InvalidRequest("Logo exceeds 100KB limit")
    if logo.startswith("data:"):
        raise invalid("logo_base64 must be the base64 text alone, without a data: URL prefix")
    try:
        base64.b64decode(logo, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(
            "logo_base64 is not valid base64 (RFC 4648 standard alphabet, padded, no whitespace)"
        ) from None


def check_title(title: str) -> None:
    if not title.strip():
        raise invalid("portal_title must not be blank")
    if len(title) > TITLE_LIMIT:
        raise invalid(f"portal_title must be at most {TITLE_LIMIT} characters")
    if any(unicodedata.category(ch) == "Cc" for ch in title):
        raise invalid("portal_title must not contain control characters")


def check_color(color: str) -> str:
    if not HEX_COLOR.fullmatch(color):
        raise invalid(f"primary_color must be a hex color such as #1a2b3c or #abc, got {color!r}")
    return color.lower()


def render(tenant_id: str, stored: Mapping[str, str]) -> pb.Branding:
    branding = pb.Branding(
        tenant_id=tenant_id, portal_title=stored.get("portal_title") or DEFAULT_PORTAL_TITLE
    )
    for field in ("logo_base64", "primary_color", "updated_at"):
        if stored.get(field):
            setattr(branding, field, stored[field])
    return branding


class BrandingServicer(branding_pb2_grpc.BrandingServiceServicer):
    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self._update = kv.register_script(_UPDATE)

    async def GetBranding(
        self, request: pb.GetBrandingRequest, context: ServicerContext
    ) -> pb.GetBrandingResponse:
        visible_tenant()  # a token without a tenant_id claim acts for none: 403
        with kv_unavailable():
            async with self.kv.pipeline(transaction=True) as pipe:
                pipe.exists(tenant_marker(request.id))
                pipe.hgetall(branding_key(request.id))
                exists, stored = await pipe.execute()
        if not exists:
            raise tenant_not_found()
        return pb.GetBrandingResponse(branding=render(request.id, stored))

    async def UpdateBranding(
        self, request: pb.UpdateBrandingRequest, context: ServicerContext
    ) -> pb.UpdateBrandingResponse:
        visible_tenant()  # a token without a tenant_id claim acts for none: 403
        changes: list[str] = []
        if request.HasField("logo_base64"):
            if request.logo_base64:
                check_logo(request.logo_base64)
            changes += ["logo_base64", request.logo_base64]
        if request.HasField("portal_title"):
            check_title(request.portal_title)
            changes += ["portal_title", request.portal_title]
        if request.HasField("primary_color"):
            color = check_color(request.primary_color) if request.primary_color else ""
            changes += ["primary_color", color]
        if not changes:
            raise invalid(f"nothing to change: send any of {', '.join(FIELDS)}")
        with kv_unavailable():
            flat = await self._update(
                keys=[tenant_marker(request.id), branding_key(request.id)],
                args=[now_iso(), *changes],
            )
        if flat is None:
            raise tenant_not_found()
        stored = dict(zip(flat[::2], flat[1::2], strict=True))
        return pb.UpdateBrandingResponse(branding=render(request.id, stored))
