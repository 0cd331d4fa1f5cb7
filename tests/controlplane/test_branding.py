"""Tenant branding through the control plane's front door: defaults, partial updates, the
100 KB logo limit, validation that changes nothing, and tenants kept apart with real IdP
tokens."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from typing import cast

import pytest
from controlplane_kit import (  # noqa: F401
    MASTER,
    Start,
    Tokens,
    call,
    drop_tenant,
    put_tenant,
    start_fixture,
    tokens_fixture,
)
from shared_kit import free_port

from controlplane.branding import branding_key
from controlplane.tenancy import tenant_marker
from runtime.stores.kv import connect_kv
from runtime.testing import Serving

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()
DEFAULTS = {
    "logo_base64": None,
    "portal_title": "Developer Portal",
    "primary_color": None,
    "updated_at": None,
}


@pytest.fixture
async def cp(start: Start, valkey_url: str) -> AsyncIterator[Serving]:
    kv = connect_kv(valkey_url)
    for tenant in ("acme", "globex"):
        await put_tenant(kv, tenant)
        await kv.delete(branding_key(tenant))
    await drop_tenant(kv, "ghost")
    await kv.delete(branding_key("ghost"))
    async with start() as svc:
        yield svc
    await kv.aclose()


async def stored(valkey_url: str, tenant: str) -> dict[str, str]:
    kv = connect_kv(valkey_url)
    try:
        return cast("dict[str, str]", await kv.hgetall(branding_key(tenant)))
    finally:
        await kv.aclose()


async def test_a_tenant_without_branding_gets_the_defaults(cp: Serving) -> None:
    status, body = await call(cp, "GET", "/api/tenants/acme/branding", MASTER)
    assert status == 200
    assert body == {"tenant_id": "acme", **DEFAULTS}


async def test_update_changes_only_the_given_fields(cp: Serving, valkey_url: str) -> None:
    change = {"logo_base64": PNG, "portal_title": "Acme APIs", "primary_color": "#1A2B3C"}
    status, body = await call(cp, "POST", "/api/tenants/acme/branding", MASTER, change)
    assert status == 200
    assert ISO.fullmatch(body.pop("updated_at"))
    assert body == {
        "tenant_id": "acme",
        "logo_base64": PNG,
        "portal_title": "Acme APIs",
        "primary_color": "#1a2b3c",  # stored lower case
    }
    first = await stored(valkey_url, "acme")
    assert first["portal_title"] == "Acme APIs" and first["logo_base64"] == PNG

    status, body = await call(
        cp, "POST", "/api/tenants/acme/branding", MASTER, {"portal_title": "Acme Developer Hub"}
    )
    assert status == 200
    assert body["portal_title"] == "Acme Developer Hub"
    assert body["logo_base64"] == PNG and body["primary_color"] == "#1a2b3c"  # kept
    assert body["updated_at"] >= first["updated_at"]
    status, again = await call(cp, "GET", "/api/tenants/acme/branding", MASTER)
    assert (status, again) == (200, body)

    # An empty logo or colour clears it (back to null); a short colour is accepted.
    status, body = await call(
        cp, "POST", "/api/tenants/acme/branding", MASTER, {"logo_base64": "", "primary_color": ""}
    )
    assert status == 200 and body["logo_base64"] is None and body["primary_color"] is None
    assert set(await stored(valkey_url, "acme")) == {"portal_title", "updated_at"}
    status, body = await call(
        cp, "POST", "/api/tenants/acme/branding", MASTER, {"primary_color": "#AbC"}
    )
    assert status == 200 and body["primary_color"] == "#abc"


async def test_logo_limit_is_100kb_of_base64_text(cp: Serving, valkey_url: str) -> None:
    at_limit = base64.b64encode(b"\0" * (100 * 1024 * 3 // 4)).decode()  # 102400 characters
    assert len(at_limit) == 100 * 1024
    status, body = await call(
        cp, "POST", "/api/tenants/acme/branding", MASTER, {"logo_base64": at_limit}
    )
    assert (status, body) == (400, {"error": "Logo exceeds 100KB limit"})
    too_big = base64.b64encode(b"\0" * 200_000).decode()
    status, body = await call(
        cp,
        "POST",
        "/api/tenants/acme/branding",
        MASTER,
        {"logo_base64": too_big, "portal_title": "not applied"},
    )
    assert (status, body) == (400, {"error": "Logo exceeds 100KB limit"})
    assert await stored(valkey_url, "acme") == {}  # nothing changed

    under = base64.b64encode(b"\0" * (100 * 1024 * 3 // 4 - 3)).decode()  # 102396 characters
    status, body = await call(
        cp, "POST", "/api/tenants/acme/branding", MASTER, {"logo_base64": under}
    )
    assert status == 200 and body["logo_base64"] == under


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"logo_base64": "not base64!"}, "logo_base64"),
        ({"logo_base64": "QUJD RA=="}, "logo_base64"),  # whitespace
        ({"logo_base64": "QUJDRA"}, "logo_base64"),  # unpadded
        ({"logo_base64": "data:image/png;base64," + PNG}, "logo_base64"),
        ({"primary_color": "red"}, "primary_color"),
        ({"primary_color": "#12345"}, "primary_color"),
        ({"primary_color": "#gggggg"}, "primary_color"),
        ({"primary_color": "1a2b3c"}, "primary_color"),
        ({"portal_title": "   "}, "portal_title"),
        ({"portal_title": "x" * 201}, "portal_title"),
        ({"portal_title": "line\nbreak"}, "portal_title"),
        ({}, "logo_base64, portal_title, primary_color"),
        ({"logo_base64": 12}, "logo_base64"),
        ({"title": "unknown field"}, "title"),
    ],
)
async def test_bad_input_is_refused_and_changes_nothing(
    cp: Serving, valkey_url: str, change: dict[str, object], named: str
) -> None:
    status, body = await call(cp, "POST", "/api/tenants/acme/branding", MASTER, change)
    assert status == 400, body
    assert body["error"] == "invalid_request"
    assert named in body["message"]
    assert await stored(valkey_url, "acme") == {}


async def test_unknown_tenant_is_404_and_leaves_nothing(cp: Serving, valkey_url: str) -> None:
    status, body = await call(cp, "GET", "/api/tenants/ghost/branding", MASTER)
    assert (status, body) == (404, {"error": "Tenant not found"})
    status, body = await call(
        cp, "POST", "/api/tenants/ghost/branding", MASTER, {"portal_title": "Ghost"}
    )
    assert (status, body) == (404, {"error": "Tenant not found"})
    assert await stored(valkey_url, "ghost") == {}
    status, body = await call(cp, "GET", "/api/tenants/bad%20id/branding", MASTER)
    assert status == 400 and body["error"] == "invalid_request"


async def test_a_tenant_being_deleted_gets_no_branding(cp: Serving, valkey_url: str) -> None:
    """A deletion removes the tenant's marker first (its record goes last): from then on the
    branding script, which checks the marker in the tenant's own slot, writes nothing."""
    kv = connect_kv(valkey_url)
    try:
        await put_tenant(kv, "leaving")
        await kv.delete(branding_key("leaving"))
        await kv.delete(tenant_marker("leaving"))  # as a deletion's first step leaves it
        status, body = await call(
            cp, "POST", "/api/tenants/leaving/branding", MASTER, {"portal_title": "Late"}
        )
        assert (status, body) == (404, {"error": "Tenant not found"})
        assert await stored(valkey_url, "leaving") == {}
        assert (await call(cp, "GET", "/api/tenants/leaving/branding", MASTER))[0] == 404
    finally:
        await drop_tenant(kv, "leaving")
        await kv.aclose()


async def test_tenants_see_and_change_only_their_own_branding(
    cp: Serving, tokens: Tokens, valkey_url: str
) -> None:
    title = {"portal_title": "Acme by Alice"}
    status, body = await call(cp, "POST", "/api/tenants/acme/branding", tokens.alice, title)
    assert status == 200 and body["portal_title"] == "Acme by Alice"
    status, body = await call(cp, "GET", "/api/tenants/acme/branding", tokens.alice)
    assert status == 200 and body["tenant_id"] == "acme"

    # Another tenant's branding: refused both ways, and nothing is written.
    for method, path, token in [
        ("GET", "/api/tenants/globex/branding", tokens.alice),
        ("POST", "/api/tenants/globex/branding", tokens.alice),
        ("GET", "/api/tenants/acme/branding", tokens.bob),
        ("POST", "/api/tenants/acme/branding", tokens.bob),
        # a person's token without the tenant claim may name no tenant here
        ("GET", "/api/tenants/acme/branding", tokens.no_tenant),
        ("POST", "/api/tenants/acme/branding", tokens.no_tenant),
        # an agent of acme may read its tenant's branding, not change it
        ("POST", "/api/tenants/acme/branding", tokens.agent),
    ]:
        status, body = await call(cp, method, path, token, {"portal_title": "hijacked"})
        assert status == 403, (method, path, body)
        assert body["error"] == "forbidden"
    assert await stored(valkey_url, "globex") == {}
    assert (await stored(valkey_url, "acme"))["portal_title"] == "Acme by Alice"
    status, body = await call(cp, "GET", "/api/tenants/acme/branding", tokens.agent)
    assert status == 200 and body["portal_title"] == "Acme by Alice"

    # A platform administrator (role in the token) acts on any tenant.
    status, body = await call(cp, "POST", "/api/tenants/globex/branding", tokens.admin, title)
    assert status == 200 and body["tenant_id"] == "globex"
    status, body = await call(cp, "GET", "/api/tenants/globex/branding", tokens.bob)
    assert status == 200 and body["portal_title"] == "Acme by Alice"

    status, body = await call(cp, "GET", "/api/tenants/acme/branding")
    assert status == 401


async def test_key_value_store_unreachable_is_503(start: Start) -> None:
    async with start(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0") as svc:
        status, body = await call(svc, "GET", "/api/tenants/acme/branding", MASTER)
        assert status == 503 and body["error"] == "store_unavailable"
        status, body = await call(
            svc, "POST", "/api/tenants/acme/branding", MASTER, {"portal_title": "x"}
        )
        assert status == 503 and body["error"] == "store_unavailable"
