"""Route lifecycle and canary through the control plane, observed at a running edge: an
in-process control plane and edge proxy (its real data plane on a free port, configured over
xDS), two real upstreams, the audit rows in `gateway.agent_audit_log`."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from controlplane_kit import MASTER, Tokens, call, tokens_fixture  # noqa: F401
from multidict import CIMultiDict
from shared_kit import ADMIN_API_KEY, ConfigFor, free_port

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.keys import ALL, SEEDED
from gateways.edge.app import build as build_edge
from gateways.edge.config import EdgeConfig
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.stores.analytics import Analytics
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving

pytestmark = pytest.mark.timeout(90)


@dataclass
class Platform:
    cp: Serving
    edge: Serving
    proxy: int  # the edge data plane's port
    stable: int  # the route's own upstream
    canary: int  # the canary upstream

    async def admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession(self.edge.http_url) as http,
            http.request(
                method,
                f"/apisix/admin{path}",
                json=body,
                headers={"X-API-KEY": ADMIN_API_KEY},
            ) as resp,
        ):
            return resp.status, await resp.json()

    async def route(self, route_id: str) -> dict[str, Any]:
        status, body = await self.admin("GET", f"/routes/{route_id}")
        assert status == 200, body
        value: dict[str, Any] = body["value"]
        return value

    async def get(self, path: str) -> tuple[int, Mapping[str, str], str]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{self.proxy}{path}") as resp,
        ):
            return resp.status, CIMultiDict(resp.headers), await resp.text()

    async def until(self, path: str, holds: Callable[[int, Mapping[str, str], str], bool]) -> None:
        """Wait until the edge's answer to `path` shows the configuration arrived."""
        for _ in range(250):
            if holds(*await self.get(path)):
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the edge never answered {path} as expected: {await self.get(path)}")

    async def served_by(self, path: str, count: int) -> Counter[str]:
        served: Counter[str] = Counter()
        for _ in range(count):
            status, _, text = await self.get(path)
            assert status == 200, text
            served[text] += 1
        return served


async def clear_edge_store(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    keys = [k async for k in kv.scan_iter(ALL)]
    if keys:
        await kv.delete(*keys)
    await kv.set(SEEDED, "0")  # as if seeded: the control plane leaves the empty store alone
    await kv.aclose()


async def named_upstream(name: str, stack: AsyncExitStack) -> int:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(text=name)

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return int(runner.addresses[0][1])


@pytest.fixture
async def platform(
    valkey_url: str,
    config_for: ConfigFor,
    stores_for: Callable[[ServiceConfig], Stores],
) -> AsyncIterator[Platform]:
    await clear_edge_store(valkey_url)
    async with AsyncExitStack() as stack:
        stable = await named_upstream("stable", stack)
        canary = await named_upstream("canary", stack)
        cp_config = config_for(ControlPlaneConfig, EDGE_CONFIG_POLL_SECS="0.5")
        cp = await stack.enter_async_context(
            serving(build_controlplane(cp_config, stores_for(cp_config)))
        )
        edge_config = config_for(EdgeConfig, CONTROLPLANE_GRPC=cp.grpc_target)
        proxy = free_port()
        edge = await stack.enter_async_context(
            serving(
                build_edge(edge_config, stores_for(edge_config), proxy_port=proxy, metrics_port=0)
            )
        )
        platform = Platform(cp, edge, proxy, stable, canary)
        status, body = await platform.admin(
            "PUT",
            "/routes/shop",
            {"uri": "/shop/*", "upstream": {"type": "roundrobin",
                                             "nodes": {f"127.0.0.1:{stable}": 1}}},
        )  # fmt: skip
        assert status == 201, body
        await platform.until("/shop/x", lambda status, _, text: text == "stable")
        yield platform


async def audit_rows(analytics: Analytics, route_id: str, action: str) -> list[dict[str, Any]]:
    return await analytics.query(
        "SELECT tenant_id, session_id, agent_id, tool_name, action, status, trace_id "
        "FROM gateway.agent_audit_log WHERE tool_name = {tool:String} AND action = {a:String} "
        "ORDER BY timestamp",
        {"tool": f"route:{route_id}", "a": action},
    )


async def clear_audit(analytics: Analytics) -> None:
    await analytics.query(
        "ALTER TABLE gateway.agent_audit_log DELETE WHERE action IN ('route_lifecycle', "
        "'route_canary') SETTINGS mutations_sync = 1"
    )


def statuses(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [r["status"] for r in rows]


# --- lifecycle -----------------------------------------------------------------------------


async def test_lifecycle_labels_the_route_and_changes_what_the_edge_does(
    platform: Platform, analytics: Analytics, tokens: Tokens
) -> None:
    await clear_audit(analytics)

    async def lifecycle(value: str, headers: dict[str, str] = MASTER) -> tuple[int, Any]:
        return await call(
            platform.cp, "PATCH", "/api/routes/shop/lifecycle", headers, {"lifecycle": value}
        )

    assert await lifecycle("published") == (
        200,
        {"status": "updated", "route_id": "shop", "lifecycle": "published"},
    )
    route = await platform.route("shop")
    assert route["labels"] == {"lifecycle": "published"}
    assert route["upstream"]["nodes"] == {f"127.0.0.1:{platform.stable}": 1}  # kept

    # deprecated: every response carries RFC 9745's Deprecation header
    before = int(time.time())
    assert (await lifecycle("deprecated"))[0] == 200
    route = await platform.route("shop")
    assert route["labels"]["lifecycle"] == "deprecated"
    header = route["plugins"]["response-rewrite"]["headers"]["set"]["Deprecation"]
    assert re.fullmatch(r"@\d+", header) and int(header[1:]) >= before
    await platform.until("/shop/x", lambda s, h, t: h.get("Deprecation") == header)
    assert (await platform.get("/shop/x"))[2] == "stable"

    # retired: the route is off at the edge (404, as an unknown route)
    assert (await lifecycle("retired"))[0] == 200
    route = await platform.route("shop")
    assert route["status"] == 0 and route["labels"]["lifecycle"] == "retired"
    assert "response-rewrite" not in route["plugins"]  # it held only the header
    await platform.until("/shop/x", lambda s, h, t: s == 404)

    # published again: served, without the header
    assert (await lifecycle("published"))[0] == 200
    route = await platform.route("shop")
    assert route["status"] == 1 and route["labels"]["lifecycle"] == "published"
    await platform.until("/shop/x", lambda s, h, t: s == 200 and "Deprecation" not in h)

    # the same value again is no transition: no write, no audit row
    revision = (await platform.admin("GET", "/routes/shop"))[1]["modifiedIndex"]
    assert (await lifecycle("published"))[0] == 200
    assert (await platform.admin("GET", "/routes/shop"))[1]["modifiedIndex"] == revision

    assert (await lifecycle("draft", tokens.admin))[0] == 200  # the platform-admin role

    rows = await audit_rows(analytics, "shop", "route_lifecycle")
    assert statuses(rows) == ["published", "deprecated", "retired", "published", "draft"]
    assert {r["agent_id"] for r in rows} == {"master-key", "admin"}
    assert all(r["tenant_id"] == "" and r["session_id"] == "" for r in rows)


async def test_deprecation_merges_into_an_existing_response_rewrite(platform: Platform) -> None:
    rewrite = {"headers": {"set": {"X-Shop": "1"}}}
    status, _ = await platform.admin(
        "PATCH", "/routes/shop", {"plugins": {"response-rewrite": rewrite},
                                  "labels": {"tenant_id": "acme", "team": "store"}},
    )  # fmt: skip
    assert status == 200
    await call(
        platform.cp, "PATCH", "/api/routes/shop/lifecycle", MASTER, {"lifecycle": "deprecated"}
    )
    conf = (await platform.route("shop"))["plugins"]["response-rewrite"]
    assert conf["headers"]["set"]["X-Shop"] == "1" and "Deprecation" in conf["headers"]["set"]
    await platform.until("/shop/x", lambda s, h, t: h.get("X-Shop") == "1" and "Deprecation" in h)
    await call(
        platform.cp, "PATCH", "/api/routes/shop/lifecycle", MASTER, {"lifecycle": "published"}
    )
    route = await platform.route("shop")
    assert route["plugins"]["response-rewrite"] == rewrite  # the operator's conf, as it was
    assert route["labels"] == {"tenant_id": "acme", "team": "store", "lifecycle": "published"}


async def test_lifecycle_bad_input_unknown_route_and_access(
    platform: Platform, tokens: Tokens
) -> None:
    path = "/api/routes/shop/lifecycle"
    for body in ({"lifecycle": "archived"}, {"lifecycle": ""}, {}, {"lifecycle": "Published"}):
        status, answer = await call(platform.cp, "PATCH", path, MASTER, body)
        assert (status, answer) == (400, {"error": "Invalid lifecycle state"}), body
    status, answer = await call(platform.cp, "PATCH", path, MASTER, {"lifecycle": 3})
    assert status == 400 and "lifecycle" in answer["message"]
    status, answer = await call(
        platform.cp, "PATCH", "/api/routes/nope/lifecycle", MASTER, {"lifecycle": "draft"}
    )
    assert (status, answer) == (404, {"error": "Route not found"})
    status, answer = await call(
        platform.cp, "PATCH", "/api/routes/bad%20id/lifecycle", MASTER, {"lifecycle": "draft"}
    )
    assert status == 400 and answer["error"] == "invalid_request"
    for headers in (tokens.alice, tokens.agent):
        status, answer = await call(platform.cp, "PATCH", path, headers, {"lifecycle": "retired"})
        assert status == 403 and answer["error"] == "forbidden"
    assert (await call(platform.cp, "PATCH", path, {}, {"lifecycle": "retired"}))[0] == 401
    route = await platform.route("shop")
    assert "labels" not in route and route.get("status", 1) == 1  # nothing changed


class FailingSink:
    async def write(self, table: str, rows: Sequence[Any], token: str | None = None) -> int:
        raise OSError("analytics store down")


async def test_no_transition_without_its_audit_entry(
    platform: Platform, config_for: ConfigFor, valkey_url: str
) -> None:
    """A second control plane replica whose analytics store is down: the route is put back
    and the call fails with 503."""
    config = config_for(ControlPlaneConfig)
    stores = Stores(kv=connect_kv(valkey_url), sink=FailingSink())
    async with serving(build_controlplane(config, stores)) as broken:
        before = await platform.route("shop")
        status, body = await call(
            broken, "PATCH", "/api/routes/shop/lifecycle", MASTER, {"lifecycle": "retired"}
        )
        assert status == 503 and body["error"] == "audit_unavailable", body
        after = await platform.route("shop")
        assert "labels" not in after and after.get("status", 1) == 1
        assert {k: v for k, v in after.items() if k != "update_time"} == {
            k: v for k, v in before.items() if k != "update_time"
        }
        status, body = await call(
            broken, "PATCH", "/api/routes/shop/canary", MASTER,
            {"weight": 50, "upstream": f"127.0.0.1:{platform.canary}"},
        )  # fmt: skip
        assert status == 503
        assert "traffic-split" not in (await platform.route("shop")).get("plugins", {})
    assert (await platform.get("/shop/x"))[:1] == (200,)


# --- canary --------------------------------------------------------------------------------


async def test_canary_splits_traffic_at_the_edge(platform: Platform, analytics: Analytics) -> None:
    await clear_audit(analytics)
    status, body = await platform.admin(
        "PUT", "/upstreams/shop-canary",
        {"type": "roundrobin", "nodes": {f"127.0.0.1:{platform.canary}": 1}},
    )  # fmt: skip
    assert status == 201, body

    async def canary(body: dict[str, Any]) -> tuple[int, Any]:
        return await call(platform.cp, "PATCH", "/api/routes/shop/canary", MASTER, body)

    # 30% to the edge upstream `shop-canary`
    assert await canary({"weight": 30, "upstream": "shop-canary"}) == (
        200,
        {"status": "updated", "route_id": "shop", "weight": 30, "upstream": "shop-canary"},
    )
    split = (await platform.route("shop"))["plugins"]["traffic-split"]
    assert split == {"rules": [{"weighted_upstreams": [{"upstream_id": "shop-canary", "weight": 30},
                                                       {"weight": 70}]}]}  # fmt: skip
    await platform.until("/shop/x", lambda s, h, t: t == "canary")
    # smooth weighted round robin: any 10 consecutive requests split exactly 3:7
    assert await platform.served_by("/shop/x", 10) == {"canary": 3, "stable": 7}

    # 50% to an inline host:port upstream
    target = f"127.0.0.1:{platform.canary}"
    assert (await canary({"weight": 50, "upstream": target}))[1]["upstream"] == target
    split = (await platform.route("shop"))["plugins"]["traffic-split"]
    first = split["rules"][0]["weighted_upstreams"][0]
    assert first == {"upstream": {"type": "roundrobin", "nodes": {target: 1}}, "weight": 50}
    await platform.until("/shop/x", lambda s, h, t: t == "canary")
    await platform.until("/shop/x", lambda s, h, t: t == "stable")
    assert await platform.served_by("/shop/x", 10) == {"canary": 5, "stable": 5}

    # 20% to an inline nodes map, then to an inline upstream object
    nodes = {target: 1}
    assert (await canary({"weight": 20, "upstream": nodes}))[1]["upstream"] == nodes
    split = (await platform.route("shop"))["plugins"]["traffic-split"]
    first = split["rules"][0]["weighted_upstreams"][0]
    assert first == {"upstream": {"type": "roundrobin", "nodes": nodes}, "weight": 20}
    await platform.until("/shop/z", lambda s, h, t: t == "canary")
    assert await platform.served_by("/shop/z", 10) == {"canary": 2, "stable": 8}
    inline = {"type": "roundrobin", "nodes": [{"host": "127.0.0.1", "port": platform.canary,
                                               "weight": 1}]}  # fmt: skip
    assert (await canary({"weight": 40, "upstream": inline}))[1]["upstream"] == inline
    split = (await platform.route("shop"))["plugins"]["traffic-split"]
    assert split["rules"][0]["weighted_upstreams"][0] == {"upstream": inline, "weight": 40}

    # 100%: everything to the canary
    assert (await canary({"weight": 100, "upstream": "shop-canary"}))[0] == 200
    await platform.until("/shop/y", lambda s, h, t: t == "canary")
    assert await platform.served_by("/shop/y", 6) == {"canary": 6}

    # 0 removes the split (an upstream given with it is ignored)
    assert await canary({"weight": 0, "upstream": "shop-canary"}) == (
        200,
        {"status": "updated", "route_id": "shop", "weight": 0, "upstream": None},
    )
    assert "traffic-split" not in (await platform.route("shop"))["plugins"]
    await platform.until("/shop/x", lambda s, h, t: t == "stable")
    assert await platform.served_by("/shop/x", 6) == {"stable": 6}
    assert (await canary({"weight": 0}))[0] == 200  # already none: no change, no row

    rows = await audit_rows(analytics, "shop", "route_canary")
    assert statuses(rows) == ["30%", "50%", "20%", "40%", "100%", "0%"]


async def test_canary_bad_input_changes_nothing(platform: Platform, tokens: Tokens) -> None:
    path = "/api/routes/shop/canary"
    target = f"127.0.0.1:{platform.canary}"
    cases = [
        ({}, "weight is required"),
        ({"upstream": target}, "weight is required"),
        ({"weight": 101, "upstream": target}, "weight must be between 0 and 100"),
        ({"weight": -1, "upstream": target}, "weight must be between 0 and 100"),
        ({"weight": 10}, "upstream is required"),
        ({"weight": 10, "upstream": " "}, "upstream is required"),
        ({"weight": 10, "upstream": "no-such-upstream"}, "neither the id of an edge upstream"),
        ({"weight": 10, "upstream": "127.0.0.1:0"}, "neither the id of an edge upstream"),
        ({"weight": 10, "upstream": "127.0.0.1:70000"}, "neither the id of an edge upstream"),
        ({"weight": 10, "upstream": "[zz::1]:80"}, "neither the id of an edge upstream"),
        ({"weight": 10, "upstream": 8080}, "upstream must be"),
        ({"weight": 10, "upstream": [target]}, "upstream must be"),
        ({"weight": 10, "upstream": {}}, "upstream must not be an empty object"),
        ({"weight": 10, "upstream": None}, "upstream is required"),
        ({"weight": "ten", "upstream": target}, "weight"),
        ({"weight": 10, "upstream": target, "extra": 1}, "extra"),
    ]
    for body, message in cases:
        status, answer = await call(platform.cp, "PATCH", path, MASTER, body)
        assert status == 400 and answer["error"] == "invalid_request", (body, answer)
        assert message in answer["message"], (body, answer)
    # an inline upstream the edge's schema refuses
    refused = {"weight": 10, "upstream": {"nodes": {target: -1}}}
    status, answer = await call(platform.cp, "PATCH", path, MASTER, refused)
    assert status == 400 and answer["error"] == "invalid_configuration", answer
    assert "traffic-split" in answer["message"]
    status, answer = await call(
        platform.cp, "PATCH", "/api/routes/nope/canary", MASTER, {"weight": 10, "upstream": target}
    )
    assert (status, answer) == (404, {"error": "Route not found"})
    for headers in (tokens.alice, tokens.bob, tokens.agent):
        status, _ = await call(
            platform.cp, "PATCH", path, headers, {"weight": 10, "upstream": target}
        )
        assert status == 403

    # a route without an upstream of its own has nothing to split with
    status, _ = await platform.admin(
        "PUT", "/routes/plain", {"uri": "/plain", "plugins": {"request-id": {}}}
    )
    assert status == 201
    status, answer = await call(
        platform.cp, "PATCH", "/api/routes/plain/canary", MASTER, {"weight": 10, "upstream": target}
    )
    assert status == 400 and "no upstream of its own" in answer["message"]
    assert "traffic-split" not in (await platform.route("shop")).get("plugins", {})


async def test_ipv6_canary_upstream_is_normalized(platform: Platform) -> None:
    status, body = await call(
        platform.cp, "PATCH", "/api/routes/shop/canary", MASTER,
        {"weight": 20, "upstream": "[0:0::1]:8080"},
    )  # fmt: skip
    assert status == 200 and body["upstream"] == "[0:0::1]:8080"
    split = (await platform.route("shop"))["plugins"]["traffic-split"]
    assert split["rules"][0]["weighted_upstreams"][0]["upstream"]["nodes"] == {"[::1]:8080": 1}
