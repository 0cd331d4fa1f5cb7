"""RateLimitService through the control plane's HTTP front door, against the real Valkey and
dev IdP: the hierarchy's shape, the keys the edge reads (`rl:config:{tenant}` and
`rl:config:{tenant}:{route}`), validation, tenant isolation with real IdP tokens, and the
real effect: a limit changed here is what a running edge enforces on the next requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from keys_kit import (
    Platform,
    Tenants,
    control_plane,
    echo_upstream,
    edge_route,
    eventually,
    unique,
    with_edge,
)
from shared_kit import free_port, user_token

from gateways.edge.keys import rate_limit_override

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = [pytest.mark.timeout(90), pytest.mark.kv_cluster]

SETTINGS = "cp:settings"
ROUTES = ("limited-a", "limited-b")


@pytest.fixture
async def tenants(kv: Any) -> AsyncIterator[Tenants]:
    made = Tenants(kv)
    yield made
    await made.cleanup(set())


@pytest.fixture
async def cp(config_for: Callable[..., Any], stores_for: Callable[..., Any]) -> AsyncIterator[Any]:
    async with control_plane(config_for, stores_for) as platform:
        yield platform


@pytest.fixture
async def platform(
    valkey_url: str, config_for: Callable[..., Any], stores_for: Callable[..., Any]
) -> AsyncIterator[Platform]:
    async with with_edge(valkey_url, config_for, stores_for) as both:
        yield both


def level(limit: int, window: str = "60s", traffic: int = 0) -> dict[str, Any]:
    return {"limit": limit, "window": window, "current_traffic": traffic}


async def test_hierarchy_of_a_tenant_without_overrides(cp: Platform, tenants: Tenants) -> None:
    tenant = await tenants.add()
    status, body = await cp.api("GET", f"/api/rate-limits/{tenant}")
    assert status == 200
    assert body == {
        "tenant_id": tenant,
        "global_default": level(100),
        "tenant_override": None,
        "route_overrides": [],
    }


async def test_global_default_follows_the_platform_setting(
    cp: Platform, kv: Any, tenants: Tenants
) -> None:
    tenant = await tenants.add()
    saved = await kv.get(SETTINGS)
    try:
        await kv.set(SETTINGS, json.dumps({"platform_name": "x", "default_rate_limit": 250}))
        _, body = await cp.api("GET", f"/api/rate-limits/{tenant}")
        assert body["global_default"] == level(250)
        await kv.set(SETTINGS, "not json")  # unreadable: the spec's default
        _, body = await cp.api("GET", f"/api/rate-limits/{tenant}")
        assert body["global_default"] == level(100)
    finally:
        if saved is None:
            await kv.delete(SETTINGS)
        else:
            await kv.set(SETTINGS, saved)


async def test_put_tenant_and_route_overrides(cp: Platform, kv: Any, tenants: Tenants) -> None:
    tenant, route, other = await tenants.add(), unique("r"), unique("r")
    await tenants.put_routes(route, other)

    status, body = await cp.api("PUT", f"/api/rate-limits/{tenant}", body={"limit": 500})
    assert status == 200 and body == {"status": "updated", "limit": 500}
    # Written in the format the edge's tenant-rate-limit reads.
    assert json.loads(await kv.get(rate_limit_override(tenant))) == {"limit": 500, "window": "60s"}

    status, body = await cp.api(
        "PUT", f"/api/rate-limits/{tenant}/routes/{route}", body={"limit": 20, "window": "5m"}
    )
    assert status == 200 and body == {"status": "updated", "route_id": route, "limit": 20}
    assert json.loads(await kv.get(rate_limit_override(tenant, route))) == {
        "limit": 20,
        "window": "5m",
    }

    _, body = await cp.api("GET", f"/api/rate-limits/{tenant}")
    assert body["tenant_override"] == level(500)
    assert body["route_overrides"] == [
        {"route_id": route, "limit": 20, "window": "5m", "current_traffic": 0}
    ]

    # A later PUT replaces the override; a window of its own is kept as given.
    status, body = await cp.api(
        "PUT", f"/api/rate-limits/{tenant}", body={"limit": 7, "window": "1h"}
    )
    assert status == 200 and body == {"status": "updated", "limit": 7}
    _, body = await cp.api("GET", f"/api/rate-limits/{tenant}")
    assert body["tenant_override"] == level(7, "1h")
    # An override the tenants service wrote as a plain integer reads too.
    await kv.set(rate_limit_override(tenant), "42")
    _, body = await cp.api("GET", f"/api/rate-limits/{tenant}")
    assert body["tenant_override"] == level(42)


async def test_bad_input_names_the_field_and_changes_nothing(
    cp: Platform, kv: Any, tenants: Tenants
) -> None:
    tenant, route = await tenants.add(), unique("r")
    await tenants.put_routes(route)
    cases: list[tuple[Any, str]] = [
        ({}, "limit"),
        ({"window": "60s"}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": -5}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"limit": 1.5}, "limit"),
        ({"limit": 10**10}, "limit"),
        ({"limit": 10, "window": "60"}, "window"),
        ({"limit": 10, "window": "0s"}, "window"),
        ({"limit": 10, "window": "fast"}, "window"),
        ({"limit": 10, "window": "2d"}, "window"),
        ({"limit": 10, "window": 60}, "window"),
        ({"limit": 10, "burst": 3}, "burst"),
    ]
    for path in (f"/api/rate-limits/{tenant}", f"/api/rate-limits/{tenant}/routes/{route}"):
        for body, field_name in cases:
            status, answer = await cp.api("PUT", path, body=body)
            assert status == 400, (path, body, answer)
            assert field_name in answer.get("field", "") + answer.get("message", ""), answer
    assert await kv.get(rate_limit_override(tenant)) is None
    assert await kv.get(rate_limit_override(tenant, route)) is None

    missing = unique("nope")
    for method, path in (
        ("GET", f"/api/rate-limits/{missing}"),
        ("PUT", f"/api/rate-limits/{missing}"),
        ("PUT", f"/api/rate-limits/{missing}/routes/{route}"),
    ):
        status, answer = await cp.api(method, path, body={"limit": 5} if method == "PUT" else None)
        assert status == 404 and answer == {"error": "Tenant not found"}
    assert await kv.get(rate_limit_override(missing)) is None
    status, answer = await cp.api(
        "PUT", f"/api/rate-limits/{tenant}/routes/{unique('absent')}", body={"limit": 5}
    )
    assert status == 404 and answer == {"error": "Route not found"}
    status, answer = await cp.api("GET", "/api/rate-limits/bad%20tenant")
    assert status == 400


async def test_tenants_read_only_their_own_limits_and_set_none(
    cp: Platform, kv: Any, idp: str, tenants: Tenants
) -> None:
    acme, globex = await tenants.add("acme"), await tenants.add("globex")
    alice = await user_token(idp, "alice", "alice")  # tenant acme
    admin = await user_token(idp, "admin", "admin")  # platform-admin
    tenantless = await user_token(idp, "alice", "alice", scope="openid")
    status, body = await cp.api("GET", f"/api/rate-limits/{acme}", token=alice)
    assert status == 200 and body["tenant_id"] == acme
    status, _ = await cp.api("GET", f"/api/rate-limits/{globex}", token=alice)
    assert status == 403
    status, _ = await cp.api("GET", f"/api/rate-limits/{acme}", token=tenantless)
    assert status == 403
    before = await kv.get(rate_limit_override(acme))
    for path in (f"/api/rate-limits/{acme}", f"/api/rate-limits/{globex}"):
        status, _ = await cp.api("PUT", path, token=alice, body={"limit": 99999})
        assert status == 403  # limits are the platform's to set
    assert await kv.get(rate_limit_override(acme)) == before
    other = await tenants.add()
    status, body = await cp.api("PUT", f"/api/rate-limits/{other}", token=admin, body={"limit": 9})
    assert status == 200 and body == {"status": "updated", "limit": 9}


async def test_key_value_store_down_fails_closed_with_503(
    config_for: Callable[..., Any], stores_for: Callable[..., Any]
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    async with control_plane(config_for, stores_for, REDIS_URL=dead) as down:
        for method, path in (
            ("GET", "/api/rate-limits/acme"),
            ("PUT", "/api/rate-limits/acme"),
            ("PUT", "/api/rate-limits/acme/routes/r1"),
        ):
            body = {"limit": 5} if method == "PUT" else None
            status, answer = await down.api(method, path, body=body)
            assert status == 503 and answer["error"] == "store_unavailable", answer


async def test_a_changed_limit_is_enforced_at_the_edge_on_the_next_requests(
    platform: Platform, tenants: Tenants
) -> None:
    tenant = await tenants.add()
    headers = {"X-Tenant-ID": tenant}
    async with echo_upstream() as port:
        plugins = {"tenant-rate-limit": {"default_count": 100}}
        for route_id in ROUTES:
            status, body = await platform.admin(
                "PUT", f"/routes/{route_id}", edge_route(f"/{route_id}/*", port, plugins)
            )
            assert status in (200, 201), body

        async def served() -> bool:
            probe = {"X-Tenant-ID": unique("probe")}  # not the tenant under test
            statuses = [(await platform.proxy(f"/{r}/x", probe))[0] for r in ROUTES]
            return statuses == [200, 200]

        await eventually(served)

        # The default (the route's default_count) until the tenant gets an override.
        status, _, reply = await platform.proxy("/limited-a/1", headers)
        assert status == 200 and reply["X-RateLimit-Limit"] == "100"

        status, _ = await platform.api("PUT", f"/api/rate-limits/{tenant}", body={"limit": 2})
        assert status == 200
        status, _, reply = await platform.proxy("/limited-a/2", headers)
        assert status == 200 and reply["X-RateLimit-Limit"] == "2"
        status, body, reply = await platform.proxy("/limited-a/3", headers)
        assert status == 429 and reply["X-RateLimit-Remaining"] == "0"
        assert body == {"error_msg": "Rate limit exceeded for tenant"}

        _, hierarchy = await platform.api("GET", f"/api/rate-limits/{tenant}")
        assert hierarchy["tenant_override"] == level(2, traffic=2)  # the live window
        assert hierarchy["global_default"] == level(100, traffic=2)

        # Raised: the next request passes.
        status, _ = await platform.api("PUT", f"/api/rate-limits/{tenant}", body={"limit": 5})
        status, _, reply = await platform.proxy("/limited-a/4", headers)
        assert status == 200 and reply["X-RateLimit-Limit"] == "5"

        # A route override wins on its route only.
        status, _ = await platform.api(
            "PUT", f"/api/rate-limits/{tenant}/routes/limited-b", body={"limit": 1}
        )
        assert status == 200
        status, _, reply = await platform.proxy("/limited-b/1", headers)
        assert status == 200 and reply["X-RateLimit-Limit"] == "1"
        assert (await platform.proxy("/limited-b/2", headers))[0] == 429
        status, _, reply = await platform.proxy("/limited-a/5", headers)
        assert status == 200 and reply["X-RateLimit-Limit"] == "5"

        _, hierarchy = await platform.api("GET", f"/api/rate-limits/{tenant}")
        assert hierarchy["route_overrides"] == [
            {"route_id": "limited-b", "limit": 1, "window": "60s", "current_traffic": 1}
        ]
        # Admitted in the window: 4 on a (its 429 is not counted), 1 on b.
        assert hierarchy["tenant_override"]["current_traffic"] == 5
