"""ip-restriction through a real data plane (the client is 127.0.0.1, or what real-ip sets),
its schema, and its refusal of a bad entry through the Admin API."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from edge_kit import conf_problem, route, serve_edge, upstream
from test_edge_config import Platform, makers, platform  # noqa: F401

from gateways.edge.model.plugins.addresses import IpMatcher
from gateways.edge.model.schema import with_defaults
from gateways.edge.plugins import REGISTRY

SCHEMA = REGISTRY["ip-restriction"].schema


def problem(conf: dict[str, Any]) -> str | None:
    return conf_problem("ip-restriction", conf)


REFUSED = {"message": "Your IP address is not allowed"}


async def test_whitelist_and_blacklist() -> None:
    calls = 0

    async def counted(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.json_response({"ok": True})

    async with upstream(counted) as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("in", "/in", port, plugins={"ip-restriction": {
                    "whitelist": ["10.0.0.0/8", "127.0.0.1", "::1"]}}),
                route("out", "/out", port, plugins={"ip-restriction": {
                    "whitelist": ["10.0.0.0/8", "2001:db8::/32"]}}),
                route("deny", "/deny", port, plugins={"ip-restriction": {
                    "blacklist": ["127.0.0.0/24"], "message": "Go away", "response_code": 404}}),
                route("other", "/other", port, plugins={"ip-restriction": {
                    "blacklist": ["192.168.1.1", "fe80::/10"]}}),
            ]
        )  # fmt: skip
        assert (await edge.call("/in"))[0] == 200
        status, body, headers = await edge.call("/out")
        assert (status, body, headers["Content-Type"]) == (403, REFUSED, "application/json")
        assert (await edge.call("/deny", method="POST"))[:2] == (404, {"message": "Go away"})
        assert (await edge.call("/other"))[0] == 200
    assert calls == 2  # refused requests never reach the upstream


async def test_ipv6_and_addresses_set_by_real_ip() -> None:
    def plugins(**restriction: Any) -> dict[str, Any]:
        return {"real-ip": {"source": "http_x_real_ip"}, "ip-restriction": restriction}

    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("v6", "/v6", port, plugins=plugins(whitelist=["2001:db8::/64"])),
                route("v4", "/v4", port, plugins=plugins(whitelist=["10.1.0.0/16"])),
            ]
        )
        for path, address, status in [
            ("/v6", "2001:db8::5", 200),
            ("/v6", "2001:db8:0:1::5", 403),  # outside the /64
            ("/v6", "10.1.2.3", 403),  # an IPv4 address never matches an IPv6 network
            ("/v4", "10.1.2.3", 200),
            ("/v4", "::ffff:10.1.2.3", 200),  # IPv4-mapped IPv6 is matched as IPv4
            ("/v4", "10.2.0.1", 403),
        ]:
            got, body, _ = await edge.call(path, headers={"X-Real-IP": address})
            assert got == status, (path, address, body)


def test_matcher_parses_once_and_matches() -> None:
    matcher = IpMatcher(["10.0.0.1", "10.0.0.0/31", "172.16.0.0/12", "::1", "fd00::/8"])
    # single addresses are a set; /31 is a network
    assert {str(a) for a in matcher.addresses} == {"10.0.0.1", "::1"}
    assert len(matcher.networks) == 3
    for address in ("10.0.0.1", "10.0.0.0", "172.31.255.255", "::1", "fd12::1"):
        assert matcher.match(address), address
    for address in ("10.0.0.2", "172.32.0.0", "::2", "fe80::1", "", "garbage"):
        assert not matcher.match(address), address


def test_schema_and_defaults() -> None:
    assert problem({}) == (
        "value should match only one schema, but matches none: "
        'property "whitelist" or "blacklist" is required'
    )
    assert problem({"whitelist": ["10.0.0.1"], "blacklist": ["10.0.0.2"]}) == (
        "value should match only one schema, but matches both schemas 1 and 2: "
        'only one of "whitelist", "blacklist" may be given'
    )
    assert problem({"whitelist": ["10.0.0.0/33"]}) == ("invalid ip address: 10.0.0.0/33")
    assert problem({"blacklist": ["2001:db8:::1"]}) is not None
    assert problem({"blacklist": []}) == (
        'property "blacklist" validation failed: expect array to have at least 1 items'
    )
    assert problem({"blacklist": ["::1"], "response_code": 401}) == (
        'property "response_code" validation failed: expected 401 to be at least 403'
    )
    assert problem({"blacklist": ["::1"], "message": ""}) is not None
    assert problem({"blacklist": ["::1"], "message": "x" * 1025}) == (
        'property "message" validation failed: string too long, expected at most 1024, got 1025'
    )
    assert with_defaults(SCHEMA, {"whitelist": ["10.0.0.0/8"]}) == {
        "whitelist": ["10.0.0.0/8"],
        "message": "Your IP address is not allowed",
        "response_code": 403,
    }


async def test_admin_api_refuses_a_bad_entry(platform: Platform) -> None:  # noqa: F811
    route_conf = {
        "uri": "/index.html",
        "plugins": {"ip-restriction": {"whitelist": ["127.0.0.1", "113.74.26.106/24"]}},
        "upstream": {"type": "roundrobin", "nodes": {"127.0.0.1:1980": 1}},
    }
    status, _, _ = await platform.admin("PUT", "/routes/1", route_conf)
    assert status == 201  # APISIX's documented example
    route_conf["plugins"] = {"ip-restriction": {"whitelist": ["127.0.0.1", "300.1.1.1"]}}
    status, body, _ = await platform.admin("PUT", "/routes/1", route_conf)
    assert status == 400
    assert body["error_msg"] == (
        "failed to check the configuration of plugin ip-restriction err: "
        "invalid ip address: 300.1.1.1"
    )
