"""real-ip through a real data plane: the address the upstream gets as X-Real-IP (and the one
ip-restriction sees) comes from the configured source when the peer is trusted."""

from __future__ import annotations

from typing import Any

import pytest
from edge_kit import conf_problem, route, serve_edge, upstream

from gateways.edge.model.schema import with_defaults
from gateways.edge.plugins import REGISTRY
from gateways.edge.plugins.real_ip import parse_address

SCHEMA = REGISTRY["real-ip"].schema


def problem(conf: dict[str, Any]) -> str | None:
    return conf_problem("real-ip", conf)


async def client_address(edge: Any, path: str, **kwargs: Any) -> str:
    """The client address the upstream was given (X-Real-IP, set by the proxy)."""
    status, body, _ = await edge.call(path, **kwargs)
    assert status == 200, body
    assert body["headers"]["x-forwarded-for"].endswith(body["headers"]["x-real-ip"])
    return str(body["headers"]["x-real-ip"])


async def test_source_header_arg_and_trusted_peers() -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                # no trusted_addresses: every peer is trusted, as APISIX
                route("h", "/h", port, plugins={"real-ip": {"source": "http_x_real_ip"}}),
                # the documented example: the address from a query argument
                route("a", "/a", port, plugins={"real-ip": {
                    "source": "arg_realip", "trusted_addresses": ["127.0.0.0/24"]}}),
                route("u", "/u", port, plugins={"real-ip": {
                    "source": "http_x_real_ip", "trusted_addresses": ["10.0.0.0/8", "::1"]}}),
            ]
        )  # fmt: skip
        assert await client_address(edge, "/h", headers={"X-Real-IP": "203.0.113.7"}) == (
            "203.0.113.7"
        )
        assert await client_address(edge, "/h") == "127.0.0.1"  # no value: unchanged
        assert await client_address(edge, "/a?realip=1.2.3.4") == "1.2.3.4"
        # the peer (127.0.0.1) is not trusted: the header is ignored
        assert await client_address(edge, "/u", headers={"X-Real-IP": "203.0.113.7"}) == (
            "127.0.0.1"
        )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1.2.3.4:8080", "1.2.3.4"),  # a port is dropped
        ("[2001:db8::1]:443", "2001:db8::1"),
        ("2001:DB8::0001", "2001:db8::1"),  # normalized
        ("not-an-ip", "127.0.0.1"),  # bad values leave the address unchanged
        ("1.2.3.4:99999", "127.0.0.1"),
        ("[2001:db8::1", "127.0.0.1"),
        ("1.2.3.256", "127.0.0.1"),
    ],
)
async def test_values_with_ports_and_bad_values(value: str, expected: str) -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/r", port, plugins={"real-ip": {"source": "http_x_ip"}})])
        assert await client_address(edge, "/r", headers={"X-IP": value}) == expected


async def test_x_forwarded_for_last_address_and_recursive() -> None:
    trusted = ["127.0.0.1", "10.0.0.0/8"]
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("last", "/last", port, plugins={"real-ip": {
                    "source": "http_x_forwarded_for", "trusted_addresses": trusted}}),
                route("rec", "/rec", port, plugins={"real-ip": {
                    "source": "http_x_forwarded_for", "trusted_addresses": trusted,
                    "recursive": True}}),
                # recursive without trusted_addresses: the last address, as APISIX
                route("all", "/all", port, plugins={"real-ip": {
                    "source": "http_x_forwarded_for", "recursive": True}}),
            ]
        )  # fmt: skip
        chain = {"X-Forwarded-For": "9.9.9.9, 1.1.1.1,10.0.0.1, 10.0.0.2"}
        assert await client_address(edge, "/last", headers=chain) == "10.0.0.2"
        assert await client_address(edge, "/rec", headers=chain) == "1.1.1.1"
        assert await client_address(edge, "/all", headers=chain) == "10.0.0.2"
        # every address trusted: the first one
        everyone = {"X-Forwarded-For": "10.1.1.1, 10.0.0.1"}
        assert await client_address(edge, "/rec", headers=everyone) == "10.1.1.1"
        # two header lines are one list
        status, body, _ = await edge.call(
            "/rec", headers=[("X-Forwarded-For", "8.8.8.8"), ("X-Forwarded-For", "10.0.0.3")]
        )
        assert (status, body["headers"]["x-real-ip"]) == (200, "8.8.8.8")
        assert await client_address(edge, "/last", headers={"X-Forwarded-For": "4.4.4.4"}) == (
            "4.4.4.4"
        )


async def test_later_plugins_see_the_real_address() -> None:
    plugins = {
        "real-ip": {"source": "http_x_real_ip"},
        "ip-restriction": {"blacklist": ["203.0.113.0/24", "2001:db8::/32"]},
    }
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/r", port, plugins=plugins)])
        for address in ("203.0.113.9", "2001:db8::7", "::ffff:203.0.113.1"):
            status, body, _ = await edge.call("/r", headers={"X-Real-IP": address})
            assert (status, body) == (403, {"message": "Your IP address is not allowed"})
        assert await client_address(edge, "/r", headers={"X-Real-IP": "198.51.100.1"}) == (
            "198.51.100.1"
        )


def test_parse_address() -> None:
    assert parse_address(" 10.0.0.1 ") == "10.0.0.1"
    assert parse_address("::ffff:10.0.0.1") == "10.0.0.1"  # an IPv4-mapped address is IPv4
    assert parse_address("[::1]x") is None
    assert parse_address("10.0.0.1:") == "10.0.0.1"  # an empty port is no port
    assert parse_address("10.0.0.1:0") is None


def test_schema() -> None:
    assert problem({}) == 'property "source" is required'
    assert problem({"source": ""}) == (
        'property "source" validation failed: string too short, expected at least 1, got 0'
    )
    assert problem({"source": "http_x_real_ip", "trusted_addresses": ["10.0.0.300"]}) == (
        "invalid ip address: 10.0.0.300"
    )
    assert problem({"source": "x", "trusted_addresses": []}) == (
        'property "trusted_addresses" validation failed: expect array to have at least 1 items'
    )
    conf = {"source": "x", "trusted_addresses": ["10.0.0.0/8", "fd00::/8", "::1"]}
    assert problem(conf) is None
    assert with_defaults(SCHEMA, {"source": "x"}) == {"source": "x", "recursive": False}
